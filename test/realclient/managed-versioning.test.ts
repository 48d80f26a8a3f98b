import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { tableDirKey } from '../../src/service/catalog/layout.js';
import { TableVersions } from '../../src/service/versions/dataset-versions.js';
import { listAll } from '../../src/store/object-store.js';
import { committedVersions } from '../support/app.js';
import { backends } from '../support/backends.js';
import { clientCredentialEnv } from '../support/client-credentials.js';
import { useLancedbRestClient } from '../support/lancedb-client.js';
import type { WorkerConfig, WorkerMessage } from './append-worker.js';

// The service as commit coordinator, driven by the real @lancedb/lancedb REST namespace client.
// A table in a namespace with managed_versioning=true is described with managed_versioning: true,
// so the client stages each manifest and commits it through POST /v1/table/{id}/version/create
// instead of writing the final manifest itself. Two OS processes append to one table at once;
// afterwards every row is there once, the history is 1..latest without gaps, and the service
// committed every version (counted by its metrics) and left no staged manifest and no version
// reservation behind.

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const WORKER = fileURLToPath(new URL('./append-worker.ts', import.meta.url));

const APPENDS = 15;
const ROWS_PER_APPEND = 2;
const SEED_ROWS = 3;
const TEST_TIMEOUT_MS = 240_000;
const WORKER_TIMEOUT_MS = 180_000;

const schema = new arrow.Schema([new arrow.Field('id', new arrow.Int64(), false), new arrow.Field('writer', new arrow.Utf8(), false)]);

function seedTable(ids: number[]): import('apache-arrow').Table {
  return new arrow.Table(schema, {
    id: arrow.vectorFromArray(
      ids.map((n) => BigInt(n)),
      new arrow.Int64(),
    ),
    writer: arrow.vectorFromArray(
      ids.map(() => 'seed'),
      new arrow.Utf8(),
    ),
  });
}

const unique = (prefix: string) => `${prefix}_${randomBytes(4).toString('hex')}`;
const enc = (id: string[]) => encodeURIComponent(id.join('$'));
const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

/** The version a staged manifest name (`<V2 or V1 name>.manifest-<uuid>`) was staged for. */
function stagedVersion(name: string): string {
  const digits = /^(\d+)\.manifest-/.exec(name)?.[1];
  if (!digits) return `? (${name})`;
  return digits.length === 20 ? String(2n ** 64n - 1n - BigInt(digits)) : digits;
}

async function postJson(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

interface WireVersion {
  version: number;
  manifest_path: string;
}

/** Every version the service lists (GET version/list, following page tokens), in its order. */
async function listVersions(url: string, id: string[]): Promise<WireVersion[]> {
  const out: WireVersion[] = [];
  let pageToken: string | null = null;
  for (let page = 0; page < 100; page++) {
    const query = new URLSearchParams({ delimiter: '$', limit: '20', ...(pageToken ? { page_token: pageToken } : {}) });
    const res = await fetch(`${url}/v1/table/${enc(id)}/version/list?${query.toString()}`);
    const text = await res.text();
    expect(res.status, text).toBe(200);
    const body = JSON.parse(text) as { versions: WireVersion[]; page_token?: string | null };
    out.push(...body.versions);
    pageToken = body.page_token ?? null;
    if (!pageToken) return out;
  }
  throw new Error('version/list: more than 100 pages');
}

/** A started writer process: resolves `ready` once it has opened the table, `done` when it has finished. */
interface Writer {
  child: ChildProcessWithoutNullStreams;
  ready: Promise<void>;
  done: Promise<Extract<WorkerMessage, { kind: 'done' }>>;
  stderr: () => string;
}

function startWriter(config: WorkerConfig, env: NodeJS.ProcessEnv): Writer {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify(config)], { cwd: REPO, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk;
  });
  const what = () => `writer ${config.writer} (pid ${String(child.pid)})`;
  let markReady: () => void = () => {};
  let failReady: (e: Error) => void = () => {};
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    failReady = reject;
  });
  const done = new Promise<Extract<WorkerMessage, { kind: 'done' }>>((resolve, reject) => {
    let result: Extract<WorkerMessage, { kind: 'done' }> | undefined;
    let failure: string | undefined;
    const timer = setTimeout(() => {
      failure = `timed out after ${WORKER_TIMEOUT_MS} ms`;
      child.kill('SIGKILL');
    }, WORKER_TIMEOUT_MS);
    createInterface({ input: child.stdout }).on('line', (line) => {
      let message: WorkerMessage;
      try {
        message = JSON.parse(line) as WorkerMessage;
      } catch {
        return; // not ours (a library printing to stdout)
      }
      if (message.kind === 'ready') markReady();
      else if (message.kind === 'done') result = message;
      else failure = message.message;
    });
    child.on('error', (e) => {
      failure = e.message;
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const error = new Error(`${what()} failed: ${failure ?? `exit ${String(code)} ${signal ?? ''}`}\n--- stderr ---\n${stderr}`);
      failReady(error);
      if (code === 0 && result) resolve(result);
      else reject(error);
    });
  });
  // Reported through `done` too; keep an early failure from being an unhandled rejection here.
  ready.catch(() => undefined);
  return { child, ready, done, stderr: () => stderr };
}

