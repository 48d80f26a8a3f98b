import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import { type ChildKind, listingSnapshotKey, listingStampKey } from './layout.js';

// A namespace's listing index in one object, so that a listing reads one key instead of LISTing a
// key per child (an object store answers a LIST of a thousand keys many times slower than a GET),
// and a log of the index's changes since, so that a snapshot catches up by what changed instead of
// being listed again whole after every write (listing-catch-up.ts).
//
//   _catalog/<folder>.stamp      a random token, never written twice; deleted by every change of the index
//   _catalog/<folder>.snapshot   { stamp, ready, names, data, pending }: the index and its pending entries
//                                as they were after that stamp was read, and the ready marker's token then
//   _catalog/<folder>.log/<name>.<token>   the name's entries changed (a token per change, never reused; layout.ts)
//
// (one set per kind of child, `tables` and `namespaces`; the keys are built in layout.ts)
//
// Invariant 1 (the stamp): while a snapshot's stamp is the current stamp, the snapshot's pending
// entries are the index's (as far as they matter: see below) and it holds the index entries of
// every other name. How it holds: a snapshot is made by reading the stamp (creating a new one,
// if-none-match, when there is none), then reading the index and its pending entries, and is
// stamped with the token read first. An operation puts its pending entry and then deletes the stamp
// before it changes a child's state (IndexEntries.begin in listing-entries.ts), and deletes it again
// after it wrote the index and its log key and before it deletes its pending entry
// (IndexEntries.settle); a token once deleted never comes back. So a reader that finds the
// snapshot's stamp read it before any state change or index write made after the snapshot's reads,
// and a snapshot made after a change began knows of its pending entry: it may answer as of the
// snapshot, an instant within its own request, reading the state of the names the snapshot has
// pending entries for (as every listing does).
//
// Invariant 2 (the log): every log key that is gone is reflected by the stored snapshot (the
// snapshot holds its name's entries as they were at some moment after the key was written), and
// every change of a name's entries settled since is in the log. How it holds: settle writes the log
// key after the index and before the stamp and the pending entry go (a change that dies before,
// or gives up, leaves its pending entry, which every snapshot made after its begin knows of); a
// snapshot is stored only in place of the one its maker read before listing the log, by a
// conditional put (if-match its etag, if-none-match when there was none), so that of two makers
// of one base only one stores; and only its maker deletes log keys, those it listed, once its
// snapshot is in place. So a process that LISTs the log, then finds the stored snapshot still the
// one it keeps (its etag), has every change its snapshot lacks in that LIST: it catches up by
// reading the entries of the names listed (the index is written before the log), under the stamp
// it read before the LISTs, which then makes it current as invariant 1 says. Log keys are unique
// per change, so a key already applied (by this process, since its base) is not read again.
//
// Invariant 3 (the incarnation): a snapshot is a base only while its `ready` is the token of the
// namespace's ready marker, read with the log's LIST (listing-build.ts writes a new random one for
// each namespace created and each build). A drop deletes the snapshots and the marker before the
// rest of the namespace's catalog (namespace-service.ts), so a drop that stops part-way, having
// cut the log short, leaves no base, and the namespace is indexed again; a snapshot that a slow
// listing puts after the drop (if-none-match, as there is none) is of the old token, and no base of
// the namespace created again under the name. A deleted marker (a rebuild asked for) likewise.
// Not covered: a stamp whose create (if-none-match) is held up past the drop and the namespace's
// creation again, with a snapshot of it: that snapshot is current by its stamp until the new
// namespace's first change.
//
// Cost: a list after a write is four round trips: the stamp (gone: a new one, if-none-match), at
// once the ready marker's GET, a LIST of the log and one of the pending entries, then at once a
// HEAD of the snapshot and two HEADs per name changed since the snapshot this process keeps (when
// another process compacted it: a GET of the snapshot, then those HEADs again, as entries read
// before it was stored may be older than it); three after a write of this process's own, which
// creates the new stamp without reading the one it deleted (stampFor). A write is one more put (its log key) and one LIST (of up
// to COMPACT_AT log keys) than without the log: the write that finds the log COMPACT_AT keys long
// compacts it (the snapshot caught up, or the index listed whole when there is no base, stored
// durably, then the keys it reflects deleted, at most DELETES_PER_REQUEST), so the log stays
// about COMPACT_AT keys long whoever lists, and a list after a write reads fewer than COMPACT_AT
// names (plus the writes running at once). A namespace without a snapshot, or with REBUILD_AT
// log keys, is listed whole (the log first, then the index).
//
// The stamp's deletion and the log key (a non-durable create of an empty file), like the index's own
// deletes, rely on the file system keeping the order of metadata changes across a crash
// (journaling file systems do). Deleting rather than replacing the stamp leaves nothing behind when
// a change settles in a namespace just dropped.

const PendingEntry = z.object({ name: z.string(), key: z.string(), until: z.number() });
export type PendingEntry = z.infer<typeof PendingEntry>;

const Snapshot = z.object({
  stamp: z.string(),
  /** The namespace's ready marker's token when the snapshot's index was read (listing-build.ts). */
  ready: z.string().optional(),
  pending: z.array(PendingEntry).optional(),
  /** Every indexed name, in index order; absent when there were more than SNAPSHOT_MAX_NAMES. */
  names: z.array(z.string()).optional(),
  /** The names the index says have data (tables only). */
  data: z.array(z.string()).optional(),
});

