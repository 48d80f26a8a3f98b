import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ErrorCode, invalidInput, NamespaceError } from '../model/errors.js';
import type { RequestContext } from '../service/request-context.js';
import { describeZodError } from './errors.js';

// Schema-first routes. A route declares its operation, paths, methods and zod schemas; one runner
// parses the path id, the query and the body with them (every failure is a 400 with code 13 that
// names the field), builds the request context, calls the handler and sends the result. The same
// declarations generate the OpenAPI document (openapi.ts).

export type HttpMethod = 'GET' | 'POST';

export interface RouteInput<B, Q> {
  /** The path id split by the delimiter; [] is the root namespace. Empty for routes without {id}. */
  id: string[];
  delimiter: string;
  body: B;
  query: Q;
  /** The raw request body (Arrow IPC routes). */
  raw: Buffer;
  ctx: RequestContext;
  /** Extra path parameters (e.g. index_name). */
  params: Record<string, string>;
}

/** 'unsupported': the route always answers 406 (documented so, and nothing else). */
export type RouteResponse = z.ZodType | 'empty' | 'arrow-file' | 'unsupported';

export interface RouteSpec<B extends z.ZodType = z.ZodType, Q extends z.ZodType = z.ZodType> {
  operationId: string;
  summary: string;
  tag: string;
  /** Paths with `{id}`-style parameters; the first is canonical, the rest are aliases clients send. */
  paths: readonly string[];
  methods: readonly HttpMethod[];
  body?: B;
  /** The body is an Arrow IPC stream rather than JSON. */
  arrowBody?: boolean;
  query?: Q;
  response: RouteResponse;
  successStatus?: number;
  /** Changes catalog state: recorded by the mutation hook. */
  mutation?: boolean;
  /** False where the body's `id` names something else than the path's (transactions); default true. */
  bodyIdIsPathId?: boolean;
  /** Returns the response body (ignored for 'empty'). */
  handler(input: RouteInput<z.output<B>, z.output<Q>>): Promise<unknown>;
}

/** Identity function that infers the body and query types of a route's handler. */
export function defineRoute<B extends z.ZodType, Q extends z.ZodType = z.ZodObject<Record<string, never>>>(spec: RouteSpec<B, Q>): RouteSpec {
  return spec as unknown as RouteSpec;
}

export interface MutationEvent {
  operationId: string;
  id: string[];
  ctx: RequestContext;
  status: number;
}

/** Bounds on what one request may cost (documented in the README's Limits section). */
export interface RequestLimits {
  /** Entries of one string map (properties, metadata, storage options, context). */
  maxMapEntries: number;
  /** UTF-8 bytes of one string map's keys and values together. */
  maxMapBytes: number;
  /** Arrow bodies above this many bytes (or of unknown length) are large... */
  largeBodyBytes: number;
  /** ...and at most this many are received at once; more are a 503 (code 17). */
  maxConcurrentLargeBodies: number;
}

export interface RouteOptions {
  jsonBodyLimit: number;
  arrowBodyLimit: number;
  limits: RequestLimits;
  onMutation: (event: MutationEvent, request: FastifyRequest) => void;
}

const CONTEXT_HEADER = 'x-namespace-ctx-';

/** The fields that hold string maps a client can make as large as the body allows. */
const MAP_FIELDS = new Set(['properties', 'metadata', 'storage_options', 'context']);
const MAX_MAP_SEARCH_DEPTH = 4;

/**
 * Refuses string maps past the limits before the body is validated or anything is stored: a map
 * of a million entries costs seconds in every later read of its record. Looks for the map fields
 * down to a small depth (batch operations nest them).
 */
export function checkMapLimits(value: unknown, limits: RequestLimits, where = '', depth = 0): void {
  if (typeof value !== 'object' || value === null || depth > MAX_MAP_SEARCH_DEPTH) return;
  if (Array.isArray(value)) {
    value.forEach((item, i) => checkMapLimits(item, limits, `${where}[${i}]`, depth + 1));
    return;
  }
  for (const [field, inner] of Object.entries(value)) {
    const path = where === '' ? field : `${where}.${field}`;
    if (MAP_FIELDS.has(field) && typeof inner === 'object' && inner !== null && !Array.isArray(inner)) checkMapSize(inner as Record<string, unknown>, limits, path);
    else checkMapLimits(inner, limits, path, depth + 1);
  }
}

