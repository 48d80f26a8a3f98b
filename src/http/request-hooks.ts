import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Metrics } from '../metrics/metrics.js';
import { invalidInput } from '../model/errors.js';
import { ANONYMOUS, type Principal, type RequestContext, type VendRecord } from '../service/context/request-context.js';
import { type Authenticate, authenticator } from './authentication.js';
import type { Authorizer } from './authorization.js';
import { checkListLimit, checkMapLimits, type RequestLimits } from './limits.js';
import type { RateLimiter } from './rate-limit.js';
import { parsePathId, type RouteConfig } from './route.js';

// What every route's request goes through besides its handler, in Fastify's hook order:
//   onRequest     the principal (authentication.ts), the caller's rate limit (rate-limit.ts), the
//                 delimiter, the path id and the operation's privilege (authorization.ts), all
//                 before the body is read; an empty context
//   preValidation what the body adds to the privilege (a rename's destination), the map limits of
//                 the JSON body (before zod sees it)
//   (validation)  body, then query, by the route's zod schemas (zod-compilers.ts)
//   preHandler    the map limits of the query, the body id against the path id, the request
//                 context (echoed as headers)
//   preSerialization  with authorization, a listing's names cut to what the caller may see
//   onResponse    the audit record of a mutation or of a request that may vend credentials; the
//                 request's count and time (metrics)

declare module 'fastify' {
  interface FastifyRequest {
    /** Who is calling (authentication.ts); ANONYMOUS when no authentication is configured. */
    principal: Principal;
    /** The path id split by the delimiter ([] for the root namespace and for routes without {id}). */
    pathId: string[];
    delimiter: string;
    ctx: RequestContext;
    /** The request's credential vends (one per table), as the service made or tried them (for the audit record). */
    vends: VendRecord[] | null;
  }
}

const CONTEXT_HEADER = 'x-namespace-ctx-';
const DEFAULT_DELIMITER = '$';

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

const asRecord = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === 'object' && value !== null && !Array.isArray(value) && !Buffer.isBuffer(value) ? (value as Record<string, unknown>) : undefined;

/** Context entries from the body's `context` and the x-namespace-ctx-<key> headers (headers win). */
function contextOf(request: FastifyRequest): Record<string, string> {
  const context: Record<string, string> = {};
  const fromBody = asRecord(asRecord(request.body)?.context);
  if (fromBody) for (const [k, v] of Object.entries(fromBody)) if (typeof v === 'string') context[k] = v;
  for (const [name, value] of Object.entries(request.headers)) {
    if (name.startsWith(CONTEXT_HEADER) && typeof value === 'string') context[name.slice(CONTEXT_HEADER.length)] = value;
  }
  return context;
}

/** Without authorization every principal may do everything. */
const everything = (): boolean => true;

const routeOf = (request: FastifyRequest): RouteConfig | undefined => request.routeOptions.config.route;

