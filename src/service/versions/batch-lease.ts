import type { Versioned } from '../catalog/records.js';
import { keepRenewed, leaseExpired, leaseUntil, type Renewal } from '../coordination/leases.js';
import type { TransactionLog, TransactionRecord } from '../transactions/transaction-log.js';
import { conflict } from './commit-steps.js';

// The lease of a batch (see the protocol in batch-commit.ts). Whoever works a batch -- its
// coordinator, or a replica finishing it after its coordinator died -- holds it through the
// `lease_until` of its transaction record, renewed every third of the lease (keepRenewed, the one
// renewal of every lease in this service) for as long as it works, in every phase: preparation,
// claims, the commit point, rolling forward or back, clean-up. The pollers of the other replicas
// take over only a batch whose lease has run out, so a batch larger than one lease is never
// rolled back under a coordinator still at work.
//
// Invariant: the holder writes the record -- renewals and phase changes alike -- one write at a
// time, each a replace-if-unchanged of the version it wrote last, and another process takes a
// batch over only with a replace-if-unchanged of exactly the record it found with its lease run
// out (take). So once anyone else has written the record, every later write of the holder fails
// and the holder knows it has lost the batch. Before the commit point it stops: the flip to
// `committing` is such a write, so a coordinator can never commit over a rollback. After it, it may
// go on rolling forward, which every finisher does idempotently.

export class BatchLease {
  private current: Versioned<TransactionRecord>;
  /** Why the batch is no longer held (undefined while it is). */
  private lost: unknown;
  /** The write under way; writes (renewals included) go one at a time. */
  private writing: Promise<unknown> = Promise.resolve();
  private readonly renewal: Renewal | null;

  private constructor(
    private readonly log: TransactionLog,
    private readonly leaseMs: number,
    record: Versioned<TransactionRecord>,
    /** When the record's lease was computed; null: not held (helping, see helping()). */
    stampedAt: number | null,
  ) {
    this.current = record;
    if (stampedAt === null) {
      this.lost = conflict(`transaction ${record.value.id} is held by another process`);
      this.renewal = null;
    } else {
      this.renewal = keepRenewed(
        leaseMs,
        async () => {
          if (!(await this.write((r) => r))) throw this.lost;
        },
        stampedAt,
      );
    }
  }

  /** Writes the record of a new batch (create-if-absent) and holds it from then on. */
  static async begin(log: TransactionLog, leaseMs: number, record: TransactionRecord): Promise<BatchLease> {
    const stampedAt = Date.now();
    const created = await log.create({ ...record, lease_until: leaseUntil(leaseMs, stampedAt) });
    return new BatchLease(log, leaseMs, created, stampedAt);
  }

  /** Takes over the batch of `found` if its lease has run out and nobody wrote its record since; else null. */
  static async take(log: TransactionLog, leaseMs: number, found: Versioned<TransactionRecord>): Promise<BatchLease | null> {
    if (!leaseExpired(found.value.lease_until)) return null;
    const stampedAt = Date.now();
    const taken = await log.update(found, { ...found.value, lease_until: leaseUntil(leaseMs, stampedAt) });
    return taken ? new BatchLease(log, leaseMs, taken, stampedAt) : null;
  }

  /** A batch found held by another process, which this one helps finish past its commit point: every write of it re-reads the record. */
  static helping(log: TransactionLog, found: Versioned<TransactionRecord>): BatchLease {
    return new BatchLease(log, 0, found, null);
  }

  /** The record as this process last wrote (or found) it. */
  get record(): Versioned<TransactionRecord> {
    return this.current;
  }

  get held(): boolean {
    return this.lost === undefined;
  }

  /** Throws why the batch is no longer held: another process wrote its record, or a renewal failed. */
  check(): void {
    if (this.lost !== undefined) throw this.lost;
  }

  /**
   * Replaces the record with `change` of it and a fresh lease, after the write under way; null when
   * the batch is not held (any more): then check() says why.
   */
  write(change: (record: TransactionRecord) => TransactionRecord): Promise<Versioned<TransactionRecord> | null> {
    const next = this.writing.then(async () => {
      if (this.lost !== undefined) return null;
      try {
        const written = await this.log.update(this.current, { ...change(this.current.value), lease_until: leaseUntil(this.leaseMs) });
        if (written) this.current = written;
        else this.lost = conflict(`transaction ${this.current.value.id} was taken over by another process once its lease had run out`);
        return written;
      } catch (e) {
        // Whether the put landed is unknown: no later write can be made from the version known here.
        this.lost = e;
        throw e;
      }
    });
    this.writing = next.catch(() => undefined);
    return next;
  }

  /** Stops renewing (after a renewal under way): the holder's work on the batch is over. */
  async end(): Promise<void> {
    await this.renewal?.stop().catch(() => undefined);
  }
}
