import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { type DatasetLocation, EngineError } from '../../engine/lance-engine.js';
import type { RowIdLayout } from '../../engine/ports/columns.js';
import { COMPUTED_COLUMN_METADATA, formatFieldPath, parseFieldPath, SQL_UDF_BACKEND, VIRTUAL_COLUMN_METADATA } from '../../model/columns.js';
import { invalidInput, NamespaceError, unsupported } from '../../model/errors.js';
import type { AlterTableBackfillColumnsRequest, AlterTableBackfillColumnsResponse } from '../../model/jobs.js';
import { displayId } from '../catalog/catalog.js';
import type { DataTables } from '../data/dataset.js';
import { engineFailure } from '../engine-errors.js';
import { backoffMs, sleep } from '../coordination/backoff.js';
import type { ServiceLogger } from '../logger.js';
import { faultPoint } from '../fault-points.js';
import { Poller, pollIntervalMs, UnfinishedMarkers } from '../coordination/markers.js';
import { CATALOG_DIR } from '../catalog/layout.js';
import type { Versioned } from '../catalog/records.js';
import type { RequestContext } from '../request-context.js';
import { TERMINAL, type TransactionLog, type TransactionRecord } from '../transactions/transaction-log.js';
import { requireMainBranch } from '../catalog/catalog.js';

// Backfill jobs of computed and virtual columns (AlterTableBackfillColumns).
//
// A job is a transaction record (<root>/_catalog/transactions/<id>.json, operation
// `backfill_column`) whose `job` field holds its plan, its progress and its lease; a marker
// <root>/_catalog/jobs/<id>.json lists it as unfinished so that runners need not scan every
// transaction. Every change to the record is a replace-if-unchanged of the version read.
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

const MARKERS = `${CATALOG_DIR}/jobs/`;
const DEFAULT_CHUNK_ROWS = 10_000;
const MAX_ATTEMPTS = 10;
const MAX_CONFLICT_RETRIES = 8;

const Chunk = z.object({ lo: z.string(), hi: z.string(), rows: z.number().int().min(0) });
type Chunk = z.infer<typeof Chunk>;

export const BackfillJob = z.object({
  kind: z.literal('backfill_column'),
  table_id: z.array(z.string()),
  column: z.string(),
  /** `update`: a virtual SQL column written chunk by chunk; `refresh`: a Lance computed column refreshed by Lance. */
  mode: z.enum(['update', 'refresh']),
  expression: z.string(),
  where: z.string().optional(),
  read_version: z.number().int().min(0).optional(),
  chunk_rows: z.number().int().min(1),
  commit_granularity: z.number().int().min(1),
  num_frags: z.number().int().min(1).optional(),
  plan: z.object({ version: z.number().int().min(0), rows: z.number().int().min(0), chunks: z.array(Chunk) }).optional(),
  chunks_done: z.number().int().min(0).default(0),
  rows_done: z.number().int().min(0).default(0),
  rows_written: z.number().int().min(0).default(0),
  swept: z.boolean().optional(),
  attempts: z.number().int().min(0).default(0),
  owner: z.string().optional(),
  lease_until: z.string().optional(),
});
export type BackfillJob = z.infer<typeof BackfillJob>;

export type JobLogger = ServiceLogger;

export interface BackfillSettings {
  /** How long a runner's hold on a job is trusted without renewal. */
  leaseMs: number;
  /** How often unfinished jobs are looked for (default: half the lease, within 100 ms .. 5 s). */
  pollMs?: number;
}

const systemContext = (jobId: string): RequestContext => ({ requestId: `job-${jobId}`, principal: null, context: {} });

/** A column name as a Lance SQL identifier. */
export const sqlIdentifier = (name: string): string => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : `\`${name.replace(/`/g, '``')}\``);

