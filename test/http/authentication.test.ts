// Authentication by API key (issue 10, rule 3, first part): a request without a valid key in
// x-api-key is 401 code 16 with WWW-Authenticate and changes nothing; the health checks and the
// OpenAPI document stay open; the configuration holds only the keys' SHA-256.

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { localBackend, type TestRoot } from '../support/backends.js';
import { expectSpecBody } from '../support/spec-body.js';

const sha256 = (key: string) => createHash('sha256').update(key).digest('hex');

describe('authentication by API key', () => {
  let root: TestRoot;
  let app: TestApp;
  const key = 'lance-test-key-1';

  beforeAll(async () => {
    root = await localBackend.newRoot();
    app = await startTestApp(root, { auth: { apiKeys: [{ principal: 'etl', sha256: sha256(key) }, { principal: 'ops', sha256: sha256('other') }] } });
    expect((await app.call('POST', '/v1/namespace/keep/create', {}, { 'x-api-key': key })).status).toBe(200);
  });
  afterAll(async () => {
    await app?.close();
    await root?.dispose();
  });

  it('refuses requests without a valid key with 401 code 16 and a challenge, changing nothing', async () => {
    const attempts: Array<Record<string, string>> = [{}, { 'x-api-key': '' }, { 'x-api-key': 'wrong' }, { 'x-api-key': sha256(key) }, { authorization: `Bearer ${key}` }];
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
    expect((await app.call('GET', '/openapi.json')).status).toBe(200);
    // Not a way around it: an API path that merely mentions them is not open.
    expect((await app.call('GET', '/v1/namespace/health/table/list')).status).toBe(401);
  });
});
