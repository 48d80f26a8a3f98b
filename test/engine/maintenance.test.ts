import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { type CommitCoordinator, type DatasetLocation, EngineError } from '../../src/engine/lance-engine.js';
import { LancedbEngine } from '../../src/engine/lancedb/engine.js';
import { DEFAULT_INDEX_PYTHON } from '../../src/engine/pylance/pylance-worker.js';
import { DEFAULT_UDF_PYTHON } from '../../src/engine/python-udf/python-udfs.js';
import { NamespaceService } from '../../src/service/catalog/namespace-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { DataTables } from '../../src/service/data/data-tables.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import { connectTable } from '../support/arrow-data.js';
import { backends, localBackend, type TestRoot } from '../support/backends.js';
import { testRootCatalogDeps, withSettings } from '../support/local-catalog.js';
import { type RayCluster, startRayCluster } from '../support/ray-cluster.js';
import { recordingWorkerLog } from '../support/worker-log.js';

// The engine's table maintenance (src/engine/pylance/pylance-maintenance.ts, run by pylance's
// worker): inspect sees what piled up; compact and optimizeIndices commit once, through a managed
// table's commit coordinator, and when their commit meets writes Lance rebases it over them or
// the maintenance loses as a conflict: never a lost, revived or duplicated row.

const available = existsSync(DEFAULT_INDEX_PYTHON);
if (!available) console.warn(`skipping the maintenance tests: no ${DEFAULT_INDEX_PYTHON}; run scripts/install-index-worker.sh`);

const ctx: RequestContext = { requestId: 'maintenance-test', principal: null, context: {} };

