import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { listAll, type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import type { BranchName } from '../branches/branch-refs.js';
import { displayId } from '../catalog/catalog.js';
import { deregisteredMarkerKey, type TableRef, tableRecordKey, writeLeaseKey, writersDirKey } from '../catalog/layout.js';
import type { StoreDir } from '../catalog/locations.js';
import { encodeRecord, readRecord, TableRecord } from '../catalog/records.js';
import { faultPoint, pausePoint } from '../coordination/fault-points.js';
import { keepRenewed, leaseExpired, leaseUntil, pollUntil, type Renewal } from '../coordination/leases.js';
import { holdsSlots, TransactionLog } from '../transactions/transaction-log.js';
import { Reservation, TableVersions } from '../versions/dataset-versions.js';
import { deregisterMarker, incarnationOf, incarnationOfRecord, leftoverDir, type NameMarker, type TableState, tableNotFound } from './table-state.js';

// Where writes to a table and its drop meet.
//
// Invariant: once a drop is acknowledged, no write made through the service can land in the
// table, and nothing left in its directory is taken for a table again (its tombstone stays until
// the name is taken anew, see name-claim.ts). A write racing a drop either lands before the drop
// deletes anything (and goes with the table) or fails cleanly.
//
// Protocol. A writer puts a lease of its own under `_catalog/writers/` of the table directory and
// only then reads the table (again, if it resolved it before: then it also checks that the table is
// the incarnation it resolved); if a drop has begun, it removes its lease and answers 404 without
// touching data. A drop puts the
// tombstone (create-if-absent: of concurrent drops one wins) and only then looks for live writer
// leases and version-slot reservations, waiting until there are none before it deletes. Each side
// writes before it reads, so at least one sees the other: a writer that saw no tombstone is seen
// and waited for by the drop; a writer that saw it never starts. A writer whose lease runs out
// (it stopped renewing: dead or stuck) is no longer waited for; should it wake, its release finds
// its lease gone and reports the write as failed.
//
// A batch's version-slot reservations (version-slots.ts) are held by its batch, not by their own
// lease: a batch may rightly work longer than a lease, renewing only its transaction record
// (batch-lease.ts). Invariant: a drop deletes nothing while a batch holding a slot of the table is
// unfinished. It brings each such batch as far as it may (BatchRecovery.holdsSlots: rolled back
// before its commit point once its lease ran out, so that its coordinator can no longer commit;
// rolled forward past it, so that the batch, which happened before the drop, completes) and waits
// for one before its commit point for as long as its holder renews its lease, with no other bound.
// The batch, holding its slots, looks at its tables again before its commit point (batch-commit.ts):
// so a batch that saw no tombstone is waited for, and one that saw it stops before its commit point.
//
// A deregister meets writers the same way with its marker (drop-table.ts), but waits for them,
// single writers and batches alike, as long as they renew (writesEnded): it keeps the data.
//
// A branch's delete meets the writes on that branch the same way, with the branch's ref for the
// tombstone (branches/branch-service.ts). A write on a branch names it in its lease; a commit
// on a branch holds its slot under the branch's reservations. Each reads the ref after it
// announced itself and fails (404 code 22) when the ref is gone, or not the one it resolved
// (single-commit.ts, batch-commit.ts, data-tables.ts; a data write's own commits keep the ref it
// read under its lease, which the delete waits for). The delete removes the ref, then waits
// (branchWritesEnded) for the branch's writers and slots as long as they renew, as a deregister
// does, and only then removes the branch's tree. Invariant: no write in flight on a branch leaves
// a manifest in its tree after its delete: a writer that saw the ref is waited for and its work
// goes with the tree; one that saw it gone never writes. A commit that finds no ref at all is a
// fork's first commit (pylance's create_branch commits before it writes the ref), not work on the
// deleted branch; what it leaves, or a writer frozen past its lease, a fork of the name removes
// before it forks (branch-service.ts).

/**
 * The writer's look after it announced itself (a write lease, or a version-slot reservation):
 * whether the table `resolved` describes is still there, neither dropped nor deregistered since,
 * nor dropped and created again. Two reads at once decide it: the same marker as resolved (none,
 * or a retired directory's, which every deregister and drop replaces), and the same record, not a
 * create's claim (unless `creatingRequest` holds it).
 */
export async function isStillResolved(store: ObjectStore, resolved: TableState, creatingRequest?: string): Promise<boolean> {
  const recordKey = tableRecordKey(resolved.ref);
  // A record whose etag is the one resolved is that record (records are replaced, never rewritten
  // in place): its HEAD decides, and only a changed one is read.
  const readIfChanged = async () => {
    const info = resolved.record ? await store.head(recordKey) : undefined;
    return info && info.etag === resolved.record?.etag ? resolved.record : readRecord(store, recordKey, TableRecord);
  };
  const [marker, record] = await Promise.all([store.head(deregisteredMarkerKey(resolved.ref)), readIfChanged()]);
  const creating = record?.value.creating;
  return (
    (marker?.etag ?? null) === resolved.markerEtag &&
    (creating === undefined || creating.request_id === creatingRequest) &&
    incarnationOfRecord(record?.value) === incarnationOf(resolved)
  );
}

/**
 * Deregisters the table `state` holds: its marker, in place of exactly the marker the state read
 * (none, or a retired directory's), so that writers see it as they see a drop (isStillResolved).
 * False when another deregister or a drop came first.
 */
export async function putDeregisterMarker(store: ObjectStore, state: TableState): Promise<boolean> {
  const { markerEtag } = state;
  try {
    await store.put(deregisteredMarkerKey(state.ref), encodeRecord(deregisterMarker(state)), markerEtag ? { ifMatch: markerEtag } : { ifNoneMatch: '*' });
    return true;
  } catch (e) {
    if (e instanceof PreconditionFailedError) return false;
    throw e;
  }
}

/** A writer's lease; `branch`: the branch it writes on (none on main). */
const Lease = z.object({ expires_at: z.string(), branch: z.string().optional() });

/** Whether batch `transactionId`, which holds a slot of a table being dropped, still holds it once brought as far as may be. */
export type BatchSlotHolds = (transactionId: string) => Promise<boolean>;

export interface WriteLease {
  /**
   * Ends the write; throws 409 when a drop did not wait for it (the write may have gone with the
   * table). `found`: the write found its table, whose directory keeps the leases' for the next
   * writer; otherwise what the lease made goes with it (a write to a missing table leaves no
   * directory that would make its name look taken).
   */
  release(found?: boolean): Promise<void>;
}

export class TableFences {
  /**
   * See BatchSlotHolds: BatchRecovery.holdsSlots, once the versions service is built
   * (settleBatchesWith). Until then a batch is waited for until its record says it is done, which
   * the pollers of every replica bring about once its lease has run out.
   */
  private batchHoldsSlot: BatchSlotHolds = async (transactionId) => holdsSlots(await new TransactionLog(this.store).read(transactionId));

  constructor(
    private readonly store: ObjectStore,
    private readonly leaseMs: number,
  ) {}

  /** How a drop brings a batch holding one of the table's version slots to an end (see BatchSlotHolds). */
  settleBatchesWith(holds: BatchSlotHolds): void {
    this.batchHoldsSlot = holds;
  }

  /**
   * Announces a write to the table `resolved` describes. 404 when the table was dropped (or
   * dropped and created again) since it was resolved; the lease is renewed until release.
   */
  async enterWrite(resolved: TableState, requestId: string): Promise<WriteLease> {
    const lease = await this.announce(resolved.ref, requestId);
    const same = await isStillResolved(this.store, resolved).catch(async (e: unknown) => {
      await lease.release().catch(() => undefined);
      throw e;
    });
    if (!same) {
      await lease.release().catch(() => undefined);
      throw tableNotFound([...resolved.ref.namespace, resolved.ref.name]);
    }
    return lease;
  }

  /**
   * Puts the write lease of a writer of the table `ref` (see the protocol), renewed until release;
   * one on a branch names it, so that the branch's delete waits for it.
   */
  private async announce(ref: TableRef, requestId: string, branch: BranchName = null): Promise<WriteLease> {
    const key = writeLeaseKey(ref, randomUUID());
    const onBranch = branch === null ? {} : { branch };
    const lease = () => encodeRecord({ request_id: requestId, expires_at: leaseUntil(this.leaseMs), ...onBranch });
    // Not fsynced: the lease matters only while its writer lives, and a crash of the machine ends
    // the writer too (an unreadable lease is no live lease to a drop, see anyLive). Short-lived: a
    // local store may write it into the file of a lease deleted before (local-spare-files.ts), and
    // a drop that reads a lease as it is deleted may then read another's bytes, or none that
    // parse: a lease being deleted is no live one, and another writer's live lease only makes the
    // drop wait for what is there anyway. On a local disk the lease, its directory kept (release),
    // then costs a rewrite of a small file instead of a new inode and a directory each (about
    // 0.6 ms of a one-row update).
    const transient = { durable: false };
    const stampedAt = Date.now();
    let etag = (await this.store.put(key, lease(), { ifNoneMatch: '*' }, { ...transient, shortLived: true })).etag;
    // Renewed only while it is exactly the lease written here: a drop that gave up waiting deleted it.
    const renewal = keepRenewed(
      this.leaseMs,
      async () => {
        etag = (await this.store.put(key, lease(), { ifMatch: etag }, transient)).etag;
      },
      stampedAt,
    );
    const entered = Date.now();
    return {
      release: async (found = false) => {
        const renewed = await renewal.stop().then(
          () => true,
          () => false,
        );
        // A drop gives up waiting only a lease after it began, and it began after this write
        // entered; so a write that ends within a lease needs no look at its lease.
        const still = renewed && (Date.now() - entered < this.leaseMs || (await this.store.head(key)) !== null);
        // The answer need not wait for the delete: a drop waits for it, and a lease left behind by
        // a crash runs out by itself.
        void this.store.delete(key, { keepDirectory: found }).catch(() => undefined);
        if (!still) {
          const id = [...ref.namespace, ref.name];
          throw new NamespaceError(
            ErrorCode.ConcurrentModification,
            `table ${displayId(id)} was dropped while this write ran; the write may have gone with it`,
          );
        }
      },
    };
  }

  /** Runs `write` under a write lease (see enterWrite); a failure of the write wins over one of the release. */
  async whileWriting<T>(resolved: TableState, requestId: string, write: () => Promise<T>): Promise<T> {
    return this.under(await this.enterWrite(resolved, requestId), write);
  }

  /**
   * Runs `resolveAndWrite` under a write lease put before it: its own resolution of the table
   * (which must find it visible, or fail) is the writer's read after its lease (see the protocol),
   * one round trip fewer than resolving first and reading again.
   */
  async whileWritingTo<T>(ref: TableRef, requestId: string, resolveAndWrite: () => Promise<T>, branch: BranchName = null): Promise<T> {
    const lease = await this.announce(ref, requestId, branch);
    return this.under(lease, async () => {
      await pausePoint('write:after-lease');
      return resolveAndWrite();
    });
  }

  /** A write that failed may not have found its table: its lease takes what it made with it (see WriteLease.release). */
  private async under<T>(lease: WriteLease, write: () => Promise<T>): Promise<T> {
    let result: T;
    try {
      result = await write();
    } catch (e) {
      await lease.release().catch(() => undefined);
      throw e;
    }
    await lease.release(true);
    return result;
  }

  /**
   * Begins a drop: puts the tombstone (in place of exactly the marker the state read, if any),
   * which hides the table at once; a retired directory stays retired (see table-state.ts). Null
   * when another drop or a deregister came first. The tombstone's lease is renewed until
   * `finishDrop` (or the process dies, after which whoever takes the name over cleans up).
   */
  async beginDrop(state: TableState): Promise<{ renewal: Renewal } | null> {
    const key = deregisteredMarkerKey(state.ref);
    const droppedAt = new Date().toISOString();
    const retired = state.retired ? { retired: true } : {};
    const body = () => encodeRecord({ dropped_at: droppedAt, lease_until: leaseUntil(this.leaseMs), ...retired } satisfies NameMarker);
    let etag: string;
    const stampedAt = Date.now();
    try {
      ({ etag } = await this.store.put(key, body(), state.markerEtag ? { ifMatch: state.markerEtag } : { ifNoneMatch: '*' }));
    } catch (e) {
      if (e instanceof PreconditionFailedError) return null;
      throw e;
    }
    return {
      renewal: keepRenewed(
        this.leaseMs,
        async () => {
          ({ etag } = await this.store.put(key, body(), { ifMatch: etag }));
        },
        stampedAt,
      ),
    };
  }

  /**
   * Waits until no write holds a live lease on the table and no version slot of its dataset is
   * held, then deletes everything in the table directory but the tombstone (in a retired one, the
   * table's own directory elsewhere and its record instead: see leftoverDir). A writer (or a single
   * commit's slot) still renewing after one lease is not waited for further; its release reports
   * it. A batch holding a slot is waited for as long as it holds it (see the invariant above).
   */
  async finishDrop(state: TableState, data: StoreDir, begun: { renewal: Renewal }): Promise<void> {
    try {
      const writersDeadline = Date.now() + this.leaseMs;
      await pollUntil(async () => {
        const slots = await this.slotsHeld(new TableVersions(data));
        if (slots.byBatch) return false;
        return Date.now() >= writersDeadline || (!slots.bySingleWriter && !(await this.anyLive(this.store, writersDirKey(state.ref))));
      }, Number.POSITIVE_INFINITY);
      const leftovers = leftoverDir(state);
      if (leftovers !== null) await this.store.deletePrefix(leftovers, { keep: [deregisteredMarkerKey(state.ref)] });
      // In a retired directory the record goes last, as it does with the rest of any other: a drop
      // killed before leaves it, and whoever takes the name over deletes the directory it names.
      if (state.retired) {
        faultPoint('drop:before-record');
        await this.store.delete(tableRecordKey(state.ref));
      }
    } finally {
      await begun.renewal.stop().catch(() => undefined);
    }
  }

  /**
   * Who holds version slots of the dataset: a single writer within its reservation's lease, or a
   * batch that still holds them (each batch asked once, see BatchSlotHolds). An unreadable
   * reservation (cut short by a crash) holds nothing.
   */
  private async slotsHeld(line: TableVersions): Promise<{ bySingleWriter: boolean; byBatch: boolean }> {
    const { objects } = await listAll(line.store, line.reservationsPrefix);
    let bySingleWriter = false;
    const batches = new Set<string>();
    for (const o of objects) {
      const held = await readRecord(line.store, o.key, Reservation).catch(() => null);
      if (held?.value.transaction_id !== undefined) batches.add(held.value.transaction_id);
      else if (held && !leaseExpired(held.value.expires_at)) bySingleWriter = true;
    }
    for (const id of batches) if (await this.batchHoldsSlot(id)) return { bySingleWriter, byBatch: true };
    return { bySingleWriter, byBatch: false };
  }

  /**
   * Waits until no write to the table `state` holds (its data in `data`) is under way, for as long
   * as one is: a deregister waits for the writes that entered before its marker, since it keeps
   * their data and promises it unchanged from its answer on (unlike a drop, it has nothing to cut
   * off). A writer that died stops renewing its lease and is waited for until it runs out.
   */
  async writesEnded(state: TableState, data: StoreDir): Promise<void> {
    await this.ended(state.ref, new TableVersions(data), undefined);
  }

  /**
   * Waits until no write on branch `branch` of the table `ref` is under way (a lease naming the
   * branch, a slot of its line of history `line`), for as long as one is: the wait of the branch's
   * delete once it removed the ref (see the protocol above).
   */
  async branchWritesEnded(ref: TableRef, branch: string, line: TableVersions): Promise<void> {
    await this.ended(ref, line, branch);
  }

  /** Waits until no slot of `line` is held and no lease on the table `ref` (with `branch`, naming it) is live. */
  private async ended(ref: TableRef, line: TableVersions, branch: string | undefined): Promise<void> {
    await pollUntil(async () => {
      const slots = await this.slotsHeld(line);
      return !slots.byBatch && !slots.bySingleWriter && !(await this.anyLive(this.store, writersDirKey(ref), branch));
    }, Number.POSITIVE_INFINITY);
  }

  /** Whether a lease under `prefix` is live (with `branch`: one naming that branch). */
  private async anyLive(store: ObjectStore, prefix: string, branch?: string): Promise<boolean> {
    const { objects } = await listAll(store, prefix);
    for (const o of objects) {
      const lease = await readRecord(store, o.key, Lease).catch(() => null);
      if (lease && !leaseExpired(lease.value.expires_at) && (branch === undefined || lease.value.branch === branch)) return true;
    }
    return false;
  }
}
