import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LancedbEngine } from '../../src/engine/lancedb/engine.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { DataTables } from '../../src/service/data/data-tables.js';
import type { BackfillJob } from '../../src/service/jobs/backfill-plan.js';
import { GENEVA_JOBS_TABLE, GenevaJobTable } from '../../src/service/jobs/geneva-job-table.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog, type TransactionRecord } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import { connectTable } from '../support/arrow-data.js';
import { localBackend, type TestRoot } from '../support/backends.js';
import { localCatalogDeps } from '../support/local-catalog.js';

// Geneva's job table (src/service/jobs/geneva-job-table.ts) against the orders its writers can
// land in: a runner on another replica writing the job's end before the row exists, a write made
// from an older state of the job landing after the end, and the row created with `__system` when
// neither exists. Each row is read back from the Lance table itself.

const ctx: RequestContext = { requestId: 'jobs-test', principal: null, context: {} };

const job: BackfillJob = {
  kind: 'backfill_column',
  table_id: ['ns', 'events'],
  column: 'score',
  mode: 'udf',
  expression: '',
  udf: { path: '_udfs/abc', inputs: ['a'] },
  chunk_rows: 100,
  commit_granularity: 1,
  chunks_done: 0,
  rows_done: 0,
  rows_written: 0,
  attempts: 1,
};

const record = (id: string, status: TransactionRecord['status'], properties: Record<string, string> = {}): TransactionRecord => ({
  id,
  status,
  operation: 'backfill_column',
  properties: { rows_total: '1000', rows_done: status === 'Succeeded' ? '1000' : '0', ...properties },
  created_at: '2026-11-23T00:00:00.000Z',
  updated_at: '2026-11-23T00:00:00.000Z',
  job,
});

describe('Geneva job table', () => {
  let root: TestRoot;
  let engine: LancedbEngine;
  let jobs: GenevaJobTable;
  let tables: TableService;

  beforeAll(async () => {
    root = await localBackend.newRoot();
    engine = await LancedbEngine.start();
    const deps = localCatalogDeps(root.store, root.root, engine);
    const versions = new TableVersionService(deps, new TransactionLog(root.store), { leaseMs: 30_000 });
    tables = new TableService(deps, (...a) => versions.coordinatorFor(...a));
    jobs = new GenevaJobTable(new DataTables(deps, versions), (c, id, arrowIpcStream) => tables.create(c, id, { arrowIpcStream, mode: 'ExistOk' }));
  });
  afterAll(async () => {
    await engine?.close();
    await root?.dispose();
  });

  async function rowsOf(id: string): Promise<Array<{ status: string; events: string[]; table_name: string; column_name: string }>> {
    const described = await tables.describe(ctx, [...GENEVA_JOBS_TABLE], {}, { withTableUri: false, loadDetailedMetadata: false, checkDeclared: false });
    const table = await connectTable(described.location ?? '', {});
    try {
      const rows = (await table.query().where(`job_id = '${id}'`).toArray()) as Array<{
        status: string;
        events: { toArray(): string[] };
        table_name: string;
        column_name: string;
      }>;
      return rows.map((r) => ({ status: r.status, events: r.events.toArray(), table_name: r.table_name, column_name: r.column_name }));
    } finally {
      table.close();
    }
  }

  it('creates __system and the table with the first row, PENDING, named after the table and column', async () => {
    await jobs.launch(record('j1', 'Queued'), job, 'alice', async () => record('j1', 'Queued'));
    expect(await rowsOf('j1')).toEqual([{ status: 'PENDING', events: [], table_name: 'events', column_name: 'score' }]);
  });

  it('ends DONE when a runner elsewhere finished the job before the row was inserted', async () => {
    // The runner's writes find no row yet...
    await jobs.changed(record('j2', 'Running'), job);
    await jobs.changed(record('j2', 'Succeeded'), job);
    expect(await rowsOf('j2')).toEqual([]);
    // ...and the launch that inserts it then brings it to the record as it is by then.
    await jobs.launch(record('j2', 'Queued'), job, 'alice', async () => record('j2', 'Succeeded'));
    expect(await rowsOf('j2')).toMatchObject([{ status: 'DONE', events: ['Job running (attempt 1)', 'Job completed with status DONE'] }]);
  });

  it('never changes a row that has ended: a late write from an older state of the job is dropped', async () => {
    await jobs.launch(record('j3', 'Queued'), job, 'alice', async () => record('j3', 'Queued'));
    await jobs.changed(record('j3', 'Failed', { error: 'row 7 is cursed' }), job);
    await jobs.changed(record('j3', 'Running'), job);
    expect(await rowsOf('j3')).toMatchObject([{ status: 'FAILED', events: ['Job running (attempt 1)', 'Job failed: row 7 is cursed'] }]);
  });
});
