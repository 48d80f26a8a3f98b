import { PreconditionFailedError } from '../../store/object-store.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { BATCH_MARKERS_DIR, reservedMarkerKey, tableRecordKey, tableRefOf } from '../catalog/layout.js';
import { encodeRecord, readRecord, TableRecord, type Versioned } from '../catalog/records.js';
import type { ServiceLogger } from '../context/logger.js';
import { faultPoint, pausePoint } from '../coordination/fault-points.js';
import { leaseExpired } from '../coordination/leases.js';
import { type Marker, Poller, pollIntervalMs, UnfinishedMarkers } from '../coordination/markers.js';
import { putDeregisterMarker } from '../tables/table-fences.js';
import { dataDir, incarnationOf, isVisible, LinkedTableDir, readTableState } from '../tables/table-state.js';
import { type BatchEntry, holdsSlots, type TransactionLog, type TransactionRecord } from '../transactions/transaction-log.js';
import { BatchLease } from './batch-lease.js';
import { branchOfEntry, slotId, versionsOn } from './branch-versions.js';
import { type PlannedVersion, StagedManifestMissing, writeManifest } from './commit-steps.js';
import type { CommittedVersion } from './dataset-versions.js';

// Bringing batches to an end (see the protocol in batch-commit.ts): past the commit point, whoever
// finds a batch's record (a later request, a restart, another replica) rolls it forward from the
// staged manifests, which are deleted only once the record says Succeeded; before it, once its
// lease has run out, rolls it back (its reservations and pending table records go). Whoever
// finishes a batch whose lease ran out takes the lease over and holds it while it works
// (batch-lease.ts); one that finds the lease live only helps a batch past its commit point.
//
// Invariant: a batch writes its marker (`_catalog/batches/<id>.json`) before its record, so before
// it claims anything, and removes it only once the batch is done and cleaned up. Every replica
// polls the markers and finishes each batch whose lease has run out (rolled back before its
// commit point, forward after it), so a batch whose coordinator died never keeps a table name or
// a version slot for longer than its lease plus a poll interval, without any restart; one whose
// coordinator is at work keeps its lease renewed and is left to it.

export interface VersionSettings {
  /** How long a reservation or an unfinished batch is trusted before it is presumed dead. */
  leaseMs: number;
  /** How often unfinished batches are looked for (default: derived from the lease, see pollIntervalMs). */
  pollMs?: number;
  /** Versions one BatchCommitTables may delete, its delete_table_versions together (--max-batch-deleted-versions; unset: any number). */
  maxDeletedVersions?: number;
}

const ignorePrecondition = (e: unknown): void => {
  if (!(e instanceof PreconditionFailedError)) throw e;
};

export class BatchRecovery {
  /** Batches this process coordinates right now: the poller leaves them to their coordinator. */
  readonly coordinating = new Set<string>();
  /** One marker per unfinished batch, written before its record (see the invariant above). */
  readonly markers: UnfinishedMarkers;
  private poller: Poller | undefined;

  constructor(
    private readonly deps: CatalogDeps,
    private readonly log: TransactionLog,
    private readonly settings: VersionSettings,
    private readonly logger?: ServiceLogger,
  ) {
    this.markers = new UnfinishedMarkers(deps.store, BATCH_MARKERS_DIR);
  }