/** Rows whose value differs from the expression (nulls compare equal to nulls). */
export const mismatchFilter = (column: string, expression: string): string => {
  const c = sqlIdentifier(column);
  return `NOT ((${c} IS NULL AND (${expression}) IS NULL) OR coalesce(${c} = (${expression}), false))`;
};

/**
 * Splits the rows of a layout into row-id ranges of about `chunkRows` rows: small fragments
 * share a range, a large fragment is cut into equal offset windows. Only the first `numFrags`
 * fragments are planned when given.
 */
export function planChunks(layout: RowIdLayout, chunkRows: number, numFrags?: number): Chunk[] {
  const fragments = numFrags === undefined ? layout.fragments : layout.fragments.slice(0, numFrags);
  const chunks: Chunk[] = [];
  let open: { lo: bigint; hi: bigint; rows: number } | null = null;
  const flush = () => {
    if (open) chunks.push({ lo: open.lo.toString(), hi: open.hi.toString(), rows: open.rows });
    open = null;
  };
  for (const f of fragments) {
    if (f.rows === 0) continue;
    const base = BigInt(f.fragment) << 32n;
    const lo = base + BigInt(f.minOffset);
    const hi = base + BigInt(f.maxOffset) + 1n;
    if (f.rows > chunkRows) {
      flush();
      const k = Math.ceil(f.rows / chunkRows);
      const span = f.maxOffset + 1 - f.minOffset;
      for (let j = 0; j < k; j++) {
        const a = f.minOffset + Math.floor((span * j) / k);
        const b = f.minOffset + Math.floor((span * (j + 1)) / k);
        const rows = Math.round((f.rows * (j + 1)) / k) - Math.round((f.rows * j) / k);
        if (b > a) chunks.push({ lo: (base + BigInt(a)).toString(), hi: (base + BigInt(b)).toString(), rows });
      }
    } else if (open !== null && (open as { rows: number }).rows + f.rows <= chunkRows) {
      const o = open as { lo: bigint; hi: bigint; rows: number };
      o.hi = hi;
      o.rows += f.rows;
    } else {
      flush();
      open = { lo, hi, rows: f.rows };
    }
  }
  flush();
  return chunks;
}

/** Why a job stopped before its end. */
type Stop = 'canceled' | 'lost' | 'stopping';

class StopSignal extends Error {
  constructor(readonly reason: Stop) {
    super(`job stopped: ${reason}`);
  }
}

/** A failure that ends the job as Failed (rather than a transient one, retried by a later run). */
function isPermanent(e: unknown): boolean {
  if (e instanceof NamespaceError) return true;
  return e instanceof EngineError && e.kind !== 'conflict';
}

const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** Creates backfill jobs (the HTTP operation) and runs them (every replica runs a runner). */
export class BackfillService {
  private readonly owner = `runner-${randomUUID()}`;
  private readonly running = new Map<string, Promise<void>>();
  private poller: Poller | undefined;
  private stopping = false;
  private readonly markers: UnfinishedMarkers;

  constructor(
    private readonly tables: DataTables,
    private readonly log: TransactionLog,
    private readonly settings: BackfillSettings,
    private readonly logger?: JobLogger,
  ) {
    this.markers = new UnfinishedMarkers(tables.catalog.store, MARKERS);
  }

  private get engine() {
    return this.tables.engine;
  }

  private get pollMs(): number {
    return this.settings.pollMs ?? pollIntervalMs(this.settings.leaseMs);
  }

  // -------------------------------------------------------------------------------------------
  // Creating a job

