import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, invalidInput, NamespaceError } from '../model/errors.js';

// Keeps web pages from driving the service through a browser (cross-site requests, DNS rebinding).
// Data clients (pylance, LanceDB, curl) send no Origin and name the host they connect to, so none
// of this touches them:
// - a request carrying an Origin is answered only for its own origin (a page the service serves
//   itself) and the configured origins (CORS is off unless origins are listed), with the CORS
//   headers they need; any other origin gets 403 code 15;
// - bound to a loopback address, the service answers only requests addressed to a loopback name
//   (localhost, 127.0.0.0/8, [::1]): a page whose own host name resolves to 127.0.0.1 sends its own
//   name as Host, and gets 403 code 15;
// - a body is taken only in its route's media type: JSON on JSON routes, Arrow (or octet-stream)
//   on Arrow routes; the types a page may send without asking (text/plain, forms) never pass.

export interface BrowserGuardOptions {
  /** Origins (scheme://host[:port]) whose pages may call the service; none by default. */
  corsOrigins: readonly string[];
  /** The service is bound to a loopback address: Host must name a loopback address too. */
  loopbackOnly: boolean;
}

const LOOPBACK_HOST = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d{1,5})?$/i;
const ARROW_TYPES = new Set(['application/vnd.apache.arrow.stream', 'application/vnd.apache.arrow.file', 'application/octet-stream']);
const CORS_METHODS = 'GET, POST, OPTIONS';
const CORS_MAX_AGE_S = '600';

const forbidden = (message: string) => new NamespaceError(ErrorCode.PermissionDenied, message);

/** The media type of a content-type header, lower case, without parameters ('' when absent). */
export function mediaTypeOf(contentType: string | undefined): string {
  return (contentType ?? '').split(';', 1)[0]?.trim().toLowerCase() ?? '';
}

const isJsonType = (type: string): boolean => type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));

/** Whether the request carries a body (a non-zero Content-Length, or chunked). */
const hasBody = (request: FastifyRequest): boolean =>
  request.headers['transfer-encoding'] !== undefined || (request.headers['content-length'] !== undefined && request.headers['content-length'] !== '0');

/** Checks a route's request body's media type (see the header): `arrowBody` routes take Arrow, the others JSON. */
export function checkBodyType(request: FastifyRequest, arrowBody: boolean): void {
  if (!hasBody(request)) return;
  const type = mediaTypeOf(request.headers['content-type']);
  if (arrowBody ? ARROW_TYPES.has(type) : isJsonType(type)) return;
  const wanted = arrowBody ? 'application/vnd.apache.arrow.stream (or .file, or application/octet-stream)' : 'application/json';
  throw invalidInput(`content-type ${JSON.stringify(type || '(none)')} is not accepted here: send ${wanted}`);
}

/** Adds the Origin and Host checks (and CORS for the configured origins) to every request of `app`. */
export function useBrowserGuard(app: FastifyInstance, options: BrowserGuardOptions): void {
  const origins = new Set(options.corsOrigins);
  app.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => {
    if (options.loopbackOnly && !LOOPBACK_HOST.test(request.headers.host ?? '')) {
      done(forbidden(`host ${JSON.stringify(request.headers.host ?? '')} is not served here: this service answers only requests addressed to localhost`));
      return;
    }
    const origin = request.headers.origin;
    // Browsers send Origin on same-origin POSTs too: a page served from this very host is no stranger
    // (by either scheme: behind a TLS proxy the page is https while this process speaks http).
    const host = request.headers.host ?? '';
    if (origin === undefined || origin === `http://${host}` || origin === `https://${host}`) {
      done();
      return;
    }
    if (!origins.has(origin)) {
      done(forbidden(`requests from web pages of ${JSON.stringify(origin)} are not allowed (list the origin in the CORS configuration to allow it)`));
      return;
    }
    reply.header('access-control-allow-origin', origin).header('vary', 'Origin');
    if (request.method === 'OPTIONS') {
      const asked = request.headers['access-control-request-headers'];
      reply
        .header('access-control-allow-methods', CORS_METHODS)
        .header('access-control-allow-headers', typeof asked === 'string' ? asked : 'content-type, authorization, x-api-key')
        .header('access-control-max-age', CORS_MAX_AGE_S)
        .code(204)
        .send();
      return;
    }
    done();
  });
}

/** Whether `host` (the address the service binds) is a loopback address. */
export function isLoopbackAddress(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127(?:\.\d{1,3}){3}$/.test(host);
}
