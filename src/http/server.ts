import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import type { ScrapedMetrics } from '../metrics/metrics.js';
import type { BranchService } from '../service/branches/branch-service.js';
import type { NamespaceService } from '../service/catalog/namespace-service.js';
import type { RequestContext } from '../service/context/request-context.js';
import type { ColumnService } from '../service/data/columns.js';
import type { IndexService } from '../service/data/indices.js';
import type { QueryService } from '../service/data/queries.js';
import type { RowService } from '../service/data/rows.js';
import type { TagService } from '../service/data/tags.js';
import type { HealthService } from '../service/health/health-service.js';
import type { JobService } from '../service/jobs/job-service.js';
import type { TableService } from '../service/tables/table-service.js';
import type { TransactionService } from '../service/transactions/transaction-service.js';
import type { TableVersionService } from '../service/versions/table-version-service.js';
import type { MaterializedViewService } from '../service/views/view-service.js';
import { type AuthenticationOptions, authenticator } from './authentication.js';
import { type AuthorizationOptions, Authorizer } from './authorization.js';
import { readBody, readJsonBody } from './body.js';
import { type BrowserGuardOptions, checkBodyType, useBrowserGuard } from './browser-guard.js';
import { type ConsoleOptions, useConsole } from './console.js';
import { messageScrubber, toWireError, wireError } from './errors.js';
import { LargeBodySlots, type RequestLimits } from './limits.js';
import { useTokenEndpoint } from './oauth-token.js';
import { buildOpenApi } from './openapi.js';
import { RateLimiter, type RateLimitOptions } from './rate-limit.js';
import { useRequestHooks } from './request-hooks.js';
import { prefixedRoutes, type RouteGroup, type RouteGroupOptions, routeMethods, withContext } from './route.js';
import { branchRoutes } from './routes/branches.js';
import { columnRoutes } from './routes/columns.js';
import { healthRoutes } from './routes/health.js';
import { indexRoutes } from './routes/indices.js';
import { jobRoutes } from './routes/jobs.js';
import { namespaceRoutes } from './routes/namespaces.js';
import { queryRoutes } from './routes/queries.js';
import { rowRoutes } from './routes/rows.js';
import { tableRoutes } from './routes/tables.js';
import { tagRoutes } from './routes/tags.js';
import { transactionRoutes } from './routes/transactions.js';
import { unsupportedRoutes } from './routes/unsupported.js';
import { versionRoutes } from './routes/versions.js';
import { viewRoutes } from './routes/views.js';
import { useZodCompilers } from './zod-compilers.js';

export interface Services {
  namespaces: NamespaceService;
  tables: TableService;
  versions: TableVersionService;
  transactions: TransactionService;
  rows: RowService;
  columns: ColumnService;
  indices: IndexService;
  tags: TagService;
  branches: BranchService;
  queries: QueryService;
  health: HealthService;
  jobs: JobService;
  views: MaterializedViewService;
}

export interface HttpServerOptions {
  logger: FastifyBaseLogger;
  jsonBodyLimit: number;
  arrowBodyLimit: number;
  limits: RequestLimits;
  /** The forms of the catalog root's own path (absolute path, URI) that error messages must not show. */
  rootForms: readonly string[];
  version: string;
  /** What browsers may do (browser-guard.ts). */
  browser: BrowserGuardOptions;
  /** Who may call (authentication.ts); absent: everyone, as ANONYMOUS. */
  authentication?: AuthenticationOptions | undefined;
  /** Requests per principal (rate-limit.ts); absent: unlimited. */
  rateLimit?: RateLimitOptions | undefined;
  /** What each principal may do (authorization.ts); absent: everything. */
  authorization?: AuthorizationOptions | undefined;
  /** Whether credential vending is configured (requests that may vend are audited). */
  vending?: boolean | undefined;
  /** Where requests are counted and timed, served at GET /metrics; absent: no metrics. */
  metrics?: ScrapedMetrics | undefined;
  /** The web console served at /ui (console.ts); absent: not served. */
  console?: ConsoleOptions | undefined;
}

/**
 * Fastify's two lines per request ('incoming request', 'request completed'), at debug: two
 * synchronous log writes cost more than most handlers here. At info a request leaves a line when
 * it changes something or may vend (the audit record, request-hooks.ts) or is refused or fails
 * (the error handler below).
 */