/** Rows {id, n} for id in [from, from + count); n = 0. */
function rowsStream(count: number, from = 0): Buffer {
  const ids = Array.from({ length: count }, (_, i) => from + i);
  const table = new arrow.Table({
    id: arrow.vectorFromArray(BigInt64Array.from(ids.map(BigInt))),
    n: arrow.vectorFromArray(Int32Array.from(ids.map(() => 0))),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

/** A fragmented table under a root's services, with an engine; and a dataset's rows. */
function tableHelpers(rootOf: () => TestRoot, engineOf: () => LancedbEngine) {
  /**
   * A table `<ns>/t` made of `appends` appends of 10 rows (ids 0..), managed or not; its services.
   * `open` gives its location as a write sees it, with a coordinator whose creates are recorded
   * and whose first create first runs `meanwhile` (with the plain location), once set.
   */
  async function fragmentedTable(ns: string, appends: number, managed: boolean) {
    const root = rootOf();
    const engine = engineOf();
    const deps = withSettings(testRootCatalogDeps(root, root.store, engine), { managedVersioningDefault: managed, leaseMs: 30_000 });
    const versions = new TableVersionService(deps, new TransactionLog(root.store), { leaseMs: 30_000 });
    await new NamespaceService(deps).create(ctx, [ns], {});
    await new TableService(deps, (...a) => versions.coordinatorFor(...a)).create(ctx, [ns, 't'], { arrowIpcStream: rowsStream(10) });
    const data = new DataTables(deps, versions);
    const plain = (await data.open(ctx, [ns, 't'])).at;
    for (let i = 1; i < appends; i++) await engine.rows.insert(plain, rowsStream(10, 10 * i), 'append');
    const creates: number[] = [];
    let meanwhile: ((at: DatasetLocation) => Promise<unknown>) | undefined;
    let meanwhileAt = 1;
    /** Runs `fn` under a write lease on the table, as the service's jobs do. */
    const write = <T>(fn: (at: DatasetLocation) => Promise<T>): Promise<T> =>
      data.write(ctx, [ns, 't'], async (table) => {
        const coordinator = table.at.coordinator;
        if (!coordinator) return fn(table.at);
        const recording: CommitCoordinator = {
          latest: () => coordinator.latest(),
          describe: (v) => coordinator.describe(v),
          list: () => coordinator.list(),
          create: async (request) => {
            if (creates.push(request.version) === meanwhileAt && meanwhile)
              await meanwhile({ location: table.at.location, storageOptions: table.at.storageOptions, coordinator });
            return coordinator.create(request);
          },
        };
        return fn({ ...table.at, coordinator: recording });
      });
    return {
      ns,
      plain,
      write,
      creates,
      versions,
      open: async (branch?: string) => (await data.open(ctx, [ns, 't'], branch === undefined ? {} : { branch })).at,
      /** `fn` runs before the `atCreate`th create (the first by default) of the writes that follow. */
      meanwhile: (fn: (at: DatasetLocation) => Promise<unknown>, atCreate = 1) => {
        meanwhile = fn;
        meanwhileAt = creates.length + atCreate;
      },
    };
  }

  async function rows(at: DatasetLocation): Promise<Array<[number, number]>> {
    const table = await connectTable(at.location, at.storageOptions);
    try {
      return (await table.query().select(['id', 'n']).toArray())
        .map((r: { id: bigint; n: number }): [number, number] => [Number(r.id), r.n])
        .sort((a, b) => a[0] - b[0]);
    } finally {
      table.close();
    }
  }

  return { fragmentedTable, rows };
}

describe.skipIf(!available).each(backends())('table maintenance by the engine, on $name', (backend) => {
  const { log, lines: logs } = recordingWorkerLog();
  let engine: LancedbEngine;
  let root: TestRoot;

  beforeAll(async () => {
    root = await backend.newRoot();
    engine = await LancedbEngine.start(undefined, { indexWorkers: { log } });
  });
  afterAll(async () => {
    await engine?.close();
    await root?.dispose();
  });
  const { fragmentedTable, rows } = tableHelpers(
    () => root,
    () => engine,
  );

  /** Rows of the dataset at `version` (the latest when undefined), of `branch` when given. */
  async function countAt(at: DatasetLocation, version: number | undefined, branch?: string): Promise<number> {
    const table = await connectTable(at.location, at.storageOptions, branch);
    try {
      if (version !== undefined) await table.checkout(version);
      return await table.countRows();
    } finally {
      table.close();
    }
  }

  for (const managed of [false, true]) {
    const label = managed ? ' (managed versioning)' : '';

    it(`inspects a table of small appends and compacts it into one fragment, through the commit path${label}`, async () => {
      const t = await fragmentedTable(managed ? 'compactm' : 'compact', 20, managed);
      await engine.rows.delete(t.plain, 'id < 5');
      const before = await engine.maintenance.inspect(t.plain);
      expect(before).toMatchObject({ version: 21, fragments: 20, smallFragments: 20, rows: 195, deletedRows: 5, indices: [] });
      expect(before.versions.map((v) => v.version)).toEqual(range(1, 21));
      expect(await engine.maintenance.inspect(t.plain, { targetRowsPerFragment: 10 })).toMatchObject({ smallFragments: 1 });
      expect((await engine.maintenance.inspect(t.plain, { withVersions: false })).versions).toEqual([]);

      const result = await t.write((at) => engine.maintenance.compact(at, {}));
      // Lance commits a compaction as two versions: the fragment ids it reserves, then the Rewrite.
      expect(result).toMatchObject({ version: 23, fragmentsBefore: 20, fragmentsAfter: 1, rowsRewritten: 200, rayTasks: 0 });
      expect(result.bytesRewritten).toBeGreaterThan(0);
      expect(t.creates).toEqual(managed ? [22, 23] : []);
      const after = await engine.maintenance.inspect(await t.open());
      expect(after).toMatchObject({ version: 23, fragments: 1, smallFragments: 1, rows: 195, deletedRows: 0 });
      expect(await rows(t.plain)).toEqual(range(5, 195).map((id) => [id, 0]));
      // Nothing left to do: no commit.
      expect(await t.write((at) => engine.maintenance.compact(at, {}))).toMatchObject({ version: null, fragmentsBefore: 1, fragmentsAfter: 1 });
    });

    // Invariant: a compaction commits one Rewrite made from the version it read. Appends committed
    // before it are rebased under it; an update or delete of rows it rewrote makes it lose as a
    // conflict, or is rebased so that its effect stays: the rows are exactly the writers'.
    it.runIf(managed)('a compaction whose commit meets appends, an update and a delete loses no row and revives none (managed versioning)', async () => {
      const t = await fragmentedTable('racem', 10, managed);
      t.meanwhile(async (other) => {
        await engine.rows.insert(other, rowsStream(10, 1000), 'append');
        await engine.rows.update(other, [['n', '1']], 'id >= 20 AND id < 30');
        await engine.rows.delete(other, 'id < 10');
        await engine.rows.insert(other, rowsStream(10, 2000), 'append');
      });
      const outcome = await t.write((at) => engine.maintenance.compact(at, {})).catch((e: unknown) => e);
      const expected = [...range(10, 90), ...range(1000, 10), ...range(2000, 10)].map((id): [number, number] => [id, id >= 20 && id < 30 ? 1 : 0]);
      expect(await rows(t.plain)).toEqual(expected);
      if (outcome instanceof Error) expect(outcome).toMatchObject({ kind: 'conflict' });
      else expect(outcome).toMatchObject({ fragmentsBefore: 10 });
      console.log(
        `${backend.name}: a compaction meeting an update and a delete: ${outcome instanceof Error ? `lost (${(outcome as EngineError).kind})` : 'rebased'}`,
      );
    });

    // A worker killed between the two commits of a compaction (its fragment ids reserved, the
    // Rewrite not committed): the compaction fails as unavailable, the rows are the table's, and
    // the next compaction (in a new worker) does the work.
    it.runIf(managed)('a worker killed in the middle of a compaction changes no row; the next one compacts (managed versioning)', async () => {
      const t = await fragmentedTable('killed', 6, managed);
      t.meanwhile(async () => {
        const pid = logs.filter((l) => l.message === 'index worker ready').pop()?.pid;
        if (pid === undefined) throw new Error('no index worker pid');
        process.kill(pid, 'SIGKILL');
        throw new EngineError('conflict', 'the version is not taken: the worker is gone');
      }, 2);
      const outcome = await t.write((at) => engine.maintenance.compact(at, {})).catch((e: unknown) => e);
      expect(outcome).toMatchObject({ kind: 'unavailable', message: expect.stringMatching(/SIGKILL while compacting a table/) });
      expect(t.creates).toEqual([7, 8]);
      expect(await rows(t.plain)).toEqual(range(0, 60).map((id) => [id, 0]));
      expect((await engine.maintenance.inspect(t.plain)).version).toBe(7);
      t.meanwhile(async () => undefined);
      expect(await t.write((at) => engine.maintenance.compact(at, {}))).toMatchObject({ fragmentsBefore: 6, fragmentsAfter: 1, rowsRewritten: 60 });
      expect(await rows(t.plain)).toEqual(range(0, 60).map((id) => [id, 0]));
    });

    it(`writers appending, updating and deleting while compactions run lose no row and revive or duplicate none${label}`, { timeout: 120_000 }, async () => {
      const t = await fragmentedTable(managed ? 'busym' : 'busy', 10, managed);
      const expected = new Map(range(0, 100).map((id) => [id, 0]));
      let compacting = true;
      const outcomes: string[] = [];
      const compactions = (async () => {
        for (let i = 0; i < 3; i++) {
          const outcome = await t.write((at) => engine.maintenance.compact(at, {})).catch((e: unknown) => e);
          if (outcome instanceof Error && !(outcome instanceof EngineError && outcome.kind === 'conflict')) throw outcome;
          outcomes.push(outcome instanceof Error ? 'conflict' : `v${(outcome as { version: number | null }).version}`);
        }
        compacting = false;
      })();
      // One writer, each write acknowledged before the next: what it was told is what must be there.
      for (let i = 0; compacting || i < 6; i++) {
        const at = await t.open();
        const step = i % 3;
        if (step === 0) {
          await engine.rows.insert(at, rowsStream(10, 1000 + 10 * i), 'append');
          for (const id of range(1000 + 10 * i, 10)) expected.set(id, 0);
        } else if (step === 1) {
          const id = [...expected.keys()][i % expected.size] as number;
          await engine.rows.update(at, [['n', 'n + 1']], `id = ${id}`);
          expected.set(id, (expected.get(id) ?? 0) + 1);
        } else {
          const id = [...expected.keys()][(7 * i) % expected.size] as number;
          await engine.rows.delete(at, `id = ${id}`);
          expected.delete(id);
        }
      }
      await compactions;
      expect(await rows(t.plain)).toEqual([...expected.entries()].sort((a, b) => a[0] - b[0]));
      console.log(`${backend.name}${label}: compactions racing a writer: ${outcomes.join(', ')}`);
    });

    it(`brings every index up to date with the rows appended since it was built, in one commit${label}`, async () => {
      const t = await fragmentedTable(managed ? 'indicesm' : 'indices', 5, managed);
      const index = (column: string, type: 'BTREE' | 'BITMAP') => ({ column, type, name: `${column}_idx`, vector: {}, fts: {} });
      await engine.indices.createIndex(t.plain, index('id', 'BTREE'));
      await engine.indices.createIndex(t.plain, index('n', 'BITMAP'));
      for (let i = 5; i < 8; i++) await engine.rows.insert(t.plain, rowsStream(10, 10 * i), 'append');
      const before = await engine.maintenance.inspect(t.plain);
      expect(before.indices.sort((a, b) => a.name.localeCompare(b.name))).toEqual([
        { name: 'id_idx', unindexedRows: 30 },
        { name: 'n_idx', unindexedRows: 30 },
      ]);
      const result = await t.write((at) => engine.maintenance.optimizeIndices(at));
      expect(result).toEqual({ version: before.version + 1, indicesUpdated: 2, rowsIndexed: 60 });
      expect(t.creates).toEqual(managed ? [before.version + 1] : []);
      expect((await engine.maintenance.inspect(await t.open())).indices.map((i) => i.unindexedRows)).toEqual([0, 0]);
      expect(await engine.columns.countRows(await t.open(), 'id >= 45 AND id < 75')).toBe(30);
      expect(await t.write((at) => engine.maintenance.optimizeIndices(at))).toEqual({ version: null, indicesUpdated: 0, rowsIndexed: 0 });
    });

    // Invariant: a cleanup never removes the latest version, nor any version committed after the
    // one it opened, whatever its cutoff: a writer appending meanwhile loses nothing.
    it(`a cleanup racing appends removes no version they committed and no row${label}`, { timeout: 120_000 }, async () => {
      const t = await fragmentedTable(managed ? 'cleanraceem' : 'cleanrace', 3, managed);
      let cleaning = true;
      const removed: number[] = [];
      const cleanups = (async () => {
        for (let i = 0; i < 4; i++) {
          const result = await t.write((at) => engine.maintenance.cleanupOldVersions(at, { olderThanMillis: Date.now() + 3_600_000, keep: new Set() }));
          removed.push(...result.removed);
        }
        cleaning = false;
      })();
      let next = 30;
      const versions: number[] = [];
      for (; cleaning || next < 60; next += 5) versions.push((await engine.rows.insert(await t.open(), rowsStream(5, next), 'append')).version);
      await cleanups;
      const last = versions[versions.length - 1] as number;
      expect(removed).not.toContain(last);
      expect((await engine.maintenance.inspect(await t.open())).version).toBe(last);
      expect(await rows(t.plain)).toEqual(range(0, next).map((id) => [id, 0]));
    });

    // Invariant: a cleanup removes exactly the versions it is asked to remove on main: never the
    // latest, a tagged version, a branch's base or one in `keep`; nor a branch's own history; and
    // the service's version listing still answers.
    it(`removes old versions but the latest, tagged ones, branches' bases and those kept${label}`, async () => {
      const t = await fragmentedTable(managed ? 'cleanupm' : 'cleanup', 8, managed);
      await engine.tags.create(t.plain, 'release', 3);
      await engine.branches.create(t.plain, 'dev', null, 5);
      await engine.rows.insert(await t.open('dev'), rowsStream(1, 500), 'append');
      await t.write((at) => engine.maintenance.compact(at, {}));
      const before = await engine.maintenance.inspect(await t.open());
      expect(before.versions.map((v) => v.version)).toEqual(range(1, 10));
      // Nothing committed before the first version: nothing goes.
      expect(await t.write((at) => engine.maintenance.cleanupOldVersions(at, { olderThanMillis: 0, keep: new Set() }))).toEqual({
        versionsRemoved: 0,
        bytesRemoved: 0,
        removed: [],
      });
      const result = await t.write((at) => engine.maintenance.cleanupOldVersions(at, { olderThanMillis: Date.now() + 60_000, keep: new Set([7]) }));
      expect(result).toMatchObject({ versionsRemoved: 6, removed: [1, 2, 4, 6, 8, 9] });
      expect(result.bytesRemoved).toBeGreaterThan(0);
      const after = await t.open();
      expect((await engine.maintenance.inspect(after)).versions.map((v) => v.version)).toEqual([3, 5, 7, 10]);
      expect(await rows(after)).toEqual(range(0, 80).map((id) => [id, 0]));
      // Kept versions still read (their data files stayed); the branch's history too.
      expect(await countAt(after, 3)).toBe(30);
      expect(await countAt(after, 5)).toBe(50);
      expect(await countAt(after, 7)).toBe(70);
      expect(await countAt(after, undefined, 'dev')).toBe(51);
      // The service's listing of versions, and its describe of the latest and of a kept one.
      const listed = await t.versions.list(ctx, [t.ns, 't'], {});
      expect(listed.versions.map((v) => v.version)).toEqual([3, 5, 7, 10]);
      const newest = await t.versions.list(ctx, [t.ns, 't'], { descending: true, limit: 1 });
      expect(newest.versions.map((v) => v.version)).toEqual([10]);
      expect(newest.page_token, 'older versions are left: a next page').toBeTruthy();
      expect((await t.versions.describe(ctx, [t.ns, 't'], null)).version.version).toBe(10);
      expect((await t.versions.describe(ctx, [t.ns, 't'], 5)).version.version).toBe(5);
      expect(await t.versions.describe(ctx, [t.ns, 't'], 4).catch((e: unknown) => e)).toMatchObject({ code: 11 });
      // Asked again: nothing more goes.
      expect(await t.write((at) => engine.maintenance.cleanupOldVersions(at, { olderThanMillis: Date.now() + 60_000, keep: new Set([7]) }))).toMatchObject({
        versionsRemoved: 0,
      });
    });
  }
});

describe.skipIf(!available)('compaction on Ray without its Python', () => {
  it("is unsupported, saying how to install the UDF worker's Python", async () => {
    const root = await localBackend.newRoot();
    const engine = await LancedbEngine.start(undefined, { maintenanceRay: { address: '127.0.0.1:1', python: '/nonexistent/python' } });
    try {
      const at: DatasetLocation = { location: root.store.location('plain.lance'), storageOptions: {} };
      await engine.createDataset(at, rowsStream(5), 'create');
      const failure = await engine.maintenance.compact(at, {}).catch((e: unknown) => e);
      expect(failure).toMatchObject({ kind: 'unsupported', message: expect.stringMatching(/scripts\/install-udf-worker\.sh.*--udf-python/) });
    } finally {
      await engine.close();
      await root.dispose();
    }
  });
});

// Past one machine (issue 33 point 5): with a Ray cluster, a compaction whose plan reaches the
// size given rewrites its fragments in Ray tasks and commits once, through a managed table's
// coordinator; below it, in the worker.
describe.skipIf(!available || !existsSync(DEFAULT_UDF_PYTHON)).each(backends())(
  'compaction on a one-node Ray cluster (needs .venv-udf), on $name',
  (backend) => {
    const { log } = recordingWorkerLog();
    let cluster: RayCluster | undefined;
    let engine: LancedbEngine;
    let root: TestRoot;
    beforeAll(async () => {
      root = await backend.newRoot();
      cluster = await startRayCluster(DEFAULT_UDF_PYTHON);
      engine = await LancedbEngine.start(undefined, { indexWorkers: { log }, maintenanceRay: { address: cluster.address, distributeAboveRows: 100 } });
    }, 180_000);
    afterAll(async () => {
      await engine?.close();
      await cluster?.stop();
      await root?.dispose();
    }, 120_000);
    const { fragmentedTable, rows } = tableHelpers(
      () => root,
      () => engine,
    );

    it('rewrites on Ray and commits once through the coordinator; a small plan stays in the worker', { timeout: 180_000 }, async () => {
      const t = await fragmentedTable('ray', 12, true);
      await engine.rows.delete(t.plain, 'id < 5');
      const result = await t.write((at) => engine.maintenance.compact(at, { targetRowsPerFragment: 40 }));
      expect(result).toMatchObject({ fragmentsBefore: 12, rowsRewritten: 120 });
      // Fragments of at most 40 rows: more than one, far fewer than 12.
      expect(result.fragmentsAfter).toBeGreaterThan(1);
      expect(result.fragmentsAfter).toBeLessThan(4);
      expect(result.rayTasks).toBeGreaterThan(0);
      // Two versions, as in the worker: the fragment ids reserved, then the Rewrite.
      expect(t.creates).toEqual([14, 15]);
      expect(await rows(t.plain)).toEqual(range(5, 115).map((id) => [id, 0]));
      const smallTable = await fragmentedTable('raysmall', 5, true);
      expect(await smallTable.write((at) => engine.maintenance.compact(at, {}))).toMatchObject({ rayTasks: 0, fragmentsBefore: 5, fragmentsAfter: 1 });
      expect(await rows(smallTable.plain)).toEqual(range(0, 50).map((id) => [id, 0]));
    });
  },
);
