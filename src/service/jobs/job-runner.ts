import { EngineError, type EngineErrorKind } from '../../engine/lance-engine.js';
import { type ChunkerExpansion, UdfFailure, type UdfOps, type UdtfRun } from '../../engine/ports/udfs.js';
import type { Materialization } from '../../engine/ports/views.js';
import { SOURCE_ROW_ID } from '../../engine/ports/views.js';
import type { Metrics } from '../../metrics/metrics.js';
import { invalidInput, NamespaceError } from '../../model/errors.js';
import type { ServiceLogger } from '../context/logger.js';
import type { RequestContext } from '../context/request-context.js';
import { backoffMs, sleep } from '../coordination/backoff.js';
import { faultPoint } from '../coordination/fault-points.js';
import { Poller, pollIntervalMs, type UnfinishedMarkers } from '../coordination/markers.js';
import type { DataTable, DataTables, OpenTable } from '../data/data-tables.js';
import { udfLocation } from '../data/python-udf-columns.js';
import type { MaintainTableJob } from '../maintenance/maintenance-job.js';
import { TERMINAL } from '../transactions/transaction-log.js';
import { LAST_REFRESHED_VERSION, VIEW_METADATA } from '../views/view-definition.js';
import { type BackfillJob, type Chunk, mismatchFilter, planChunks, sqlIdentifier } from './backfill-plan.js';
import type { Job } from './job.js';
import { JobLease, type JobRecords, StopSignal } from './job-lease.js';
import type { RefreshViewJob } from './refresh-job.js';

// Backfill jobs of computed and virtual columns (AlterTableBackfillColumns) and refreshes of
// materialized views (RefreshMaterializedView): how they run.
//
// A job is a transaction record (<root>/_catalog/transactions/<id>.json, operation
// `backfill_column` or `refresh_materialized_view`) whose `job` field holds its plan, its
// progress and its lease; a marker <root>/_catalog/jobs/<id>.json lists it as unfinished so that
// runners need not scan every transaction. Every change to the record is a replace-if-unchanged
// of the version read (job-lease.ts). job-service.ts creates jobs (views/view-service.ts
// the refreshes); backfill-plan.ts cuts backfills into chunks. A refresh is one step: the whole
// view recomputed from the source version in its plan, in one commit, which is idempotent (the
// same rows again), so the invariants below hold for it with one chunk and no sweep.
//
// Invariants:
// - Exactly one runner works a job at a time: a runner takes it with a replace-if-unchanged that
//   sets `job.owner` and `job.lease_until`, and only when it is unowned or the lease has run out.
//   The owner renews the lease (heartbeats and every checkpoint) and stops as soon as a re-read
//   record names another owner, so after a takeover the old owner writes at most the one chunk it
//   had in flight, which is idempotent (see below).
// - Chunks are ranges of Lance row ids (`fragment << 32 | offset`) of the rows matching `where`
//   at the plan's version, planned once and stored in the record before any is written. A Lance
//   update rewrites the rows it changes into new fragments, whose ids are above every fragment of
//   the plan's version (fragment ids only grow), so a written row leaves every range of the plan
//   and the rows a range still holds are exactly those not yet written. Writing a chunk sets the
//   column to its expression over the row's current inputs, so writing it again (after a crash
//   between its commit and its checkpoint, or by a replaced owner) changes nothing.
// - Progress (`chunks_done`) is checkpointed only after the chunk's commit, so a restart resumes
//   at the first chunk whose commit may be missing: no chunk is skipped.
// - Rows the ranges can no longer find (moved by a compaction during the job, appended since the
//   plan) are caught by a final sweep over the rows matching `where` whose value differs from the
//   expression, so a job that succeeds leaves the column equal to its expression on every such row.
// - Cancel (AlterTransaction status Canceled) is seen at the next checkpoint, which re-reads the
//   record: the job stops there, committed chunks stay, the table is a valid Lance version.

const MAX_ATTEMPTS = 10;
const MAX_CONFLICT_RETRIES = 8;

const systemContext = (jobId: string): RequestContext => ({ requestId: `job-${jobId}`, principal: null, context: {} });

/** A lost commit race, a full or unreachable store, a UDF worker that died: a later attempt may succeed. */
const TRANSIENT_KINDS: ReadonlySet<EngineErrorKind> = new Set(['conflict', 'unavailable', 'store_unreachable', 'store_full']);

/** A failure that ends the job as Failed (rather than a transient one, retried by a later run). */
function isPermanent(e: unknown): boolean {
  // A UDF that raised raises again on the same rows.
  if (e instanceof NamespaceError || e instanceof UdfFailure) return true;
  return e instanceof EngineError && !TRANSIENT_KINDS.has(e.kind);
}