describe.each(backends())('managed versioning: the service commits for @lancedb/lancedb on $name', (backend) => {
  const client = useLancedbRestClient(backend);

  it(
    'two processes append concurrently: all rows once, versions 1..latest, every commit recorded by the service',
    async () => {
      const ns = unique('mv');
      await client.db.createNamespace([ns], { properties: { managed_versioning: 'true' } });
      expect((await client.db.describeNamespace([ns])).properties).toEqual({ managed_versioning: 'true' });

      const name = unique('appends');
      const id = [ns, name];
      const seedIds = range(0, SEED_ROWS);
      const committedBefore = await committedVersions(client.app);
      (await client.db.createTable(name, seedTable(seedIds), [ns], { schema })).close();

      const described = await postJson(`${client.app.url}/v1/table/${enc(id)}/describe`, { id });
      expect(described.status, JSON.stringify(described.json)).toBe(200);
      expect(described.json.managed_versioning).toBe(true);

      // Two writers, disjoint ids, started together.
      const configs: WorkerConfig[] = ['a', 'b'].map((writer, i) => ({
        url: client.app.url,
        namespace: [ns],
        table: name,
        writer,
        firstId: 1000 * (i + 1),
        appends: APPENDS,
        rowsPerAppend: ROWS_PER_APPEND,
      }));
      const env: NodeJS.ProcessEnv = { ...process.env, ...clientCredentialEnv(client.root), NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost' };
      const writers = configs.map((c) => startWriter(c, env));
      try {
        await Promise.all(writers.map((w) => w.ready));
        for (const w of writers) w.child.stdin.write('go\n');
        const results = await Promise.all(writers.map((w) => w.done));

        // They really overlapped in time.
        const [a, b] = results;
        if (!a || !b) throw new Error('missing writer result');
        expect(a.startedAt).toBeLessThan(b.endedAt);
        expect(b.startedAt).toBeLessThan(a.endedAt);

        // Each append got its own version; together they are exactly 2..latest.
        const latest = 1 + 2 * APPENDS;
        const appended = results.flatMap((r) => r.versions).sort((x, y) => x - y);
        expect(appended).toEqual(range(2, 2 * APPENDS));
        for (const r of results) expect([...r.versions].sort((x, y) => x - y)).toEqual(r.versions);

        // Every row exactly once, read back through a fresh handle.
        const table = await client.db.openTable(name, [ns]);
        const expectedIds = [...seedIds, ...configs.flatMap((c) => range(c.firstId, c.appends * c.rowsPerAppend))].sort((x, y) => x - y);
        expect(await table.countRows()).toBe(expectedIds.length);
        const read = await table.query().select(['id', 'writer']).toArrow();
        const idColumn = read.getChild('id');
        if (!idColumn) throw new Error('no id column');
        const ids = Array.from({ length: read.numRows }, (_, i) => Number(idColumn.get(i) as bigint)).sort((x, y) => x - y);
        expect(ids).toEqual(expectedIds);
        expect(await table.countRows("writer = 'a'")).toBe(APPENDS * ROWS_PER_APPEND);
        expect(await table.countRows("writer = 'b'")).toBe(APPENDS * ROWS_PER_APPEND);
        expect(await table.version()).toBe(latest);
        table.close();

        // The service's history: gap-free 1..latest.
        const listed = await listVersions(client.app.url, id);
        expect(listed.map((v) => v.version)).toEqual(range(1, latest));
        const newest = await postJson(`${client.app.url}/v1/table/${enc(id)}/version/describe`, { id });
        expect(newest.status, JSON.stringify(newest.json)).toBe(200);
        expect((newest.json.version as WireVersion | undefined)?.version).toBe(latest);

        // The service committed every version: none was written past it.
        expect((await committedVersions(client.app)) - committedBefore).toBe(latest);
        const dir = tableDirKey({ namespace: [ns], name });
        const versions = new TableVersions({ store: client.root.store, key: dir, owned: true });

        // Nothing half-done is left: no held version slots, one manifest a version, no staged manifests
        // (once what the commits left for after their answers is done).
        await client.app.app.settled();
        expect((await listAll(client.root.store, `${dir}_catalog/reservations/`)).objects.map((o) => o.key)).toEqual([]);
        const versionFiles = (await listAll(client.root.store, versions.versionsPrefix)).objects.map((o) => o.key.slice(versions.versionsPrefix.length));
        expect(versionFiles.filter((f) => /^\d+\.manifest$/.test(f))).toHaveLength(latest);
        const staged = versionFiles.filter((f) => f.includes('.manifest-'));
        expect(staged, `staged manifests left behind, of versions ${staged.map(stagedVersion).join(', ')}`).toEqual([]);
      } finally {
        for (const w of writers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
      }
    },
    TEST_TIMEOUT_MS,
  );
});
