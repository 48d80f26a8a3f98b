import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { type CommitCoordinator, type DatasetLocation, EngineError } from '../../src/engine/lance-engine.js';
import { LancedbEngine } from '../../src/engine/lancedb/engine.js';
import { UdfFailure, type UdfFill, type UdfOps } from '../../src/engine/ports/udfs.js';
import type { Materialization } from '../../src/engine/ports/views.js';
import { DEFAULT_UDF_PYTHON } from '../../src/engine/python-udf/python-udfs.js';
import { NamespaceService } from '../../src/service/catalog/namespace-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { DataTables } from '../../src/service/data/data-tables.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import { connectTable } from '../support/arrow-data.js';
import { type Backend, localBackend, s3Backends, type TestRoot } from '../support/backends.js';
import { localCatalogDeps, withSettings } from '../support/local-catalog.js';
import { type RayCluster, startRayCluster } from '../support/ray-cluster.js';
import { genevaQuery, META, makeUdfEnvelopes, schemaMessage, viewRows } from '../support/views.js';
import { recordingWorkerLog } from '../support/worker-log.js';

// The Python UDF adapter (src/engine/python-udf/, worker/udf_worker.py) against real Geneva UDF
// envelopes, built by test/support/geneva_udfs.py with the pinned Geneva, over real Lance datasets:
// values row by row, rows outside the filter untouched, a UDF that raises, a managed table's commit
// through its coordinator, a worker SIGKILLed mid-fill, a fill timeout, and S3 through the resolver;
// and a materialized view recomputed from its source (`materialize`).

const available = existsSync(DEFAULT_UDF_PYTHON);
if (!available) console.warn(`skipping the UDF worker tests: no ${DEFAULT_UDF_PYTHON}; run scripts/install-udf-worker.sh`);

const ctx: RequestContext = { requestId: 'udf-test', principal: null, context: {} };
const FRAGMENT = 2n ** 32n;

type UdfName =
  | 'double'
  | 'plus'
  | 'describe_row'
  | 'raises'
  | 'chatty'
  | 'wrong_type'
  | 'too_short'
  | 'sleeps'
  | 'pieces'
  | 'pieces_raise'
  | 'decades'
  | 'decades_by_v'
  | 'decades_by_x'
  | 'decades_raise';

