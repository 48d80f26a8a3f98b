import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { type CommitCoordinator, type DatasetLocation, EngineError } from '../../src/engine/lance-engine.js';
import { readManifestIndices } from '../../src/engine/lance-format/manifest-indices.js';
import { LancedbEngine } from '../../src/engine/lancedb/engine.js';
import type { IndexSpec } from '../../src/engine/ports/indices.js';
import { DEFAULT_INDEX_PYTHON } from '../../src/engine/pylance/pylance-worker.js';
import { NamespaceService } from '../../src/service/catalog/namespace-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { DataTables } from '../../src/service/data/data-tables.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersions } from '../../src/service/versions/dataset-versions.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import { connectTable } from '../support/arrow-data.js';
import { localBackend, type TestRoot } from '../support/backends.js';
import { localCatalogDeps, withSettings } from '../support/local-catalog.js';
import { recordingWorkerLog } from '../support/worker-log.js';

// The second Lance engine (src/engine/pylance/, worker/index_worker.py): an index build on a table
// with managed versioning commits through its commit coordinator, and when that commit meets
// appends Lance rebases it over them (the appended rows stay, unindexed); a worker killed in the
// middle of a build fails it as unavailable and the next build gets a new worker; without a Python
// that runs the worker, the types it builds are 'unsupported' with how to install it.

const available = existsSync(DEFAULT_INDEX_PYTHON);
if (!available) console.warn(`skipping the index worker tests: no ${DEFAULT_INDEX_PYTHON}; run scripts/install-index-worker.sh`);

const ctx: RequestContext = { requestId: 'index-worker-test', principal: null, context: {} };