  /** Applies the table operations of a committed batch. Idempotent. */
  private async applyTableOps(record: TransactionRecord): Promise<void> {
    for (const op of record.table_ops ?? []) {
      const ref = tableRefOf(op.table_id);
      if (op.kind !== 'delete_versions') await this.deps.listingIndex.begin('table', ref, record.id);
      if (op.kind === 'declare') {
        const current = await readRecord(this.deps.store, tableRecordKey(ref), TableRecord);
        if (current?.value.pending_transaction === record.id) {
          const { pending_transaction: _pending, ...settled } = current.value;
          await this.deps.store.put(tableRecordKey(ref), encodeRecord(settled), { ifMatch: current.etag }).catch(ignorePrecondition);
        }
        await this.deps.store.put(reservedMarkerKey(ref), '', { ifNoneMatch: '*' }).catch(ignorePrecondition);
      } else if (op.kind === 'delete_versions') {
        const versions = versionsOn(this.deps.locations.resolve(op.location), op.branch ?? null);
        for (const v of op.versions) {
          await versions.store.delete(v.key);
          await versions.store.delete(versions.sidecarKey(v.version));
        }
      } else {
        // The table as planned, unless it was dropped, deregistered or created anew since (a replay finds it done),
        // or a symbolic link keeps the catalog out of it since (it holds no table: see LinkedTableDir).
        const state = await readTableState(this.deps.store, ref).catch((e: unknown) => {
          if (e instanceof LinkedTableDir) return null;
          throw e;
        });
        if (state && isVisible(state) && (op.incarnation === undefined || incarnationOf(state) === op.incarnation))
          await putDeregisterMarker(this.deps.store, state);
      }
      if (op.kind !== 'delete_versions') await this.deps.listingIndex.settleOp('table', ref, record.id);
    }
  }

  /** Undoes what an abandoned batch claimed for its table operations: its pending table records. */
  private async undoTableOps(record: TransactionRecord): Promise<void> {
    for (const op of record.table_ops ?? []) {
      if (op.kind !== 'declare') continue;
      const key = tableRecordKey(tableRefOf(op.table_id));
      const current = await readRecord(this.deps.store, key, TableRecord);
      if (current?.value.pending_transaction === record.id) await this.deps.store.delete(key);
      await this.deps.listingIndex.settleOp('table', tableRefOf(op.table_id), record.id);
    }
  }

  private planFromEntry(entry: BatchEntry): PlannedVersion {
    return { entry, versions: versionsOn(this.deps.locations.resolve(entry.location), branchOfEntry(entry)) };
  }

  /**
   * Writes `change` of the batch's record unless it has `reached` that state: through the lease
   * while this process holds it, else (another process finishes the batch too) re-reading the
   * record after each lost race. Returns the record as it then is; null when it is gone.
   */
  private async advance(
    lease: BatchLease,
    reached: (r: TransactionRecord) => boolean,
    change: (r: TransactionRecord) => TransactionRecord,
  ): Promise<Versioned<TransactionRecord> | null> {
    if (lease.held && reached(lease.record.value)) return lease.record;
    const written = await lease.write(change).catch(() => null);
    if (written) return written;
    const id = lease.record.value.id;
    let current = await this.log.read(id);
    while (current && !reached(current.value)) current = (await this.log.update(current, change(current.value))) ?? (await this.log.read(id));
    return current;
  }

  /** Finishes a batch past its commit point: manifests, then Succeeded, then cleanup. Idempotent. */
  async rollForward(lease: BatchLease): Promise<Map<string, CommittedVersion>> {
    const record = lease.record.value;
    const committed = new Map<string, CommittedVersion>();
    for (const [i, entry] of (record.entries ?? []).entries()) {
      const written = await this.writeEntry(entry, record.id);
      if (written) committed.set(slotId(entry), written);
      faultPoint(`batch:after-manifest-${i}`);
    }
    await this.applyTableOps(record);
    const done = await this.advance(
      lease,
      (r) => r.phase === 'done',
      (r) => ({ ...r, status: 'Succeeded', phase: 'done' }),
    );
    await pausePoint('batch:after-succeeded');
    if (done) await this.finish(lease, done);
    else await this.cleanUpVanished(record, true);
    return committed;
  }