const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** Retries an engine write that lost a commit race; the write is idempotent. */
async function withConflictRetries<T>(metrics: Metrics, fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (!(e instanceof EngineError && e.kind === 'conflict') || attempt >= MAX_CONFLICT_RETRIES) throw e;
      metrics.commitRetry('backfill');
      await sleep(backoffMs(attempt, 20, 1000));
    }
  }
}

/** How a runner works one kind of job, on its table opened under a write lease; ends it with records.finish. */
export type JobWork<J extends Job> = (id: string, job: J, lease: JobLease, table: OpenTable, records: JobRecords) => Promise<void>;

/** Finds unfinished jobs and works them; every replica runs one. */
export class JobRunner {
  private readonly running = new Map<string, Promise<void>>();
  private poller: Poller | undefined;
  private stopping = false;

  constructor(
    private readonly tables: DataTables,
    private readonly records: JobRecords,
    private readonly markers: UnfinishedMarkers,
    private readonly pollMs: number = pollIntervalMs(records.leaseMs),
    private readonly logger?: ServiceLogger,
  ) {}

  /** Jobs this runner is working on now. */
  get runningCount(): number {
    return this.running.size;
  }

  /** Whether this runner is shutting down. */
  readonly isStopping = (): boolean => this.stopping;

  /** Starts looking for unfinished jobs (now and then every pollMs). */
  start(): void {
    this.stopping = false;
    this.poller = new Poller(() => this.poll(), this.pollMs);
    this.poller.start();
  }

  /** Stops taking jobs; running ones stop at their next checkpoint and hand their lease back. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.poller?.stop();
    this.poller = undefined;
    await Promise.allSettled([...this.running.values()]);
  }

  /** Looks at every unfinished job once. */
  async poll(): Promise<void> {
    if (this.stopping) return;
    try {
      for (const { id, lastModified } of await this.markers.list()) {
        if (this.running.has(id)) continue;
        if (Date.now() - lastModified.getTime() > this.records.leaseMs && !(await this.records.read(id))) {
          await this.markers.remove(id); // its creator died between the marker and the record
          continue;
        }
        this.launch(id);
      }
    } catch (e) {
      this.logger?.warn({ err: e }, 'backfill poll failed');
    }
  }

  /** Runs the job here unless it already runs here. Resolves when the run ends. */
  launch(id: string): Promise<void> {
    const existing = this.running.get(id);
    if (existing) return existing;
    if (this.stopping) return Promise.resolve();
    const run = this.run(id)
      .catch((e: unknown) => this.logger?.error({ err: e, job: id }, 'backfill run failed'))
      .finally(() => this.running.delete(id));
    this.running.set(id, run);
    return run;
  }

  /** Resolves when the job stops running in this process (for tests). */
  async settled(id: string): Promise<void> {
    await this.running.get(id);
  }

  private async run(id: string): Promise<void> {
    const found = await this.records.read(id);
    if (!found) return;
    if (TERMINAL.has(found.value.status)) {
      // Canceled before any runner took it (or finished while its marker stayed): its row says so too.
      await this.records.observe(found.value);
      await this.markers.remove(id);
      return;
    }
    const initial = this.records.jobOf(found.value);
    if (!initial) {
      await this.records.finish(id, 'Failed', 'the job record cannot be read by this service version');
      return;
    }
    const owner = this.records.owner;
    const leased = initial.owner && initial.owner !== owner && initial.lease_until && Date.parse(initial.lease_until) > Date.now();
    if (leased) return;
    const attempts = initial.attempts + 1;
    if (!(await this.records.take(found, initial, attempts))) return;
    this.logger?.info({ job: id, attempts, owner }, 'backfill job taken');
    if (attempts > MAX_ATTEMPTS) {
      await this.records.finish(id, 'Failed', `gave up after ${MAX_ATTEMPTS} attempts`);
      return;
    }
    const lease = new JobLease(this.records, id, this.isStopping);
    lease.startHeartbeat();
    try {
      await this.work(id, initial, lease);
    } catch (e) {
      if (e instanceof StopSignal) {
        if (e.reason === 'stopping') await lease.release();
        this.logger?.info({ job: id, reason: e.reason }, 'backfill job stopped');
        if (e.reason === 'canceled') await this.markers.remove(id);
      } else if (isPermanent(e)) {
        this.logger?.warn({ job: id, err: e }, 'backfill job failed');
        await this.records.finish(id, 'Failed', messageOf(e));
      } else {
        // Transient (the store, the network): leave it Running; the lease runs out and a runner takes it again.
        this.logger?.warn({ job: id, err: e }, 'backfill run interrupted; it will be resumed');
      }
    } finally {
      lease.stopHeartbeat();
    }
  }