  async backfill(ctx: RequestContext, id: string[], request: AlterTableBackfillColumnsRequest): Promise<AlterTableBackfillColumnsResponse> {
    requireMainBranch(request.branch);
    const parsed = parseFieldPath(request.column);
    if (!parsed.ok) throw invalidInput(`column: ${parsed.error}`);
    const column = formatFieldPath(parsed.segments);
    const table = await this.tables.open(ctx, id);
    let binding: { mode: 'update' | 'refresh'; expression: string };
    try {
      const field = await this.engine.columns.field(table.at, parsed.segments);
      const m = field.metadata;
      const virtualSql = m[VIRTUAL_COLUMN_METADATA.expression];
      const computedSql = m[COMPUTED_COLUMN_METADATA.expression];
      if (m[VIRTUAL_COLUMN_METADATA.marker] === 'true' && (m[VIRTUAL_COLUMN_METADATA.backend] ?? '').toLowerCase() === SQL_UDF_BACKEND && virtualSql) {
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
      if (where !== undefined || readVersion !== undefined) await this.engine.columns.checkExpression(table.at, where === undefined ? '1' : `(${where})`, readVersion);
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
      column: parsed.segments[0] as string,
      mode: binding.mode,
      expression: binding.expression,
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
    const now = new Date().toISOString();
    const jobId = this.log.newId();
    const record: TransactionRecord = {
      id: jobId,
      status: 'Queued',
      operation: 'backfill_column',
      properties: {
        table: JSON.stringify(id),
        column,
        mode: binding.mode,
        expression: binding.expression,
        ...(job.where !== undefined ? { where: job.where } : {}),
        ...(job.read_version !== undefined ? { read_version: String(job.read_version) } : {}),
        chunk_rows: String(chunkRows),
        commit_granularity: String(job.commit_granularity),
        rows_done: '0',
      },
      created_at: now,
      updated_at: now,
      job,
    };
    // The marker first: a record without one would never be run; a marker without a record is removed by the poller.
    await this.markers.add(jobId);
    await this.log.create(record);
    this.launch(jobId);
    return { job_id: jobId };
  }

  // -------------------------------------------------------------------------------------------
  // Running jobs

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
        if (Date.now() - lastModified.getTime() > this.settings.leaseMs && !(await this.log.read(id))) {
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

  private jobOf(record: TransactionRecord): BackfillJob | null {
    const parsed = BackfillJob.safeParse(record.job);
    return parsed.success ? parsed.data : null;
  }

  /** Replaces the record (re-read each try) with fn's result; null from fn leaves it as it is. */
  private async mutate(id: string, fn: (record: TransactionRecord, job: BackfillJob) => TransactionRecord | null): Promise<Versioned<TransactionRecord> | null> {
    for (;;) {
      const current = await this.log.read(id);
      if (!current) return null;
      const job = this.jobOf(current.value);
      if (!job) return null;
      const next = fn(current.value, job);
      if (!next) return null;
      const written = await this.log.update(current, next);
      if (written) return written;
    }
  }

  private async removeMarker(id: string): Promise<void> {
    await this.markers.remove(id);
  }

  private async run(id: string): Promise<void> {
    const found = await this.log.read(id);
    if (!found) return;
    if (TERMINAL.has(found.value.status)) {
      await this.removeMarker(id);
      return;
    }
    const initial = this.jobOf(found.value);
    if (!initial) {
      await this.finish(id, 'Failed', 'the job record cannot be read by this service version');
      return;
    }
    const leased = initial.owner && initial.owner !== this.owner && initial.lease_until && Date.parse(initial.lease_until) > Date.now();
    if (leased) return;
    // Take the job: one replace-if-unchanged of the record read, so of two runners one wins.
    const attempts = initial.attempts + 1;
    const taken = await this.log.update(found, {
      ...found.value,
      status: 'Running',
      job: { ...initial, attempts, owner: this.owner, lease_until: new Date(Date.now() + this.settings.leaseMs).toISOString() },
    });
    if (!taken) return;
    this.logger?.info({ job: id, attempts, owner: this.owner }, 'backfill job taken');
    if (attempts > MAX_ATTEMPTS) {
      await this.finish(id, 'Failed', `gave up after ${MAX_ATTEMPTS} attempts`);
      return;
    }
    const lease = new JobLease(this, id, this.settings.leaseMs);
    lease.startHeartbeat();
    try {
      await this.work(id, initial, lease);
    } catch (e) {
      if (e instanceof StopSignal) {
        if (e.reason === 'stopping') await lease.release();
        this.logger?.info({ job: id, reason: e.reason }, 'backfill job stopped');
        if (e.reason === 'canceled') await this.removeMarker(id);
      } else if (isPermanent(e)) {
        this.logger?.warn({ job: id, err: e }, 'backfill job failed');
        await this.finish(id, 'Failed', messageOf(e));
      } else {
        // Transient (the store, the network): leave it Running; the lease runs out and a runner takes it again.
        this.logger?.warn({ job: id, err: e }, 'backfill run interrupted; it will be resumed');
      }
    } finally {
      lease.stopHeartbeat();
    }
  }

  /** Writes a checkpoint: applies `change` to the job and renews the lease; throws StopSignal when the job must stop. */
  async checkpoint(id: string, change: (job: BackfillJob) => BackfillJob, properties: Record<string, string> = {}): Promise<void> {
    const outcome: { stop: Stop | null } = { stop: null };
    const written = await this.mutate(id, (record, job) => {
      outcome.stop = null;
      const terminal = TERMINAL.has(record.status);
      // A canceled job has no owner once a heartbeat saw it; its last chunk's progress is still ours to record.
      if (job.owner !== this.owner && !(terminal && job.owner === undefined)) {
        outcome.stop = 'lost';
        return null;
      }
      if (terminal) outcome.stop = 'canceled';
      else if (this.stopping) outcome.stop = 'stopping';
      const changed = change(job);
      const { owner: _owner, lease_until: _lease, ...released } = changed;
      return {
        ...record,
        properties: { ...record.properties, ...properties },
        job: terminal ? released : { ...changed, owner: this.owner, lease_until: new Date(Date.now() + this.settings.leaseMs).toISOString() },
      };
    });
    if (!written && outcome.stop === null) outcome.stop = 'lost';
    if (outcome.stop !== null) throw new StopSignal(outcome.stop);
  }

  /** Hands the lease back (graceful shutdown) so that another runner may take the job at once. */
  async releaseLease(id: string): Promise<void> {
    await this.mutate(id, (record, job) => {
      if (job.owner !== this.owner) return null;
      const { owner: _owner, lease_until: _lease, ...released } = job;
      return { ...record, job: released };
    });
  }

  /** Ends the job with a terminal status (unless it already has one) and removes its marker. */
  private async finish(id: string, status: 'Succeeded' | 'Failed', error?: string): Promise<void> {
    await this.mutate(id, (record, job) => {
      if (TERMINAL.has(record.status)) return null;
      if (job.owner !== undefined && job.owner !== this.owner) return null;
      const { owner: _owner, lease_until: _lease, ...released } = job;
      return { ...record, status, properties: { ...record.properties, ...(error !== undefined ? { error } : {}) }, job: released };
    });
    const after = await this.log.read(id);
    if (after && TERMINAL.has(after.value.status)) await this.removeMarker(id);
  }

  /** Retries an engine write that lost a commit race; the write is idempotent. */
  private async withConflictRetries<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn();
      } catch (e) {
        if (!(e instanceof EngineError && e.kind === 'conflict') || attempt >= MAX_CONFLICT_RETRIES) throw e;
        await sleep(backoffMs(attempt, 20, 1000));
      }
    }
  }

