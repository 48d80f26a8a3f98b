import { randomUUID } from 'node:crypto';
import { COMPUTED_COLUMN_METADATA, formatFieldPath, parseFieldPath, SQL_UDF_BACKEND, VIRTUAL_COLUMN_METADATA } from '../../model/columns.js';
import { invalidInput, unsupported } from '../../model/errors.js';
import type { AlterTableBackfillColumnsRequest, AlterTableBackfillColumnsResponse } from '../../model/jobs.js';
import { normalizeBranch } from '../branches/branch-refs.js';
import { displayId } from '../catalog/catalog.js';
import { JOB_MARKERS_DIR } from '../catalog/layout.js';
import type { ServiceLogger } from '../context/logger.js';
import type { RequestContext } from '../context/request-context.js';
import { pollIntervalMs, UnfinishedMarkers } from '../coordination/markers.js';
import type { DataTables } from '../data/data-tables.js';
import { pythonUdfOf, requirePythonUdfs } from '../data/python-udf-columns.js';
import { engineFailure } from '../errors/engine-errors.js';
import type { MaintainTableJob } from '../maintenance/maintenance-job.js';
import type { TransactionLog, TransactionRecord } from '../transactions/transaction-log.js';
import { type BackfillJob, DEFAULT_CHUNK_ROWS } from './backfill-plan.js';
import { GenevaJobTable } from './geneva-job-table.js';
import type { Job } from './job.js';
import { JobRecords } from './job-lease.js';
import { JobRunner, type JobWork } from './job-runner.js';

// The service's jobs: backfills (AlterTableBackfillColumns, checked here against the table) and
// materialized views' refreshes (submitted by views/view-service.ts). Each is written (marker
// first, then its transaction record, then Geneva's row) and handed to this replica's runner
// (job-runner.ts, where the protocol is described).

export interface JobSettings {
  /** How long a runner's hold on a job is trusted without renewal. */
  leaseMs: number;
  /** How often unfinished jobs are looked for (default: half the lease, within 100 ms .. 5 s). */
  pollMs?: number;
}

/** Creates backfill jobs (the HTTP operation) and runs them (every replica runs a runner). */
export class JobService {
  private readonly markers: UnfinishedMarkers;
  private readonly runner: JobRunner;

  private readonly genevaJobs: GenevaJobTable;

  constructor(
    private readonly tables: DataTables,
    private readonly log: TransactionLog,
    settings: JobSettings,
    /** Creates a table from an Arrow IPC stream unless it exists (ExistOk): Geneva's job table. */
    createTable: (ctx: RequestContext, id: string[], arrowIpcStream: Buffer) => Promise<unknown>,
    logger?: ServiceLogger,
  ) {
    this.markers = new UnfinishedMarkers(tables.catalog.store, JOB_MARKERS_DIR);
    const { metrics } = tables.catalog;
    this.genevaJobs = new GenevaJobTable(tables, createTable, logger);
    const records = new JobRecords(
      log,
      this.markers,
      `runner-${randomUUID()}`,
      settings.leaseMs,
      () => this.runner.isStopping(),
      metrics,
      (record, job) => (job.kind === 'maintain_table' ? Promise.resolve() : this.genevaJobs.changed(record, job)),
    );
    this.runner = new JobRunner(tables, records, this.markers, settings.pollMs ?? pollIntervalMs(settings.leaseMs), logger);
    metrics.observe({ jobsRunning: () => this.runner.runningCount });
  }

  private get engine() {
    return this.tables.engine;
  }

