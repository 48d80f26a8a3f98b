// Authentication: bearer JWTs verified against configured keys or a JWKS URL
// (issuer, audience, expiry, clock skew), and API keys in x-api-key of which the configuration
// holds only the SHA-256. Anything else is 401 code 16 with WWW-Authenticate and changes nothing;
// the health checks and the OpenAPI document stay open.

import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { exportJWK, generateKeyPair, type JWK, SignJWT, UnsecuredJWT } from 'jose';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/app.js';
import { startTestApp, type TestApp, testConfig } from '../support/app.js';
import { localBackend, type TestRoot } from '../support/backends.js';
import { expectSpecBody } from '../support/spec-body.js';

const sha256 = (key: string) => createHash('sha256').update(key).digest('hex');

describe('authentication by API key', () => {
  let root: TestRoot;
  let app: TestApp;
  const key = 'lance-test-key-1';

  beforeAll(async () => {
    root = await localBackend.newRoot();
    app = await startTestApp(root, {
      auth: {
        apiKeys: [
          { principal: 'etl', sha256: sha256(key) },
          { principal: 'ops', sha256: sha256('other') },
        ],
      },
    });
    expect((await app.call('POST', '/v1/namespace/keep/create', {}, { 'x-api-key': key })).status).toBe(200);
  });
  afterAll(async () => {
    await app?.close();
    await root?.dispose();
  });

  it('refuses requests without a valid key with 401 code 16 and a challenge, changing nothing', async () => {
    const attempts: Array<Record<string, string>> = [
      {},
      { 'x-api-key': '' },
      { 'x-api-key': 'wrong' },
      { 'x-api-key': sha256(key) },
      { authorization: `Bearer ${key}` },
    ];
    for (const headers of attempts) {
      const res = await app.call('POST', '/v1/namespace/keep/drop', {}, headers);
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expectSpecBody(res.json, 401, 16, root);
      expect(res.headers['www-authenticate'], JSON.stringify(headers)).toMatch(/x-api-key/);
      expect(res.text).not.toContain(key);
    }
    expect((await app.call('POST', '/v1/namespace/keep/exists', {}, { 'x-api-key': key })).status).toBe(200);
    expect((await app.call('GET', '/v1/namespace/keep/table/list', undefined, { 'x-api-key': 'other' })).status).toBe(200);
  });

  it('keeps the health checks and the OpenAPI document open', async () => {
    expect((await app.call('GET', '/health/live')).status).toBe(200);
    expect((await app.call('GET', '/health/ready')).status).toBe(200);
    const openapi = await app.call('GET', '/openapi.json');
    expect(openapi.status).toBe(200);
    // The document says so: the spec's three schemes, none needed for the health checks.
    const doc = openapi.json as {
      security: unknown;
      components: { securitySchemes: Record<string, unknown> };
      paths: Record<string, Record<string, { security?: unknown }>>;
    };
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['ApiKeyAuth', 'BearerAuth', 'OAuth2']);
    expect(doc.components.securitySchemes.OAuth2).toMatchObject({ flows: { clientCredentials: { tokenUrl: '/oauth/token' } } });
    expect(doc.paths['/health/live']?.get?.security).toEqual([]);
    // Not a way around it: an API path that merely mentions them is not open.
    expect((await app.call('GET', '/v1/namespace/health/table/list')).status).toBe(401);
  });
});

