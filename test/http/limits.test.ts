import { once } from 'node:events';
import http from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { type Config, loadConfig } from '../../src/config.js';
import { listenTestApp, startTestApp, type TestApp, useTestApp } from '../support/app.js';
import { peopleStream } from '../support/arrow-data.js';
import { backends, localBackend, type TestRoot } from '../support/backends.js';
import { manifestBytes } from '../support/manifests.js';

// Big inputs cost what they must. String maps past the documented limits are
// refused before validation or any write; large Arrow bodies are admitted a few at a time.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const mapOf = (n: number, value = 'v'): Record<string, string> => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, value]));

describe('documented defaults', () => {
  it('are the ones docs/compatibility.md lists', () => {
    const config = loadConfig([], {});
    expect(config).toMatchObject({
      maxJsonBodyBytes: 4 * 1024 * 1024,
      maxMapEntries: 1000,
      maxMapBytes: 256 * 1024,
      largeBodyBytes: 16 * 1024 * 1024,
      maxConcurrentLargeBodies: 2,
      maxBatchOperations: 500,
      maxBatchEntries: 500,
      maxBatchDeletedVersions: 500,
    });
  });
});

describe.each(backends())('string map limits on $name', (backend) => {
  const fx = useTestApp(backend, { maxMapEntries: 5, maxMapBytes: 100 });
  beforeAll(async () => {
    expect((await fx.t.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
  });

  async function expectRefused(res: { status: number; json: Record<string, unknown> }, field: string): Promise<void> {
    expect(res.status).toBe(400);
    expect(res.json.code).toBe(13);
    expect(String(res.json.error)).toContain(field);
  }

  it('accepts maps within the limits', async () => {
    expect((await fx.t.call('POST', '/v1/namespace/within/create', { properties: mapOf(5) })).status).toBe(200);
  });

  it('refuses a map with too many entries or too many bytes, and creates nothing', async () => {
    await expectRefused(await fx.t.call('POST', '/v1/namespace/many/create', { properties: mapOf(6) }), 'properties');
    await expectRefused(await fx.t.call('POST', '/v1/namespace/heavy/create', { properties: { a: 'x'.repeat(60), b: 'y'.repeat(60) } }), 'properties');
    await expectRefused(await fx.t.call('POST', '/v1/table/ns%24decl/declare', { properties: mapOf(6) }), 'properties');
    await expectRefused(await fx.t.call('POST', '/v1/namespace/ctx/create', { context: mapOf(6) }), 'context');
    for (const id of ['many', 'heavy', 'ctx']) expect((await fx.t.call('POST', `/v1/namespace/${id}/exists`, {})).status).toBe(404);
    expect((await fx.t.call('POST', '/v1/table/ns%24decl/exists', {})).status).toBe(404);
  });

  it('finds maps nested in batch bodies and in CreateTable query strings', async () => {
    const commit = await fx.t.call('POST', '/v1/table/batch-commit', { operations: [{ declare_table: { id: ['ns', 'nested'], properties: mapOf(6) } }] });
    await expectRefused(commit, 'operations[0].declare_table.properties');
    const query = `?properties=${encodeURIComponent(JSON.stringify(mapOf(6)))}`;
    await expectRefused(await fx.t.call('POST', `/v1/table/ns%24q/create${query}`, peopleStream([1]), ARROW), 'properties');
    expect((await fx.t.call('POST', '/v1/table/ns%24nested/exists', {})).status).toBe(404);
    expect((await fx.t.call('POST', '/v1/table/ns%24q/exists', {})).status).toBe(404);
  });
});

// A batch is applied in one request, under one lease, at a cost of store round
// trips per item; past the limits it is refused before anything is validated in depth or written.
describe('batch limits', () => {
  const fx = useTestApp(localBackend, { maxBatchOperations: 3, maxBatchEntries: 3, maxBatchDeletedVersions: 3 });
  beforeAll(async () => {
    expect((await fx.t.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
  });
  const declares = (names: string[]) => names.map((name) => ({ declare_table: { id: ['ns', name] } }));
  const written = async () => [...(await fx.root.store.list('_catalog/transactions/')).objects, ...(await fx.root.store.list('_catalog/batches/')).objects];

  it('refuses a BatchCommitTables of more operations, naming the field and the limit, and writes nothing', async () => {
    const res = await fx.t.call('POST', '/v1/table/batch-commit', { operations: declares(['o1', 'o2', 'o3', 'o4']) });
    expect(res.status, res.text).toBe(400);
    expect(res.json.code).toBe(13);
    expect(String(res.json.error)).toBe('operations: at most 3 are allowed in one request, got 4');
    expect(await written()).toEqual([]);
    for (const name of ['o1', 'o4']) expect((await fx.t.call('POST', `/v1/table/ns%24${name}/exists`, {})).status).toBe(404);
    // Counted before the operations are validated: what they hold does not matter.
    const junk = await fx.t.call('POST', '/v1/table/batch-commit', { operations: [1, 2, 3, 4] });
    expect(junk.status).toBe(400);
    expect(String(junk.json.error)).toContain('operations: at most 3');
  });

  it('refuses a BatchCreateTableVersions of more entries, naming the field and the limit, and writes nothing', async () => {
    const entries = ['e1', 'e2', 'e3', 'e4'].map((name) => ({ id: ['ns', name], version: 1, manifest_path: '_versions/1.manifest-x' }));
    const res = await fx.t.call('POST', '/v1/table/version/batch-create', { entries });
    expect(res.status, res.text).toBe(400);
    expect(res.json.code).toBe(13);
    expect(String(res.json.error)).toBe('entries: at most 3 are allowed in one request, got 4');
    expect(await written()).toEqual([]);
  });

  it('refuses a BatchCommitTables deleting more versions, naming the field and the limit, and deletes nothing', async () => {
    // Its transaction record holds every version it deletes, and it deletes each within the one request.
    expect((await fx.t.call('POST', '/v1/table/ns%24many/declare', {})).status).toBe(200);
    for (const version of [1, 2, 3, 4]) {
      const staged = `_versions/${version}.manifest-staged`;
      await fx.root.store.put(`ns/many.lance/${staged}`, manifestBytes(version));
      expect((await fx.t.call('POST', '/v1/table/ns%24many/version/create', { version, manifest_path: staged })).status).toBe(200);
    }
    const deleting = (start_version: number, end_version: number) => ({
      delete_table_versions: { id: ['ns', 'many'], ranges: [{ start_version, end_version }] },
    });
    // Two operations of two versions each: the limit bounds them together.
    const res = await fx.t.call('POST', '/v1/table/batch-commit', { operations: [deleting(1, 3), deleting(3, 5)] });
    expect(res.status, res.text).toBe(400);
    expect(res.json.code).toBe(13);
    expect(String(res.json.error)).toBe(
      'delete_table_versions: at most 3 versions may be deleted by one BatchCommitTables (--max-batch-deleted-versions), these ranges match 4',
    );
    expect(await written()).toEqual([]);
    const listed = async () => ((await fx.t.call('GET', '/v1/table/ns%24many/version/list')).json.versions as Array<{ version: number }>).map((v) => v.version);
    expect(await listed()).toEqual([1, 2, 3, 4]);
    const within = await fx.t.call('POST', '/v1/table/batch-commit', { operations: [deleting(1, 4)] });
    expect(within.status, within.text).toBe(200);
    expect(await listed()).toEqual([4]);
  });

  it('accepts a batch at the limit', async () => {
    const res = await fx.t.call('POST', '/v1/table/batch-commit', { operations: declares(['a1', 'a2', 'a3']) });
    expect(res.status, res.text).toBe(200);
    for (const name of ['a1', 'a3']) expect((await fx.t.call('POST', `/v1/table/ns%24${name}/exists`, {})).status).toBe(200);
  });
});

describe('a million properties (14 MB)', () => {
  /** Declares a table with a million properties on a fresh app; the answer, how long it took, and whether the table exists after. */
  async function declareMillion(overrides: Partial<Config>) {
    const root = await localBackend.newRoot();
    const t = await startTestApp(root, overrides);
    try {
      expect((await t.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
      const body = Buffer.from(JSON.stringify({ properties: mapOf(1_000_000) }));
      const started = Date.now();
      const res = await t.call('POST', '/v1/table/ns%24huge/declare', body);
      const ms = Date.now() - started;
      return { res, ms, exists: (await t.call('POST', '/v1/table/ns%24huge/exists', {})).status === 200 };
    } finally {
      await t.close();
      await root.dispose();
    }
  }

  it('is refused with 413 by the default JSON limit, before the body is read', async () => {
    const { res, ms, exists } = await declareMillion({});
    expect(res.status).toBe(413);
    expect(res.json.code).toBe(13);
    expect(exists).toBe(false);
    // Generous: it took 21-40 s to create before; refusing costs no parse at all.
    expect(ms).toBeLessThan(10_000);
  });

  it('is refused with 400 by the entry limit when the JSON limit lets it through', async () => {
    const { res, ms, exists } = await declareMillion({ maxJsonBodyBytes: 64 * 1024 * 1024 });
    expect(res.status).toBe(400);
    expect(res.json.code).toBe(13);
    expect(exists).toBe(false);
    // Only parsing and counting remain (about a second unloaded); generous for a loaded machine.
    expect(ms).toBeLessThan(20_000);
  });
});

describe('concurrent large Arrow bodies', () => {
  let t: TestApp & { url: string };
  let root: TestRoot;
  beforeAll(async () => {
    root = await localBackend.newRoot();
    t = await listenTestApp(root, { largeBodyBytes: 64, maxConcurrentLargeBodies: 1 });
    expect((await t.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
    return async () => {
      await t.close();
      await root.dispose();
    };
  });

  /** Starts a CreateTable whose body arrives only when `finish` is called. */
  function slowCreate(table: string, body: Buffer) {
    const { hostname, port } = new URL(t.url);
    const req = http.request({ hostname, port, method: 'POST', path: `/v1/table/ns%24${table}/create`, headers: { ...ARROW, 'content-length': body.length } });
    const response = new Promise<http.IncomingMessage>((resolve, reject) => {
      req.once('response', resolve);
      req.once('error', reject);
    }).then(async (res) => {
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      return { status: res.statusCode ?? 0, headers: res.headers, json: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown> };
    });
    req.flushHeaders();
    req.write(body.subarray(0, 8));
    return { response, finish: () => req.end(body.subarray(8)) };
  }

  it('admits one at a time: the next is a 503 code 17 until the first is done', async () => {
    const body = peopleStream([1, 2, 3]);
    expect(body.length).toBeGreaterThan(64);
    const server = t.app.server.server;
    const arrived = once(server, 'request');
    const first = slowCreate('first', body);
    await arrived;
    // The slot is taken in the route's onRequest hook, which runs within the same turn as the
    // 'request' event's microtasks; one macrotask later it has certainly run.
    await new Promise((resolve) => setImmediate(resolve));
    const second = await t.call('POST', '/v1/table/ns%24second/create', body, ARROW);
    expect(second.status).toBe(503);
    expect(second.json).toMatchObject({ code: 17, status: 503 });
    expect(second.headers['retry-after']).toBe('1');
    // Small bodies are not held up.
    expect((await t.call('POST', '/v1/namespace/small/create', {})).status).toBe(200);
    first.finish();
    expect((await first.response).status).toBe(200);
    const third = await t.call('POST', '/v1/table/ns%24third/create', body, ARROW);
    expect(third.status, JSON.stringify(third.json)).toBe(200);
    expect((await t.call('POST', '/v1/table/ns%24second/exists', {})).status).toBe(404);
  });
});

describe('Arrow bodies without a Content-Length (chunked)', () => {
  let t: TestApp & { url: string };
  let root: TestRoot;
  beforeAll(async () => {
    root = await localBackend.newRoot();
    t = await listenTestApp(root, { maxArrowBodyBytes: 4096 });
    expect((await t.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
    return async () => {
      await t.close();
      await root.dispose();
    };
  });

  /** A CreateTable whose body is sent in pieces, chunked. */
  async function chunkedCreate(table: string, body: Buffer): Promise<{ status: number; json: Record<string, unknown> }> {
    const { hostname, port } = new URL(t.url);
    const req = http.request({ hostname, port, method: 'POST', path: `/v1/table/ns%24${table}/create`, headers: ARROW });
    const answered = once(req, 'response') as Promise<[http.IncomingMessage]>;
    const third = Math.ceil(body.length / 3);
    for (let at = 0; at < body.length; at += third) req.write(body.subarray(at, at + third));
    req.end();
    const [res] = await answered;
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    return { status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown> };
  }

  it('are joined whole, and refused with 413 past the Arrow limit', async () => {
    const small = peopleStream([1, 2, 3]);
    expect(small.length).toBeLessThan(4096);
    const created = await chunkedCreate('chunked', small);
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    expect(created.json.version).toBe(1);
    expect((await t.call('POST', '/v1/table/ns%24chunked/count_rows', {})).text).toBe('3');
    const big = peopleStream(Array.from({ length: 400 }, (_, i) => i));
    expect(big.length).toBeGreaterThan(4096);
    const refused = await chunkedCreate('toobig', big);
    expect(refused.status).toBe(413);
    expect(refused.json.code).toBe(13);
  });
});
