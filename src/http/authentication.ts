import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createLocalJWKSet, createRemoteJWKSet, decodeJwt, type JWK, type JWTVerifyGetKey, jwtVerify } from 'jose';
import { ErrorCode, NamespaceError } from '../model/errors.js';
import { ANONYMOUS, type Principal } from '../service/context/request-context.js';
import { BUILTIN_ISSUER, type OAuth2Options, verifyIssuedToken } from './oauth-token.js';

// Who is calling: established once per request, in the request hooks' onRequest, before anything
// of the request is read. With no authentication configured every caller is ANONYMOUS (main.ts
// allows that only on a loopback address, or when told --insecure). Configured, a request carries
// a bearer JWT in `authorization` (verified against a JWKS URL or configured public keys: issuer,
// audience, expiry with a clock skew) or an API key in `x-api-key` (the configuration holds only
// each key's SHA-256, so the file gives nothing away). The health checks and the OpenAPI document
// stay open.

export interface JwtOptions {
  issuer: string;
  audience: string;
  /** Where the issuer publishes its signing keys; or `keys`. */
  jwksUrl?: string | undefined;
  /** Public signing keys (JWKs); or `jwksUrl`. */
  keys?: JWK[] | undefined;
  clockSkewSeconds: number;
  /** The claim that names the principal. */
  principalClaim: string;
}

export interface AuthenticationOptions {
  apiKeys?: ReadonlyArray<{ principal: string; sha256: string }> | undefined;
  jwt?: JwtOptions | undefined;
  /** The built-in client-credentials grant (oauth-token.ts), whose tokens are accepted too. */
  oauth2?: OAuth2Options | undefined;
}

/** Paths answered without credentials: liveness, readiness, the API's description, and the token endpoint. */
const OPEN_PATHS = /^\/(health\/|openapi\.json(?:$|\?)|oauth\/token(?:$|\?))/;
const DEFAULT_CLOCK_SKEW_S = 30;

export type Authenticate = (request: FastifyRequest, reply: FastifyReply) => Principal | Promise<Principal>;

/** The authentication `options` configure (none: everyone is ANONYMOUS); fails with 401 code 16 for missing or bad credentials. */
export function authenticator(options: AuthenticationOptions | undefined): Authenticate {
  if (!options) return () => ANONYMOUS;
  const byHash = new Map((options.apiKeys ?? []).map((k) => [k.sha256, Object.freeze({ id: k.principal })]));
  const jwt = options.jwt;
  const keySet: JWTVerifyGetKey | undefined = jwt
    ? jwt.jwksUrl
      ? createRemoteJWKSet(new URL(jwt.jwksUrl))
      : createLocalJWKSet({ keys: jwt.keys ?? [] })
    : undefined;
  const oauth2 = options.oauth2;
  const bearers = jwt !== undefined || oauth2 !== undefined;
  const challenges = [
    ...(bearers ? ['Bearer realm="lance-namespace"'] : []),
    ...(byHash.size > 0 ? ['ApiKey realm="lance-namespace", header="x-api-key"'] : []),
  ].join(', ');
  const ways = [...(bearers ? ['a bearer token in the authorization header'] : []), ...(byHash.size > 0 ? ['an API key in the x-api-key header'] : [])].join(
    ' or ',
  );
  const unauthenticated = (reply: FastifyReply, message: string): NamespaceError => {
    reply.header('www-authenticate', challenges);
    return new NamespaceError(ErrorCode.Unauthenticated, message);
  };
  return (request, reply) => {
    if (OPEN_PATHS.test(request.url)) return ANONYMOUS;
    const authorization = request.headers.authorization;
    const bearer = typeof authorization === 'string' && /^bearer /i.test(authorization) ? authorization.slice(7).trim() : undefined;
    if (bearer !== undefined && bearers) {
      const verified = (): Promise<string> => {
        // A token this service issued goes to its own key; any other to the configured issuer's.
        if (oauth2 && issuerOf(bearer) === BUILTIN_ISSUER) return verifyIssuedToken(bearer, oauth2, jwt?.clockSkewSeconds ?? DEFAULT_CLOCK_SKEW_S);
        if (!jwt || !keySet) return Promise.reject(Object.assign(new Error('not issued here'), { code: 'ERR_JWT_CLAIM_VALIDATION_FAILED' }));
        return jwtVerify(bearer, keySet, { issuer: jwt.issuer, audience: jwt.audience, clockTolerance: jwt.clockSkewSeconds, requiredClaims: ['exp'] }).then(
          ({ payload }) => {
            const id = payload[jwt.principalClaim];
            if (typeof id !== 'string' || id === '') throw unauthenticated(reply, `the token has no ${jwt.principalClaim} claim to name its principal`);
            return id;
          },
        );
      };
      return verified().then(
        (id) => Object.freeze({ id }),
        (e: unknown) => {
          if (e instanceof NamespaceError) throw e;
          // jose's code (ERR_JWT_EXPIRED, ERR_JWS_SIGNATURE_VERIFICATION_FAILED, ...) says why without echoing the token.
          throw unauthenticated(reply, `the bearer token is not valid (${(e as { code?: string }).code ?? 'unreadable'})`);
        },
      );
    }
    const key = request.headers['x-api-key'];
    if (key !== undefined && byHash.size > 0) {
      if (typeof key !== 'string' || key === '') throw unauthenticated(reply, 'the x-api-key header must hold one API key');
      const principal = byHash.get(createHash('sha256').update(key).digest('hex'));
      if (!principal) throw unauthenticated(reply, 'the API key is not valid');
      return principal;
    }
    throw unauthenticated(reply, `credentials are required: send ${ways}`);
  };
}

/** The unverified `iss` of a token, to choose the key that must verify it. */
function issuerOf(token: string): string | undefined {
  try {
    return decodeJwt(token).iss;
  } catch {
    return undefined;
  }
}
