// Benchmark of the data endpoints against the engine they wrap.
//
//   npx tsx scripts/bench-data.ts [--backend local|rgw|both] [--rows N] [--iterations N]
//                                 [--only ops|builds] [--build-rows N] [--build-iterations N]
//   npm run bench:data -- --backend local --iterations 20
//   npm run bench:data -- --only builds     the index builds of scripts/bench-index-builds.ts only
//
// For each backend, starts the service in-process (createApp, listening on 127.0.0.1:0, logs
// silent) on a fresh temporary local root or on a throwaway Ceph radosgw started here
// (test/support/s3-server.ts), creates a table of --rows rows (id int64, value float64, name utf8,
// vec FixedSizeList(16, float32)) through CreateTable, builds a BTREE index on id through
// create_scalar_index and an FTS index on name through create_index, opens the same dataset
// straight through @lancedb/lancedb, and then times,
// alternating service and direct calls (and rotating which goes first) so both see the same
// table, the same page cache and the same machine load:
//   update        POST /v1/table/{id}/update (1 row by id, SQL expression) | table.update({where, valuesSql})
//   delete        POST /v1/table/{id}/delete (1 row by id)                  | table.delete(predicate)
//   count rows    POST /v1/table/{id}/count_rows                            | table.countRows()
//   describe detailed  POST /v1/table/{id}/describe (load_detailed_metadata) | table.version(), table.schema()
//   table stats   POST /v1/table/{id}/stats                                 | table.stats()
//   index stats   POST /v1/table/{id}/index/id_idx/stats                    | table.indexStats('id_idx')
//   analyze plan  POST /v1/table/{id}/analyze_plan (filter id = k, k 10)    | query().where().limit(10).analyzePlan()
//   hybrid query  POST /v1/table/{id}/query (vector + full text "k", k 10)  | query().nearestTo(v).fullTextSearch().limit(10)
// Each direct call is timed twice: on a warm handle kept open for the whole run, and on a handle
// the same connection opens for that one call (as the service's engine adapter did before it kept
// datasets open; the "adapter" side below still does: it is given no latest version, so it has
// nothing to check a kept dataset against). To show where the service's extra time goes, it also times the parts every data
// request pays: an HTTP round trip through the route runner (GET /health/live), the table resolve
// (DescribeTable with check_declared: the same LIST + GET + LIST of the store a data request
// makes before the engine runs), and the per-request open of the dataset by the service's engine
// adapter (a second adapter instance here: LancedbEngine.datasetVersion vs. the warm handle's
// version()).
//
// The direct handle is opened like test/support/arrow-data.ts connectTable does (connect to the
// parent, openTable by name), but with readConsistencyInterval 0: connectTable's default handle
// never looks for newer versions, so it would update stale data after each service commit and
// report stale statistics. With 0 it checks for the latest version before every call, as the
// service (which checks its kept dataset against the latest version per request) does too.
//
// Temporary roots and the radosgw are removed at exit, also on errors and on Ctrl-C.

import os from 'node:os';
import { parseArgs } from 'node:util';

import { arrow } from '../src/engine/arrow.js';
import { LancedbEngine } from '../src/engine/lancedb/engine.js';
import type { Table } from '../src/engine/lancedb/table-access.js';
import { readTableState } from '../src/service/tables/table-state.js';
import { TableVersions } from '../src/service/versions/dataset-versions.js';
import { type IndexBuildResult, measureIndexBuilds, printIndexBuilds } from './bench-index-builds.js';
import { type BenchService, checkAborted, cleanups, ms, now, openDirect, runMain, type Summary, secs, startBenchService, summarize } from './bench-support.js';

type BackendName = 'local' | 'rgw';

const NAMESPACE = 'bench';
const TABLE = 'data';
const DELIMITER = '$';
const DIM = 16;
const INDEX = 'id_idx';
/** The hybrid query's vector (the table's vectors are uniform in [0, 1)). */
const QUERY_VECTOR: number[] = Array.from({ length: DIM }, () => 0.5);
const WARMUP = 3;
const QUERY_K = 10;
/** Bound on any one HTTP request of the benchmark. */
const REQUEST_TIMEOUT_MS = 120_000;

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