describe('authentication by bearer JWT', () => {
  let root: TestRoot;
  let local: TestApp;
  let remote: TestApp;
  let jwks: http.Server;
  let signingKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
  let strangerKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
  const issuer = 'https://issuer.test';
  const audience = 'lance-namespace';

  const token = (claims: { sub?: string; iss?: string; aud?: string; expiresIn?: string | number | null }, key = signingKey) => {
    let jwt = new SignJWT(claims.sub === undefined ? {} : { sub: claims.sub })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setIssuer(claims.iss ?? issuer)
      .setAudience(claims.aud ?? audience)
      .setIssuedAt();
    if (claims.expiresIn !== null) jwt = jwt.setExpirationTime(claims.expiresIn ?? '5m');
    return jwt.sign(key);
  };
  const bearer = async (t: string | Promise<string>) => ({ authorization: `Bearer ${await t}` });

  beforeAll(async () => {
    const pair = await generateKeyPair('ES256');
    signingKey = pair.privateKey;
    strangerKey = (await generateKeyPair('ES256')).privateKey;
    const publicJwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
    jwks = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [publicJwk] })));
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
    root = await localBackend.newRoot();
    const jwt = { issuer, audience, clockSkewSeconds: 30, principalClaim: 'sub' };
    [local, remote] = await Promise.all([
      startTestApp(root, { auth: { jwt: { ...jwt, keys: [publicJwk] }, apiKeys: [{ principal: 'etl', sha256: sha256('k') }] } }),
      startTestApp(root, { auth: { jwt: { ...jwt, jwksUrl } } }),
    ]);
    expect((await local.call('POST', '/v1/namespace/jwt/create', {}, await bearer(token({ sub: 'alice' })))).status).toBe(200);
  });
  afterAll(async () => {
    await Promise.all([local?.close(), remote?.close()]);
    await new Promise<void>((resolve) => (jwks ? jwks.close(() => resolve()) : resolve()));
    await root?.dispose();
  });

  it('accepts a valid token, from configured keys and from a JWKS URL, and API keys beside it', async () => {
    expect((await local.call('POST', '/v1/namespace/jwt/exists', {}, await bearer(token({ sub: 'alice' })))).status).toBe(200);
    expect((await remote.call('POST', '/v1/namespace/jwt/exists', {}, await bearer(token({ sub: 'bob' })))).status).toBe(200);
    expect((await local.call('POST', '/v1/namespace/jwt/exists', {}, { 'x-api-key': 'k' })).status).toBe(200);
    // Within the clock skew an expired token still passes.
    expect(
      (await local.call('POST', '/v1/namespace/jwt/exists', {}, await bearer(token({ sub: 'alice', expiresIn: Math.floor(Date.now() / 1000) - 10 })))).status,
    ).toBe(200);
  });

  it('refuses expired, foreign, misaddressed, unsigned and unnamed tokens with 401 code 16, changing nothing', async () => {
    const unsigned = new UnsecuredJWT({ sub: 'mallory' }).setIssuer(issuer).setAudience(audience).setExpirationTime('5m').encode();
    const cases: Array<[string, Record<string, string>]> = [
      ['expired', await bearer(token({ sub: 'alice', expiresIn: Math.floor(Date.now() / 1000) - 120 }))],
      ['another key', await bearer(token({ sub: 'alice' }, strangerKey))],
      ['another issuer', await bearer(token({ sub: 'alice', iss: 'https://evil.test' }))],
      ['another audience', await bearer(token({ sub: 'alice', aud: 'other' }))],
      ['no expiry', await bearer(token({ sub: 'alice', expiresIn: null }))],
      ['no subject', await bearer(token({}))],
      ['unsigned', { authorization: `Bearer ${unsigned}` }],
      ['garbage', { authorization: 'Bearer not.a.token' }],
      ['nothing', {}],
    ];
    for (const [label, headers] of cases) {
      for (const app of [local, remote]) {
        const res = await app.call('POST', '/v1/namespace/jwt/drop', {}, headers);
        expect(res.status, label).toBe(401);
        expectSpecBody(res.json, 401, 16, root);
        expect(String(res.headers['www-authenticate']), label).toMatch(/Bearer realm/);
      }
    }
    expect((await local.call('POST', '/v1/namespace/jwt/exists', {}, await bearer(token({ sub: 'alice' })))).status).toBe(200);
  });
});