  async backfill(ctx: RequestContext, id: string[], request: AlterTableBackfillColumnsRequest): Promise<AlterTableBackfillColumnsResponse> {
    const parsed = parseFieldPath(request.column);
    if (!parsed.ok) throw invalidInput(`column: ${parsed.error}`);
    const column = formatFieldPath(parsed.segments);
    const branch = normalizeBranch(request.branch);
    const table = await this.tables.open(ctx, id, { branch });
    let binding: { mode: 'update' | 'refresh' | 'udf'; expression: string; udf?: { path: string; inputs: string[] | null } };
    try {
      const field = await this.engine.columns.field(table.at, parsed.segments);
      const m = field.metadata;
      const virtualSql = m[VIRTUAL_COLUMN_METADATA.expression];
      const computedSql = m[COMPUTED_COLUMN_METADATA.expression];
      const python = pythonUdfOf(m);
      if (python) {
        requirePythonUdfs(this.tables, ctx, id, 'backfill_column');
        binding = { mode: 'udf', expression: '', udf: { path: python.udfPath, inputs: python.inputs } };
      } else if (m[VIRTUAL_COLUMN_METADATA.marker] === 'true' && (m[VIRTUAL_COLUMN_METADATA.backend] ?? '').toLowerCase() === SQL_UDF_BACKEND && virtualSql) {
        binding = { mode: 'update', expression: virtualSql };
      } else if (m[COMPUTED_COLUMN_METADATA.marker] === 'true' && computedSql) {
        binding = { mode: 'refresh', expression: computedSql };
      } else {
        throw invalidInput(
          `column ${column} of table ${displayId(id)} is neither computed nor virtual: declare it with add_columns \`computed\` or bind it with alter_columns \`virtual_column\` (udf_backend "${SQL_UDF_BACKEND}")`,
        );
      }
      if (parsed.segments.length !== 1) throw invalidInput(`column: only top-level columns can be backfilled, got ${column}`);
      const where = request.where ?? undefined;
      if (binding.mode === 'refresh' && (where !== undefined || (request.read_version ?? null) !== null || (request.num_frags ?? null) !== null)) {
        throw unsupported(
          `column ${column} was declared computed through add_columns: Lance lets only its own refresh write it, which fills the whole column in one commit, so where, read_version and num_frags cannot apply (bind the expression with alter_columns virtual_column udf_backend "${SQL_UDF_BACKEND}" on a plain column for chunked, filtered backfills)`,
        );
      }
      if (where !== undefined && where.trim() === '') throw invalidInput('where: must not be empty');
      // The filter must be valid SQL over the table, and read_version an existing version.
      const readVersion = request.read_version ?? undefined;
      if (where !== undefined || readVersion !== undefined)
        await this.engine.columns.checkExpression(table.at, where === undefined ? '1' : `(${where})`, readVersion);
    } catch (e) {
      throw engineFailure(e, id);
    }
    const chunkRows = Math.max(
      request.min_checkpoint_size ?? 1,
      Math.min(request.max_checkpoint_size ?? Number.MAX_SAFE_INTEGER, request.checkpoint_size ?? request.task_size ?? DEFAULT_CHUNK_ROWS),
    );
    const job: BackfillJob = {
      kind: 'backfill_column',
      table_id: id,
      ...(branch !== null ? { branch } : {}),
      column: parsed.segments[0] as string,
      mode: binding.mode,
      expression: binding.expression,
      ...(binding.udf ? { udf: binding.udf } : {}),
      ...(request.where !== undefined && request.where !== null ? { where: request.where } : {}),
      ...(request.read_version !== undefined && request.read_version !== null ? { read_version: request.read_version } : {}),
      chunk_rows: chunkRows,
      commit_granularity: request.commit_granularity ?? 1,
      ...(request.num_frags !== undefined && request.num_frags !== null ? { num_frags: request.num_frags } : {}),
      chunks_done: 0,
      rows_done: 0,
      rows_written: 0,
      attempts: 0,
    };
    const jobId = await this.submit(ctx, 'backfill_column', job, {
      table: JSON.stringify(id),
      ...(branch !== null ? { branch } : {}),
      column,
      mode: binding.mode,
      ...(binding.udf ? { udf: binding.udf.path } : { expression: binding.expression }),
      ...(job.where !== undefined ? { where: job.where } : {}),
      ...(job.read_version !== undefined ? { read_version: String(job.read_version) } : {}),
      chunk_rows: String(chunkRows),
      commit_granularity: String(job.commit_granularity),
      rows_done: '0',
    });
    return { job_id: jobId };
  }

  /**
   * Writes a new job (its marker, then its transaction record, then Geneva's row) and hands it
   * to this replica's runner; returns its id once the job cannot be lost.
   */
  async submit(ctx: RequestContext, operation: string, job: Job, properties: Record<string, string>, jobId: string = this.log.newId()): Promise<string> {
    const now = new Date().toISOString();
    const record: TransactionRecord = { id: jobId, status: 'Queued', operation, properties, created_at: now, updated_at: now, job };
    // The marker first: a record without one would never be run; a marker without a record is removed by the poller.
    await this.markers.add(jobId);
    await this.log.create(record);
    // Geneva's row before the answer: the client then finds it rather than adding a second one.
    if (job.kind !== 'maintain_table')
      await this.genevaJobs.launch(record, job, ctx.principal?.id ?? null, async () => (await this.log.read(jobId))?.value ?? null);
    void this.runner.launch(jobId);
    return jobId;
  }

  /** How this replica's runner works maintenance runs (set by the maintenance scheduler, which submits them). */
  set maintenanceWork(work: JobWork<MaintainTableJob>) {
    this.runner.maintenanceWork = work;
  }

  /** Starts this replica's runner. */
  start(): void {
    this.runner.start();
  }

  /** Stops taking jobs; running ones stop at their next checkpoint and hand their lease back. */
  stop(): Promise<void> {
    return this.runner.stop();
  }

  /** Resolves when the job stops running in this process (for tests). */
  settled(id: string): Promise<void> {
    return this.runner.settled(id);
  }
}
