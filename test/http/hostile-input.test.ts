import fs, { promises as fsp } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { listAll } from '../../src/store/object-store.js';
import { listenTestApp, type TestApp, useTestApp } from '../support/app.js';
import { peopleStream } from '../support/arrow-data.js';
import { backends, localBackend, type TestRoot } from '../support/backends.js';
import { expectSpecBody } from '../support/spec-body.js';

// Every input that can make the reply fail is refused before anything
// changes, and every error (framework, store, engine) has the spec body without internals.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
/** One request over a fresh socket, bytes exactly as given; the status and the parsed body. */
function rawExchange(port: number, request: string): Promise<{ status: number; json: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end(request));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', body = ''] = text.split('\r\n\r\n');
      let json: Record<string, unknown> = {};
      try {
        json = JSON.parse(body) as Record<string, unknown>;
      } catch {
        // not JSON: the assertions on the body say so
      }
      resolve({ status: Number(head.split(' ')[1]), json });
    });
  });
}

describe.each(backends())('hostile input on $name', (backend) => {
  const fx = useTestApp(backend);
  beforeAll(async () => {
    expect((await fx.t.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/ns%24t/create', peopleStream([1, 2, 3]), ARROW)).status).toBe(200);
  });

  it('refuses a context key or value that cannot be echoed as a header, and changes nothing', async () => {
    const badKey = await fx.t.call('POST', '/v1/namespace/ctx1/create', { context: { 'a(b': 'x' } });
    expect(badKey.status).toBe(400);
    expectSpecBody(badKey.json, 400, 13);
    expect((await fx.t.call('POST', '/v1/namespace/ctx1/exists', {})).status).toBe(404);
    const badValue = await fx.t.call('POST', '/v1/table/ns%24ctx2/declare', { context: { trace: 'a\r\nset-cookie: x=1' } });
    expect(badValue.status).toBe(400);
    expectSpecBody(badValue.json, 400, 13);
    expect((await fx.t.call('POST', '/v1/table/ns%24ctx2/exists', {})).status).toBe(404);
    const fine = await fx.t.call('POST', '/v1/namespace/ctx3/create', { context: { 'trace-id': 'abc 123' } });
    expect(fine.status).toBe(200);
    expect(fine.headers['x-namespace-ctx-trace-id']).toBe('abc 123');
  });

  it('declares, lists and drops tables and namespaces with names of every length the catalog keys switch form at, up to the limit', async () => {
    // The listing index's keys hold the name and a suffix in one file name while they fit, and a
    // folder of the name beyond: each length on either side of the switch works end to end.
    expect((await fx.t.call('POST', '/v1/namespace/lengths/create', {})).status).toBe(200);
    const lengths = [180, 200, 201, 210, 217, 218, 219, 220, 237, 238, 249];
    const names = lengths.map((n) => 'x'.repeat(n));
    for (const name of names) {
      const declared = await fx.t.call('POST', `/v1/table/lengths%24${name}/declare`, {});
      expect(declared.status, `${name.length}: ${declared.text}`).toBe(200);
      const made = await fx.t.call('POST', `/v1/namespace/lengths%24${name}/create`, {});
      expect(made.status, `${name.length}: ${made.text}`).toBe(200);
    }
    // Every change settled: its listing log key written, no pending entry left behind for listings to read.
    const { objects: left } = await listAll(fx.root.store, 'lengths/_catalog/', {});
    expect(left.map((o) => o.key).filter((k) => k.includes('pending/'))).toEqual([]);
    const sorted = [...names].sort();
    const listed = await fx.t.call('GET', '/v1/namespace/lengths/table/list');
    expect(listed.status, listed.text).toBe(200);
    expect(listed.json.tables).toEqual(sorted);
    expect((await fx.t.call('GET', '/v1/namespace/lengths/list')).json.namespaces).toEqual(sorted);
    for (const name of names) {
      expect((await fx.t.call('POST', `/v1/table/lengths%24${name}/drop`, {})).status).toBe(200);
      expect((await fx.t.call('POST', `/v1/namespace/lengths%24${name}/drop`, {})).status).toBe(200);
    }
    expect((await fx.t.call('GET', '/v1/namespace/lengths/table/list')).json.tables).toEqual([]);
    expect((await fx.t.call('GET', '/v1/namespace/lengths/list')).json.namespaces).toEqual([]);
  });

  it('answers ids too long for the store with 400 code 13, in batch bodies too', async () => {
    // Each part is within the name limit; together they exceed S3's key length and the local PATH_MAX.
    const deep = Array.from({ length: 17 }, (_, i) => `${i}`.padEnd(249, 'n'));
    const commit = await fx.t.call('POST', '/v1/table/batch-commit', { operations: [{ declare_table: { id: [...deep, 't'] } }] });
    expect(commit.status, commit.text).toBe(400);
    expectSpecBody(commit.json, 400, 13, fx.root);
    const batch = await fx.t.call('POST', '/v1/table/version/batch-create', {
      entries: [{ id: [...deep, 't'], version: 2, manifest_path: 'x/_versions/2.manifest' }],
    });
    expect(batch.status, batch.text).toBe(400);
    expectSpecBody(batch.json, 400, 13, fx.root);
  });

  it('refuses register locations that are not readable datasets with 400 code 13', async () => {
    const locations = ['file:///etc/passwd', 'abc\u0000def', '/tmp/abc\u0000def'];
    if (backend !== localBackend) locations.push('s3://no-such-bucket-for-lance-ns-tests/x.lance');
    for (const location of locations) {
      const res = await fx.t.call('POST', '/v1/table/ns%24reg/register', { location });
      expect(res.status, `${JSON.stringify(location)}: ${res.text}`).toBe(400);
      expectSpecBody(res.json, 400, 13, fx.root);
    }
    expect((await fx.t.call('POST', '/v1/table/ns%24reg/exists', {})).status).toBe(404);
  });

  it('refuses a tag name too long to be a file with 400 code 13', async () => {
    const res = await fx.t.call('POST', '/v1/table/ns%24t/tags/create', { tag: 'x'.repeat(1000), version: 1 });
    expect(res.status).toBe(400);
    expectSpecBody(res.json, 400, 13, fx.root);
    expect((await fx.t.call('POST', '/v1/table/ns%24t/tags/list', {})).json.tags).toEqual({});
  });

  it('keeps the root path and the engine build paths out of engine errors', async () => {
    expect((await fx.t.call('POST', '/v1/table/ns%24gone/create', peopleStream([1]), ARROW)).status).toBe(200);
    // The data files disappear behind the service's back: the engine's message names their path.
    await fx.root.store.deletePrefix('ns/gone.lance/data/');
    const res = await fx.t.call('POST', '/v1/table/ns%24gone/query', { k: 5 });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expectSpecBody(res.json, res.status, Number(res.json.code), fx.root);
    expect(String(res.json.error)).toContain('gone.lance');
  });
});

describe.each(backends())('a root whose last segment is a word, on $name', (backend) => {
  // `cat` is in `location` and `catalog`, and in names and locations clients send: only the root
  // itself, as a whole location prefix, may be cut from a message.
  const fx = useTestApp({ ...backend, newRoot: () => backend.newRoot({ leaf: 'cat' }) });
  beforeAll(async () => {
    expect((await fx.t.call('POST', '/v1/namespace/cat/create', {})).status).toBe(200);
  });

  it('echoes what the client sent as it was and cuts only the root', async () => {
    const root = fx.root.store.location('');
    expect(root.endsWith('/cat')).toBe(true);
    const outside = `${root}alog/x.lance`;
    const stray = await fx.t.call('POST', '/v1/table/cat%24stray/register', { location: outside });
    expect(stray.status).toBe(400);
    expect(stray.json.error).toBe(
      `Absolute ${outside.startsWith('/') ? 'paths' : 'URIs'} are not allowed outside the catalog root and every allowed location: location ${JSON.stringify(outside)} (see allowed locations in the README)`,
    );
    const missing = await fx.t.call('POST', '/v1/table/cat%24category/describe', {});
    expect(missing.status).toBe(404);
    expect(String(missing.json.error)).toContain('["cat","category"]');
    // A location in the root is named relative to it, whatever form the client used.
    const none = await fx.t.call('POST', '/v1/table/cat%24none/register', { location: `${root}/cat/none.lance` });
    expect(none.status).toBe(400);
    expect(String(none.json.error)).toMatch(/^location "cat\/none\.lance" is not a readable Lance dataset/);
    for (const res of [stray, missing, none]) {
      expectSpecBody(res.json, res.status, res.status === 404 ? 4 : 13);
      expect(String(res.json.error)).not.toMatch(/lo\.ion|\.alog|"\."|\.\/cat/);
    }
    expect(String(none.json.error)).not.toContain(root);
  });
});

describe('framework errors have the spec body', () => {
  let t: TestApp & { url: string };
  let root: TestRoot;
  let port: number;
  beforeAll(async () => {
    root = await localBackend.newRoot();
    t = await listenTestApp(root, { maxJsonBodyBytes: 1024 });
    port = Number(new URL(t.url).port);
    return async () => {
      await t.close();
      await root.dispose();
    };
  });

  const request = (line: string, headers: string[] = []) => rawExchange(port, [line, 'Host: x', 'Connection: close', ...headers, '', ''].join('\r\n'));

  it('a path that is not valid percent-encoded UTF-8: 400 code 13', async () => {
    const res = await request('GET /v1/namespace/%C0%AE/describe HTTP/1.1');
    expect(res.status).toBe(400);
    expectSpecBody(res.json, 400, 13);
  });

  it('a path parameter over the limit: 414 code 13', async () => {
    const res = await request(`POST /v1/namespace/${'a'.repeat(3000)}/describe HTTP/1.1`, ['Content-Length: 0']);
    expect(res.status).toBe(414);
    expectSpecBody(res.json, 414, 13);
  });

  it('headers over the limit: 431 code 13', async () => {
    const res = await request('GET /health/live HTTP/1.1', [`X-Big: ${'a'.repeat(20_000)}`]);
    expect(res.status).toBe(431);
    expectSpecBody(res.json, 431, 13);
  });

  it('an invalid header name: 400 code 13', async () => {
    const res = await request('GET /health/live HTTP/1.1', ['bad header: y']);
    expect(res.status).toBe(400);
    expectSpecBody(res.json, 400, 13);
  });

  it('a known route with the wrong method: 405 with Allow', async () => {
    const res = await t.call('GET', '/v1/namespace/x/create');
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('POST');
    expectSpecBody(res.json, 405, 0);
  });

  it('a body over the limit: 413 code 13', async () => {
    const res = await t.call('POST', '/v1/namespace/big/create', { properties: { blob: 'x'.repeat(4096) } });
    expect(res.status).toBe(413);
    expectSpecBody(res.json, 413, 13);
  });
});

describe('a full disk (local store)', () => {
  const fx = useTestApp(localBackend);
  afterEach(() => {
    vi.restoreAllMocks();
  });

  /** Makes every file written under `dir` of the root fail half-way with ENOSPC, as a full disk does (the local store writes with fs.openSync and fs.writeSync). */
  function fillDiskUnder(dir: string): void {
    const realOpen = fs.openSync.bind(fs) as (...args: unknown[]) => number;
    const realWrite = fs.writeSync.bind(fs) as (...args: unknown[]) => number;
    const under = path.join(fx.root.root, dir) + path.sep;
    const doomed = new Map<number, string>();
    vi.spyOn(fs, 'openSync').mockImplementation(((...args: unknown[]) => {
      const fd = realOpen(...args);
      if (String(args[0]).startsWith(under)) doomed.set(fd, String(args[0]));
      return fd;
    }) as typeof fs.openSync);
    vi.spyOn(fs, 'writeSync').mockImplementation(((fd: number, ...rest: unknown[]) => {
      const file = doomed.get(fd);
      if (file === undefined) return realWrite(fd, ...rest);
      doomed.delete(fd);
      realWrite(fd, Buffer.from('partial'));
      // The message names the file, as node's does: the answer must not pass it on.
      throw Object.assign(new Error(`ENOSPC: no space left on device, write '${file}'`), { code: 'ENOSPC', errno: -28, syscall: 'write' });
    }) as typeof fs.writeSync);
  }

  async function filesUnder(dir: string): Promise<string[]> {
    const entries = await fsp.readdir(path.join(fx.root.root, dir), { recursive: true, withFileTypes: true }).catch(() => []);
    return entries.filter((e) => e.isFile()).map((e) => e.name);
  }

  it('answers 503 code 17 without paths, leaves no temporary file, and the namespace can still be dropped', async () => {
    expect((await fx.t.call('POST', '/v1/namespace/full/create', {})).status).toBe(200);
    fillDiskUnder('full');
    const child = await fx.t.call('POST', '/v1/namespace/full%24child/create', {});
    const declared = await fx.t.call('POST', '/v1/table/full%24t/declare', {});
    vi.restoreAllMocks();
    for (const res of [child, declared]) {
      expect(res.status, res.text).toBe(503);
      expectSpecBody(res.json, 503, 17, fx.root);
    }
    // The namespace's record and its (empty) listing index's marker, nothing else but the keys of
    // the index's log of changes (one per failed operation, deleted once a snapshot reflects them).
    const logged = await filesUnder('full/_catalog/tables.log');
    const loggedNs = await filesUnder('full/_catalog/namespaces.log');
    expect(logged.length + loggedNs.length).toBeLessThanOrEqual(2);
    expect((await filesUnder('full')).filter((f) => !logged.includes(f) && !loggedNs.includes(f)).sort()).toEqual(['.lance-namespace', 'index.ready']);
    expect((await fx.t.call('POST', '/v1/namespace/full%24child/exists', {})).status).toBe(404);
    const dropped = await fx.t.call('POST', '/v1/namespace/full/drop', { behavior: 'Restrict' });
    expect(dropped.status, dropped.text).toBe(200);
  });
});