describe('the OAuth2 client-credentials endpoint', () => {
  let root: TestRoot;
  let app: TestApp;
  let replica: TestApp;
  const secret = 'etl-secret-1';
  const oauth2 = { signingSecret: 's'.repeat(40), tokenTtlSeconds: 600, clients: [{ clientId: 'etl', secretSha256: sha256(secret), principal: 'etl-job' }] };
  const form = (fields: Record<string, string>) => Buffer.from(new URLSearchParams(fields).toString());
  const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

  beforeAll(async () => {
    root = await localBackend.newRoot();
    [app, replica] = await Promise.all([startTestApp(root, { auth: { oauth2 } }), startTestApp(root, { auth: { oauth2 } })]);
  });
  afterAll(async () => {
    await Promise.all([app?.close(), replica?.close()]);
    await root?.dispose();
  });

  it('issues a short-lived bearer token to a configured client, which every replica with the secret accepts', async () => {
    const issued = await app.call('POST', '/oauth/token', form({ grant_type: 'client_credentials', client_id: 'etl', client_secret: secret }), FORM);
    expect(issued.status, issued.text).toBe(200);
    expect(issued.json).toMatchObject({ token_type: 'Bearer', expires_in: 600 });
    expect(issued.headers['cache-control']).toBe('no-store');
    const auth = { authorization: `Bearer ${String(issued.json.access_token)}` };
    expect((await app.call('POST', '/v1/namespace/oauth/create', {}, auth)).status).toBe(200);
    expect((await replica.call('POST', '/v1/namespace/oauth/exists', {}, auth)).status).toBe(200);
    // HTTP Basic client authentication works the same.
    const basic = `Basic ${Buffer.from(`etl:${secret}`).toString('base64')}`;
    expect((await app.call('POST', '/oauth/token', form({ grant_type: 'client_credentials' }), { ...FORM, authorization: basic })).status).toBe(200);
  });

  it("refuses wrong clients, wrong grants and other bodies with OAuth's errors, and tokens it did not sign", async () => {
    const cases: Array<[string, Buffer, Record<string, string>, number, string]> = [
      ['wrong secret', form({ grant_type: 'client_credentials', client_id: 'etl', client_secret: 'nope' }), FORM, 401, 'invalid_client'],
      ['unknown client', form({ grant_type: 'client_credentials', client_id: 'who', client_secret: secret }), FORM, 401, 'invalid_client'],
      ['no secret', form({ grant_type: 'client_credentials', client_id: 'etl' }), FORM, 401, 'invalid_client'],
      ['password grant', form({ grant_type: 'password', username: 'etl', password: secret }), FORM, 400, 'unsupported_grant_type'],
      [
        'JSON body',
        Buffer.from(JSON.stringify({ grant_type: 'client_credentials', client_id: 'etl', client_secret: secret })),
        { 'content-type': 'application/json' },
        400,
        'invalid_request',
      ],
    ];
    for (const [label, body, headers, status, error] of cases) {
      const res = await app.call('POST', '/oauth/token', body, headers);
      expect(res.status, label).toBe(status);
      expect(res.json.error, label).toBe(error);
      expect(res.json.access_token, label).toBeUndefined();
    }
    // A token signed with another secret, or expired, is no token.
    const forged = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer('lance-namespace-service')
      .setAudience('lance-namespace-service')
      .setSubject('etl-job')
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode('x'.repeat(40)));
    const expired = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer('lance-namespace-service')
      .setAudience('lance-namespace-service')
      .setSubject('etl-job')
      .setExpirationTime(Math.floor(Date.now() / 1000) - 600)
      .sign(new TextEncoder().encode(oauth2.signingSecret));
    for (const token of [forged, expired]) {
      const res = await app.call('POST', '/v1/namespace/oauth2/create', {}, { authorization: `Bearer ${token}` });
      expect(res.status).toBe(401);
      expectSpecBody(res.json, 401, 16, root);
    }
    expect((await app.call('POST', '/v1/namespace/oauth2/exists', {}, { authorization: `Bearer ${forged}` })).status).toBe(401);
  });
});

describe('rate limits per principal', () => {
  let root: TestRoot;
  let app: TestApp;

  beforeAll(async () => {
    root = await localBackend.newRoot();
    app = await startTestApp(root, {
      auth: {
        apiKeys: [
          { principal: 'a', sha256: sha256('key-a') },
          { principal: 'b', sha256: sha256('key-b') },
        ],
      },
      rateLimit: { requestsPerSecond: 0.01, burst: 3 },
    });
  });
  afterAll(async () => {
    await app?.close();
    await root?.dispose();
  });

  it('answers 429 code 21 with Retry-After once a principal has spent its burst; others and health checks go on', async () => {
    const a = { 'x-api-key': 'key-a' };
    for (let i = 0; i < 3; i++) expect((await app.call('POST', '/v1/namespace/late/exists', {}, a)).status).toBe(404);
    const throttled = await app.call('POST', '/v1/namespace/late/create', {}, a);
    expect(throttled.status).toBe(429);
    expectSpecBody(throttled.json, 429, 21, root);
    expect(Number(throttled.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await app.call('POST', '/v1/namespace/late/exists', {}, { 'x-api-key': 'key-b' })).status).toBe(404);
    expect((await app.call('GET', '/health/live')).status).toBe(200);
    // Refused before it ran: nothing was created.
    expect((await app.call('POST', '/v1/namespace/late/exists', {}, { 'x-api-key': 'key-b' })).status).toBe(404);
  });
});

