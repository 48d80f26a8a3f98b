import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import { type ChildKind, listingSnapshotKey, listingStampKey } from './layout.js';

// A namespace's listing index in one object, so that a listing reads one key instead of LISTing a
// key per child (an object store answers a LIST of a thousand keys many times slower than a GET).
//
//   _catalog/<folder>.stamp      a random token, never written twice; deleted by every change of the index
//   _catalog/<folder>.snapshot   { stamp, names, data, pending }: the index and its pending entries as
//                                listed after that stamp was read
//
// (one pair per kind of child, `tables` and `namespaces`; the keys are built in layout.ts)
//
// Invariant: while a snapshot's stamp is the current stamp, the snapshot's pending entries are the
// index's (as far as they matter: see below) and it holds the index entries of every other name. How
// it holds: a snapshot is built by reading the stamp (creating a new one, if-none-match, when there
// is none), then LISTing the whole index and its pending entries, then writing them with the stamp
// read first. An operation deletes the stamp before it changes a child's state (IndexEntries.begin
// in listing-entries.ts, at once with putting its pending entry) and again after it wrote the index
// and before it deletes its pending entry (IndexEntries.settle); a token once deleted never comes
// back. So a reader that finds the snapshot's stamp read it before any state change or index write
// made after the builder's LISTs: it may answer as of the snapshot, an instant within its own
// request, reading the state of the names the snapshot has pending entries for (as every listing does).
// A snapshot is a cache: written without a condition, it need not survive a crash. The stamp's
// deletion, like the index's own deletes, relies on the file system keeping the order of metadata
// changes across a crash (journaling file systems do). Deleting rather than replacing the stamp leaves
// nothing behind when a change settles in a namespace just dropped.

const PendingEntry = z.object({ name: z.string(), key: z.string(), until: z.number() });
export type PendingEntry = z.infer<typeof PendingEntry>;

const Snapshot = z.object({
  stamp: z.string(),
  pending: z.array(PendingEntry).optional(),
  /** Every indexed name, in index order; absent when there were more than SNAPSHOT_MAX_NAMES. */
  names: z.array(z.string()).optional(),
  /** The names the index says have data (tables only). */
  data: z.array(z.string()).optional(),
});

export interface IndexSnapshot {
  stamp: string;
  /** Indexed names in index order; null when the index is too large to keep in one object. */
  names: string[] | null;
  data: Set<string>;
  pending: PendingEntry[];
}

/** Above this many children a namespace is listed from the index itself, page by page. */
export const SNAPSHOT_MAX_NAMES = 20_000;
/** Names kept in memory across namespaces; the least recently used snapshots go first. */
const KEPT_NAMES = 200_000;

export class ListingSnapshots {
  /** Snapshots read or built by this process, by snapshot key; checked against the stamp before use. */
  private readonly kept = new Map<string, IndexSnapshot>();
  private keptNames = 0;

  constructor(private readonly store: ObjectStore) {}

  /** Announces a change of the index of `kind` in `ns`: no snapshot taken before it holds (see the invariant above). */
  async invalidate(ns: string[], kind: ChildKind): Promise<void> {
    await this.store.delete(listingStampKey(ns, kind));
  }

  /** The current stamp (null: none yet). */
  async stamp(ns: string[], kind: ChildKind): Promise<string | null> {
    const object = await this.store.get(listingStampKey(ns, kind));
    return object ? object.body.toString('utf8') : null;
  }

  /** A stamp for a builder that found none: a new one, or the one another builder created meanwhile. */
  async createStamp(ns: string[], kind: ChildKind): Promise<string> {
    for (;;) {
      const fresh = randomUUID();
      try {
        await this.store.put(listingStampKey(ns, kind), fresh, { ifNoneMatch: '*' });
        return fresh;
      } catch (e) {
        if (!(e instanceof PreconditionFailedError)) throw e;
      }
      const current = await this.stamp(ns, kind);
      if (current !== null) return current;
    }
  }

  /** This process's snapshot of the index, whatever its stamp (the caller checks it). */
  keptFor(ns: string[], kind: ChildKind): IndexSnapshot | undefined {
    const key = listingSnapshotKey(ns, kind);
    const snapshot = this.kept.get(key);
    if (snapshot) {
      // Most recently used last: eviction takes from the front.
      this.kept.delete(key);
      this.kept.set(key, snapshot);
    }
    return snapshot;
  }

  /** The stored snapshot (null: none, or unreadable). */
  async read(ns: string[], kind: ChildKind): Promise<IndexSnapshot | null> {
    const object = await this.store.get(listingSnapshotKey(ns, kind));
    if (!object) return null;
    let parsed: z.infer<typeof Snapshot>;
    try {
      parsed = Snapshot.parse(JSON.parse(object.body.toString('utf8')));
    } catch {
      return null; // a cache: an unreadable one is rebuilt
    }
    const snapshot = { stamp: parsed.stamp, names: parsed.names ?? null, data: new Set(parsed.data ?? []), pending: parsed.pending ?? [] };
    this.keep(ns, kind, snapshot);
    return snapshot;
  }

  /**
   * Stores and keeps a snapshot of `names` built under `stamp` (read before the index was listed);
   * past SNAPSHOT_MAX_NAMES only a marker that says so. A failed write is a cache not filled.
   */
  async write(ns: string[], kind: ChildKind, stamp: string, names: string[], data: Set<string>, pending: PendingEntry[]): Promise<void> {
    const snapshot: IndexSnapshot = names.length > SNAPSHOT_MAX_NAMES ? { stamp, names: null, data: new Set(), pending: [] } : { stamp, names, data, pending };
    const body = snapshot.names === null ? { stamp } : { stamp, names, data: [...data], pending };
    this.keep(ns, kind, snapshot);
    await this.store.put(listingSnapshotKey(ns, kind), JSON.stringify(body), undefined, { durable: false, besideExisting: true }).catch(() => undefined);
  }

  /** Forgets this process's snapshot (found stale). */
  forget(ns: string[], kind: ChildKind): void {
    const key = listingSnapshotKey(ns, kind);
    const old = this.kept.get(key);
    if (!old) return;
    this.kept.delete(key);
    this.keptNames -= old.names?.length ?? 0;
  }

  private keep(ns: string[], kind: ChildKind, snapshot: IndexSnapshot): void {
    this.forget(ns, kind);
    const size = snapshot.names?.length ?? 0;
    if (size > KEPT_NAMES) return;
    for (const [key, old] of this.kept) {
      if (this.keptNames + size <= KEPT_NAMES) break;
      this.kept.delete(key);
      this.keptNames -= old.names?.length ?? 0;
    }
    this.kept.set(listingSnapshotKey(ns, kind), snapshot);
    this.keptNames += size;
  }
}