  /** Works the job under a write lease on its table (a view's, for a refresh), so that a drop of the table waits for the job or stops it. */
  private async work(id: string, initial: Job, lease: JobLease): Promise<void> {
    const ctx = systemContext(id);
    await this.tables.write(
      ctx,
      initial.table_id,
      (table) => {
        if (initial.kind === 'refresh_materialized_view') return this.refreshView(ctx, id, initial, lease, table);
        if (initial.kind === 'maintain_table') return this.maintain(id, initial, lease, table);
        return this.workOn(id, initial, lease, table);
      },
      { branch: initial.kind === 'backfill_column' ? (initial.branch ?? null) : null },
    );
  }

  /** Works a maintenance run with the worker the maintenance scheduler gave (maintenance/maintenance-run.ts). */
  private maintain(id: string, job: MaintainTableJob, lease: JobLease, table: OpenTable): Promise<void> {
    if (!this.maintenanceWork) throw invalidInput('this replica runs no table maintenance (--maintenance-interval-ms 0)');
    return this.maintenanceWork(id, job, lease, table, this.records);
  }

  /** Set once by the maintenance scheduler that submits the runs (the scheduler needs the job service, which builds this runner). */
  maintenanceWork: JobWork<MaintainTableJob> | undefined;

  /** The engine's Python UDFs, for a job that needs them; a 400 on a replica that runs none. */
  private pythonUdfs(): UdfOps {
    const { udfs } = this.tables.engine;
    if (!udfs) throw invalidInput('this service runs no Python UDFs (udf_execution is off on the replica that took the job)');
    return udfs;
  }

  /**
   * Recomputes a materialized view from its source at the job's version, in one commit (through
   * the UDF workers when the service runs them) that also writes the view's refresh metadata (the
   * source version). Doing it again (after a crash between the commit and the checkpoint, or by a
   * replaced owner) commits the same rows again: the refresh is idempotent, and the job is one step.
   */
  private async refreshView(ctx: RequestContext, id: string, job: RefreshViewJob, lease: JobLease, view: OpenTable): Promise<void> {
    const { views } = this.tables.engine;
    const udfs = job.udfs.length > 0 || job.chunker || job.udtf ? this.pythonUdfs() : this.tables.engine.udfs;
    await lease.check();
    const source = await this.tables.open(ctx, job.source_id);
    const { schema } = await this.tables.engine.describeDataset(view.at);
    const fieldMetadata = schema.fields.find((f) => f.name === SOURCE_ROW_ID)?.metadata ?? {};
    const m: Materialization = {
      sourceVersion: job.src_version,
      filter: job.filter,
      columns: job.columns,
      offset: job.offset,
      limit: job.limit,
      udfs: job.udfs.map((u) => ({ column: u.column, udfPath: u.path, inputColumns: u.inputs })),
      schemaMetadata: { ...schema.metadata, [VIEW_METADATA.baseTableVersion]: String(job.src_version) },
      fieldMetadata: { [SOURCE_ROW_ID]: { ...fieldMetadata, [LAST_REFRESHED_VERSION]: String(job.src_version) } },
      maxRowsPerFile: job.max_rows_per_fragment,
    };
    // The workers stream the rows; the engine's own path (views without UDFs, workers off) gathers them in memory.
    // On S3 with credential vending, the workers (user code) get credentials for the two tables only: reading the source, writing the view.
    const result = await withConflictRetries(this.tables.catalog.metrics, async () =>
      udfs
        ? udfs.materialize(await udfLocation(this.tables, source, id, 'read'), await udfLocation(this.tables, view, id), m, expansionOf(job))
        : views.materialize(source.at, view.at, m),
    );
    faultPoint('refresh:after-commit');
    await this.records.checkpoint<RefreshViewJob>(id, (j) => ({ ...j, rows_done: result.rows }), {
      rows_total: String(result.rows),
      rows_done: String(result.rows),
      rows_refreshed: String(result.rows),
      writer_fragments: String(result.fragments),
      last_committed_version: String(result.version),
    });
    await this.records.finish(id, 'Succeeded');
    this.logger?.info({ job: id, rows: result.rows }, 'materialized view refreshed');
  }