describe('secrets stay out of logs and answers', () => {
  it('never writes a key, a client secret or a token to a log line or an error body, and audits refused mutations', async () => {
    const root = await localBackend.newRoot();
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        lines.push(
          ...chunk
            .toString('utf8')
            .split('\n')
            .filter((l) => l !== ''),
        );
        callback();
      },
    });
    const secrets = { key: 'api-key-SECRET-1', wrongKey: 'api-key-SECRET-2', client: 'client-SECRET-3', token: 'e30.e30.TOKEN-SECRET-4' };
    const config = testConfig(root, {
      logLevel: 'debug',
      auth: {
        apiKeys: [{ principal: 'etl', sha256: sha256(secrets.key) }],
        oauth2: {
          signingSecret: 'signing-SECRET-5'.padEnd(40, 'x'),
          tokenTtlSeconds: 600,
          clients: [{ clientId: 'c', secretSha256: sha256(secrets.client), principal: 'c' }],
        },
      },
    });
    const app = await createApp(config, pino({ level: 'debug' }, sink));
    try {
      const answers: string[] = [];
      const call = async (method: 'GET' | 'POST', url: string, payload: string | undefined, headers: Record<string, string>) => {
        const res = await app.server.inject({ method, url, payload, headers });
        answers.push(res.body);
        return res;
      };
      const json = { 'content-type': 'application/json' };
      expect((await call('POST', '/v1/namespace/n/create', '{}', { ...json, 'x-api-key': secrets.key })).statusCode).toBe(200);
      expect((await call('POST', '/v1/namespace/n/drop', '{}', { ...json, 'x-api-key': secrets.wrongKey })).statusCode).toBe(401);
      expect((await call('POST', '/v1/namespace/n/drop', '{}', { ...json, authorization: `Bearer ${secrets.token}` })).statusCode).toBe(401);
      const form = { 'content-type': 'application/x-www-form-urlencoded' };
      const issued = await call('POST', '/oauth/token', `grant_type=client_credentials&client_id=c&client_secret=${secrets.client}`, form);
      expect(issued.statusCode).toBe(200);
      const token = String((JSON.parse(issued.body) as { access_token: string }).access_token);
      expect((await call('POST', '/oauth/token', `grant_type=client_credentials&client_id=c&client_secret=${secrets.wrongKey}`, form)).statusCode).toBe(401);
      expect((await call('POST', '/v1/namespace/n/exists', '{}', { ...json, authorization: `Bearer ${token}` })).statusCode).toBe(200);
      const logged = lines.join('\n');
      for (const secret of [...Object.values(secrets), 'signing-SECRET-5', token]) {
        expect(logged, `a log line holds ${secret}`).not.toContain(secret);
        for (const answer of answers.slice(0, 3).concat(answers.slice(4))) expect(answer, `an answer holds ${secret}`).not.toContain(secret);
      }
      const audits = lines
        .map((l) => JSON.parse(l) as { audit?: { operation: string; status: number; principal: string | null; id: unknown } })
        .filter((l) => l.audit);
      // The refused drops are audited with no principal, and with their id parsed like any other's.
      expect(audits.filter((a) => a.audit?.operation === 'DropNamespace').map((a) => [a.audit?.status, a.audit?.principal, a.audit?.id])).toEqual([
        [401, null, ['n']],
        [401, null, ['n']],
      ]);
      expect(audits.find((a) => a.audit?.operation === 'CreateNamespace')?.audit?.principal).toBe('etl');
    } finally {
      await app.close();
      await root.dispose();
    }
  });
});