export interface IndexSnapshot {
  stamp: string;
  /** The ready marker's token read before the index was (null: unknown); a base only while it is the marker's. */
  ready: string | null;
  /** Indexed names in index order; null when the index is too large to keep in one object. */
  names: string[] | null;
  data: Set<string>;
  pending: PendingEntry[];
  /** The etag of the stored snapshot this one is, or was caught up from (null: none that was current). */
  base: string | null;
  /** The log keys this one reflects beyond its base (listing-catch-up.ts). */
  applied: Set<string>;
  /** This process deleted its stamp since (a change it made): no use reading the stamp before catching it up. */
  stampDeleted?: boolean;
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
    const kept = this.kept.get(listingSnapshotKey(ns, kind));
    if (kept) kept.stampDeleted = true;
    await this.store.delete(listingStampKey(ns, kind));
  }

  /**
   * The stamp a listing holds its snapshot up to: read, or when this process deleted the one its
   * snapshot has, a new one created at once (createStamp; also read, when another process created
   * one first). Either is read or created before the listing's reads of the index, as invariant 1
   * asks; null: none (read).
   */
  async stampFor(ns: string[], kind: ChildKind, kept: IndexSnapshot | undefined): Promise<string | null> {
    return kept?.stampDeleted ? this.createStamp(ns, kind) : this.stamp(ns, kind);
  }

  /** The current stamp (null: none yet). */
  async stamp(ns: string[], kind: ChildKind): Promise<string | null> {
    const object = await this.store.get(listingStampKey(ns, kind));
    // Empty: a stamp the machine's crash caught before its bytes were on disk (see createStamp) holds nothing.
    return object && object.body.length > 0 ? object.body.toString('utf8') : null;
  }

  /** A stamp for a builder that found none: a new one, or the one another builder created meanwhile. */
  async createStamp(ns: string[], kind: ChildKind): Promise<string> {
    for (;;) {
      const fresh = randomUUID();
      try {
        // Not durable: a stamp lost with the machine only makes the snapshots of it stale, as a change does.
        await this.store.put(listingStampKey(ns, kind), fresh, { ifNoneMatch: '*' }, { durable: false });
        return fresh;
      } catch (e) {
        if (!(e instanceof PreconditionFailedError)) throw e;
      }
      const current = await this.stamp(ns, kind);
      if (current !== null) return current;
      // Gone again, or empty (left by a crash): deleting a stamp only ever makes snapshots stale.
      await this.invalidate(ns, kind);
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

  /** The stored snapshot (null: none, or unreadable), kept; `base` is its etag. */
  async read(ns: string[], kind: ChildKind): Promise<IndexSnapshot | null> {
    const object = await this.store.get(listingSnapshotKey(ns, kind));
    if (!object) return null;
    let parsed: z.infer<typeof Snapshot>;
    try {
      parsed = Snapshot.parse(JSON.parse(object.body.toString('utf8')));
    } catch {
      return null; // rebuilt: the next write replaces it (if-match its etag, see head)
    }
    const snapshot: IndexSnapshot = {
      stamp: parsed.stamp,
      ready: parsed.ready ?? null,
      names: parsed.names ?? null,
      data: new Set(parsed.data ?? []),
      pending: parsed.pending ?? [],
      base: object.etag,
      applied: new Set(),
    };
    this.keep(ns, kind, snapshot);
    return snapshot;
  }

  /** The stored snapshot's etag (null: none). */
  async head(ns: string[], kind: ChildKind): Promise<string | null> {
    return (await this.store.head(listingSnapshotKey(ns, kind)))?.etag ?? null;
  }

  /**
   * Keeps `snapshot` and stores it in place of the stored one whose etag is `replacing` (null: in
   * place of none); past SNAPSHOT_MAX_NAMES only a marker that says so. Returns the new etag, or
   * null when another writer replaced it first (or the store failed): then it is only kept here.
   */
  async write(ns: string[], kind: ChildKind, snapshot: IndexSnapshot, replacing: string | null): Promise<string | null> {
    const large = snapshot.names !== null && snapshot.names.length > SNAPSHOT_MAX_NAMES;
    const kept: IndexSnapshot = large ? { ...snapshot, names: null, data: new Set(), pending: [] } : snapshot;
    const ready = kept.ready === null ? {} : { ready: kept.ready };
    const body =
      kept.names === null ? { stamp: kept.stamp, ...ready } : { stamp: kept.stamp, ...ready, names: kept.names, data: [...kept.data], pending: kept.pending };
    this.keep(ns, kind, kept);
    const condition = replacing === null ? { ifNoneMatch: '*' as const } : { ifMatch: replacing };
    // Durable: the log keys it reflects are deleted once it is in place.
    const written = await this.store.put(listingSnapshotKey(ns, kind), JSON.stringify(body), condition, { besideExisting: true }).catch(() => null);
    if (written) kept.base = written.etag;
    return written?.etag ?? null;
  }

  /** Forgets this process's snapshot (found stale). */
  forget(ns: string[], kind: ChildKind): void {
    const key = listingSnapshotKey(ns, kind);
    const old = this.kept.get(key);
    if (!old) return;
    this.kept.delete(key);
    this.keptNames -= old.names?.length ?? 0;
  }

  /** Keeps `snapshot` as this process's snapshot of the index. */
  keep(ns: string[], kind: ChildKind, snapshot: IndexSnapshot): void {
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
