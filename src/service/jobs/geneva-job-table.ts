import type { JsonArrowSchema } from '../../engine/json-arrow-schema.js';
import { EngineError } from '../../engine/lance-engine.js';
import { formatFieldPath } from '../../model/columns.js';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { SYSTEM_NAMESPACE } from '../catalog/system-namespace.js';
import type { ServiceLogger } from '../context/logger.js';
import type { RequestContext } from '../context/request-context.js';
import { backoffMs, sleep } from '../coordination/backoff.js';
import type { DataTables } from '../data/data-tables.js';
import type { TransactionRecord } from '../transactions/transaction-log.js';
import type { GenevaJob } from './job.js';

// Geneva follows a job through its row in the Lance table `__system$geneva_jobs` (its JobRecord:
// geneva/jobs/jobs.py), polling `job_id = '<id>'`. This module keeps that row current from the
// job's transaction record, which stays the job's source of truth (DescribeTransaction).
//
// - The row is inserted (PENDING) before the job's 202 is answered: the client, which then
//   "launches" the job itself, finds the row and only updates its own columns (config, input and
//   output columns), so there is exactly one row per job. The table (and `__system`) are created
//   here when missing, with Geneva's schema; a client that creates it first is as good.
// - Afterwards only the job's owner writes the row, and only the columns Geneva leaves to the
//   server (status, metrics, events, updated_at, completed_at), through a merge on job_id that
//   updates matched rows only: a client's concurrent update of its own columns is never undone.
// - A row once DONE, FAILED or CANCELLED never changes again (the merge updates only rows not in
//   such a status), so a write made from an older state of the job that lands late cannot undo
//   the end. A runner on another replica may take the job before its row is inserted, and its
//   writes then find no row: after inserting, `launch` writes the row from the job's record as it
//   is by then, so the row ends as the job does either way.
// - The row is a view for Geneva: failing to write it is logged and never fails the job.

export const GENEVA_JOBS_TABLE: readonly string[] = Object.freeze([...SYSTEM_NAMESPACE, 'geneva_jobs']);

const utf8 = { type: 'utf8' };
const stringList = { type: 'list', fields: [{ name: 'item', type: utf8, nullable: true }] };
const timestampUtc = { type: 'timestamp:us:UTC' };

/** Geneva 0.17's JobRecord as an Arrow schema (geneva.utils.schema.attrs_to_arrow_schema of it). */
const JOB_RECORD_SCHEMA: JsonArrowSchema = {
  fields: [
    { name: 'table_name', type: utf8, nullable: false },
    { name: 'column_name', type: utf8, nullable: false },
    { name: 'job_id', type: utf8, nullable: false },
    { name: 'job_type', type: utf8, nullable: false },
    { name: 'object_ref', type: utf8, nullable: true },
    { name: 'status', type: utf8, nullable: false },
    { name: 'launched_at', type: timestampUtc, nullable: false },
    { name: 'completed_at', type: timestampUtc, nullable: true },
    { name: 'config', type: utf8, nullable: false },
    { name: 'launched_by', type: utf8, nullable: true },
    { name: 'manifest_id', type: utf8, nullable: true },
    { name: 'manifest_checksum', type: utf8, nullable: true },
    { name: 'metrics', type: stringList, nullable: true },
    { name: 'events', type: stringList, nullable: true },
    { name: 'updated_at', type: timestampUtc, nullable: true },
    { name: 'cluster_name', type: utf8, nullable: true },
    { name: 'input_columns', type: stringList, nullable: true },
    { name: 'output_columns', type: stringList, nullable: true },
  ],
};

/** The schema of some of the row's columns (job_id first), for a merge that writes only those. */
const schemaOf = (names: readonly string[]): JsonArrowSchema => ({ fields: JOB_RECORD_SCHEMA.fields.filter((f) => names.includes(f.name)) });