function checkMapSize(map: Record<string, unknown>, limits: RequestLimits, path: string): void {
  let entries = 0;
  let bytes = 0;
  // for-in stops at the first entry past a limit; Object.entries would first copy every entry.
  for (const key in map) {
    const v = map[key];
    entries += 1;
    bytes += Buffer.byteLength(key) + (typeof v === 'string' ? Buffer.byteLength(v) : 0);
    if (entries > limits.maxMapEntries) throw invalidInput(`${path}: at most ${limits.maxMapEntries} entries are allowed`);
    if (bytes > limits.maxMapBytes) throw invalidInput(`${path}: at most ${limits.maxMapBytes} bytes of keys and values are allowed`);
  }
}

/** RFC 9110 token (a header name) and field value without CR, LF or NUL: what can be echoed as a header. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Context entries travel back as headers, so one that cannot be a header would fail the reply
 * after the operation took effect: refuse it before anything runs.
 */
function checkContext(context: Record<string, string>): void {
  for (const [key, value] of Object.entries(context)) {
    if (!HEADER_NAME.test(key)) throw invalidInput(`context: the key ${JSON.stringify(key)} cannot be a header name (x-namespace-ctx-<key>)`);
    if (!HEADER_VALUE.test(value)) throw invalidInput(`context: the value of ${JSON.stringify(key)} cannot be a header value`);
  }
}

/** Counts the large bodies being received; a slot is taken when a request starts and given back when its response ends. */
class LargeBodySlots {
  private inUse = 0;

  constructor(private readonly limits: RequestLimits) {}

  /** True when the request may go on (a slot was taken for it if its body is large). */
  admit(request: FastifyRequest, reply: FastifyReply): boolean {
    const length = Number(request.headers['content-length'] ?? Number.NaN);
    // Chunked bodies have no length up front: count them as large.
    const large = Number.isNaN(length) ? request.headers['transfer-encoding'] !== undefined : length > this.limits.largeBodyBytes;
    if (!large) return true;
    if (this.inUse >= this.limits.maxConcurrentLargeBodies) return false;
    this.inUse += 1;
    let released = false;
    reply.raw.once('close', () => {
      if (!released) this.inUse -= 1;
      released = true;
    });
    return true;
  }
}

/** Splits a path id by the delimiter; the delimiter alone is the root namespace. */
export function parsePathId(raw: string, delimiter: string): string[] {
  if (delimiter === '') throw invalidInput('delimiter must not be empty');
  if (raw === delimiter) return [];
  if (raw === '') throw invalidInput('the id in the path must not be empty (use the delimiter for the root namespace)');
  const parts = raw.split(delimiter);
  const empty = parts.findIndex((p) => p === '');
  if (empty >= 0) throw invalidInput(`the id ${JSON.stringify(raw)} has an empty part at position ${empty}`);
  return parts;
}

function parseJsonBody(raw: Buffer): unknown {
  const text = raw.toString('utf8').trim();
  if (text === '' || text === 'null') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw invalidInput(`the request body is not valid JSON: ${(e as Error).message}`);
  }
}

function parseWith<S extends z.ZodType>(schema: S, value: unknown, where: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw invalidInput(describeZodError(parsed.error, where));
  return parsed.data;
}

function contextOf(request: FastifyRequest, body: unknown): Record<string, string> {
  const context: Record<string, string> = {};
  if (typeof body === 'object' && body !== null && 'context' in body) {
    const fromBody = (body as { context?: unknown }).context;
    if (typeof fromBody === 'object' && fromBody !== null) {
      for (const [k, v] of Object.entries(fromBody)) if (typeof v === 'string') context[k] = v;
    }
  }
  for (const [name, value] of Object.entries(request.headers)) {
    if (name.startsWith(CONTEXT_HEADER) && typeof value === 'string') context[name.slice(CONTEXT_HEADER.length)] = value;
  }
  return context;
}