/** Rows {id, text} for id in [from, from + n). */
function rowsStream(n: number, from = 0): Buffer {
  const ids = Array.from({ length: n }, (_, i) => from + i);
  const table = new arrow.Table({
    id: arrow.vectorFromArray(BigInt64Array.from(ids.map(BigInt))),
    text: arrow.vectorFromArray(
      ids.map((i) => `row ${i}`),
      new arrow.Utf8(),
    ),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

const spec = (type: IndexSpec['type'], column: string, name: string): IndexSpec => ({ column, type, name, vector: {}, fts: {} });

describe.skipIf(!available)('the index worker (pylance; needs .venv-index: scripts/install-index-worker.sh)', () => {
  const { log, lines: logs, next: nextLog } = recordingWorkerLog();
  let engine: LancedbEngine;
  let root: TestRoot;

  beforeAll(async () => {
    root = await localBackend.newRoot();
    engine = await LancedbEngine.start(undefined, { indexWorkers: { log } });
  });
  afterAll(async () => {
    await engine?.close();
    await root?.dispose();
  });

  /**
   * A managed table `<name>/t` of 20 rows, and a build of `index` whose first commit (through the
   * coordinator) first runs `meanwhile` (and so do its next ones up to the `lost`th); the build's
   * outcome, the versions it asked to create, and the table's location and directory.
   */
  async function buildMeeting(name: string, index: IndexSpec, meanwhile: (at: DatasetLocation) => Promise<unknown>, lost = 0) {
    const deps = withSettings(localCatalogDeps(root.store, root.root, engine), { managedVersioningDefault: true, leaseMs: 30_000 });
    const versions = new TableVersionService(deps, new TransactionLog(root.store), { leaseMs: 30_000 });
    await new NamespaceService(deps).create(ctx, [name], {});
    await new TableService(deps, (...a) => versions.coordinatorFor(...a)).create(ctx, [name, 't'], { arrowIpcStream: rowsStream(20) });
    const data = new DataTables(deps, versions);
    const creates: number[] = [];
    const outcome = await data
      .write(ctx, [name, 't'], async (table) => {
        const coordinator = table.at.coordinator as CommitCoordinator;
        return engine.indices.createIndex(
          {
            ...table.at,
            coordinator: {
              latest: () => coordinator.latest(),
              describe: (v) => coordinator.describe(v),
              list: () => coordinator.list(),
              create: async (request) => {
                if (creates.push(request.version) <= Math.max(1, lost)) {
                  await meanwhile({ location: table.at.location, storageOptions: table.at.storageOptions, coordinator });
                }
                return coordinator.create(request);
              },
            },
          },
          index,
        );
      })
      .catch((e: unknown) => e);
    const opened = await data.open(ctx, [name, 't']);
    return { outcome, creates, at: opened.at, versions: new TableVersions(opened.dir) };
  }

  async function ids(at: DatasetLocation): Promise<number[]> {
    const table = await connectTable(at.location, at.storageOptions);
    try {
      return (await table.query().select(['id']).toArray()).map((r: { id: bigint }) => Number(r.id)).sort((a, b) => a - b);
    } finally {
      table.close();
    }
  }

  it('commits a build on a managed table through its commit coordinator', async () => {
    const { outcome, creates, at, versions } = await buildMeeting('managed', spec('ZONEMAP', 'id', 'id_zm'), async () => undefined);
    expect(outcome).toEqual({ name: 'id_zm', version: 2 });
    expect(creates).toEqual([2]);
    expect((await at.coordinator?.latest())?.version).toBe(2);
    const file = await versions.readManifestFile(2);
    expect(file && readManifestIndices(file).map((i) => [i.name, i.type, i.numIndexedRows])).toEqual([['id_zm', 'ZONEMAP', 20]]);
  });

  // Invariant: a build commits one CreateIndex made from the version it read. Appends committed
  // before it (here: in the slot it was about to take) are rebased under it, as rows it does not
  // cover; none is lost.
  it('a build whose commit meets appends is rebased over them: their rows stay, unindexed', async () => {
    const { outcome, creates, at, versions } = await buildMeeting('race', spec('NGRAM', 'text', 'text_ngram'), async (other) => {
      for (let i = 0; i < 3; i++) await engine.rows.insert(other, rowsStream(5, 100 + 5 * i), 'append');
    });
    expect(outcome).toEqual({ name: 'text_ngram', version: 5 });
    expect(creates).toEqual([2, 5]);
    const all = [...Array.from({ length: 20 }, (_, i) => i), ...Array.from({ length: 15 }, (_, i) => 100 + i)];
    expect(await ids(at)).toEqual(all);
    const file = await versions.readManifestFile(5);
    expect(file && readManifestIndices(file).map((i) => [i.name, i.type, i.numIndexedRows, i.numUnindexedRows])).toEqual([['text_ngram', 'NGRAM', 20, 15]]);
    // A filter the index answers, with a scan of the rows it does not cover, as brute force: row 10, and 100 to 109.
    expect(await engine.columns.countRows(at, "contains(text, 'row 10')")).toBe(all.filter((i) => `row ${i}`.includes('row 10')).length);
  });

  // A build whose commit lost every rebase Lance tries (an append landing before each of its 21
  // commits) is built again from the latest version: a client sees a conflict only when every
  // build lost. The appends' rows all stay.
  it("a build whose commit loses all of Lance's retries to appends is built again and commits", { timeout: 120_000 }, async () => {
    let appended = 0;
    const { outcome, creates, at } = await buildMeeting(
      'starved',
      spec('ZONEMAP', 'id', 'id_zm'),
      (other) => engine.rows.insert(other, rowsStream(1, 100 + appended++), 'append'),
      21,
    );
    expect(appended).toBe(21);
    expect(outcome).toEqual({ name: 'id_zm', version: 23 });
    expect(creates.length).toBe(22);
    expect(await ids(at)).toEqual([...Array.from({ length: 20 }, (_, i) => i), ...Array.from({ length: 21 }, (_, i) => 100 + i)]);
  });

  it('a worker killed in the middle of a build fails it as unavailable and changes nothing; the next build gets a new worker', async () => {
    let pid: number | undefined;
    const { outcome, at, versions } = await buildMeeting('killed', spec('BLOOMFILTER', 'text', 'text_bf'), async () => {
      // The worker waits for its commit's answer: it dies with the build unfinished.
      pid = logs.filter((l) => l.message === 'index worker ready').pop()?.pid;
      if (pid === undefined) throw new Error('no index worker pid');
      process.kill(pid, 'SIGKILL');
      throw new EngineError('conflict', 'the version is not taken: the worker is gone');
    });
    expect(outcome).toBeInstanceOf(EngineError);
    expect(outcome).toMatchObject({ kind: 'unavailable', message: expect.stringMatching(/exited on signal SIGKILL while building index text_bf/) });
    expect((await at.coordinator?.latest())?.version).toBe(1);
    const replaced = nextLog(/^starting a new index worker in place of one that ended$/);
    expect(await engine.indices.createIndex(at, spec('BLOOMFILTER', 'text', 'text_bf'))).toEqual({ name: 'text_bf', version: 2 });
    expect((await replaced).pid).toBe(pid);
    const file = await versions.readManifestFile(2);
    expect(file && readManifestIndices(file).map((i) => i.type)).toEqual(['BLOOMFILTER']);
  });

  it('without a Python that runs the worker, the types it builds are unsupported, with how to install it', async () => {
    const at: DatasetLocation = { location: root.store.location('plain.lance'), storageOptions: {} };
    await engine.createDataset(at, rowsStream(5), 'create');
    for (const python of ['/nonexistent/python', process.execPath]) {
      const without = await LancedbEngine.start(undefined, { indexWorkers: { python, log } });
      try {
        const failure = await without.indices.createIndex(at, spec('ZONEMAP', 'id', 'id_zm')).catch((e: unknown) => e);
        expect(failure).toBeInstanceOf(EngineError);
        expect(failure).toMatchObject({ kind: 'unsupported', message: expect.stringMatching(/scripts\/install-index-worker\.sh/) });
        // The types @lancedb/lancedb builds do not need it.
        expect((await without.indices.createIndex(at, spec('BTREE', 'id', 'id_bt'))).name).toBe('id_bt');
        await without.indices.dropIndex(at, 'id_bt');
      } finally {
        await without.close();
      }
    }
  });
});
