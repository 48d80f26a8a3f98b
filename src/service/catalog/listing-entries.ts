import { randomUUID } from 'node:crypto';
import { listAll, type ObjectStore } from '../../store/object-store.js';
import { faultPoint } from '../coordination/fault-points.js';
import { leaseExpired, leaseUntil } from '../coordination/leases.js';
import { isVisible, LinkedTableDir, readTableState, tableHasData } from '../tables/table-state.js';
import { AfterAnswer, nextTurn } from '../versions/after-answer.js';
import { readNamespace } from './catalog.js';
import {
  type ChildKind,
  indexDataKey,
  indexPendingDirKey,
  indexPendingKey,
  indexPendingNamePrefix,
  indexVisibleKey,
  isPendingOf,
  listingLogKey,
  parsePendingKey,
  type TableRef,
} from './layout.js';
import type { ListingSnapshots } from './listing-snapshot.js';
import { LinkedLocation, type Locations } from './locations.js';

// A name's entries in the listing index (listing-index.ts): announced by a pending entry before a
// change of the child, settled to match the child's state after it.
//
// Invariant: a name without a pending entry has exactly the `v` (and `t`) its child's state calls
// for. A name with a pending entry is read from the child's state itself.
//
// How it holds. Every operation that changes a child's state puts its pending entry first, changes
// the state, then settles the name and only then deletes its pending entry; a crash anywhere leaves
// the pending entry behind. Settling writes the entries the state calls for and then reads the state
// again, repeating until the two agree: of two settlers racing, the later write is followed by a
// read that sees the later state, so the last word always matches the state. A pending entry whose
// lease ran out belongs to a dead operation (or one too slow to trust): a listing that meets it
// settles the name and deletes it, unless the state shows a live create or drop, whose own settle is
// still to come (listing-pages.ts). Pending entries are few (operations under way, and dead ones
// until a listing meets them), so a listing reads all of them with one LIST, and reads state only
// for the names on its page that have one.

const SETTLE_ROUNDS = 5;

/**
 * The index's keys are empty: what makes one durable is the file system's journal, which keeps
 * the order of metadata changes across a crash (as the deletes of entries rely on), not an fsync
 * of its own. A pending entry is so before the state change its operation then makes durable
 * (its fsync commits the journal), and an entry, or a log key, before the pending entry's delete
 * that follows it; one lost with the machine leaves its pending entry, and a listing reads the
 * state. So none of them costs an fsync (on a local disk; an object store is always durable).
 */
const EMPTY_ENTRY = { durable: false } as const;

/** What a change made of a child: visible or gone, with data or not. */
export interface Made {
  visible: boolean;
  data: boolean;
}

/** A child's state as the index needs it. */
export interface Truth extends Made {
  /** A create or drop is under way: its own settle will come. */
  busy: boolean;
}

export class IndexEntries {
  constructor(
    private readonly store: ObjectStore,
    private readonly locations: Locations,
    private readonly leaseMs: number,
    private readonly snapshots: ListingSnapshots,
    /** Compacts the index's log when it is long (SnapshotCatchUp.compactIfLong). */
    private readonly compactLog: (kind: ChildKind, ns: string[]) => Promise<void>,
  ) {}

  /** What a settle leaves for after its caller's answer: the log's compaction. */
  private readonly after = new AfterAnswer();

  /** Announces a change of the name's state; returns the pending key to pass to `settle`. */
  async begin(kind: ChildKind, ref: TableRef, op: string = randomUUID()): Promise<string> {
    const key = indexPendingKey(kind, ref, Date.parse(leaseUntil(this.leaseMs)), op);
    // Snapshots taken before this change stop holding before it changes anything, and those taken
    // after know of its pending entry (listing-snapshot.ts): the stamp goes once the entry is there.
    await this.store.put(key, '', undefined, EMPTY_ENTRY);
    faultPoint('index:after-pending');
    await this.snapshots.invalidate(ref.namespace, kind);
    return key;
  }

