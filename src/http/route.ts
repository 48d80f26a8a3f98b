import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ErrorCode, invalidInput, NamespaceError } from '../model/errors.js';
import { normalizeBranch } from '../service/branches/branch-refs.js';
import type { RequestContext } from '../service/context/request-context.js';
import { escapeRegExp } from './errors.js';
import type { BoundedList, LargeBodySlots } from './limits.js';
import { parseRequestPart } from './zod-compilers.js';

// Schema-first routes. A route declares its operation, paths, methods and zod schemas; each route
// group (routes/*.ts) is a Fastify plugin registered under its prefix. Fastify validates the body
// and query with the zod schemas and serializes the answer through the response schema (see
// zod-compilers.ts); the request hooks (request-hooks.ts) parse the path id, check the body id,
// the map limits and the branch, build the request context and write the audit record; the
// handler only calls the service. The same declarations generate the OpenAPI document (openapi.ts).

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

/**
 * A listing that shows the caller only the names it may see (authorization.ts filterListing), and
 * so needs less than read on its place (Authorizer.check): `child-namespaces`, the `namespaces`
 * under the path's namespace, to whoever sees that namespace; `table-ids`, the `tables` of the
 * whole catalog as full ids, to anyone.
 */
export type FilteredListing = 'child-namespaces' | 'table-ids';

/** 'unsupported': the route always answers 406 (documented so, and nothing else). */
export type RouteResponse = z.ZodType | 'empty' | 'arrow-file' | 'unsupported';

export interface RouteSpec<B extends z.ZodType = z.ZodType, Q extends z.ZodType = z.ZodType> {
  operationId: string;
  summary: string;
  tag: string;
  /** Paths below the group's prefix, with `{id}`-style parameters; the first is canonical, the rest are aliases clients send. */
  paths: readonly string[];
  methods: readonly HttpMethod[];
  body?: B;
  /** The body is an Arrow IPC stream rather than JSON. */
  arrowBody?: boolean;
  query?: Q;
  response: RouteResponse;
  successStatus?: number;
  /** Changes catalog state: an audit record is written for each request. */
  mutation?: boolean;
  /** Its response may carry vended credentials (credential-vending.ts): audited like a mutation when it may vend. */
  vends?: boolean;
  /** False where the body's `id` names something else than the path's (transactions); default true. */
  bodyIdIsPathId?: boolean;
  /** A list of the body bounded by a request limit (limits.ts): past it, a 400 before anything is validated or done. */
  boundedList?: BoundedList;
  /** Its answer is filtered to what the caller may see (see FilteredListing). */
  filteredListing?: FilteredListing;
  /**
   * Answered to anyone (health): it needs no privilege, and the OpenAPI document asks no
   * credentials of it. Authentication lets its path through by itself (authentication.ts), before
   * any route is known: an open route's path must be one of those.
   */
  open?: boolean;
  /** Returns the response body (ignored for 'empty'). */
  handler(input: RouteInput<z.output<B>, z.output<Q>>): Promise<unknown>;
}

/** Identity function that infers the body and query types of a route's handler. */
export function defineRoute<B extends z.ZodType, Q extends z.ZodType = z.ZodObject<Record<string, never>>>(spec: RouteSpec<B, Q>): RouteSpec {
  return spec as unknown as RouteSpec;
}

/** What every route group plugin is given by the server. */
export interface RouteGroupOptions {
  jsonBodyLimit: number;
  arrowBodyLimit: number;
  /** Shared by all groups: the limit on large bodies is one for the process. */
  largeBodies: LargeBodySlots;
}

/** A route group: its routes (for the OpenAPI document and the 405 answers) and the plugin that registers them under `prefix`. */
export interface RouteGroup {
  prefix: string;
  routes: readonly RouteSpec[];
  plugin: FastifyPluginAsync<RouteGroupOptions>;
}

/** The facts of a route the request hooks read, from its Fastify `config`. */
export interface RouteConfig {
  operationId: string;
  mutation: boolean;
  vends: boolean;
  arrowBody: boolean;
  bodyIdIsPathId: boolean;
  boundedList: BoundedList | null;
  filteredListing: FilteredListing | null;
  open: boolean;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set on every route of a route group; absent on the service's own routes (OpenAPI, not found). */
    route?: RouteConfig;
  }
}

/** The route group of `routes` under `prefix`, as a Fastify plugin. */
export function routeGroup(prefix: string, routes: readonly RouteSpec[]): RouteGroup {
  return {
    prefix,
    routes,
    plugin: async (app, options) => {
      for (const route of routes) registerRoute(app, route, options);
    },
  };
}

/** The routes of the groups with their full paths (prefix included). */
export function prefixedRoutes(groups: readonly RouteGroup[]): RouteSpec[] {
  return groups.flatMap((group) => group.routes.map((route) => ({ ...route, paths: route.paths.map((p) => `${group.prefix}${p}`) })));
}

/** Splits a path id by the delimiter; the delimiter alone is the root namespace. */
export function parsePathId(raw: string, delimiter: string): string[] {
  if (delimiter === '') throw invalidInput('delimiter must not be empty');
  if (raw === delimiter) return [];
  if (raw === '') throw invalidInput('the id in the path must not be empty (use the delimiter for the root namespace)');
  const parts = raw.split(delimiter);
  const empty = parts.indexOf('');
  if (empty >= 0) throw invalidInput(`the id ${JSON.stringify(raw)} has an empty part at position ${empty}`);
  return parts;
}