/** An Arrow IPC stream of `rows` rows: id int64 (0..rows-1), value float64, name utf8, vec FixedSizeList(16, float32). */
function tableStream(rows: number): Buffer {
  const ids = new BigInt64Array(rows);
  const values = new Float64Array(rows);
  const names: string[] = new Array<string>(rows);
  const floats = new Float32Array(rows * DIM);
  for (let i = 0; i < rows; i++) {
    ids[i] = BigInt(i);
    values[i] = i * 0.5;
    names[i] = `name-${i}`;
  }
  for (let j = 0; j < floats.length; j++) floats[j] = Math.random();
  const vecType = new arrow.FixedSizeList(DIM, new arrow.Field('item', new arrow.Float32(), true));
  const child = arrow.makeData({ type: new arrow.Float32(), length: rows * DIM, nullCount: 0, data: floats });
  const vec = arrow.makeVector(arrow.makeData({ type: vecType, length: rows, nullCount: 0, child }));
  const table = new arrow.Table({
    id: arrow.makeVector(ids),
    value: arrow.makeVector(values),
    name: arrow.vectorFromArray(names, new arrow.Utf8()),
    vec,
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

// ---------------------------------------------------------------------------------------------
// The service under test and an HTTP client for it.

type Service = BenchService;
const startService = (backend: BackendName): Promise<Service> => startBenchService(backend, log, 'lance-ns-bench-data-');

async function call(service: Service, method: 'GET' | 'POST', route: string, body?: unknown): Promise<unknown> {
  const init: RequestInit = { method, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) };
  if (Buffer.isBuffer(body)) {
    init.body = body;
    init.headers = { 'content-type': 'application/vnd.apache.arrow.stream' };
  } else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { 'content-type': 'application/json' };
  }
  const res = await fetch(`${service.baseUrl}${route}`, init);
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${route} -> ${res.status}: ${text.slice(0, 300)}`);
  return text === '' ? {} : (JSON.parse(text) as unknown);
}

/** A POST whose answer is an Arrow IPC file: the number of rows in it. */
async function callArrow(service: Service, route: string, body: unknown): Promise<number> {
  const res = await fetch(`${service.baseUrl}${route}`, {
    method: 'POST',
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  const bytes = new Uint8Array(await res.arrayBuffer());
  if (!res.ok) throw new Error(`POST ${route} -> ${res.status}: ${Buffer.from(bytes).toString().slice(0, 300)}`);
  return arrow.tableFromIPC(bytes).numRows;
}

const TABLE_PATH = `/v1/table/${encodeURIComponent([NAMESPACE, TABLE].join(DELIMITER))}`;

// ---------------------------------------------------------------------------------------------
// The measurements.

/** The three ways an operation is timed; `slot` tells them apart (distinct rows to change). */
const SIDES = ['service', 'adapter', 'reopened', 'direct'] as const;
type Side = (typeof SIDES)[number];

/**
 * One operation measured four ways: through the service over HTTP; through a second instance of
 * the service's engine adapter (what a request costs without HTTP and the table resolve); on a
 * handle the direct connection opens for this one call; and on the warm direct handle. `i` counts
 * the iterations so far (warm-up included).
 */
interface MeasuredOp {
  name: string;
  service: (i: number, slot: number) => Promise<void>;
  adapter: (i: number, slot: number) => Promise<void>;
  engine: (table: Table, i: number, slot: number) => Promise<void>;
}

type Timings = Record<Side, Summary>;

interface OpResult {
  name: string;
  timings: Timings;
}

function expectEqual(what: string, actual: unknown, expected: unknown): void {
  if (actual !== expected) throw new Error(`${what}: got ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
}

/**
 * Runs every side of every op `WARMUP + iterations` times: within an iteration the ops take turns,
 * each op runs its sides back to back, and which side goes first rotates from one iteration to the next.
 */
async function measureOps(ops: Array<{ name: string; sides: Record<Side, (i: number) => Promise<void>> }>, iterations: number): Promise<OpResult[]> {
  const samples = new Map(ops.map((op) => [op.name, { service: [] as number[], adapter: [] as number[], reopened: [] as number[], direct: [] as number[] }]));
  for (let i = 0; i < WARMUP + iterations; i++) {
    for (const op of ops) {
      const s = samples.get(op.name);
      for (let k = 0; k < SIDES.length; k++) {
        const side = SIDES[(i + k) % SIDES.length] ?? 'service';
        checkAborted();
        const started = now();
        await op.sides[side](i);
        const elapsed = now() - started;
        if (i >= WARMUP && s) s[side].push(elapsed);
      }
    }
    if ((i + 1) % 10 === 0) log(`  iteration ${i + 1} / ${WARMUP + iterations}`);
  }
  return ops.map((op) => {
    const s = samples.get(op.name) ?? { service: [], adapter: [], reopened: [], direct: [] };
    return {
      name: op.name,
      timings: { service: summarize(s.service), adapter: summarize(s.adapter), reopened: summarize(s.reopened), direct: summarize(s.direct) },
    };
  });
}

interface BackendResult {
  backend: BackendName;
  rows: number;
  iterations: number;
  setup: { createMs: number; indexMs: number; ftsMs: number };
  ops: OpResult[];
  parts: { httpFloor: Summary; resolve: Summary; resolveStore: Summary; engineOpen: Summary; directVersion: Summary };
}

/** What to run: the data operations, the index builds (bench-index-builds.ts), or both. */
interface Plan {
  ops: { rows: number; iterations: number } | undefined;
  builds: { rows: number; iterations: number } | undefined;
}

async function runBackend(backend: BackendName, plan: Plan): Promise<{ ops?: BackendResult; builds?: IndexBuildResult[] }> {
  const undoDepth = cleanups.length;
  try {
    const service = await startService(backend);
    await call(service, 'POST', `/v1/namespace/${NAMESPACE}/create`, {});
    const ops = plan.ops ? await measureDataOps(service, backend, plan.ops.rows, plan.ops.iterations) : undefined;
    const builds = plan.builds
      ? await measureIndexBuilds(service, (method, route, body) => call(service, method, route, body), plan.builds.rows, plan.builds.iterations, log)
      : undefined;
    return { ...(ops ? { ops } : {}), ...(builds ? { builds } : {}) };
  } finally {
    // Release this backend's handles, service, root and radosgw before the next backend starts.
    for (const undo of cleanups.splice(undoDepth).reverse()) await undo().catch((e: unknown) => log(`cleanup failed: ${String(e)}`));
  }
}

async function measureDataOps(service: Service, backend: BackendName, rows: number, iterations: number): Promise<BackendResult> {
  {
    const body = tableStream(rows);
    let started = now();
    const created = (await call(service, 'POST', `${TABLE_PATH}/create`, body)) as { location?: unknown };
    const createMs = now() - started;
    if (typeof created.location !== 'string') throw new Error(`CreateTable returned no location: ${JSON.stringify(created)}`);
    const location = created.location;
    log(`${backend}: created ${rows.toLocaleString('en-US')} rows (${(body.length / 2 ** 20).toFixed(1)} MiB Arrow) in ${secs(createMs)} at ${location}`);

    started = now();
    await call(service, 'POST', `${TABLE_PATH}/create_scalar_index`, { column: 'id', index_type: 'BTREE', name: INDEX });
    const indexMs = now() - started;
    log(`${backend}: BTREE index on id in ${secs(indexMs)}`);
    started = now();
    await call(service, 'POST', `${TABLE_PATH}/create_index`, { column: 'name', index_type: 'FTS' });
    const ftsMs = now() - started;
    log(`${backend}: FTS index on name in ${secs(ftsMs)}`);
    checkAborted();

    const storageOptions = service.app.store.engineStorageOptions();
    const direct = await openDirect(location, storageOptions);
    expectEqual('direct countRows', await direct.table.countRows(), rows);
    // A second instance of the service's engine adapter (with its own loopback resolver), given
    // the dataset location the service would resolve for each request.
    const adapter = await LancedbEngine.start();
    cleanups.push(() => adapter.close());
    const at = { location, storageOptions };

    // Rows each side changes: updates from the bottom, deletes from the top, never the same row twice.
    const n = SIDES.length;
    const updateId = (slot: number, i: number) => n * i + slot;
    const deleteId = (slot: number, i: number) => rows - 1 - (n * i + slot);
    const queryId = (i: number) => Math.floor(rows / 2) + i;
    const valueSql = 'value * 2 + 1';

    const ops: MeasuredOp[] = [
      {
        name: 'update',
        service: async (i, slot) => {
          const r = (await call(service, 'POST', `${TABLE_PATH}/update`, { predicate: `id = ${updateId(slot, i)}`, updates: [['value', valueSql]] })) as {
            updated_rows?: unknown;
          };
          expectEqual('service updated_rows', r.updated_rows, 1);
        },
        adapter: async (i, slot) => {
          const r = await adapter.rows.update(at, [['value', valueSql]], `id = ${updateId(slot, i)}`);
          expectEqual('adapter updatedRows', r.updatedRows, 1);
        },
        engine: async (t, i, slot) => {
          const r = await t.update({ where: `id = ${updateId(slot, i)}`, valuesSql: { value: valueSql } });
          expectEqual('direct rowsUpdated', r.rowsUpdated, 1);
        },
      },
      {
        name: 'delete',
        service: async (i, slot) => {
          await call(service, 'POST', `${TABLE_PATH}/delete`, { predicate: `id = ${deleteId(slot, i)}` });
        },
        adapter: async (i, slot) => {
          const r = await adapter.rows.delete(at, `id = ${deleteId(slot, i)}`);
          expectEqual('adapter deletedRows', r.deletedRows, 1);
        },
        engine: async (t, i, slot) => {
          const r = await t.delete(`id = ${deleteId(slot, i)}`);
          expectEqual('direct numDeletedRows', r.numDeletedRows, 1);
        },
      },
      {
        name: 'count rows',
        service: async () => {
          const r = await call(service, 'POST', `${TABLE_PATH}/count_rows`, {});
          if (typeof r !== 'number' || r <= 0) throw new Error(`service count_rows: ${JSON.stringify(r)}`);
        },
        adapter: async () => {
          await adapter.rows.countRows(at);
        },
        engine: async (t) => {
          await t.countRows();
        },
      },
      {
        name: 'describe detailed',
        service: async () => {
          const r = (await call(service, 'POST', `${TABLE_PATH}/describe`, { load_detailed_metadata: true })) as { version?: unknown };
          if (typeof r.version !== 'number') throw new Error(`service describe: ${JSON.stringify(r).slice(0, 200)}`);
        },
        adapter: async () => {
          await adapter.describeDataset(at);
        },
        engine: async (t) => {
          await t.version();
          await t.schema();
        },
      },
      {
        name: 'table stats',
        service: async () => {
          await call(service, 'POST', `${TABLE_PATH}/stats`, {});
        },
        adapter: async () => {
          await adapter.columns.tableStats(at);
        },
        engine: async (t) => {
          await t.stats();
        },
      },
      {
        name: 'index stats',
        service: async () => {
          await call(service, 'POST', `${TABLE_PATH}/index/${INDEX}/stats`, {});
        },
        adapter: async () => {
          await adapter.columns.indexStats(at, INDEX);
        },
        engine: async (t) => {
          if (!(await t.indexStats(INDEX))) throw new Error(`direct indexStats: no index ${INDEX}`);
        },
      },
      {
        name: 'analyze plan',
        service: async (i) => {
          const plan = await call(service, 'POST', `${TABLE_PATH}/analyze_plan`, { k: QUERY_K, filter: `id = ${queryId(i)}` });
          if (typeof plan !== 'string' || plan === '') throw new Error(`service analyze_plan: ${JSON.stringify(plan)}`);
        },
        adapter: async (i) => {
          const plan = await adapter.queries.analyzePlan(at, { limit: QUERY_K, filter: `id = ${queryId(i)}` });
          if (plan === '') throw new Error('adapter analyzePlan: empty plan');
        },
        engine: async (t, i) => {
          const plan = await t
            .query()
            .where(`id = ${queryId(i)}`)
            .limit(QUERY_K)
            .analyzePlan();
          if (plan === '') throw new Error('direct analyzePlan: empty plan');
        },
      },
      {
        // A hybrid search: the vector search and the full-text search for row k's own number
        // (name-k), fused by RRF. Each finds k rows: row k, and the 10 nearest vectors.
        name: 'hybrid query',
        service: async (i) => {
          const found = await callArrow(service, `${TABLE_PATH}/query`, {
            vector: { single_vector: QUERY_VECTOR },
            vector_column: 'vec',
            full_text_query: { string_query: { query: String(queryId(i)), columns: ['name'] } },
            k: QUERY_K,
            columns: { column_names: ['id'] },
          });
          expectEqual('service hybrid rows', found, QUERY_K);
        },
        adapter: async (i) => {
          const ipc = await adapter.queries.query(at, {
            vector: QUERY_VECTOR,
            vectorColumn: 'vec',
            fullText: { text: String(queryId(i)), columns: ['name'] },
            limit: QUERY_K,
            columns: ['id'],
          });
          expectEqual('adapter hybrid rows', arrow.tableFromIPC(ipc).numRows, QUERY_K);
        },
        engine: async (t, i) => {
          const found = await t
            .query()
            .nearestTo(QUERY_VECTOR)
            .column('vec')
            .fullTextSearch(String(queryId(i)), { columns: ['name'] })
            .select(['id'])
            .limit(QUERY_K)
            .toArrow();
          expectEqual('direct hybrid rows', found.numRows, QUERY_K);
        },
      },
    ];
    const slotOf = (side: Side): number => SIDES.indexOf(side);
    started = now();
    const results = await measureOps(
      ops.map((op) => ({
        name: op.name,
        sides: {
          service: (i: number) => op.service(i, slotOf('service')),
          adapter: (i: number) => op.adapter(i, slotOf('adapter')),
          direct: (i: number) => op.engine(direct.table, i, slotOf('direct')),
          reopened: async (i: number) => {
            const t = await direct.reopen();
            try {
              await op.engine(t, i, slotOf('reopened'));
            } finally {
              t.close();
            }
          },
        },
      })),
      iterations,
    );
    log(`${backend}: data operations measured in ${secs(now() - started)}`);

    // Where the service's time goes: the parts every data request pays, measured alone.
    const ref = { namespace: [NAMESPACE], name: TABLE };
    const [http, open, storeCalls] = await measureOps(
      [
        {
          name: 'http',
          sides: {
            service: async () => {
              await call(service, 'GET', '/health/live');
            },
            direct: async () => {
              await call(service, 'POST', `${TABLE_PATH}/describe?check_declared=true`, {});
            },
            adapter: async () => {},
            reopened: async () => {},
          },
        },
        {
          name: 'open',
          sides: {
            service: async () => {
              await adapter.datasetVersion(at);
            },
            direct: async () => {
              await direct.table.version();
            },
            adapter: async () => {},
            reopened: async () => {},
          },
        },
        {
          // The store calls of the resolve, in-process: LIST of the table directory, GET of its
          // record, LIST of `_versions/` (readTableState + tableHasData).
          name: 'store',
          sides: {
            service: async () => {
              const state = await readTableState(service.app.store, ref);
              if (!(await new TableVersions({ store: service.app.store, key: state.dirKey, owned: true }).hasCommitted()))
                throw new Error('resolve: no committed version');
            },
            direct: async () => {},
            adapter: async () => {},
            reopened: async () => {},
          },
        },
      ],
      iterations,
    );
    if (!http || !open || !storeCalls) throw new Error('missing breakdown results');

    expectEqual('rows left', await direct.table.countRows(), rows - n * (WARMUP + iterations));
    return {
      backend,
      rows,
      iterations,
      setup: { createMs, indexMs, ftsMs },
      ops: results,
      parts: {
        httpFloor: http.timings.service,
        resolve: http.timings.direct,
        resolveStore: storeCalls.timings.service,
        engineOpen: open.timings.service,
        directVersion: open.timings.direct,
      },
    };
  }
}

// ---------------------------------------------------------------------------------------------
// Output.

function printResult(r: BackendResult): void {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  out('');
  out(
    `${r.backend}: ${r.rows.toLocaleString('en-US')} rows, ${r.iterations} iterations per operation and side; ` +
      `setup: CreateTable ${secs(r.setup.createMs)}, BTREE index ${secs(r.setup.indexMs)}, FTS index ${secs(r.setup.ftsMs)}`,
  );
  const table = (header: string[], lines: string[][]) => {
    const widths = header.map((h, c) => Math.max(h.length, ...lines.map((l) => (l[c] ?? '').length)));
    const fmt = (cells: string[]) => `  ${cells.map((cell, c) => cell.padEnd(widths[c] ?? 0)).join('  ')}`.trimEnd();
    out(fmt(header));
    for (const l of lines) out(fmt(l));
  };
  const plus = (x: number) => `${x >= 0 ? '+' : ''}${ms(x)} ms`;
  table(
    ['operation', 'service p50 / p95', 'direct p50 / p95', 'ratio p50', 'overhead p50'],
    r.ops.map(({ name, timings: t }) => [
      name,
      `${ms(t.service.p50)} / ${ms(t.service.p95)} ms`,
      `${ms(t.direct.p50)} / ${ms(t.direct.p95)} ms`,
      `${(t.service.p50 / t.direct.p50).toFixed(1)}x`,
      plus(t.service.p50 - t.direct.p50),
    ]),
  );
  out("  where the overhead goes, p50 (adapter: the service's engine adapter called in-process; reopened: direct, table opened per call):");
  table(
    ['operation', 'adapter', 'reopened', 'HTTP + resolve (service - adapter)', 'adapter open (adapter - reopened)', 'reopen (reopened - direct)'],
    r.ops.map(({ name, timings: t }) => [
      name,
      `${ms(t.adapter.p50)} ms`,
      `${ms(t.reopened.p50)} ms`,
      plus(t.service.p50 - t.adapter.p50),
      plus(t.adapter.p50 - t.reopened.p50),
      plus(t.reopened.p50 - t.direct.p50),
    ]),
  );
  const { httpFloor, resolve, resolveStore, engineOpen, directVersion } = r.parts;
  out('  parts of a service request, p50 / p95:');
  const parts: Array<[string, string]> = [
    ['HTTP round trip (GET /health/live)', `${ms(httpFloor.p50)} / ${ms(httpFloor.p95)} ms`],
    ['HTTP + table resolve (DescribeTable check_declared)', `${ms(resolve.p50)} / ${ms(resolve.p95)} ms (resolve ~${ms(resolve.p50 - httpFloor.p50)} ms)`],
    ['  its store calls in-process (LIST, GET, LIST)', `${ms(resolveStore.p50)} / ${ms(resolveStore.p95)} ms`],
    [
      'engine adapter open + version()',
      `${ms(engineOpen.p50)} / ${ms(engineOpen.p95)} ms (warm handle version() ${ms(directVersion.p50)} ms: the open ~${ms(engineOpen.p50 - directVersion.p50)} ms)`,
    ],
  ];
  const labelWidth = Math.max(...parts.map(([label]) => label.length));
  for (const [label, value] of parts) out(`    ${label.padEnd(labelWidth)}  ${value}`);
}

function summaryLine(results: BackendResult[]): string {
  return results
    .map((r) => {
      const ops = r.ops.map(({ name, timings: t }) => `${name} ${ms(t.service.p50)} vs ${ms(t.direct.p50)} ms`).join(', ');
      const overheads = r.ops.map(({ timings: t }) => t.service.p50 - t.direct.p50);
      return `${r.backend} (service vs direct p50): ${ops}; overhead +${ms(Math.min(...overheads))}..+${ms(Math.max(...overheads))} ms`;
    })
    .join(' | ');
}

function positiveInt(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, not ${JSON.stringify(text)}`);
  return n;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    strict: true,
    options: {
      backend: { type: 'string', default: 'both' },
      rows: { type: 'string' },
      iterations: { type: 'string' },
      only: { type: 'string' },
      'build-rows': { type: 'string' },
      'build-iterations': { type: 'string' },
    },
  });
  const only = values.only;
  if (only !== undefined && only !== 'ops' && only !== 'builds') throw new Error(`--only must be ops or builds, not ${JSON.stringify(only)}`);
  const which = values.backend;
  if (which !== 'local' && which !== 'rgw' && which !== 'both') throw new Error(`--backend must be local, rgw or both, not ${JSON.stringify(which)}`);
  const backends: BackendName[] = which === 'both' ? ['local', 'rgw'] : [which];
  const rows = positiveInt('rows', values.rows, 100_000);
  const iterations = positiveInt('iterations', values.iterations, 50);
  if (iterations > 10_000) throw new Error('--iterations: at most 10000');
  // Each side updates and deletes one distinct row per call; at least one row is never touched.
  const needed = 2 * SIDES.length * (WARMUP + iterations) + 1;
  if (rows < needed) throw new Error(`--rows must be at least ${needed} for ${iterations} iterations`);
  const plan: Plan = {
    ops: only === 'builds' ? undefined : { rows, iterations },
    builds:
      only === 'ops'
        ? undefined
        : { rows: positiveInt('build-rows', values['build-rows'], 20_000), iterations: positiveInt('build-iterations', values['build-iterations'], 3) },
  };
  log(`${os.cpus().length} cores, node ${process.version}, backends ${backends.join(', ')}, ${JSON.stringify(plan)}`);
  const results: Array<{ backend: BackendName; ops?: BackendResult; builds?: IndexBuildResult[] }> = [];
  for (const backend of backends) {
    const started = now();
    results.push({ backend, ...(await runBackend(backend, plan)) });
    log(`${backend} done in ${secs(now() - started)}`);
  }
  const out = (line: string) => process.stdout.write(`${line}\n`);
  for (const r of results) {
    if (r.ops) printResult(r.ops);
    else out(`\n${r.backend}:`);
    if (r.builds && plan.builds) printIndexBuilds(r.builds, plan.builds.rows, plan.builds.iterations, out);
  }
  const ops = results.flatMap((r) => (r.ops ? [r.ops] : []));
  if (ops.length > 0) out(`\nsummary: ${summaryLine(ops)}`);
}

runMain(main);
