import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { EngineError } from '../../src/engine/lance-engine.js';
import { DEFAULT_INDEX_PYTHON } from '../../src/engine/pylance/pylance-worker.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { DataTables } from '../../src/service/data/data-tables.js';
import { CLOCK_ALLOWANCE_MS } from '../../src/service/maintenance/maintenance-plan.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import { listenTestApp, metricSamples, type TestApp, tally } from '../support/app.js';
import { connectTable } from '../support/arrow-data.js';
import { backends, type TestRoot } from '../support/backends.js';
import { clientCredentialEnv } from '../support/client-credentials.js';
import { testRootCatalogDeps, withSettings } from '../support/local-catalog.js';
import { REPO, VENV_BIN } from '../support/python.js';

// Writers never lose (issue 33 point 3): a pylance writer and a LanceDB (Python) writer, each in a
// process of its own through the service, append, update and delete while the engine compacts the
// table and brings its index up to date again and again. The rows are then exactly what the
// writers were told: no acknowledged write lost, no deleted row revived, no row twice; a
// maintenance commit that lost a race is EngineError('conflict') and nothing else.

const WRITER = fileURLToPath(new URL('./maintenance_writer.py', import.meta.url));
const available = existsSync(DEFAULT_INDEX_PYTHON) && existsSync(`${VENV_BIN}python`);
if (!available) console.warn('skipping the maintenance writer tests: they need .venv-index and .venv');

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const ctx: RequestContext = { requestId: 'maintenance-writers', principal: null, context: {} };
const CLIENTS = ['pylance', 'lancedb'] as const;
/** Rows each writer owns at the start (updates and deletes touch only its own): a writer's rounds (append, update, delete) end with them. */
const OWN = 20;