  private async workOn(id: string, initial: BackfillJob, lease: JobLease, table: DataTable): Promise<void> {
    const { at } = table;
    let job = initial;
    const columns = this.tables.engine.columns;
    const records = this.records;

    if (job.mode === 'refresh') {
      await lease.check();
      const result = await withConflictRetries(this.tables.catalog.metrics, () => columns.refreshComputedColumn(at, job.column));
      faultPoint('backfill:after-commit-0');
      await records.checkpoint<BackfillJob>(id, (j) => ({ ...j, chunks_done: 1, rows_done: result.rows, rows_written: result.rows, swept: true }), {
        rows_total: String(result.rows),
        rows_done: String(result.rows),
        chunks_total: '1',
        chunks_done: '1',
        last_committed_version: String(result.version),
      });
      await records.finish(id, 'Succeeded');
      return;
    }

    const udfs = job.mode === 'udf' ? this.pythonUdfs() : this.tables.engine.udfs;
    if (!job.plan) {
      const layout = await columns.rowIdLayout(at, job.where, job.read_version);
      const chunks = planChunks(layout, job.chunk_rows, job.num_frags);
      const rows = chunks.reduce((n, c) => n + c.rows, 0);
      // Row ids above every planned range belong to rows that came after the plan (appended, or moved by a compaction).
      const plan = { version: layout.version, rows, chunks, fresh_from: chunks[chunks.length - 1]?.hi ?? '0' };
      await records.checkpoint<BackfillJob>(id, (j) => ({ ...j, plan }), {
        rows_total: String(rows),
        rows_done: '0',
        chunks_total: String(chunks.length),
        chunks_done: '0',
        plan_version: String(layout.version),
      });
      job = { ...job, plan };
      faultPoint('backfill:after-plan');
    }
    const plan = job.plan as NonNullable<BackfillJob['plan']>;
    const where = job.where !== undefined ? ` AND (${job.where})` : '';
    const udf = job.udf;
    // One write of the column over the rows of `filter`: the SQL expression, or the UDF through the workers.
    const fill = async (filter: string) =>
      job.mode === 'udf' && udfs && udf
        ? udfs.fill(await udfLocation(this.tables, table, id), { column: job.column, udfPath: udf.path, inputColumns: udf.inputs, filter })
        : columns.fillColumn(at, job.column, job.expression, filter);
    let rowsDone = job.rows_done;
    let rowsWritten = job.rows_written;
    for (let next = job.chunks_done; next < plan.chunks.length; ) {
      await lease.check();
      const group = plan.chunks.slice(next, next + job.commit_granularity);
      const first = group[0] as Chunk;
      const last = group[group.length - 1] as Chunk;
      const filter = `_rowid >= ${first.lo} AND _rowid < ${last.hi}${where}`;
      const result = await withConflictRetries(this.tables.catalog.metrics, () => fill(filter));
      const commit = Math.floor(next / job.commit_granularity);
      faultPoint(`backfill:after-commit-${commit}`);
      next += group.length;
      rowsDone += group.reduce((n, c) => n + c.rows, 0);
      rowsWritten += result.rows;
      const done = next;
      const doneRows = rowsDone;
      const written = rowsWritten;
      await records.checkpoint<BackfillJob>(id, (j) => ({ ...j, chunks_done: done, rows_done: doneRows, rows_written: written }), {
        rows_done: String(doneRows),
        rows_written: String(written),
        chunks_done: String(done),
        last_committed_version: String(result.version),
      });
      faultPoint(`backfill:after-checkpoint-${commit}`);
    }

    // The sweep (skipped when num_frags limits the job to part of the table).
    if (!job.swept && job.num_frags === undefined) {
      await lease.check();
      // A UDF's value cannot be checked in SQL: its sweep fills the rows that came after the plan and are still unset.
      const filter =
        job.mode === 'udf'
          ? `${sqlIdentifier(job.column)} IS NULL AND _rowid >= ${plan.fresh_from ?? '0'}${where}`
          : `${mismatchFilter(job.column, job.expression)}${where}`;
      const left = await columns.countRows(at, filter);
      const swept = left > 0 ? await withConflictRetries(this.tables.catalog.metrics, () => fill(filter)) : null;
      await records.checkpoint<BackfillJob>(id, (j) => ({ ...j, swept: true }), {
        rows_swept: String(swept?.rows ?? 0),
        ...(swept ? { last_committed_version: String(swept.version) } : {}),
      });
    }
    await records.finish(id, 'Succeeded');
    this.logger?.info({ job: id, rows: rowsDone }, 'backfill job succeeded');
  }
}

/** A chunker or udtf view's expansion, as the UDF workers take it. */
function expansionOf(job: RefreshViewJob): ChunkerExpansion | UdtfRun | undefined {
  if (job.chunker)
    return {
      kind: 'chunker',
      udfPath: job.chunker.path,
      inputColumns: job.chunker.inputs,
      inherited: job.chunker.inherited,
      outputLimit: job.output_limit ?? null,
    };
  if (job.udtf) return { kind: 'udtf', udfPath: job.udtf.path, sourceQuery: job.udtf.query, partitionBy: job.udtf.partition_by };
  return undefined;
}
