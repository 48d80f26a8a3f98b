import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, NamespaceError } from '../model/errors.js';
import { ANONYMOUS, type Principal } from '../service/request-context.js';

// Who is calling: established once per request, in the request hooks' onRequest, before anything
// of the request is read. With no authentication configured every caller is ANONYMOUS (main.ts
// allows that only on a loopback address, or when told --insecure). With API keys configured, a
// request must carry one in `x-api-key`; the configuration holds only each key's SHA-256, so the
// file gives nothing away. The health checks and the OpenAPI document stay open.

export interface AuthenticationOptions {
  apiKeys: ReadonlyArray<{ principal: string; sha256: string }>;
}

/** Paths answered without credentials: liveness, readiness, and the API's description. */
const OPEN_PATHS = /^\/(health\/|openapi\.json(?:$|\?))/;
const CHALLENGE = 'ApiKey realm="lance-namespace", header="x-api-key"';

export type Authenticate = (request: FastifyRequest, reply: FastifyReply) => Principal;

const unauthenticated = (reply: FastifyReply, message: string): NamespaceError => {
  reply.header('www-authenticate', CHALLENGE);
  return new NamespaceError(ErrorCode.Unauthenticated, message);
};

/** The authentication `options` configure (none: everyone is ANONYMOUS); throws 401 code 16 for missing or bad credentials. */
export function authenticator(options: AuthenticationOptions | undefined): Authenticate {
  if (!options) return () => ANONYMOUS;
  const byHash = new Map(options.apiKeys.map((k) => [k.sha256, Object.freeze({ id: k.principal })]));
  return (request, reply) => {
    if (OPEN_PATHS.test(request.url)) return ANONYMOUS;
    const key = request.headers['x-api-key'];
    if (key === undefined) throw unauthenticated(reply, 'credentials are required: send an API key in the x-api-key header');
    if (typeof key !== 'string' || key === '') throw unauthenticated(reply, 'the x-api-key header must hold one API key');
    const principal = byHash.get(createHash('sha256').update(key).digest('hex'));
    if (!principal) throw unauthenticated(reply, 'the API key is not valid');
    return principal;
  };
}