class QuietRequestLogs extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null, request: FastifyRequest, reply: FastifyReply): void {
    if (error) super.requestCompleted(error, request, reply, {});
    else reply.log.debug({ res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}

/** The request line's path, when a client error left it readable in the raw bytes. */
function rawPath(packet: unknown): string {
  if (!Buffer.isBuffer(packet)) return '/';
  const line = packet.subarray(0, 2048).toString('latin1').split('\r\n', 1)[0] ?? '';
  const path = line.split(' ')[1] ?? '/';
  return path.length > 256 || !path.startsWith('/') ? '/' : (path.split('?')[0] ?? '/');
}

export function routeGroups(services: Services): RouteGroup[] {
  return [
    healthRoutes(services.health),
    namespaceRoutes(services.namespaces),
    tableRoutes(services.tables),
    versionRoutes(services.versions),
    transactionRoutes(services.transactions),
    rowRoutes(services.rows),
    columnRoutes(services.columns),
    indexRoutes(services.indices),
    tagRoutes(services.tags),
    branchRoutes(services.branches),
    queryRoutes(services.queries),
    jobRoutes(services.jobs),
    viewRoutes(services.views),
    unsupportedRoutes(),
  ];
}

export function buildHttpServer(services: Services, options: HttpServerOptions): FastifyInstance {
  const scrub = messageScrubber(options.rootForms);
  const pathOf = (url: string): string => url.split('?')[0] ?? url;
  const app = Fastify({
    loggerInstance: options.logger,
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    logController: new QuietRequestLogs(),
    routerOptions: { ignoreTrailingSlash: true, ignoreDuplicateSlashes: true, maxParamLength: 2048 },
    forceCloseConnections: 'idle',
    bodyLimit: options.jsonBodyLimit,
    // Errors met before routing (a bad percent-encoding, an over-long path parameter) get the spec body too.
    frameworkErrors: (error, request, reply) => {
      const wire = toWireError(error, pathOf(request.url).slice(0, 256), scrub);
      request.log.info({ code: wire.body.code, err: error }, 'request rejected');
      // The option's reply is generic in a route schema that these errors never have.
      void (reply as unknown as FastifyReply).code(wire.status).type('application/json').send(wire.body);
    },
    // Errors of the HTTP parser (headers too large, invalid header tokens) never reach Fastify's
    // request cycle: answer them on the socket, in the spec's shape.
    clientErrorHandler(error, socket) {
      if ((error as { code?: string }).code === 'ECONNRESET' || socket.destroyed) return;
      const instance = rawPath(error.rawPacket);
      const known = toWireError(error, instance, scrub);
      // The parser's other errors (invalid tokens, bad chunking, ...) are all a malformed request.
      const wire = known.status < 500 ? known : toWireError({ statusCode: 400, message: 'malformed HTTP request' }, instance, scrub);
      const body = JSON.stringify(wire.body);
      if (socket.writable) {
        socket.write(
          `HTTP/1.1 ${wire.status} ${STATUS_CODES[wire.status] ?? ''}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
      }
      socket.destroy();
    },
  });

  useBrowserGuard(app, options.browser);

  // Every body arrives as bytes whatever its content type says (the 404 answer needs no more).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (request, payload, done) => readBody(request, payload, done));

  // During a graceful shutdown the responses of in-flight requests close their connections, so
  // that the process need not wait out keep-alive timeouts.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // The callback form: an async hook would cost every response a promise.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });

  const groups = routeGroups(services);
  const routes = prefixedRoutes(groups);
  const largeBodies = new LargeBodySlots(options.limits);
  // The routes live in one encapsulated context: its compilers, body parser and hooks are theirs alone.
  void app.register(async (api) => {
    useZodCompilers(api);
    // A route's body is JSON (an empty body or `null` is the empty request) or, on Arrow routes, the bytes.
    api.removeAllContentTypeParsers();
    api.addContentTypeParser('*', (request, payload, done) => {
      const arrowBody = request.routeOptions.config.route?.arrowBody === true;
      try {
        checkBodyType(request, arrowBody);
      } catch (e) {
        done(e as Error);
        return;
      }
      if (arrowBody) readBody(request, payload, done);
      else readJsonBody(request, payload, done);
    });
    useRequestHooks(api, options.limits, {
      authenticate: authenticator(options.authentication),
      rateLimiter: options.rateLimit ? new RateLimiter(options.rateLimit) : undefined,
      authorizer: options.authorization ? new Authorizer(options.authorization) : undefined,
      vending: options.vending,
      metrics: options.metrics,
    });
    const groupOptions: RouteGroupOptions = { jsonBodyLimit: options.jsonBodyLimit, arrowBodyLimit: options.arrowBodyLimit, largeBodies };
    for (const group of groups) await api.register(group.plugin, { ...groupOptions, prefix: group.prefix });
  });

  const openapi = buildOpenApi(routes, { title: 'Lance Namespace Service', version: options.version });
  app.get('/openapi.json', async (_request, reply) => reply.type('application/json').send(openapi));
  const { metrics } = options;
  // Open like the health checks and the OpenAPI document: a scraper brings no credentials.
  if (metrics) {
    app.get('/metrics', async (_request, reply) => {
      const { contentType, body } = await metrics.scrape();
      return reply.type(contentType).send(body);
    });
  }
  if (options.authentication?.oauth2) useTokenEndpoint(app, options.authentication.oauth2);
  if (options.console) useConsole(app, options.console);

  const methodsOf = routeMethods(routes);
  app.setNotFoundHandler(async (request, reply) => {
    const path = pathOf(request.url);
    const allowed = methodsOf(path);
    if (allowed.length > 0) {
      const { status, body } = wireError(405, 0, `${request.method} is not allowed on ${path}; use ${allowed.join(' or ')}`, path);
      return reply.code(status).header('allow', allowed.join(', ')).type('application/json').send(body);
    }
    const { status, body } = wireError(404, 0, `no such route: ${request.method} ${path}`, path);
    return reply.code(status).type('application/json').send(body);
  });

  app.setErrorHandler(async (error, request, reply) => {
    const path = pathOf(request.url);
    const wire = toWireError(error, path, scrub);
    if (wire.internal) request.log.error({ err: error }, 'request failed');
    // A rejection with a cause (an engine or store failure behind it) logs that cause in full, paths and all.
    else
      request.log.info(
        { code: wire.body.code, error: wire.body.error, ...(error instanceof Error && error.cause !== undefined ? { err: error } : {}) },
        'request rejected',
      );
    // Refused before the request hooks ran (authentication, a bad path), a request has no context yet.
    return reply
      .code(wire.status)
      .type('application/json')
      .send(withContext(wire.body, (request.ctx as RequestContext | undefined)?.context));
  });

  return app;
}