  /**
   * Makes the name's entries match its state (see the invariant above), then deletes the given
   * pending keys. `made` is the state the caller's change just made, if it knows it: it saves the
   * first read (the read after the write still checks it).
   */
  async settle(kind: ChildKind, ref: TableRef, pending: string[], made?: Made): Promise<void> {
    faultPoint('index:before-settle');
    let truth: Truth = made ? { ...made, busy: false } : await this.observe(kind, ref);
    for (let round = 0; ; round++) {
      await this.apply(kind, ref, truth);
      // Written: read the state again, so that a change made meanwhile is not overwritten unseen.
      const again = await this.observe(kind, ref);
      if (again.visible === truth.visible && again.data === truth.data) break;
      // Kept changing: the pending entries stay, and listings read the state (snapshots taken meanwhile know of them).
      if (round === SETTLE_ROUNDS - 1) return this.snapshots.invalidate(ref.namespace, kind);
      truth = again;
    }
    // A change that leaves no child under the name of a namespace dropped meanwhile logs nothing: the
    // drop took the index and its log with it, and the log key would be all that is left of it.
    // (One GET, only for changes that end without a child: drops and failed creates.)
    if (!truth.visible && ref.namespace.length > 0 && (await readNamespace(this.store, ref.namespace)) === null) {
      for (const key of pending) await this.store.delete(key);
      return;
    }
    // In turn (listing-snapshot.ts): the change into the index's log, for snapshots to catch up by;
    // the stamp, so that no snapshot taken before it holds; the pending entry.
    await this.store.put(listingLogKey(kind, ref, randomUUID()), '', { ifNoneMatch: '*' }, EMPTY_ENTRY);
    faultPoint('index:after-log');
    await this.snapshots.invalidate(ref.namespace, kind);
    faultPoint('index:after-stamp');
    for (const key of pending) await this.deletePending(kind, ref, key);
    // Settled: the log is kept bounded, after the caller's answer (a failure, or a process that
    // dies first, leaves it to the next write or whole listing: a long log costs lists, never their
    // truth). In a later turn: its LIST of the log (a readdir per name on a local disk) runs after
    // the answer is written, not interleaved with it.
    this.after.add(
      'listing log compaction',
      nextTurn().then(() => this.compactLog(kind, ref.namespace)),
    );
  }

  /**
   * Deletes a pending entry. One of the flat form keeps the kind's pending folder (the next change
   * of any name puts its entry there: no rmdir now and mkdir then, which cost a local disk's
   * journal more than the entry's own unlink); one under a name's directory (a long name) takes
   * that directory with it. (In a namespace dropped meanwhile, nothing is kept: see settle.)
   */
  private deletePending(kind: ChildKind, ref: TableRef, key: string): Promise<void> {
    const flat = !key.slice(indexPendingDirKey(kind, ref.namespace).length).includes('/');
    return this.store.delete(key, { keepDirectory: flat });
  }

  /** Resolves once the compactions begun after settles so far have ended (see AfterAnswer). */
  settled(): Promise<void> {
    return this.after.settled();
  }

  /** Settles the name and deletes every pending entry of the operation `op` (a batch's transaction, which another process may finish). */
  async settleOp(kind: ChildKind, ref: TableRef, op: string): Promise<void> {
    const dir = indexPendingDirKey(kind, ref.namespace);
    const { objects } = await listAll(this.store, indexPendingNamePrefix(kind, ref));
    await this.settle(
      kind,
      ref,
      objects.map((o) => o.key).filter((k) => parsePendingKey(dir, k)?.name === ref.name && isPendingOf(k, op)),
    );
  }

  /** Runs `change` between `begin` and `settle`; the settle runs even when the change fails. */
  async around<T>(kind: ChildKind, ref: TableRef, change: () => Promise<T>, made?: Made): Promise<T> {
    const pending = await this.begin(kind, ref);
    let changed = false;
    try {
      const result = await change();
      changed = true;
      return result;
    } finally {
      // The pending entry stays if this fails: listings read the state.
      await this.settle(kind, ref, [pending], changed ? made : undefined).catch(() => undefined);
    }
  }

  /** Writes the name's entries for `truth`; the two keys at once (the pending entry covers the moment between). */
  private async apply(kind: ChildKind, ref: TableRef, truth: Truth): Promise<void> {
    const visible = indexVisibleKey(kind, ref);
    await Promise.all([
      truth.visible ? this.store.put(visible, '', undefined, EMPTY_ENTRY) : this.store.delete(visible),
      kind === 'table'
        ? truth.visible && truth.data
          ? this.store.put(indexDataKey(ref), '', undefined, EMPTY_ENTRY)
          : this.store.delete(indexDataKey(ref))
        : undefined,
    ]);
  }

  /** The child's state: what a listing shows of a name with a pending entry, or of a declared table it checks for data. */
  async observe(kind: ChildKind, ref: TableRef): Promise<Truth> {
    if (kind === 'namespace') {
      const record = await readNamespace(this.store, [...ref.namespace, ref.name]);
      const dropping = record?.value.state === 'dropping' && !leaseExpired(record.value.dropping_until);
      return { visible: record !== null, data: false, busy: dropping };
    }
    // A name whose table a symbolic link keeps the catalog out of holds no table (see LinkedTableDir, LinkedLocation).
    const none = { visible: false, data: false, busy: false };
    const linked = (e: unknown): null => {
      if (e instanceof LinkedTableDir || e instanceof LinkedLocation) return null;
      throw e;
    };
    const state = await readTableState(this.store, ref).catch(linked);
    if (state === null) return none;
    const visible = isVisible(state);
    const data = visible ? await tableHasData(this.locations, state).catch(linked) : false;
    if (data === null) return none;
    return { visible, data, busy: state.creating?.live === true || state.dropUnderWay };
  }
}