/** Value of `query[key]` when given, else of `body[key]`, for each key: the query string wins over the (POST) body. */
export function queryOrBody<Q extends object, B extends object, K extends keyof Q & keyof B>(
  query: Q,
  body: B,
  keys: readonly K[],
): { [P in K]: Exclude<Q[P], undefined> | B[P] } {
  const out = {} as { [P in K]: Exclude<Q[P], undefined> | B[P] };
  for (const key of keys) out[key] = (query[key] ?? body[key]) as Exclude<Q[typeof key], undefined> | B[typeof key];
  return out;
}

/**
 * The `branch` of a route that takes it in the query string and in the body. Both may carry it; when
 * both name a line (null and absent name none; "" and "main" name main) they must name the same one
 * (400 code 13 otherwise), so that a write never lands on a line its sender did not mean.
 */
export function branchOfQueryOrBody(query: { branch?: string | null }, body: { branch?: string | null }): string | null | undefined {
  const [inQuery, inBody] = [query.branch, body.branch];
  if (inQuery === undefined || inQuery === null) return inBody;
  if (inBody !== undefined && inBody !== null && normalizeBranch(inQuery) !== normalizeBranch(inBody))
    throw invalidInput(
      `the query string's branch ${JSON.stringify(inQuery)} and the body's ${JSON.stringify(inBody)} name different lines of history; give one`,
    );
  return inQuery;
}

/** The object shape of a schema, if it is an object schema. */
const shapeOf = (schema: z.ZodType | undefined): Record<string, z.ZodType> | undefined =>
  schema instanceof z.ZodObject ? (schema.shape as Record<string, z.ZodType>) : undefined;

const toFastifyPath = (p: string): string => p.replace(/\{([^}]+)\}/g, ':$1');

const ARROW_FILE = 'application/vnd.apache.arrow.file';
const BUSY = 'too many large request bodies are being received; retry shortly';
const NO_BYTES = Buffer.alloc(0);

function registerRoute(app: FastifyInstance, route: RouteSpec, options: RouteGroupOptions): void {
  const status = route.successStatus ?? 200;
  const config: RouteConfig = {
    operationId: route.operationId,
    mutation: route.mutation ?? false,
    vends: route.vends ?? false,
    arrowBody: route.arrowBody ?? false,
    bodyIdIsPathId: route.bodyIdIsPathId ?? true,
    boundedList: route.boundedList ?? null,
    filteredListing: route.filteredListing ?? null,
    open: route.open ?? false,
  };
  const jsonResponse = typeof route.response === 'object' ? route.response : undefined;
  // The spec gives every JSON answer object an optional `context` (model/common.ts ResponseBase).
  const carriesContext = shapeOf(jsonResponse)?.context !== undefined;
  // Decided before the body is read, so a refused body costs no memory.
  const admitLargeBody = async (request: FastifyRequest, reply: FastifyReply) => {
    if (options.largeBodies.admit(request, reply)) return;
    void reply.header('retry-after', '1');
    throw new NamespaceError(ErrorCode.ServiceUnavailable, BUSY);
  };
  for (const method of route.methods) {
    // A GET has no body: its body is the empty request (what an empty POST body also is).
    const bodySchema = method === 'POST' && !config.arrowBody ? route.body : undefined;
    const emptyBody = method === 'GET' && route.body ? route.body : undefined;
    const handler = async (request: FastifyRequest, reply: FastifyReply) => {
      const body = emptyBody ? parseRequestPart(emptyBody, {}, 'request body') : config.arrowBody ? {} : (request.body ?? {});
      const result = await route.handler({
        id: request.pathId,
        delimiter: request.delimiter,
        body,
        query: route.query ? request.query : {},
        raw: Buffer.isBuffer(request.body) ? request.body : NO_BYTES,
        ctx: request.ctx,
        params: request.params as Record<string, string>,
      });
      void reply.code(status);
      if (route.response === 'empty' || route.response === 'unsupported') return reply.send();
      if (route.response === 'arrow-file') return reply.type(ARROW_FILE).send(result);
      // Fastify sends a string (or nothing) as already serialized: those go through the response schema here.
      const answer = carriesContext ? withContext(result, request.ctx.context) : result;
      return reply.type('application/json').send(typeof answer === 'object' && answer !== null ? answer : reply.serialize(answer));
    };
    for (const path of route.paths) {
      app.route({
        method,
        url: toFastifyPath(path),
        bodyLimit: config.arrowBody ? options.arrowBodyLimit : options.jsonBodyLimit,
        config: { route: config },
        schema: {
          ...(bodySchema ? { body: bodySchema } : {}),
          ...(route.query ? { querystring: route.query } : {}),
          ...(jsonResponse ? { response: { [status]: jsonResponse } } : {}),
        },
        ...(config.arrowBody ? { onRequest: admitLargeBody } : {}),
        handler,
      });
    }
  }
}

/** `answer` with the request's context as its `context`, when the client sent one (the spec's answers carry it). */
export function withContext<T>(answer: T, context: Record<string, string> | undefined): T {
  if (context === undefined || Object.keys(context).length === 0 || typeof answer !== 'object' || answer === null) return answer;
  return { ...answer, context };
}

/** The methods each route path answers, for telling a wrong method (405) from an unknown path (404). */
export function routeMethods(routes: readonly RouteSpec[]): (path: string) => HttpMethod[] {
  const patterns = routes.flatMap((route) =>
    route.paths.map((p) => ({
      regex: new RegExp(
        `^${p
          .split(/\{[^}]+\}/)
          .map(escapeRegExp)
          .join('[^/]+')}/?$`,
      ),
      methods: route.methods,
    })),
  );
  return (path) => {
    const normalized = path.replace(/\/{2,}/g, '/');
    return [...new Set(patterns.filter((p) => p.regex.test(normalized)).flatMap((p) => p.methods))];
  };
}