/** Rows {a, b = a * 10, v = -1, s = null} for a in [from, from + n). */
function rowsStream(n: number, from = 0): Buffer {
  const a = BigInt64Array.from({ length: n }, (_, i) => BigInt(from + i));
  const table = new arrow.Table({
    a: arrow.vectorFromArray(a),
    b: arrow.vectorFromArray(a.map((x) => x * 10n)),
    v: arrow.vectorFromArray(new BigInt64Array(n).fill(-1n)),
    s: arrow.vectorFromArray(new Array<string | null>(n).fill(null), new arrow.Utf8()),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

interface Row {
  rowid: bigint;
  a: number;
  v: number | null;
  s: string | null;
}

async function readAll(at: DatasetLocation): Promise<Row[]> {
  const table = await connectTable(at.location, at.storageOptions);
  try {
    const data = await table.query().withRowId().select(['a', 'v', 's']).toArrow();
    const col = (name: string) => {
      const c = data.getChild(name);
      if (!c) throw new Error(`no column ${name}`);
      return c;
    };
    const rows: Row[] = [];
    for (let i = 0; i < data.numRows; i++) {
      const v = col('v').get(i) as bigint | null;
      rows.push({ rowid: col('_rowid').get(i) as bigint, a: Number(col('a').get(i)), v: v === null ? null : Number(v), s: col('s').get(i) as string | null });
    }
    return rows.sort((x, y) => x.a - y.a);
  } finally {
    table.close();
  }
}

describe.skipIf(!available)('Python UDFs in worker processes (needs .venv-udf: scripts/install-udf-worker.sh)', () => {
  let envelopes: Record<string, { sha: string; body: string }> = {};
  const { log, lines: logs, next: nextLog } = recordingWorkerLog();
  let engine: LancedbEngine;
  let udfs: UdfOps;

  beforeAll(async () => {
    envelopes = await makeUdfEnvelopes();
    engine = await LancedbEngine.start(undefined, { udf: { workers: 2, log } });
    if (!engine.udfs) throw new Error('the engine has no UDFs');
    udfs = engine.udfs;
  });
  afterAll(async () => {
    await engine?.close();
  });

  /** Puts a UDF's envelope where Geneva stores it, `<dataset>/_udfs/<sha256>`; returns that relative path. */
  async function putUdf(root: TestRoot, datasetKey: string, name: UdfName): Promise<string> {
    const envelope = envelopes[name];
    if (!envelope) throw new Error(`geneva_udfs.py made no envelope ${name}`);
    const udfPath = `_udfs/${envelope.sha}`;
    await root.store.put(`${datasetKey}${udfPath}`, envelope.body);
    return udfPath;
  }

  /** A dataset of three fragments of 10 rows (a = 0..29) on `root`, with every test UDF stored in it. */
  async function threeFragments(root: TestRoot, name: string): Promise<{ at: DatasetLocation; udf: Record<UdfName, string> }> {
    const key = `${name}.lance/`;
    const at: DatasetLocation = { location: root.store.location(`${name}.lance`), storageOptions: root.store.engineStorageOptions() };
    await engine.createDataset(at, rowsStream(10), 'create');
    await engine.rows.insert(at, rowsStream(10, 10), 'append');
    await engine.rows.insert(at, rowsStream(10, 20), 'append');
    const udf = {} as Record<UdfName, string>;
    for (const n of Object.keys(envelopes) as UdfName[]) udf[n] = await putUdf(root, key, n);
    return { at, udf };
  }

  function useRoot(backend: Backend): { readonly root: TestRoot } {
    const fixture = {} as { root: TestRoot };
    beforeAll(async () => {
      fixture.root = await backend.newRoot();
    });
    afterAll(() => fixture.root?.dispose());
    return fixture;
  }

  describe('on a local disk', () => {
    const fx = useRoot(localBackend);
    let seq = 0;
    const fresh = () => threeFragments(fx.root, `t${++seq}`);

    it('fills a _rowid range and a filter across fragments, row by row; other rows, row ids and fragments stay; a second fill changes no value', async () => {
      const { at, udf } = await fresh();
      const before = await readAll(at);
      expect(before.map((r) => r.rowid >> 32n)).toEqual([...Array(10).fill(0n), ...Array(10).fill(1n), ...Array(10).fill(2n)]);
      const startVersion = await engine.datasetVersion(at);
      const fill: UdfFill = { column: 'v', udfPath: udf.double, inputColumns: null, filter: `_rowid >= 5 AND _rowid < ${2n * FRAGMENT + 5n} AND a % 3 <> 0` };
      const selected = (r: Row) => r.a >= 5 && r.a < 25 && r.a % 3 !== 0;
      const first = await udfs.fill(at, fill);
      expect(first).toEqual({ rows: before.filter(selected).length, version: startVersion + 1 });
      const after = await readAll(at);
      expect(after.map((r) => r.rowid)).toEqual(before.map((r) => r.rowid));
      expect(after.filter((r) => r.v !== (selected(r) ? r.a * 2 : -1))).toEqual([]);
      const second = await udfs.fill(at, fill);
      expect(second).toEqual({ rows: first.rows, version: first.version + 1 });
      expect(await readAll(at)).toEqual(after);
    });

    it('calls array and RecordBatch UDFs as Geneva does, and takes the recorded input columns over the UDF own', async () => {
      const { at, udf } = await fresh();
      expect((await udfs.fill(at, { column: 'v', udfPath: udf.plus, inputColumns: ['a', 'b'], filter: 'a < 15' })).rows).toBe(15);
      expect((await readAll(at)).filter((r) => r.v !== (r.a < 15 ? r.a * 11 : -1))).toEqual([]);
      // add_columns({"v": (double, ["b"])}): the column records b as the input of `double(a)`.
      expect((await udfs.fill(at, { column: 'v', udfPath: udf.double, inputColumns: ['b'], filter: 'a >= 15' })).rows).toBe(15);
      expect((await readAll(at)).filter((r) => r.v !== (r.a < 15 ? r.a * 11 : r.a * 20))).toEqual([]);
      // The next fill without recorded inputs reads the UDF's own (a): no request's inputs stay on the cached UDF.
      expect((await udfs.fill(at, { column: 'v', udfPath: udf.double, inputColumns: null, filter: 'a >= 25' })).rows).toBe(5);
      expect((await readAll(at)).filter((r) => r.v !== (r.a < 15 ? r.a * 11 : r.a < 25 ? r.a * 20 : r.a * 2))).toEqual([]);
      // A RecordBatch UDF gets the whole row but the column it fills; Geneva records its inputs as [].
      expect((await udfs.fill(at, { column: 's', udfPath: udf.describe_row, inputColumns: [], filter: 'true' })).rows).toBe(30);
      expect((await readAll(at)).filter((r) => r.s !== `a,b,v:${r.a}`)).toEqual([]);
    });

    it('a UDF that raises, or returns values of another type or count, is a UdfFailure with its message (and traceback), and commits nothing', async () => {
      const { at, udf } = await fresh();
      const version = await engine.datasetVersion(at);
      const failure = await udfs.fill(at, { column: 'v', udfPath: udf.raises, inputColumns: null, filter: 'true' }).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(UdfFailure);
      expect((failure as UdfFailure).message).toMatch(/ValueError: cannot compute row a=7/);
      expect((failure as UdfFailure).traceback).toMatch(/raise ValueError/);
      const wrong = await udfs.fill(at, { column: 'v', udfPath: udf.wrong_type, inputColumns: null, filter: 'true' }).catch((e: unknown) => e);
      expect(wrong).toBeInstanceOf(UdfFailure);
      expect((wrong as UdfFailure).message).toMatch(/int64/);
      const short = await udfs.fill(at, { column: 'v', udfPath: udf.too_short, inputColumns: null, filter: 'true' }).catch((e: unknown) => e);
      expect(short).toBeInstanceOf(UdfFailure);
      expect((short as UdfFailure).message).toMatch(/returned 9 values for 10 rows/);
      expect(await engine.datasetVersion(at)).toBe(version);
      expect((await readAll(at)).every((r) => r.v === -1)).toBe(true);
    });

    it('what a UDF prints or reads does not touch the protocol; its output reaches the log', async () => {
      const { at, udf } = await fresh();
      expect((await udfs.fill(at, { column: 'v', udfPath: udf.chatty, inputColumns: null, filter: 'a < 3' })).rows).toBe(3);
      expect((await readAll(at)).filter((r) => r.v !== (r.a < 3 ? r.a + 1 : -1))).toEqual([]);
      expect(logs.map((l) => l.message)).toEqual(expect.arrayContaining(['chatty sees 0', 'written straight to fd 1']));
    });

    it('materializes a view from its source at a version: SQL and UDF columns (array, RecordBatch, one named like its input), filter, offset, limit; one commit', async () => {
      const { at: source } = await fresh();
      const name = `view${++seq}`;
      const view = await emptyView(name, [...META, ['a', new arrow.Int64()], ['b', new arrow.Int64()], ['a10', new arrow.Int64()], ['s', new arrow.Utf8()]]);
      const udf = { double: await putUdf(fx.root, `${name}.lance/`, 'double'), describe: await putUdf(fx.root, `${name}.lance/`, 'describe_row') };
      const m: Materialization = {
        sourceVersion: 2,
        filter: 'a % 2 = 0',
        columns: [
          { name: 'a', sql: 'a' },
          { name: 'a10', sql: 'a + 10' },
        ],
        offset: 1,
        limit: 5,
        udfs: [
          { column: 'b', udfPath: udf.double, inputColumns: ['b'] },
          { column: 's', udfPath: udf.describe, inputColumns: null },
        ],
        schemaMetadata: { 'geneva::view::base_table_version': '2' },
        fieldMetadata: { __source_row_id: { 'geneva::mv::last_refreshed_version': '2' } },
        maxRowsPerFile: 3,
      };
      const done = await udfs.materialize(source, view, m);
      expect(done).toEqual({ rows: 5, version: 2, fragments: 2 });
      const table = await connectTable(view.location, view.storageOptions);
      try {
        const rows = ((await table.query().toArray()) as Array<Record<string, unknown>>).map((r) => ({
          ...r,
          __source_row_id: Number(r.__source_row_id),
          a: Number(r.a),
          b: Number(r.b),
          a10: Number(r.a10),
        }));
        const ids = [2, 4, 6, 8, 10];
        expect(rows.sort((x, y) => x.a - y.a)).toEqual(
          ids.map((a) => ({ __source_row_id: a < 10 ? a : 2 ** 32 + a - 10, __is_set: true, a, b: a * 20, a10: a + 10, s: `a,b,v,s:${a}` })),
        );
        const schema = await table.schema();
        expect(Object.fromEntries(schema.metadata)).toEqual({ 'geneva::view::base_table_version': '2' });
        expect(Object.fromEntries(schema.fields[0]?.metadata ?? new Map())).toEqual({ 'geneva::mv::last_refreshed_version': '2' });
      } finally {
        table.close();
      }
      // Again from the same version: the same rows, one more commit; a bad filter is invalid input and commits nothing.
      expect(await udfs.materialize(source, view, m)).toEqual({ rows: 5, version: 3, fragments: 2 });
      const bad = await udfs.materialize(source, view, { ...m, filter: 'nope >' }).catch((e: unknown) => e);
      expect(bad).toBeInstanceOf(EngineError);
      expect((bad as EngineError).kind).toBe('invalid_input');
      expect(await engine.datasetVersion(view)).toBe(3);
    });

    /** An empty view table `<name>.lance` with these fields, as a view's create makes it. */
    async function emptyView(name: string, fields: Array<[string, import('apache-arrow').DataType]>): Promise<DatasetLocation> {
      const view: DatasetLocation = { location: fx.root.store.location(`${name}.lance`), storageOptions: fx.root.store.engineStorageOptions() };
      await engine.createDataset(view, engine.schemaStream(Buffer.from(schemaMessage(fields), 'base64')).stream, 'create');
      return view;
    }

    it('materializes a chunker view: each source row expanded 1:N by the chunker, inherited columns copied, output_limit honoured; a raising chunker commits nothing', async () => {
      const { at: source } = await fresh();
      const name = `chunks${++seq}`;
      const view = await emptyView(name, [
        ['__source_row_id', new arrow.Int64()],
        ['__child_index', new arrow.Int32()],
        ['b', new arrow.Int64()],
        ['label', new arrow.Utf8()],
        ['k', new arrow.Int64()],
      ]);
      const pieces = await putUdf(fx.root, `${name}.lance/`, 'pieces');
      const m: Materialization = {
        sourceVersion: 3,
        filter: 'a >= 5 AND a < 15',
        columns: [
          { name: 'a', sql: 'a' },
          { name: 'b', sql: 'b' },
        ],
        offset: null,
        limit: null,
        udfs: [],
        schemaMetadata: { 'geneva::view::version': 'chunker' },
        fieldMetadata: {},
        maxRowsPerFile: null,
      };
      const chunker = { kind: 'chunker' as const, udfPath: pieces, inputColumns: ['a'], inherited: ['b'], outputLimit: null };
      const rowsOf = () => viewRows(view.location, view.storageOptions);
      const expected = Array.from({ length: 10 }, (_, i) => i + 5).flatMap((a) =>
        Array.from({ length: a % 3 }, (_, k) => ({ __source_row_id: a < 10 ? a : 2 ** 32 + a - 10, __child_index: k, b: a * 10, label: `${a}.${k}`, k })),
      );
      expect(await udfs.materialize(source, view, m, chunker)).toEqual({ rows: expected.length, version: 2, fragments: 1 });
      expect(await rowsOf()).toEqual(expected);
      // output_limit: the first view rows in the source's order.
      expect(await udfs.materialize(source, view, m, { ...chunker, outputLimit: 4 })).toMatchObject({ rows: 4, version: 3 });
      expect(await rowsOf()).toEqual(expected.slice(0, 4));
      const raising = await udfs
        .materialize(source, view, m, { ...chunker, udfPath: await putUdf(fx.root, `${name}.lance/`, 'pieces_raise') })
        .catch((e: unknown) => e);
      expect(raising).toBeInstanceOf(UdfFailure);
      expect((raising as UdfFailure).message).toMatch(/ValueError: cannot chunk row a=7/);
      expect(await engine.datasetVersion(view)).toBe(3);
      // A UDF envelope where a chunker is expected is a UdfFailure too.
      expect(
        await udfs.materialize(source, view, m, { ...chunker, udfPath: await putUdf(fx.root, `${name}.lance/`, 'double') }).catch((e: unknown) => e),
      ).toBeInstanceOf(UdfFailure);
    });

    it("materializes a udtf view: the UDTF handed a Geneva query over the source at the version (per partition value), its rows the view's; a raising UDTF commits nothing", async () => {
      const { at: source } = await fresh();
      // A fourth version: rows 20..29 with v = 1.
      expect((await engine.rows.update(source, [['v', '1']], 'a >= 20')).version).toBe(4);
      const name = `udtf${++seq}`;
      const view = await emptyView(name, [
        ['decade', new arrow.Int64()],
        ['n', new arrow.Int64()],
        ['total', new arrow.Int64()],
      ]);
      const m: Materialization = {
        sourceVersion: 2,
        filter: null,
        columns: [],
        offset: null,
        limit: null,
        udfs: [],
        schemaMetadata: { 'geneva::view::version': 'udtf' },
        fieldMetadata: {},
        maxRowsPerFile: null,
      };
      const run = async (udtf: UdfName, version: number, partitionBy: string | null = null) =>
        udfs.materialize(
          source,
          view,
          { ...m, sourceVersion: version },
          { kind: 'udtf', udfPath: await putUdf(fx.root, `${name}.lance/`, udtf), sourceQuery: genevaQuery(`t${seq}`, { filter: 'a >= 5' }), partitionBy },
        );
      const rowsOf = async () =>
        (await viewRows(view.location, view.storageOptions))
          .map((r) => [Number(r.decade), Number(r.n), Number(r.total)])
          .sort((x, y) => (x[0] ?? 0) - (y[0] ?? 0) || (x[1] ?? 0) - (y[1] ?? 0));
      // Version 2 has a = 0..19: rows 5..19.
      expect(await run('decades', 2)).toMatchObject({ rows: 2, version: 2 });
      expect(await rowsOf()).toEqual([
        [0, 5, 35],
        [1, 10, 145],
      ]);
      // Partitioned by v at version 4: v = -1 (a 5..19) and v = 1 (a 20..29), each run on its own.
      expect(await run('decades_by_v', 4, 'v')).toMatchObject({ rows: 3, version: 3 });
      expect(await rowsOf()).toEqual([
        [0, 5, 35],
        [1, 10, 145],
        [2, 10, 245],
      ]);
      const raising = await run('decades_raise', 4).catch((e: unknown) => e);
      expect(raising).toBeInstanceOf(UdfFailure);
      expect((raising as UdfFailure).message).toMatch(/ValueError: no decades today/);
      expect(await engine.datasetVersion(view)).toBe(3);
    });

    it('no matching row: one commit, nothing changed; bad requests are classified', async () => {
      const { at, udf } = await fresh();
      const version = await engine.datasetVersion(at);
      expect(await udfs.fill(at, { column: 'v', udfPath: udf.double, inputColumns: null, filter: 'a > 1000' })).toEqual({ rows: 0, version: version + 1 });
      expect((await readAll(at)).every((r) => r.v === -1)).toBe(true);
      const fails = (fill: Partial<UdfFill>) =>
        udfs.fill(at, { column: 'v', udfPath: udf.double, inputColumns: null, filter: 'true', ...fill }).catch((e: unknown) => e);
      expect(await fails({ column: 'nope' })).toMatchObject({ kind: 'column_not_found' });
      expect(await fails({ inputColumns: ['nope'] })).toMatchObject({ kind: 'column_not_found' });
      expect(await fails({ filter: 'a >>> 1' })).toMatchObject({ kind: 'invalid_input' });
      expect(await fails({ udfPath: `_udfs/${'0'.repeat(64)}` })).toBeInstanceOf(UdfFailure);
      expect(await fails({ inputColumns: ['v'] })).toMatchObject({ kind: 'invalid_input' });
      const missing: DatasetLocation = { location: fx.root.store.location('missing.lance'), storageOptions: {} };
      expect(await udfs.fill(missing, { column: 'v', udfPath: udf.double, inputColumns: null, filter: 'true' }).catch((e: unknown) => e)).toMatchObject({
        kind: 'not_a_dataset',
      });
      expect(await engine.datasetVersion(at)).toBe(version + 1);
    });

    it('two workers run two fills at once; one SIGKILLed during its fill fails that fill as unavailable (worth a retry), and its slot gets a new worker', async () => {
      const { at, udf } = await fresh();
      const version = await engine.datasetVersion(at);
      const sleeping = nextLog(/^sleeps started in \d+$/);
      let settled = false;
      const fill = udfs
        .fill(at, { column: 'v', udfPath: udf.sleeps, inputColumns: null, filter: 'true' })
        .catch((e: unknown) => e)
        .finally(() => (settled = true));
      const pid = Number((await sleeping).message.split(' ').pop());
      // The other worker fills meanwhile.
      expect((await udfs.fill(at, { column: 'v', udfPath: udf.chatty, inputColumns: null, filter: 'a = 1' })).rows).toBe(1);
      expect(settled).toBe(false);
      expect(logs.filter((l) => l.message === 'chatty sees 1').pop()?.pid).not.toBe(pid);
      process.kill(pid, 'SIGKILL');
      const failure = await fill;
      expect(failure).toBeInstanceOf(EngineError);
      expect(failure).toMatchObject({ kind: 'unavailable', message: expect.stringMatching(/exited on signal SIGKILL while running a fill/) });
      expect(await engine.datasetVersion(at)).toBe(version + 1);
      // The dead worker's slot is the next one taken: it gets a new worker.
      const replaced = nextLog(/^starting a new UDF worker in place of one that ended$/);
      expect((await udfs.fill(at, { column: 'v', udfPath: udf.chatty, inputColumns: null, filter: 'a = 2' })).rows).toBe(1);
      expect((await replaced).pid).toBe(pid);
      const next = logs.filter((l) => l.message === 'chatty sees 2').pop();
      expect(next?.pid).toBeDefined();
      expect(next?.pid).not.toBe(pid);
      expect((await readAll(at)).filter((r) => r.v !== (r.a === 1 || r.a === 2 ? r.a + 1 : -1))).toEqual([]);
    });

    it('a fill past its timeout fails as a UdfFailure and its worker is replaced', async () => {
      const timed = await LancedbEngine.start(undefined, { udf: { fillTimeoutMs: 2_000, log } });
      try {
        const { at, udf } = await fresh();
        const failure = await timed.udfs?.fill(at, { column: 'v', udfPath: udf.sleeps, inputColumns: null, filter: 'true' }).catch((e: unknown) => e);
        expect(failure).toBeInstanceOf(UdfFailure);
        expect((failure as UdfFailure).message).toMatch(/a fill of column \w+ did not finish within 2000 ms/);
        expect((await timed.udfs?.fill(at, { column: 'v', udfPath: udf.double, inputColumns: null, filter: 'a = 4' }))?.rows).toBe(1);
      } finally {
        await timed.close();
      }
    });

    it('an engine whose Python cannot run the worker does not start, and says how to install it', async () => {
      await expect(LancedbEngine.start(undefined, { udf: { python: '/nonexistent/python', log } })).rejects.toThrow(/scripts\/install-udf-worker\.sh/);
      expect((await LancedbEngine.start().then(async (e) => [e.udfs, await e.close()]))[0]).toBeUndefined();
    });

    /**
     * A managed table `<name>/t` of 20 rows in one fragment with `double` stored, and a fill of
     * `a >= 10` whose commit meets `meanwhile` (another writer's commit, through the same
     * coordinator, of the version the fill was about to take). Returns the fill's outcome.
     */
    async function fillMeeting(
      name: string,
      meanwhile: (at: DatasetLocation) => Promise<unknown>,
    ): Promise<{ outcome: unknown; at: DatasetLocation; creates: number[] }> {
      const root = fx.root;
      const deps = withSettings(localCatalogDeps(root.store, root.root, engine), { managedVersioningDefault: true, leaseMs: 30_000 });
      const versions = new TableVersionService(deps, new TransactionLog(root.store), { leaseMs: 30_000 });
      const tables = new TableService(deps, (...a) => versions.coordinatorFor(...a));
      await new NamespaceService(deps).create(ctx, [name], {});
      await tables.create(ctx, [name, 't'], { arrowIpcStream: rowsStream(20) });
      const data = new DataTables(deps, versions);
      const creates: number[] = [];
      const outcome = await data
        .write(ctx, [name, 't'], async (table) => {
          const coordinator = table.at.coordinator as CommitCoordinator;
          const udfPath = await putUdf(root, table.dir.key, 'double');
          return udfs.fill(
            {
              ...table.at,
              coordinator: {
                latest: () => coordinator.latest(),
                describe: (v) => coordinator.describe(v),
                list: () => coordinator.list(),
                create: async (request) => {
                  if (creates.push(request.version) === 1)
                    await meanwhile({ location: table.at.location, storageOptions: table.at.storageOptions, coordinator });
                  return coordinator.create(request);
                },
              },
            },
            { column: 'v', udfPath, inputColumns: null, filter: 'a >= 10' },
          );
        })
        .catch((e: unknown) => e);
      return { outcome, at: (await data.open(ctx, [name, 't'])).at, creates };
    }

    it('on a table with managed versioning the fill commits through the commit coordinator', async () => {
      const { outcome, at, creates } = await fillMeeting('managed', async () => undefined);
      expect(outcome).toEqual({ rows: 10, version: 2 });
      expect(creates).toEqual([2]);
      expect((await at.coordinator?.latest())?.version).toBe(2);
      expect((await readAll(at)).filter((r) => r.v !== (r.a >= 10 ? r.a * 2 : -1))).toEqual([]);
    });

    // Invariant: a fill commits all the rows it computed in one version made from the version it
    // read, or nothing. Another writer that commits first either leaves the fill compatible (Lance
    // rebases it and both writes stay) or makes it fail as a conflict; no write is lost.
    it('a fill whose commit meets an append is rebased over it: both writes stay', async () => {
      const { outcome, at, creates } = await fillMeeting('race1', (other) => engine.rows.insert(other, rowsStream(5, 100), 'append'));
      expect(outcome).toEqual({ rows: 10, version: 3 });
      expect(creates).toEqual([2, 3]);
      const rows = await readAll(at);
      expect(rows.length).toBe(25);
      expect(rows.filter((r) => r.v !== (r.a >= 10 && r.a < 20 ? r.a * 2 : -1))).toEqual([]);
    });

    it('a fill whose commit meets a write to the rows of its fragment fails as a conflict and changes nothing', async () => {
      const { outcome, at, creates } = await fillMeeting('race2', (other) => engine.rows.update(other, [['v', '100']], 'a < 5'));
      expect(outcome).toBeInstanceOf(EngineError);
      expect(outcome).toMatchObject({ kind: 'conflict' });
      expect(creates[0]).toBe(2);
      const rows = await readAll(at);
      expect(rows.filter((r) => r.v !== (r.a < 5 ? 100 : -1))).toEqual([]);
    });

    it(`rates a fill of 100,000 rows in chunks of 10,000 (scalar a * 2)`, { timeout: 300_000 }, async () => {
      const key = 'rate.lance/';
      const at: DatasetLocation = { location: fx.root.store.location('rate.lance'), storageOptions: {} };
      await engine.createDataset(at, rowsStream(100_000), 'create');
      const udfPath = await putUdf(fx.root, key, 'double');
      const started = performance.now();
      for (let chunk = 0; chunk < 10; chunk++) {
        const filter = `_rowid >= ${chunk * 10_000} AND _rowid < ${(chunk + 1) * 10_000}`;
        expect((await udfs.fill(at, { column: 'v', udfPath, inputColumns: null, filter })).rows).toBe(10_000);
      }
      const elapsed = performance.now() - started;
      expect((await readAll(at)).filter((r) => r.v !== r.a * 2)).toEqual([]);
      console.log(
        `UDF fill of 100,000 rows in 10 fills of 10,000 (scalar a * 2, one fill after another): ${elapsed.toFixed(0)} ms, ${Math.round(100_000 / (elapsed / 1000)).toLocaleString('en')} rows/s`,
      );
    });
  });

  const s3 = s3Backends()[0];
  // udf_execution ray: the same fills, the UDF called in tasks on a one-node Ray cluster.
  describe('with the UDF calls sent to a Ray cluster', () => {
    const fx = useRoot(localBackend);
    let cluster: RayCluster | undefined;
    let onRay: LancedbEngine | undefined;
    beforeAll(async () => {
      cluster = await startRayCluster(DEFAULT_UDF_PYTHON);
      onRay = await LancedbEngine.start(undefined, { udf: { workers: 1, log, rayAddress: cluster.address } });
    }, 180_000);
    afterAll(async () => {
      await onRay?.close();
      await cluster?.stop();
    }, 120_000);
    let seq = 0;

    it('fills a _rowid range and a filter row by row, and a UDF that raises is a UdfFailure with its message', { timeout: 180_000 }, async () => {
      const rayUdfs = onRay?.udfs;
      if (!rayUdfs) throw new Error('no UDFs on the Ray engine');
      const { at, udf } = await threeFragments(fx.root, `ray${++seq}`);
      const selected = (r: Row) => r.a >= 5 && r.a < 25 && r.a % 3 !== 0;
      const filled = await rayUdfs.fill(at, {
        column: 'v',
        udfPath: udf.double,
        inputColumns: null,
        filter: `_rowid >= 5 AND _rowid < ${2n * FRAGMENT + 5n} AND a % 3 <> 0`,
      });
      expect(filled.rows).toBe(13);
      expect((await readAll(at)).filter((r) => r.v !== (selected(r) ? r.a * 2 : -1))).toEqual([]);
      const failure = await rayUdfs.fill(at, { column: 'v', udfPath: udf.raises, inputColumns: null, filter: 'true' }).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(UdfFailure);
      expect((failure as UdfFailure).message).toMatch(/ValueError: cannot compute row a=7/);
    });
  });

  describe.skipIf(!s3)(`on ${s3?.name ?? 'S3 (off)'}`, () => {
    const fx = useRoot(s3 ?? localBackend);

    it('opens, reads the envelope and commits through the resolver with the storage options', async () => {
      const { at, udf } = await threeFragments(fx.root, 's3t');
      expect(at.location).toMatch(/^s3:\/\//);
      expect((await udfs.fill(at, { column: 'v', udfPath: udf.double, inputColumns: null, filter: 'a % 2 = 0' })).rows).toBe(15);
      expect((await readAll(at)).filter((r) => r.v !== (r.a % 2 === 0 ? r.a * 2 : -1))).toEqual([]);
    });
  });
});
