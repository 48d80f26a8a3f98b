// Browsers cannot drive the service by accident: a web page's cross-site request,
// a request for another host name (DNS rebinding) and a body of a type a page may send without
// asking are refused before anything changes; configured origins get CORS.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { peopleStream } from '../support/arrow-data.js';
import { localBackend, type TestRoot } from '../support/backends.js';
import { expectSpecBody } from '../support/spec-body.js';

describe('browser guard', () => {
  let root: TestRoot;
  let app: TestApp;
  let cors: TestApp;
  let exposed: TestApp;

  beforeAll(async () => {
    root = await localBackend.newRoot();
    [app, cors, exposed] = await Promise.all([
      startTestApp(root),
      startTestApp(root, { corsOrigins: ['https://console.example'] }),
      startTestApp(root, { host: '0.0.0.0' }),
    ]);
    expect((await app.call('POST', '/v1/namespace/keep/create', {})).status).toBe(200);
  });
  afterAll(async () => {
    await Promise.all([app?.close(), cors?.close(), exposed?.close()]);
    await root?.dispose();
  });

  const stillThere = async () => expect((await app.call('POST', '/v1/namespace/keep/exists', {})).status).toBe(200);

  it('refuses a JSON route body sent as text/plain or a form: what a page may send without asking', async () => {
    for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      const res = await app.call('POST', '/v1/namespace/keep/drop', Buffer.from('{"behavior":"Cascade"}'), { 'content-type': type });
      expect(res.status, type).toBe(400);
      expectSpecBody(res.json, 400, 13, root);
      expect(String(res.json.error), type).toMatch(/content-type/);
    }
    await stillThere();
    // JSON with parameters, and a request without a body, are what clients send.
    expect((await app.call('POST', '/v1/namespace/keep/describe', Buffer.from('{}'), { 'content-type': 'application/json; charset=utf-8' })).status).toBe(200);
    const bare = await app.call('POST', '/v1/namespace/keep/exists');
    expect(bare.status, bare.text).toBe(200);
  });

  it('takes an Arrow route body only in an Arrow (or octet-stream) type', async () => {
    const refused = await app.call('POST', '/v1/table/keep%24t/create', peopleStream([1]), { 'content-type': 'text/plain' });
    expect(refused.status).toBe(400);
    expectSpecBody(refused.json, 400, 13, root);
    expect((await app.call('POST', '/v1/table/keep%24t/exists', {})).status).toBe(404);
    const stream = await app.call('POST', '/v1/table/keep%24t/create', peopleStream([1]), { 'content-type': 'application/vnd.apache.arrow.stream' });
    expect(stream.status, stream.text).toBe(200);
    const octets = await app.call('POST', '/v1/table/keep%24t/insert', peopleStream([2]), { 'content-type': 'application/octet-stream' });
    expect(octets.status, octets.text).toBe(200);
  });

  it('refuses requests from web pages of origins not configured, with or without a body', async () => {
    for (const [body, headers] of [
      [undefined, { origin: 'https://evil.example' }],
      [{}, { origin: 'https://evil.example' }],
      [undefined, { origin: 'null' }],
    ] as const) {
      const res = await app.call('POST', '/v1/namespace/keep/drop', body, headers);
      expect(res.status, JSON.stringify(headers)).toBe(403);
      expectSpecBody(res.json, 403, 15, root);
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
    }
    await stillThere();
    // A page the service serves itself sends its own origin.
    expect((await app.call('POST', '/v1/namespace/keep/exists', {}, { origin: 'http://localhost:2333', host: 'localhost:2333' })).status).toBe(200);
    expect((await app.call('POST', '/v1/namespace/keep/exists', {}, { origin: 'https://localhost:2333', host: 'localhost:2333' })).status).toBe(200);
    expect((await app.call('POST', '/v1/namespace/keep/exists', {}, { origin: 'http://localhost:2334', host: 'localhost:2333' })).status).toBe(403);
  });

  it('bound to loopback, answers only requests addressed to a loopback name (no DNS rebinding)', async () => {
    for (const host of ['localhost', 'localhost:2333', '127.0.0.1:2333', '[::1]:2333', '127.1.2.3']) {
      expect((await app.call('POST', '/v1/namespace/keep/exists', {}, { host })).status, host).toBe(200);
    }
    for (const host of ['evil.example', 'evil.example:2333', '127.0.0.1.evil.example', 'localhost.evil.example:2333']) {
      const res = await app.call('POST', '/v1/namespace/keep/drop', {}, { host });
      expect(res.status, host).toBe(403);
      expectSpecBody(res.json, 403, 15, root);
    }
    await stillThere();
    // Bound elsewhere, the service is reached by whatever name its network gives it.
    expect((await exposed.call('POST', '/v1/namespace/keep/exists', {}, { host: 'catalog.internal:2333' })).status).toBe(200);
  });

  it('answers configured origins with CORS, preflight included', async () => {
    const preflight = await cors.call('OPTIONS' as 'GET', '/v1/namespace/keep/describe', undefined, {
      origin: 'https://console.example',
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'content-type',
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('https://console.example');
    expect(String(preflight.headers['access-control-allow-methods'])).toContain('POST');
    expect(preflight.headers['access-control-allow-headers']).toBe('content-type');
    const described = await cors.call('POST', '/v1/namespace/keep/describe', {}, { origin: 'https://console.example' });
    expect(described.status).toBe(200);
    expect(described.headers['access-control-allow-origin']).toBe('https://console.example');
    const other = await cors.call('POST', '/v1/namespace/keep/describe', {}, { origin: 'https://evil.example' });
    expect(other.status).toBe(403);
  });
});