function rowsStream(ids: number[]): Buffer {
  const table = new arrow.Table({
    id: arrow.vectorFromArray(BigInt64Array.from(ids.map(BigInt))),
    n: arrow.vectorFromArray(Int32Array.from(ids.map(() => 0))),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

interface Report {
  kind: string;
  ids?: number[];
  id?: number;
  error?: string;
  message?: string;
}

/** A writer process: `ready` once it connected, `go` on stdin, its reports as they come, `done` when it exits. */
function startWriter(root: TestRoot, config: Record<string, unknown>, reports: Report[]) {
  const env = { ...process.env, ...clientCredentialEnv(root), NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost' };
  const child: ChildProcessWithoutNullStreams = spawn(`${VENV_BIN}python`, [WRITER, JSON.stringify(config)], { cwd: REPO, env, stdio: 'pipe' });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (c: string) => (stderr += c));
  let markReady = () => {};
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  createInterface({ input: child.stdout }).on('line', (line) => {
    let m: Report;
    try {
      m = JSON.parse(line) as Report;
    } catch {
      return;
    }
    if (m.kind === 'ready') markReady();
    else if (m.kind === 'append' || m.kind === 'update' || m.kind === 'delete' || m.kind === 'error') reports.push(m);
  });
  const done = new Promise<void>((resolve, reject) =>
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${String(config.client)} writer exited ${String(code)}: ${stderr.slice(-2000)}`)))),
  );
  done.catch(() => undefined);
  return {
    ready: Promise.race([ready, done]),
    go: () => child.stdin.write('go\n'),
    done,
    kill: () => child.kill('SIGKILL'),
  };
}

/** Polls `probe` until it holds (a maintenance run is started by a tick and ends on its own). */
async function until(what: string, probe: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** ns$t of both writers' rows, in 2 * OWN / 10 appends (fragments to compact), with a BTREE index; `properties` on the namespace. */
async function seedTable(t: TestApp, ns: string, properties: Record<string, string>): Promise<void> {
  expect((await t.call('POST', `/v1/namespace/${ns}/create`, { properties })).status).toBe(200);
  const created = await t.call('POST', `/v1/table/${ns}%24t/create`, rowsStream(range(0, 10)), ARROW);
  expect(created.status, created.text).toBe(200);
  for (let from = 10; from < 2 * OWN; from += 10)
    expect((await t.call('POST', `/v1/table/${ns}%24t/insert`, rowsStream(range(from, 10)), ARROW)).status).toBe(200);
  const indexed = await t.call('POST', `/v1/table/${ns}%24t/create_index`, { column: 'id', index_type: 'BTREE', name: 'id_idx' });
  expect(indexed.status, indexed.text).toBe(200);
}

/** One writer per client on ns$t through the service at `t`, each owning OWN of the seeded rows. */
function startWriters(t: TestApp & { url: string }, root: TestRoot, ns: string, reports: Report[][]) {
  return CLIENTS.map((client, w) =>
    startWriter(root, { url: t.url, namespace: [ns], table: 't', client, own: range(w * OWN, OWN), first_id: 100_000 * (w + 1) }, reports[w] as Report[]),
  );
}

/** The table's rows are exactly what the writers were told, one after another each: no acknowledged write lost, no deleted row revived, no row twice. */
async function expectRowsAsAcknowledged(t: TestApp, root: TestRoot, ns: string, reports: Report[][], label: string): Promise<void> {
  // What the writers were told, one after another each: that is what must be there.
  const expected = new Map(range(0, 2 * OWN).map((id) => [id, 0]));
  let failed = 0;
  for (const list of reports) {
    for (const r of list) {
      expect(r.kind, r.message).not.toBe('error');
      if (r.error !== undefined) {
        failed++;
        continue;
      }
      if (r.kind === 'append') for (const id of r.ids ?? []) expected.set(id, 0);
      else if (r.kind === 'update') expected.set(r.id as number, (expected.get(r.id as number) ?? 0) + 1);
      else expected.delete(r.id as number);
    }
  }
  const acknowledged = reports.map((list) => list.filter((r) => r.error === undefined).length);
  console.log(`${label}: writes acknowledged ${acknowledged.join(' + ')}, failed ${failed}`);
  const described = await t.call('POST', `/v1/table/${ns}%24t/describe`, {});
  const table = await connectTable(String(described.json.location), root.store.engineStorageOptions());
  try {
    const rows = (await table.query().select(['id', 'n']).toArray()).map((r: { id: bigint; n: number }): [number, number] => [Number(r.id), r.n]);
    rows.sort((a, b) => a[0] - b[0]);
    expect(rows).toEqual([...expected.entries()].sort((a, b) => a[0] - b[0]));
  } finally {
    table.close();
  }
}

describe.skipIf(!available).each(backends())('writers racing maintenance, on $name', (backend) => {
  let root: TestRoot;
  let t: TestApp & { url: string };
  beforeAll(async () => {
    root = await backend.newRoot();
    t = await listenTestApp(root);
  });
  afterAll(async () => {
    await t?.close();
    await root?.dispose();
  });

  for (const managed of [true, false]) {
    it(`pylance and LanceDB writers appending, updating and deleting while compactions and index upkeep run${managed ? ' (managed versioning)' : ''}`, {
      timeout: 240_000,
    }, async () => {
      const ns = managed ? 'managed' : 'plain';
      await seedTable(t, ns, managed ? { managed_versioning: 'true' } : {});
      const reports: Report[][] = CLIENTS.map(() => []);
      const writers = startWriters(t, root, ns, reports);
      try {
        await Promise.all(writers.map((w) => w.ready));
        for (const w of writers) w.go();

        // Maintenance as another replica over the same root runs it: its own services, the app's engine.
        const deps = withSettings(testRootCatalogDeps(root, root.store, t.app.engine), { leaseMs: 30_000 });
        const versions = new TableVersionService(deps, new TransactionLog(root.store), { leaseMs: 30_000 });
        const data = new DataTables(deps, versions);
        const outcomes: string[] = [];
        let writing = true;
        const finished = Promise.all(writers.map((w) => w.done)).finally(() => (writing = false));
        // Rounds until the writers are done (at least two).
        for (let round = 0; writing || round < 2; round++) {
          for (const op of ['compact', 'optimizeIndices'] as const) {
            const outcome = await data
              .write<{ version: number | null }>(ctx, [ns, 't'], (table) =>
                op === 'compact' ? t.app.engine.maintenance.compact(table.at, {}) : t.app.engine.maintenance.optimizeIndices(table.at),
              )
              .catch((e: unknown) => e);
            if (outcome instanceof Error) {
              expect(outcome, String(outcome)).toBeInstanceOf(EngineError);
              expect((outcome as EngineError).kind, outcome.message).toBe('conflict');
            }
            outcomes.push(`${op} ${outcome instanceof Error ? 'conflict' : (outcome as { version: number | null }).version === null ? 'no-op' : 'committed'}`);
          }
        }
        await finished;
        console.log(`${backend.name}${managed ? ', managed' : ''}: ${JSON.stringify(tally(outcomes))}`);
      } finally {
        for (const w of writers) w.kill();
      }

      await expectRowsAsAcknowledged(t, root, ns, reports, `${backend.name}${managed ? ', managed' : ''}`);
    });
  }

  // The same writers while the service's own scheduler maintains the table (another replica over
  // the root, ticking every 100 ms) under a namespace policy of all three steps, the cleanup of
  // versions older than a second included: runs compact, index and remove versions as the writers
  // go, and the rows are still exactly what the writers were told.
  it('pylance and LanceDB writers while the scheduler compacts, indexes and cleans up the table (managed versioning)', { timeout: 240_000 }, async () => {
    const ns = 'scheduled';
    await seedTable(t, ns, {
      managed_versioning: 'true',
      'maintenance.compact': 'true',
      'maintenance.min_fragments': '2',
      'maintenance.optimize_indices': 'true',
      'maintenance.max_unindexed_rows': '1',
      'maintenance.cleanup_older_than': '1s',
    });
    const maintainer = await listenTestApp(root, { maintenanceIntervalMs: 100, transactionLeaseMs: 2_000 });
    const reports: Report[][] = CLIENTS.map(() => []);
    const writers = startWriters(t, root, ns, reports);
    try {
      await Promise.all(writers.map((w) => w.ready));
      for (const w of writers) w.go();
      await Promise.all(writers.map((w) => w.done));
      // Time is the input of a cleanup: once the writers' versions have left the reader window
      // (lease and clock allowance), the next run removes the old ones.
      await new Promise((r) => setTimeout(r, 2_000 + CLOCK_ALLOWANCE_MS + 500));
      await until('a cleanup', async () => {
        const { started } = await maintainer.app.maintenance.tick();
        await Promise.all(started.map((s) => maintainer.app.jobSettled(s.job)));
        return (
          (metricSamples((await maintainer.app.server.inject({ method: 'GET', url: '/metrics' })).body).get('lance_ns_maintenance_versions_removed_total') ??
            0) > 0
        );
      });
      const scraped = metricSamples((await maintainer.app.server.inject({ method: 'GET', url: '/metrics' })).body);
      const runs = [...scraped].filter(([k]) => k.startsWith('lance_ns_maintenance_')).map(([k, v]) => `${k} ${v}`);
      console.log(`${backend.name}, scheduled: ${runs.join(', ')}`);
      expect(scraped.get('lance_ns_maintenance_runs_total{outcome="succeeded"}') ?? 0, runs.join(', ')).toBeGreaterThan(0);
    } finally {
      for (const w of writers) w.kill();
      // The runs started meanwhile end (or are left to their lease) as the replica closes.
      await maintainer.close();
    }
    await expectRowsAsAcknowledged(t, root, ns, reports, `${backend.name}, scheduled`);
    const versions = ((await t.call('POST', `/v1/table/${ns}%24t/version/list`, {})).json.versions as Array<{ version: number }>).map((v) => v.version);
    expect(versions.length, `versions left: ${versions.join(' ')}`).toBeLessThan(Math.max(...versions));
  });
});