/** Geneva's status for a transaction status. */
const GENEVA_STATUS: Record<TransactionRecord['status'], string> = {
  Queued: 'PENDING',
  Running: 'RUNNING',
  Succeeded: 'DONE',
  Failed: 'FAILED',
  Canceled: 'CANCELLED',
};

/** Geneva's statuses of a job that has ended. */
const ENDED = ['DONE', 'FAILED', 'CANCELLED'];

const MAX_CONFLICT_RETRIES = 6;
/** Progress (not status) is written at most this often per job: each write is a commit of the job table. */
const PROGRESS_EVERY_MS = 1000;

const systemContext = (jobId: string): RequestContext => ({ requestId: `job-row-${jobId}`, principal: null, context: {} });

/** What Geneva's row of a job says, from the job's transaction record. */
function rowState(record: TransactionRecord, job: GenevaJob, now: Date): Record<string, unknown> {
  const status = GENEVA_STATUS[record.status];
  const total = Number(record.properties.rows_total ?? (job.kind === 'backfill_column' ? job.plan?.rows : undefined) ?? 0);
  const done = Number(record.properties.rows_done ?? job.rows_done);
  const terminal = ENDED.includes(status);
  const metric = (name: string, n: number, desc: string, of = total) => JSON.stringify({ name, n, total: of, done: terminal || n >= of, desc });
  const events: string[] = [];
  if (record.status !== 'Queued') events.push(`Job running (attempt ${job.attempts})`);
  if (status === 'DONE') events.push('Job completed with status DONE');
  else if (status === 'FAILED') events.push(`Job failed: ${record.properties.error ?? 'no details'}`);
  else if (status === 'CANCELLED') events.push('Job cancelled');
  // A refresh's result (Geneva's RefreshJobResult) is read from rows_refreshed and writer_fragments.
  const fragments = Number(record.properties.writer_fragments ?? 0);
  const metrics =
    job.kind === 'refresh_materialized_view'
      ? [metric('rows_refreshed', done, 'Rows refreshed'), metric('writer_fragments', fragments, 'Fragments written', fragments)]
      : [metric('rows_checkpointed', done, 'Rows checkpointed'), metric('rows_ready_for_commit', done, 'Rows committed')];
  return {
    job_id: record.id,
    status,
    metrics,
    events,
    updated_at: now,
    completed_at: terminal ? now : null,
  };
}

/** The row's columns that say what a job is about (Geneva's client writes column_name "" for a refresh). */
function describedJob(job: GenevaJob): Record<'column_name' | 'job_type' | 'config' | 'input_columns' | 'output_columns', unknown> {
  if (job.kind === 'refresh_materialized_view') {
    return { column_name: '', job_type: 'REFRESH', config: JSON.stringify({ src_version: job.src_version }), input_columns: null, output_columns: null };
  }
  return {
    column_name: job.column,
    job_type: 'BACKFILL',
    config: JSON.stringify({
      where: job.where ?? null,
      read_version: job.read_version ?? null,
      checkpoint_size: job.chunk_rows,
      commit_granularity: job.commit_granularity,
    }),
    input_columns: job.udf?.inputs ?? null,
    output_columns: [formatFieldPath([job.column])],
  };
}

export class GenevaJobTable {
  private readonly lastProgress = new Map<string, { status: string; at: number }>();

  constructor(
    private readonly tables: DataTables,
    /** Creates the job table with the given Arrow IPC stream when it is missing (ExistOk). */
    private readonly createTable: (ctx: RequestContext, id: string[], arrowIpcStream: Buffer) => Promise<unknown>,
    private readonly logger?: ServiceLogger,
  ) {}

