import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { listAll, type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import { idOfJsonKey, TRANSACTIONS_DIR, transactionRecordKey } from '../catalog/layout.js';
import { encodeRecord, readRecord, type Versioned } from '../catalog/records.js';

// Transaction records under <root>/_catalog/transactions/<id>.json. Every change to a record is a
// replace-if-unchanged of the version that was read, so concurrent writers (replicas finishing
// each other's work, a coordinator and a recoverer) never both win.

export const TransactionStatus = z.enum(['Queued', 'Running', 'Succeeded', 'Failed', 'Canceled']);
export type TransactionStatus = z.infer<typeof TransactionStatus>;

export const TERMINAL: ReadonlySet<TransactionStatus> = new Set(['Succeeded', 'Failed', 'Canceled']);

/** One version a batch commits: where the dataset is, the staged bytes and the final name. */
export const BatchEntry = z.object({
  table_id: z.array(z.string()),
  /** Dataset location as Locations.resolve takes it. */
  location: z.string(),
  /** The branch the version is of (its history under the dataset's `tree/<branch>/`); absent: main. */
  branch: z.string().optional(),
  version: z.number().int().min(0),
  staged_key: z.string(),
  final_key: z.string(),
  naming_scheme: z.enum(['V1', 'V2']),
  manifest_size: z.number().int().min(0).optional(),
  e_tag: z.string().optional(),
  metadata: z.record(z.string(), z.string()).optional(),
  /**
   * The table as planned (its incarnation: for a table the batch declares, the one its declare
   * gives it; absent in older records), so that rolling forward knows a table dropped since.
   */
  incarnation: z.string().optional(),
});
export type BatchEntry = z.infer<typeof BatchEntry>;

/** A catalog change a batch commit makes besides versions; applied after its commit point. */
export const TableOp = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('declare'),
    table_id: z.array(z.string()),
    properties: z.record(z.string(), z.string()),
    managed_versioning: z.boolean(),
    /** The declared table's incarnation, chosen when the batch was planned (absent in older records: chosen at its claim). */
    incarnation: z.string().optional(),
  }),
  z.object({
    kind: z.literal('delete_versions'),
    table_id: z.array(z.string()),
    location: z.string(),
    /** As in BatchEntry: absent, main. */
    branch: z.string().optional(),
    /** Resolved when the batch was planned, so that replaying it deletes the same versions. */
    versions: z.array(z.object({ version: z.number().int().min(0), key: z.string() })),
  }),
  /** `incarnation`: the table as planned, so that a replay never deregisters a table created since (absent in older records). */
  z.object({ kind: z.literal('deregister'), table_id: z.array(z.string()), incarnation: z.string().optional() }),
]);
export type TableOp = z.infer<typeof TableOp>;

export const TransactionRecord = z.object({
  id: z.string(),
  status: TransactionStatus,
  /** What the transaction does, e.g. `batch_create_table_versions`. */
  operation: z.string(),
  /**
   * Protocol phase of a batch: `reserving` (slots being claimed; rolled back if abandoned),
   * `committing` (past the commit point; rolled forward by whoever finds it), `done`.
   */
  phase: z.enum(['reserving', 'committing', 'done']).optional(),
  properties: z.record(z.string(), z.string()).default({}),
  entries: z.array(BatchEntry).optional(),
  table_ops: z.array(TableOp).optional(),
  created_at: z.string(),
  updated_at: z.string(),
  /** A coordinator that has not reached the commit point by then is presumed dead. */
  lease_until: z.string().optional(),
  /**
   * Set once a `done` batch holds nothing any more (its reservations released and, if it
   * succeeded, its staged manifests deleted). A crash between `done` and the clean-up leaves it
   * unset, which is how start-up recovery finds such a batch.
   */
  cleaned_up: z.boolean().optional(),
  /** State of a long-running job (backfill_column), owned and parsed by src/service/jobs/. */
  job: z.record(z.string(), z.unknown()).optional(),
});
export type TransactionRecord = z.infer<typeof TransactionRecord>;

export class TransactionLog {
  constructor(private readonly store: ObjectStore) {}

  private key(id: string): string {
    return transactionRecordKey(id);
  }

  newId(): string {
    return randomUUID();
  }

  async create(record: TransactionRecord): Promise<Versioned<TransactionRecord>> {
    const info = await this.store.put(this.key(record.id), encodeRecord(record), { ifNoneMatch: '*' });
    return { value: record, etag: info.etag };
  }

  async read(id: string): Promise<Versioned<TransactionRecord> | null> {
    if (!/^[A-Za-z0-9._-]{1,128}$/.test(id) || id.startsWith('.')) return null;
    return readRecord(this.store, this.key(id), TransactionRecord);
  }

  async require(id: string): Promise<Versioned<TransactionRecord>> {
    const record = await this.read(id);
    if (!record) throw new NamespaceError(ErrorCode.TransactionNotFound, `transaction ${JSON.stringify(id)} does not exist`);
    return record;
  }

  /** Replaces the record if it is still the version read; null when another writer got there first. */
  async update(current: Versioned<TransactionRecord>, next: TransactionRecord): Promise<Versioned<TransactionRecord> | null> {
    try {
      const info = await this.store.put(this.key(next.id), encodeRecord({ ...next, updated_at: new Date().toISOString() }), { ifMatch: current.etag });
      return { value: next, etag: info.etag };
    } catch (e) {
      if (e instanceof PreconditionFailedError) return null;
      throw e;
    }
  }

  /** Ids of every transaction record (for recovery at start-up). */
  async ids(): Promise<string[]> {
    const listing = await listAll(this.store, TRANSACTIONS_DIR, { delimiter: '/' });
    return listing.objects.map((o) => idOfJsonKey(TRANSACTIONS_DIR, o.key)).filter((id) => id !== null);
  }
}

/**
 * Whether a transaction reached its commit point. A table record created by a batch that has not
 * (a pending declare) is invisible until it does.
 */
export async function isCommitted(store: ObjectStore, id: string): Promise<boolean> {
  const record = await new TransactionLog(store).read(id);
  return record !== null && (record.value.phase === 'committing' || record.value.status === 'Succeeded');
}

/**
 * Whether a batch still holds the version slots it reserved: until it is done (rolled back, or
 * forward), whatever its reservations' own leases say; a drop waits for it (see table-fences.ts).
 */
export const holdsSlots = (record: Versioned<TransactionRecord> | null): boolean =>
  record !== null && record.value.entries !== undefined && record.value.phase !== 'done';