  /**
   * Writes the version of a committed batch's entry; null when its table was dropped since (or
   * deregistered, or dropped and created again) and its staged manifest went with it. The batch
   * happened before the drop, and of such a table nothing is left to write: the entry is done, and
   * the rest of the batch goes on (a drop waits for a batch holding its table's slots, see
   * table-fences.ts; this covers whoever rolls forward after it: the coordinator, a helper, a
   * drop that died while it waited). Costs nothing more on the way every other entry takes.
   */
  private async writeEntry(entry: BatchEntry, transactionId: string): Promise<CommittedVersion | null> {
    try {
      return await writeManifest(this.planFromEntry(entry), transactionId);
    } catch (e) {
      if (e instanceof StagedManifestMissing && (await this.droppedSince(entry))) return null;
      throw e;
    }
  }

  /** Whether the table of `entry` is no longer the one the batch planned: not visible, another incarnation, or its data elsewhere. */
  private async droppedSince(entry: BatchEntry): Promise<boolean> {
    const state = await readTableState(this.deps.store, tableRefOf(entry.table_id));
    if (!isVisible(state) || (entry.incarnation !== undefined && incarnationOf(state) !== entry.incarnation)) return true;
    const dir = dataDir(this.deps.locations, state);
    return dir.store.location(dir.key) !== entry.location;
  }

  /**
   * Abandons a batch before its commit point: Failed, then its reservations go. Only its
   * coordinator, or a process that took its lease over (which the coordinator then has lost), may.
   */
  async rollBack(lease: BatchLease): Promise<void> {
    const current = await this.advance(
      lease,
      (r) => r.phase !== 'reserving',
      (r) => ({ ...r, status: 'Failed', phase: 'done' }),
    );
    if (current?.value.phase === 'committing') {
      // Its coordinator's flip to committing landed though its answer was lost: roll it forward.
      await this.rollForward(BatchLease.helping(this.log, current));
      return;
    }
    if (current) await this.finish(lease, current);
    else await this.cleanUpVanished(lease.record.value, false);
  }

  /** Clean-up of a batch whose record is gone (removed by hand): nothing is left to mark. */
  private async cleanUpVanished(record: TransactionRecord, succeeded: boolean): Promise<void> {
    await this.cleanUp(record, succeeded);
    await this.markers.remove(record.id);
  }

  /**
   * Cleans up after a `done` batch, then marks its record cleaned_up. Without the mark, start-up
   * recovery (which skips finished records) could not tell a batch that crashed between `done`
   * and its clean-up: its reservations would stay forever and, if it succeeded, so would its
   * staged manifests. A race to mark the record lost to a renewal is tried again (advance).
   */
  private async finish(lease: BatchLease, record: Versioned<TransactionRecord>): Promise<void> {
    await this.cleanUp(record.value, record.value.status === 'Succeeded');
    await this.advance(
      lease,
      (r) => r.cleaned_up === true,
      (r) => ({ ...r, cleaned_up: true }),
    );
    await this.markers.remove(record.value.id);
  }

  /**
   * Releases the reservations a finished transaction still holds; deletes its staged manifests if
   * it succeeded. The caller removes the marker, or (finish) first marks the record cleaned up;
   * a record gone meanwhile leaves the marker to go here.
   */
  private async cleanUp(record: TransactionRecord, succeeded: boolean): Promise<void> {
    if (!succeeded) await this.undoTableOps(record);
    for (const entry of record.entries ?? []) {
      const { versions } = this.planFromEntry(entry);
      if (succeeded) await versions.store.delete(entry.staged_key);
      const held = await versions.readReservation(entry.version);
      if (held?.value.transaction_id === record.id) await versions.release(entry.version);
    }
  }

