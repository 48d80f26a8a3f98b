import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { jwtVerify, SignJWT } from 'jose';
import { mediaTypeOf } from './browser-guard.js';

// The built-in OAuth2 client-credentials grant (RFC 6749 §4.4) at the spec's token URL,
// `POST /oauth/token`: a configured client sends its id and secret (form body or HTTP Basic) and
// gets a short-lived bearer token, an HS256 JWT signed with the configured secret, which every
// replica given the same secret accepts (authentication.ts). The configuration holds only each
// client secret's SHA-256. Errors are OAuth's own JSON (`error`, `error_description`), as OAuth
// clients expect, not the namespace error body.

export interface OAuth2Options {
  /** HMAC key of the issued tokens (at least 32 characters), the same on every replica. */
  signingSecret: string;
  tokenTtlSeconds: number;
  clients: ReadonlyArray<{ clientId: string; secretSha256: string; principal: string }>;
}

/** The `iss` and `aud` of the tokens this service issues. */
export const BUILTIN_ISSUER = 'lance-namespace-service';

const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest();

/** Verifies a token this service issued; its principal, or a rejection (jose's error). */
export async function verifyIssuedToken(token: string, options: OAuth2Options, clockSkewSeconds: number): Promise<string> {
  const { payload } = await jwtVerify(token, new TextEncoder().encode(options.signingSecret), {
    issuer: BUILTIN_ISSUER,
    audience: BUILTIN_ISSUER,
    algorithms: ['HS256'],
    clockTolerance: clockSkewSeconds,
    requiredClaims: ['exp', 'sub'],
  });
  return String(payload.sub);
}

/** Adds `POST /oauth/token` to `app` (whose parser hands it the raw body). */
export function useTokenEndpoint(app: FastifyInstance, options: OAuth2Options): void {
  const key = new TextEncoder().encode(options.signingSecret);
  const clients = new Map(options.clients.map((c) => [c.clientId, c]));
  app.post('/oauth/token', async (request, reply) => {
    const fail = (status: number, error: string, description: string) => {
      if (status === 401) reply.header('www-authenticate', 'Basic realm="lance-namespace"');
      return reply.code(status).header('cache-control', 'no-store').type('application/json').send({ error, error_description: description });
    };
    if (mediaTypeOf(request.headers['content-type']) !== 'application/x-www-form-urlencoded')
      return fail(400, 'invalid_request', 'send the token request as application/x-www-form-urlencoded');
    const form = new URLSearchParams(Buffer.isBuffer(request.body) ? request.body.toString('utf8') : '');
    if (form.get('grant_type') !== 'client_credentials') return fail(400, 'unsupported_grant_type', 'only grant_type=client_credentials is supported');
    let clientId = form.get('client_id');
    let secret = form.get('client_secret');
    const basic = /^basic (.+)$/i.exec(request.headers.authorization ?? '')?.[1];
    if (basic) {
      const decoded = Buffer.from(basic, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon < 0) return fail(401, 'invalid_client', 'malformed Basic credentials');
      // RFC 6749 §2.3.1: the id and secret are form-encoded before they are put in Basic credentials.
      clientId = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' '));
      secret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' '));
    }
    const client = clientId ? clients.get(clientId) : undefined;
    const given = sha256(secret ?? '');
    // Compared in constant time whether or not the client exists.
    const expected = client ? Buffer.from(client.secretSha256, 'hex') : sha256(`no such client ${Math.random()}`);
    if (!client || secret === null || !timingSafeEqual(given, expected)) return fail(401, 'invalid_client', 'unknown client or wrong secret');
    const accessToken = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer(BUILTIN_ISSUER)
      .setAudience(BUILTIN_ISSUER)
      .setSubject(client.principal)
      .setIssuedAt()
      .setExpirationTime(`${options.tokenTtlSeconds}s`)
      .sign(key);
    return reply
      .header('cache-control', 'no-store')
      .type('application/json')
      .send({ access_token: accessToken, token_type: 'Bearer', expires_in: options.tokenTtlSeconds });
  });
}