/** A hook in Fastify's callback form around a synchronous step; what the step throws is the request's error. */
const syncHook =
  (step: (request: FastifyRequest, reply: FastifyReply) => void) =>
  (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void => {
    try {
      step(request, reply);
    } catch (e) {
      done(e as Error);
      return;
    }
    done();
  };

/** Who may call and how much (authentication.ts, rate-limit.ts, authorization.ts); all optional. */
export interface AccessControl {
  authenticate?: Authenticate | undefined;
  rateLimiter?: RateLimiter | undefined;
  authorizer?: Authorizer | undefined;
  /** Whether credential vending is configured: then every request of a route that vends is audited. */
  vending?: boolean | undefined;
  /** Where each answered request is counted and timed. */
  metrics?: Metrics | undefined;
}

/**
 * Adds the request hooks to `app`, for the routes registered in it and its children (the route
 * groups). Called on the encapsulated context that holds the route groups, not registered as a
 * plugin of its own (that would keep the hooks to itself).
 */
export function useRequestHooks(app: FastifyInstance, limits: RequestLimits, access: AccessControl = {}): void {
  const { authenticate = authenticator(undefined), rateLimiter, authorizer, vending = false, metrics } = access;
  // Declared so every request has the same shape; set by the onRequest hook before any other reads them.
  const slots: string[] = ['principal', 'pathId', 'ctx', 'vends'];
  for (const slot of slots) app.decorateRequest(slot, null);
  app.decorateRequest('delimiter', DEFAULT_DELIMITER);

  // The hooks take Fastify's callback form: an async hook costs every request a promise and a turn
  // of the microtask queue, and only a bearer token's check waits for anything.
  app.addHook('onRequest', (request, reply, done) => {
    // The one place the principal is established (authentication.ts), before anything is read.
    const settle = (principal: Principal): void => {
      // Health checks are never throttled: a load balancer's probes must not take a caller's turn.
      if (rateLimiter && !request.url.startsWith('/health/')) {
        try {
          // Anonymous callers are told apart by address; everyone else by principal.
          rateLimiter.take(principal === ANONYMOUS ? `address:${request.ip}` : `principal:${principal.id}`, reply);
        } catch (e) {
          done(e as Error);
          return;
        }
      }
      request.principal = principal;
      request.pathId = [];
      try {
        // Who may do what is decided here, before the body is read (a large Arrow body included).
        const route = routeOf(request);
        if (route) {
          resolvePath(request);
          authorizer?.check(principal, route, request.pathId);
        }
      } catch (e) {
        done(e as Error);
        return;
      }
      request.ctx = {
        requestId: String(request.id),
        principal,
        context: {},
        may: authorizer ? (privilege, namespace) => authorizer.may(principal, privilege, namespace) : everything,
        onVend: (record) => {
          request.vends ??= [];
          request.vends.push(record);
        },
      };
      done();
    };
    let found: Principal | Promise<Principal>;
    try {
      found = authenticate(request, reply);
    } catch (e) {
      done(e as Error);
      return;
    }
    // Only a bearer token makes it wait (for its signature check); everything else stays synchronous.
    if (found instanceof Promise) found.then(settle, (e: unknown) => done(e as Error));
    else settle(found);
  });

  app.addHook(
    'preValidation',
    syncHook((request) => {
      const route = routeOf(request);
      if (authorizer && route) authorizer.checkBody(request.principal, route.operationId, request.body);
      if (route?.boundedList) checkListLimit(request.body, route.boundedList, limits);
      if (!route?.arrowBody) checkMapLimits(request.body, limits);
    }),
  );

  // A filteredListing route's answer shows only what the caller may see (authorization.ts).
  if (authorizer) {
    app.addHook('preSerialization', (request: FastifyRequest, _reply: FastifyReply, payload: unknown, done: (err: Error | null, value?: unknown) => void) => {
      const listing = routeOf(request)?.filteredListing;
      const body = asRecord(payload);
      const field = listing === 'child-namespaces' ? 'namespaces' : 'tables';
      const names = listing && body ? body[field] : undefined;
      if (listing && Array.isArray(names)) {
        done(null, { ...body, [field]: authorizer.filterListing(request.principal, listing, request.pathId, names as string[], request.delimiter) });
        return;
      }
      done(null, payload);
    });
  }

  app.addHook(
    'preHandler',
    syncHook((request, reply) => prepareHandler(request, reply, limits)),
  );

  // One structured line per mutating request and per request that may vend credentials, whatever its outcome.
  app.addHook('onResponse', (request, reply, done) => {
    const route = routeOf(request);
    if (route?.mutation || (route?.vends && mayVend(request, vending))) writeAudit(request, reply);
    if (route) metrics?.httpRequest(route.operationId, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
}

/** The delimiter (query) and the path id of a route's request. */
function resolvePath(request: FastifyRequest): void {
  const delimiter = asRecord(request.query)?.delimiter;
  if (delimiter !== undefined && typeof delimiter !== 'string') throw invalidInput('delimiter: must be given once, as a string');
  request.delimiter = delimiter ?? DEFAULT_DELIMITER;
  const rawId = (request.params as Record<string, string | undefined>).id;
  if (rawId !== undefined) request.pathId = parsePathId(rawId, request.delimiter);
}

/** The preHandler's checks (query limits, body id, context, branch), and the request context with its echoed headers. */
function prepareHandler(request: FastifyRequest, reply: FastifyReply, limits: RequestLimits): void {
  const route = routeOf(request);
  checkMapLimits(request.query, limits);
  const bodyId = asRecord(request.body)?.id;
  const hasPathId = (request.params as Record<string, string | undefined>).id !== undefined;
  if (hasPathId && route?.bodyIdIsPathId !== false && Array.isArray(bodyId) && JSON.stringify(bodyId) !== JSON.stringify(request.pathId)) {
    throw invalidInput(`the id in the body ${JSON.stringify(bodyId)} does not match the id in the path ${JSON.stringify(request.pathId)}`);
  }
  const context = contextOf(request);
  checkContext(context);
  request.ctx = { ...request.ctx, context };
  // Context travels back the way it came in, so callers can correlate.
  for (const [key, value] of Object.entries(context)) void reply.header(`${CONTEXT_HEADER}${key.toLowerCase()}`, value);
}

/** Whether a request to a route that vends could have vended: it asked, or vending is configured and it did not decline. */
function mayVend(request: FastifyRequest, vending: boolean): boolean {
  const asked = asRecord(request.body)?.vend_credentials;
  return asked === true || (vending && asked !== false) || request.vends !== null;
}

/** The path id of the audit record; for a request refused before its path was resolved (authentication), parsed here, or raw when it does not parse. */
function auditId(request: FastifyRequest): string[] | string | null {
  const resolved = request.pathId as string[] | null;
  if (resolved) return resolved;
  const raw = (request.params as Record<string, string | undefined>).id;
  if (raw === undefined) return null;
  const delimiter = asRecord(request.query)?.delimiter;
  try {
    return parsePathId(raw, typeof delimiter === 'string' ? delimiter : DEFAULT_DELIMITER);
  } catch {
    return raw;
  }
}

/** The audit record of a mutating or vending request, refused and failed ones included. */
function writeAudit(request: FastifyRequest, reply: FastifyReply): void {
  const route = routeOf(request);
  if (!route) return;
  // A request refused in onRequest (authentication, rate limit) has no principal, path id or context yet.
  const settled = request.ctx as RequestContext | null;
  request.log.info(
    {
      audit: {
        operation: route.operationId,
        id: auditId(request),
        status: reply.statusCode,
        duration_ms: Math.round(reply.elapsedTime * 1000) / 1000,
        request_id: request.id,
        principal: (request.principal as Principal | null)?.id ?? null,
        context: settled?.context ?? {},
        ...(route.vends ? { vends: (request.vends as VendRecord[] | null) ?? [] } : {}),
      },
    },
    'audit',
  );
}