  /**
   * Brings a batch found unfinished to an end: once its lease has run out, this process takes the
   * lease over and rolls the batch back before its commit point, forward after it. Within its lease
   * its holder is at work: a batch before the commit point is left to it, one past it is helped
   * forward (a writer waiting for one of its slots, a restart). Returns whether the lease was taken.
   */
  async recover(transactionId: string): Promise<boolean> {
    const found = await this.log.read(transactionId);
    if (!found?.value.entries) return false;
    const lease = await BatchLease.take(this.log, this.settings.leaseMs, found);
    if (!lease) {
      if (found.value.phase !== 'reserving') await this.finishBatch(BatchLease.helping(this.log, found));
      return false;
    }
    try {
      await this.finishBatch(lease);
    } finally {
      await lease.end();
    }
    return true;
  }

  /**
   * Brings batch `transactionId` as far as this process may (recover: rolled back or forward once
   * its lease has run out, helped forward past its commit point), and says whether it still holds
   * the version slots it reserved (holdsSlots): only a batch before its commit point whose
   * holder still renews its lease does, once this returns. A drop asks (see table-fences.ts).
   */
  async holdsSlots(transactionId: string): Promise<boolean> {
    await this.recover(transactionId);
    return holdsSlots(await this.log.read(transactionId));
  }

  private async finishBatch(lease: BatchLease): Promise<void> {
    const { phase } = lease.record.value;
    if (phase === 'committing') await this.rollForward(lease);
    else if (phase === 'reserving') await this.rollBack(lease);
    else await this.finish(lease, lease.record);
  }

  /** Recovers every unfinished transaction; run at start-up. Returns how many were looked at, and those that failed. */
  async recoverAll(): Promise<{ count: number; failures: Array<{ id: string; error: unknown }> }> {
    let count = 0;
    const failures: Array<{ id: string; error: unknown }> = [];
    for (const id of await this.log.ids()) {
      // One record that cannot be finished must not keep the service from starting.
      try {
        const record = await this.log.read(id);
        // A `done` batch not yet cleaned up crashed before its clean-up: finish that too.
        if (record?.value.entries && (record.value.phase !== 'done' || !record.value.cleaned_up)) {
          count++;
          await this.recover(id);
          // A batch still within its lease (a live coordinator elsewhere, or one written by a
          // version without markers) is left to the pollers: make sure they can find it.
          const after = await this.log.read(id);
          if (after && !this.isFinished(after.value)) await this.markers.add(id);
        }
      } catch (error) {
        failures.push({ id, error });
      }
    }
    return { count, failures };
  }

  private isFinished(record: TransactionRecord): boolean {
    return record.phase === 'done' && record.cleaned_up === true;
  }

  /** Starts polling for batches whose coordinator died (every replica runs this). */
  start(): void {
    this.poller ??= new Poller(() => this.pollBatches(), this.settings.pollMs ?? pollIntervalMs(this.settings.leaseMs));
    this.poller.start();
  }

  async stop(): Promise<void> {
    await this.poller?.stop();
    this.poller = undefined;
  }

  /**
   * Looks at every unfinished batch once: each whose lease has run out and that is not
   * coordinated here is finished (rolled back or forward). A marker whose record never appeared
   * is removed once older than the lease; one whose batch is finished, at once.
   */
  async pollBatches(): Promise<void> {
    let markers: Marker[];
    try {
      markers = await this.markers.list();
    } catch (err) {
      this.logger?.warn({ err }, 'could not list unfinished batches');
      return;
    }
    for (const { id, lastModified } of markers) {
      if (this.coordinating.has(id)) continue;
      try {
        const record = await this.log.read(id);
        if (!record) {
          if (Date.now() - lastModified.getTime() > this.settings.leaseMs) await this.markers.remove(id);
        } else if (this.isFinished(record.value)) {
          await this.markers.remove(id);
        } else if (leaseExpired(record.value.lease_until) && (await this.recover(id))) {
          const after = await this.log.read(id);
          this.logger?.info({ transaction: id, status: after?.value.status, phase: after?.value.phase }, 'finished a batch whose coordinator died');
        }
      } catch (err) {
        this.logger?.warn({ transaction: id, err }, 'could not finish an unfinished batch; it is tried again at the next poll');
      }
    }
  }
}