  /** Works the job under a write lease on its table, so that a drop of the table waits for the job or stops it. */
  private async work(id: string, initial: BackfillJob, lease: JobLease): Promise<void> {
    const ctx = systemContext(id);
    await this.tables.write(ctx, initial.table_id, (table) => this.workOn(id, initial, lease, table.at));
  }

  private async workOn(id: string, initial: BackfillJob, lease: JobLease, at: DatasetLocation): Promise<void> {
    let job = initial;
    const columns = this.engine.columns;

    if (job.mode === 'refresh') {
      await lease.check();
      const result = await this.withConflictRetries(() => columns.refreshComputedColumn(at, job.column));
      faultPoint('backfill:after-commit-0');
      await this.checkpoint(id, (j) => ({ ...j, chunks_done: 1, rows_done: result.rows, rows_written: result.rows, swept: true }), {
        rows_total: String(result.rows),
        rows_done: String(result.rows),
        chunks_total: '1',
        chunks_done: '1',
        last_committed_version: String(result.version),
      });
      await this.finish(id, 'Succeeded');
      return;
    }

    if (!job.plan) {
      const layout = await columns.rowIdLayout(at, job.where, job.read_version);
      const chunks = planChunks(layout, job.chunk_rows, job.num_frags);
      const rows = chunks.reduce((n, c) => n + c.rows, 0);
      const plan = { version: layout.version, rows, chunks };
      await this.checkpoint(id, (j) => ({ ...j, plan }), {
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
    let rowsDone = job.rows_done;
    let rowsWritten = job.rows_written;
    for (let next = job.chunks_done; next < plan.chunks.length; ) {
      await lease.check();
      const group = plan.chunks.slice(next, next + job.commit_granularity);
      const first = group[0] as Chunk;
      const last = group[group.length - 1] as Chunk;
      const filter = `_rowid >= ${first.lo} AND _rowid < ${last.hi}${where}`;
      const result = await this.withConflictRetries(() => columns.fillColumn(at, job.column, job.expression, filter));
      const commit = Math.floor(next / job.commit_granularity);
      faultPoint(`backfill:after-commit-${commit}`);
      next += group.length;
      rowsDone += group.reduce((n, c) => n + c.rows, 0);
      rowsWritten += result.rows;
      const done = next;
      const doneRows = rowsDone;
      const written = rowsWritten;
      await this.checkpoint(id, (j) => ({ ...j, chunks_done: done, rows_done: doneRows, rows_written: written }), {
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
      const filter = `${mismatchFilter(job.column, job.expression)}${where}`;
      const left = await columns.countRows(at, filter);
      const swept = left > 0 ? await this.withConflictRetries(() => columns.fillColumn(at, job.column, job.expression, filter)) : null;
      await this.checkpoint(id, (j) => ({ ...j, swept: true }), {
        rows_swept: String(swept?.rows ?? 0),
        ...(swept ? { last_committed_version: String(swept.version) } : {}),
      });
    }
    await this.finish(id, 'Succeeded');
    this.logger?.info({ job: id, rows: rowsDone }, 'backfill job succeeded');
  }

  /** Whether this runner is shutting down. */
  get isStopping(): boolean {
    return this.stopping;
  }
}

/**
 * The runner's hold on one job: heartbeats renew the lease between checkpoints (a chunk may take
 * longer than the lease), and a heartbeat that finds the job canceled or taken over makes the
 * next check stop the job.
 */
class JobLease {
  private timer: NodeJS.Timeout | undefined;
  private queue: Promise<void> = Promise.resolve();
  private stop: Stop | null = null;

  constructor(
    private readonly service: BackfillService,
    private readonly id: string,
    private readonly leaseMs: number,
  ) {}

  startHeartbeat(): void {
    const every = Math.max(50, Math.floor(this.leaseMs / 3));
    this.timer = setInterval(() => {
      this.queue = this.queue
        .then(() => this.service.checkpoint(this.id, (j) => j))
        .catch((e: unknown) => {
          if (e instanceof StopSignal) this.stop ??= e.reason;
        });
    }, every);
    this.timer.unref();
  }

  stopHeartbeat(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Throws StopSignal when a heartbeat found the job canceled or taken, or the runner is stopping. */
  async check(): Promise<void> {
    await this.queue;
    if (this.stop !== null) throw new StopSignal(this.stop);
    if (this.service.isStopping) throw new StopSignal('stopping');
  }

  async release(): Promise<void> {
    this.stopHeartbeat();
    await this.queue;
    await this.service.releaseLease(this.id);
  }
}
