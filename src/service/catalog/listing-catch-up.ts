import pLimit from 'p-limit';
import type { ObjectStore } from '../../store/object-store.js';
import { faultPoint } from '../coordination/fault-points.js';
import { type ChildKind, indexDataDirKey, indexDataKey, indexVisibleDirKey, indexVisibleKey, listingLogDirKey, nameOfLogKey } from './layout.js';
import type { IndexBuilder } from './listing-build.js';
import { allNames, CHECK_CONCURRENCY, firstAfter, LIST_PAGE, type Pending, pendingOf } from './listing-reads.js';
import type { IndexSnapshot, ListingSnapshots, PendingEntry } from './listing-snapshot.js';

// A snapshot of the listing index brought up to date by what changed since it was stored, read
// from the index's log (listing-snapshot.ts says why that is exact, and what it costs), instead of
// LISTing the whole index again; the write that makes the log long compacts it (compactIfLong).
// Only a namespace without a snapshot of its ready marker's token, or whose log has grown past
// REBUILD_AT, is listed whole.

/** A log this long is compacted (by the write that made it so): the snapshot caught up replaces the stored one, and the keys it reflects go. */
export const COMPACT_AT = 64;
/** A log this long (a namespace written to for long with no listing of it whole) is not read: the index is listed whole. */
const REBUILD_AT = 2_000;
/** Log keys one request deletes at most; those left are read again, and deleted by the next compaction. */
const DELETES_PER_REQUEST = 2 * COMPACT_AT;

export class SnapshotCatchUp {
  constructor(
    private readonly store: ObjectStore,
    private readonly snapshots: ListingSnapshots,
    private readonly builder: IndexBuilder,
  ) {}

  /**
   * The index as of a moment after `stampRead` (the stamp read just before; null: none) was read,
   * stamped with it: `had` (a snapshot this process kept, or the stored one, no longer current)
   * caught up by the log, or, when that cannot be, the whole index listed again if `whole`. Null:
   * neither, or the namespace's ready marker is gone (the caller reads the index itself, and
   * builds it when the marker is missing: listing-build.ts). A base is one of the marker's current
   * token: a snapshot from before a drop of the namespace (however far that got) or a rebuild is none.
   */
  async current(kind: ChildKind, ns: string[], stampRead: string | null, had: IndexSnapshot | undefined, whole: boolean): Promise<IndexSnapshot | null> {
    const stamp = stampRead ?? (await this.snapshots.createStamp(ns, kind));
    const byLog = had?.names ? had : undefined;
    const [ready, log, pending] = await Promise.all([
      this.builder.readyToken(ns),
      byLog ? this.log(kind, ns) : undefined,
      byLog ? pendingOf(this.store, kind, ns) : undefined,
    ]);
    if (ready === null) return null;
    if (byLog && log && pending && log.size < REBUILD_AT) {
      // After the log's LIST: a base still stored then has lost none of the keys it does not reflect.
      // The entries of the names changed since the snapshot kept are read at once with that HEAD
      // (after the LIST: the index is written before the log). They are used only when the HEAD
      // finds that snapshot still stored: another stored since may reflect later changes of those
      // names, whose log keys its maker then deleted, so with it they are read again, after it.
      const [etag, entries] = await Promise.all([this.snapshots.head(ns, kind), this.entriesOf(kind, ns, changedSince(byLog, log))]);
      const kept = byLog.base !== null && byLog.base === etag;
      const base = kept ? byLog : etag === null ? null : await this.snapshots.read(ns, kind);
      if (base?.names && base.ready === ready) return this.caughtUp(kind, ns, stamp, base, log, pending, kept ? entries : new Map());
    }
    return whole ? this.rebuilt(kind, ns, stamp, ready) : null;
  }

  /**
   * Compacts the log once it is COMPACT_AT keys long; called by the write that added a key, so
   * that the log stays bounded in a namespace that no whole listing catches up (listed by pages
   * only, or too large for a snapshot). One LIST while it is shorter.
   */
  async compactIfLong(kind: ChildKind, ns: string[]): Promise<void> {
    const { objects } = await this.store.list(listingLogDirKey(ns, kind), { maxKeys: COMPACT_AT });
    if (objects.length < COMPACT_AT) return;
    const [stamp, stored, ready] = await Promise.all([this.snapshots.stamp(ns, kind), this.snapshots.read(ns, kind), this.builder.readyToken(ns)]);
    if (ready === null) {
      // No index to catch up from yet (a namespace no listing has indexed: the root until its first
      // listing, one Lance's catalog wrote): no snapshot is a base until a build puts the marker,
      // after listing the namespace whole, past every change logged by the keys listed here.
      await this.drop(objects.map((o) => o.key));
      return;
    }
    if (stored && stored.names === null && stored.ready === ready) {
      // Only a marker, which no listing catches up: it is stored again (so that a rebuild that
      // read the index before the changes listed cannot replace it) and the keys listed go.
      const log = await this.log(kind, ns);
      if ((await this.snapshots.write(ns, kind, { ...stored, applied: new Set(log.keys()) }, stored.base)) !== null) await this.drop([...log.keys()]);
      return;
    }
    await this.current(kind, ns, stamp, stored ?? undefined, true);
  }