const toFastifyPath = (p: string): string => p.replace(/\{([^}]+)\}/g, ':$1');

async function run(route: RouteSpec, options: RouteOptions, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const queryRecord = (request.query ?? {}) as Record<string, unknown>;
  const params = (request.params ?? {}) as Record<string, string>;
  const delimiterValue = queryRecord.delimiter;
  if (delimiterValue !== undefined && typeof delimiterValue !== 'string') throw invalidInput('delimiter: must be given once, as a string');
  const delimiter = delimiterValue ?? '$';
  const id = params.id === undefined ? [] : parsePathId(params.id, delimiter);
  const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
  const json = route.arrowBody || request.method === 'GET' ? {} : parseJsonBody(raw);
  checkMapLimits(json, options.limits);
  const body = route.body ? parseWith(route.body, json, 'request body') : json;
  const query = route.query ? parseWith(route.query, queryRecord, 'query parameters') : {};
  checkMapLimits(query, options.limits);
  const bodyId = (body as { id?: unknown }).id;
  if (params.id !== undefined && route.bodyIdIsPathId !== false && Array.isArray(bodyId) && JSON.stringify(bodyId) !== JSON.stringify(id)) {
    throw invalidInput(`the id in the body ${JSON.stringify(bodyId)} does not match the id in the path ${JSON.stringify(id)}`);
  }
  const ctx: RequestContext = { requestId: String(request.id), principal: null, context: contextOf(request, body) };
  checkContext(ctx.context);
  // Context travels back the way it came in, so callers can correlate.
  for (const [key, value] of Object.entries(ctx.context)) void reply.header(`${CONTEXT_HEADER}${key.toLowerCase()}`, value);
  const result = await route.handler({ id, delimiter, body, query, raw, ctx, params });
  const status = route.successStatus ?? 200;
  if (route.mutation) options.onMutation({ operationId: route.operationId, id, ctx, status }, request);
  if (route.response === 'empty' || route.response === 'unsupported') {
    await reply.code(status).send();
    return;
  }
  if (route.response === 'arrow-file') {
    await reply.code(status).type('application/vnd.apache.arrow.file').send(result);
    return;
  }
  await reply.code(status).type('application/json').send(JSON.stringify(result));
}

const BUSY = 'too many large request bodies are being received; retry shortly';

export function registerRoutes(app: FastifyInstance, routes: readonly RouteSpec[], options: RouteOptions): void {
  const slots = new LargeBodySlots(options.limits);
  for (const route of routes) {
    for (const path of route.paths) {
      app.route({
        method: [...route.methods],
        url: toFastifyPath(path),
        bodyLimit: route.arrowBody ? options.arrowBodyLimit : options.jsonBodyLimit,
        // Decided before the body is read, so a refused body costs no memory.
        ...(route.arrowBody
          ? {
              onRequest: async (request: FastifyRequest, reply: FastifyReply) => {
                if (slots.admit(request, reply)) return;
                void reply.header('retry-after', '1');
                throw new NamespaceError(ErrorCode.ServiceUnavailable, BUSY);
              },
            }
          : {}),
        handler: (request, reply) => run(route, options, request, reply),
      });
    }
  }
}

/** The methods each route path answers, for telling a wrong method (405) from an unknown path (404). */
export function routeMethods(routes: readonly RouteSpec[]): (path: string) => HttpMethod[] {
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const patterns = routes.flatMap((route) =>
    route.paths.map((p) => ({
      regex: new RegExp(`^${p.split(/\{[^}]+\}/).map(escape).join('[^/]+')}/?$`),
      methods: route.methods,
    })),
  );
  return (path) => {
    const normalized = path.replace(/\/{2,}/g, '/');
    return [...new Set(patterns.filter((p) => p.regex.test(normalized)).flatMap((p) => p.methods))];
  };
}