  /**
   * Inserts the job's PENDING row (the table created first if needed), then brings it up to the
   * job's record as `current` reads it then; logged, never thrown.
   */
  async launch(record: TransactionRecord, job: GenevaJob, launchedBy: string | null, current: () => Promise<TransactionRecord | null>): Promise<void> {
    const now = new Date(record.created_at);
    const row = {
      table_name: job.table_id[job.table_id.length - 1] ?? '',
      job_id: record.id,
      object_ref: null,
      status: 'PENDING',
      launched_at: now,
      completed_at: null,
      launched_by: launchedBy,
      manifest_id: null,
      manifest_checksum: null,
      metrics: [],
      events: [],
      updated_at: now,
      cluster_name: null,
      ...describedJob(job),
    };
    await this.guarded(record.id, 'insert', async () => {
      const ctx = systemContext(record.id);
      await this.ensureTable(ctx);
      await this.merge(ctx, [row], JOB_RECORD_SCHEMA, { insert: true });
      const now = await current();
      if (now && now.status !== 'Queued') await this.write(now, job);
    });
  }

  /**
   * The job's record changed (taken, checkpointed, finished, canceled): writes the row's status,
   * metrics and events. A change of progress alone is written at most every PROGRESS_EVERY_MS.
   */
  async changed(record: TransactionRecord, job: GenevaJob): Promise<void> {
    const status = GENEVA_STATUS[record.status];
    const last = this.lastProgress.get(record.id);
    if (last && last.status === status && Date.now() - last.at < PROGRESS_EVERY_MS) return;
    if (ENDED.includes(status)) this.lastProgress.delete(record.id);
    else this.lastProgress.set(record.id, { status, at: Date.now() });
    await this.guarded(record.id, `status ${status}`, () => this.write(record, job));
  }

  /** Writes the row's server-side columns from the job's record (matched rows not yet ended only). */
  private write(record: TransactionRecord, job: GenevaJob): Promise<void> {
    const state = rowState(record, job, new Date());
    return this.merge(systemContext(record.id), [state], schemaOf(Object.keys(state)), { insert: false });
  }

  private async ensureTable(ctx: RequestContext): Promise<void> {
    try {
      await this.tables.open(ctx, [...GENEVA_JOBS_TABLE]);
      return;
    } catch (e) {
      if (
        !(
          e instanceof NamespaceError &&
          (e.code === ErrorCode.TableNotFound || e.code === ErrorCode.NamespaceNotFound || e.code === ErrorCode.InvalidTableState)
        )
      )
        throw e;
    }
    try {
      await this.createTable(ctx, [...GENEVA_JOBS_TABLE], this.tables.engine.encodeRows(JOB_RECORD_SCHEMA, []));
    } catch (e) {
      // Created meanwhile (by the client or another replica): as good.
      if (!(e instanceof NamespaceError && e.code === ErrorCode.TableAlreadyExists)) throw e;
    }
  }

  /** Merges rows on job_id: inserting missing ones (`insert`) or updating matched ones only. */
  private async merge(ctx: RequestContext, rows: Array<Record<string, unknown>>, schema: JsonArrowSchema, options: { insert: boolean }): Promise<void> {
    const stream = this.tables.engine.encodeRows(schema, rows);
    for (let attempt = 0; ; attempt++) {
      try {
        await this.tables.write(ctx, [...GENEVA_JOBS_TABLE], (table) =>
          this.tables.engine.rows.mergeInsert(table.at, stream, {
            on: 'job_id',
            whenMatchedUpdateAll: !options.insert,
            ...(options.insert ? {} : { updateAllWhere: `target.status NOT IN (${ENDED.map((s) => `'${s}'`).join(', ')})` }),
            whenNotMatchedInsertAll: options.insert,
            whenNotMatchedBySourceDelete: false,
          }),
        );
        return;
      } catch (e) {
        if (!(e instanceof EngineError && e.kind === 'conflict') || attempt >= MAX_CONFLICT_RETRIES) throw e;
        await sleep(backoffMs(attempt, 20, 500));
      }
    }
  }

  private async guarded(jobId: string, what: string, fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (e) {
      this.logger?.warn({ err: e, job: jobId }, `could not write the job's row in ${GENEVA_JOBS_TABLE.join('$')} (${what})`);
    }
  }
}