  /** `base` with the log's changes it does not reflect applied, read from the index (those not `read` already); compacted when the log is long. */
  private async caughtUp(
    kind: ChildKind,
    ns: string[],
    stamp: string,
    base: IndexSnapshot,
    log: Map<string, string>,
    pending: Map<string, Pending[]>,
    read: Map<string, EntryState>,
  ): Promise<IndexSnapshot> {
    const changed = changedSince(base, log);
    const fresh = await this.entriesOf(
      kind,
      ns,
      changed.filter((name) => !read.has(name)),
    );
    // A few names changed among many: placed by binary search into a copy, the rest left as it is.
    let names = base.names ?? [];
    let data = base.data;
    for (const name of changed) {
      const state = read.get(name) ?? fresh.get(name);
      if (state === undefined) continue; // every changed name was read, above or by the caller
      const e = { name, ...state };
      const next = firstAfter(names, e.name);
      const present = next > 0 && names[next - 1] === e.name;
      const at = present ? next - 1 : next;
      if (e.visible !== present) {
        if (names === base.names) names = names.slice();
        if (e.visible) names.splice(at, 0, e.name);
        else names.splice(at, 1);
      }
      const withData = e.visible && e.data;
      if (withData !== data.has(e.name)) {
        if (data === base.data) data = new Set(data);
        if (withData) data.add(e.name);
        else data.delete(e.name);
      }
    }
    const snapshot: IndexSnapshot = {
      stamp,
      ready: base.ready,
      names,
      data,
      pending: pendingEntries(pending),
      base: base.base,
      applied: new Set(log.keys()),
    };
    if (log.size < COMPACT_AT || base.base === null) {
      this.snapshots.keep(ns, kind, snapshot);
      return snapshot;
    }
    // It reflects every key of the log as listed: it replaces the base it was caught up from, if
    // that is still the one stored, and then those keys can go.
    if ((await this.snapshots.write(ns, kind, snapshot, base.base)) !== null) await this.drop([...log.keys()]);
    return snapshot;
  }

  /** The whole index listed (after its log) and stored under `stamp` in place of what is stored, and the log it reflects deleted. */
  private async rebuilt(kind: ChildKind, ns: string[], stamp: string, ready: string): Promise<IndexSnapshot> {
    // In turn: the snapshot's etag, the log, the index, so that the snapshot written reflects every key deleted.
    const replacing = await this.snapshots.head(ns, kind);
    const log = await this.log(kind, ns);
    const [names, data, pending] = await Promise.all([
      allNames(this.store, indexVisibleDirKey(kind, ns)),
      kind === 'table' ? allNames(this.store, indexDataDirKey(ns)) : [],
      pendingOf(this.store, kind, ns),
    ]);
    const snapshot: IndexSnapshot = { stamp, ready, names, data: new Set(data), pending: pendingEntries(pending), base: null, applied: new Set(log.keys()) };
    if ((await this.snapshots.write(ns, kind, snapshot, replacing)) !== null) await this.drop([...log.keys()]);
    return snapshot;
  }

  /** The index entries of `names`, read at once (CHECK_CONCURRENCY at a time). */
  private async entriesOf(kind: ChildKind, ns: string[], names: string[]): Promise<Map<string, EntryState>> {
    const limit = pLimit(CHECK_CONCURRENCY);
    const states = await Promise.all(
      names.map((name) =>
        limit(async () => {
          const ref = { namespace: ns, name };
          const [visible, data] = await Promise.all([
            this.store.head(indexVisibleKey(kind, ref)),
            kind === 'table' ? this.store.head(indexDataKey(ref)) : null,
          ]);
          return [name, { visible: visible !== null, data: data !== null }] as const;
        }),
      ),
    );
    return new Map(states);
  }

  /** The log's keys and the name of each. */
  private async log(kind: ChildKind, ns: string[]): Promise<Map<string, string>> {
    const dir = listingLogDirKey(ns, kind);
    const keys = new Map<string, string>();
    let startAfter: string | undefined;
    for (;;) {
      const listing = await this.store.list(dir, { maxKeys: LIST_PAGE, ...(startAfter ? { startAfter } : {}) });
      for (const o of listing.objects) {
        const name = nameOfLogKey(dir, o.key);
        if (name !== null) keys.set(o.key, name);
      }
      if (!listing.nextStartAfter) return keys;
      startAfter = listing.nextStartAfter;
    }
  }

  /** Deletes log keys a stored snapshot reflects; one that stays is read again by a catch-up, and deleted by the next compaction. */
  private async drop(keys: string[]): Promise<void> {
    faultPoint('listing:before-log-delete');
    const limit = pLimit(CHECK_CONCURRENCY);
    await Promise.all(keys.slice(0, DELETES_PER_REQUEST).map((key) => limit(() => this.store.delete(key).catch(() => undefined))));
  }
}

/** What the index says of a name: visible, and with data (tables). */
interface EntryState {
  visible: boolean;
  data: boolean;
}

/** The names of the log's keys that `base` does not reflect. */
function changedSince(base: IndexSnapshot, log: Map<string, string>): string[] {
  return [...new Set([...log].filter(([key]) => !base.applied.has(key)).map(([, name]) => name))];
}

function pendingEntries(byName: Map<string, Pending[]>): PendingEntry[] {
  return [...byName].flatMap(([name, entries]) => entries.map((e) => ({ name, ...e })));
}
