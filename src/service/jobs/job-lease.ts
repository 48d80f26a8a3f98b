import { type Metrics, NO_METRICS } from '../../metrics/metrics.js';
import type { Versioned } from '../catalog/records.js';
import type { UnfinishedMarkers } from '../coordination/markers.js';
import { TERMINAL, type TransactionLog, type TransactionRecord } from '../transactions/transaction-log.js';
import { Job } from './job.js';

// A runner's hold on jobs (backfills and view refreshes): every write to a job's record is a replace-if-unchanged of the
// version read, and names the runner as `job.owner` with a `job.lease_until`; a runner that finds
// another owner in a record it re-reads stops. See job-runner.ts for the protocol.

/** Why a job stopped before its end. */
export type Stop = 'canceled' | 'lost' | 'stopping';

export class StopSignal extends Error {
  constructor(readonly reason: Stop) {
    super(`job stopped: ${reason}`);
  }
}

/** Hears of a job's record as the runner wrote it (Geneva's job table mirrors it). */
export type JobObserver = (record: TransactionRecord, job: Job) => Promise<void>;

/** The job records as one runner (`owner`) writes them. */
export class JobRecords {
  constructor(
    private readonly log: TransactionLog,
    private readonly markers: UnfinishedMarkers,
    readonly owner: string,
    readonly leaseMs: number,
    /** True once the runner is shutting down: the next checkpoint stops the job. */
    private readonly isStopping: () => boolean,
    private readonly metrics: Metrics = NO_METRICS,
    /** Hears of every state the runner writes (taken, checkpointed, finished, canceled); must not throw. */
    private readonly observer: JobObserver = () => Promise.resolve(),
  ) {}

  /** Tells the observer about a record as written. */
  observe(record: TransactionRecord): Promise<void> {
    const job = this.jobOf(record);
    return job ? this.observer(record, job) : Promise.resolve();
  }

  read(id: string): Promise<Versioned<TransactionRecord> | null> {
    return this.log.read(id);
  }

  jobOf(record: TransactionRecord): Job | null {
    const parsed = Job.safeParse(record.job);
    return parsed.success ? parsed.data : null;
  }

  private leaseUntil(): string {
    return new Date(Date.now() + this.leaseMs).toISOString();
  }

  /** Takes the job: one replace-if-unchanged of the record read, so of two runners one wins. */
  async take(found: Versioned<TransactionRecord>, job: Job, attempts: number): Promise<boolean> {
    const taken = await this.log.update(found, {
      ...found.value,
      status: 'Running',
      job: { ...job, attempts, owner: this.owner, lease_until: this.leaseUntil() },
    });
    if (taken) await this.observe(taken.value);
    return taken !== null;
  }

  /** Replaces the record (re-read each try) with fn's result; null from fn leaves it as it is. */
  private async mutate(id: string, fn: (record: TransactionRecord, job: Job) => TransactionRecord | null): Promise<Versioned<TransactionRecord> | null> {
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

  /**
   * Writes a checkpoint: applies `change` to the job and renews the lease; throws StopSignal when
   * the job must stop. `J` is the kind of job the caller works: a record's job never changes kind.
   */
  async checkpoint<J extends Job>(id: string, change: (job: J) => J, properties: Record<string, string> = {}): Promise<void> {
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
      else if (this.isStopping()) outcome.stop = 'stopping';
      const changed = change(job as J);
      const { owner: _owner, lease_until: _lease, ...released } = changed;
      return {
        ...record,
        properties: { ...record.properties, ...properties },
        job: terminal ? released : { ...changed, owner: this.owner, lease_until: this.leaseUntil() },
      };
    });
    if (!written && outcome.stop === null) outcome.stop = 'lost';
    if (written && (outcome.stop === 'canceled' || Object.keys(properties).length > 0)) await this.observe(written.value);
    if (outcome.stop !== null) throw new StopSignal(outcome.stop);
  }

  /** Hands the lease back (graceful shutdown) so that another runner may take the job at once. */
  async release(id: string): Promise<void> {
    await this.mutate(id, (record, job) => {
      if (job.owner !== this.owner) return null;
      const { owner: _owner, lease_until: _lease, ...released } = job;
      return { ...record, job: released };
    });
  }

  /** Ends the job with a terminal status (unless it already has one) and removes its marker. */
  async finish(id: string, status: 'Succeeded' | 'Failed', error?: string): Promise<void> {
    const finished = await this.mutate(id, (record, job) => {
      if (TERMINAL.has(record.status)) return null;
      if (job.owner !== undefined && job.owner !== this.owner) return null;
      const { owner: _owner, lease_until: _lease, ...released } = job;
      return { ...record, status, properties: { ...record.properties, ...(error !== undefined ? { error } : {}) }, job: released };
    });
    if (finished) {
      this.metrics.jobFinished(status);
      await this.observe(finished.value);
    }
    const after = await this.log.read(id);
    if (after && TERMINAL.has(after.value.status)) await this.markers.remove(id);
  }
}

/**
 * The runner's hold on one job while it works it: heartbeats renew the lease between checkpoints
 * (a chunk may take longer than the lease), and a heartbeat that finds the job canceled or taken
 * over makes the next check stop the job.
 */
export class JobLease {
  private timer: NodeJS.Timeout | undefined;
  private queue: Promise<void> = Promise.resolve();
  private stop: Stop | null = null;

  constructor(
    private readonly records: JobRecords,
    private readonly id: string,
    private readonly isStopping: () => boolean,
  ) {}

  startHeartbeat(): void {
    const every = Math.max(50, Math.floor(this.records.leaseMs / 3));
    this.timer = setInterval(() => {
      this.queue = this.queue
        .then(() => this.records.checkpoint(this.id, (j) => j))
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
    if (this.isStopping()) throw new StopSignal('stopping');
  }

  async release(): Promise<void> {
    this.stopHeartbeat();
    await this.queue;
    await this.records.release(this.id);
  }
}
