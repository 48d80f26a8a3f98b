import { randomUUID } from 'node:crypto';
import pLimit from 'p-limit';
import { type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import { readNamespace } from './catalog.js';
import {
  type ChildKind,
  childOfPrefix,
  compareNames,
  indexDataDirKey,
  indexDataKey,
  indexNameDirKey,
  indexPendingDirKey,
  indexPendingKey,
  indexPendingNameDirKey,
  indexReadyKey,
  indexVisibleDirKey,
  indexVisibleKey,
  isPendingOf,
  nameInIndexDir,
  namespaceDirKey,
  parsePendingKey,
  type TableRef,
} from './layout.js';
import type { Locations } from './locations.js';
import { type IndexSnapshot, ListingSnapshots, type PendingEntry } from './listing-snapshot.js';
import type { PageTokens } from './page-token.js';
import { leaseExpired, leaseUntil } from '../coordination/leases.js';
import { faultPoint } from '../fault-points.js';
import { isVisible, LinkedTableDir, readTableState, tableHasData } from '../tables/table-state.js';

// The listing index of a namespace's children: empty keys under `<ns>/_catalog/` (built in
// layout.ts) whose names say what a listing needs, so that a LIST of the index answers a page
// without reading any child's record or directory. One directory per child name in each folder, so
// that a delimited LIST names them in order (on a local disk without reading each one):
//
//   tables/<name>/v                   a table of this name is visible
//   data/<name>/t                     ... and has data (absent: declared only, as far as the index knows)
//   namespaces/<name>/v               a child namespace of this name exists
//   pending/<name>/<until>.<op>       an operation is changing what the table name holds (or died doing so)
//   namespace-pending/<name>/<until>.<op>   the same for a child namespace
//
// Names are ordered as their keys are: by the bytes of `<name>/` (compareNames).
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
// still to come. Pending entries are few (operations under way, and dead ones until a listing meets
// them), so a listing reads all of them with one LIST, and reads state only for the names on its
// page that have one.
//
// Data: a declared table that got its first data from a Lance client writing directly (the service
// never told) has no `t`; listings that exclude declared tables check the `_versions/` of the
// declared names on their page (one LIST each, bounded by the page), and do not record it.
//
// Listings that read every name (no limit) keep the index and its pending entries in one object as
// well, checked against a stamp that every begin and every settle deletes (listing-snapshot.ts), so
// that they read two keys instead of LISTing a key per name; a page after such a listing reads it
// from memory while the stamp matches.
//
// Namespaces the index does not cover yet (written by Lance's own directory catalog, or by a
// version of this service before the index) have no `_catalog/index.ready` marker: the first
// listing settles every child in it once, then puts the marker. Children that Lance's directory
// catalog creates in the same namespace after that are not seen until it is rebuilt.

/** Keys one LIST asks for: S3 answers at most 1,000 whatever is asked, a local root all of them (a large page in one call). */
const LIST_PAGE = 10_000;
const CHECK_CONCURRENCY = 16;
const SETTLE_ROUNDS = 5;
/** Dead pending entries off the page that one listing settles, so that they do not pile up. */
const SETTLE_ELSEWHERE = 8;

/** A page of names; `more` says whether names may follow, after `resumeAfter` when given (a short page), else after the last name. */
export interface IndexPage {
  names: string[];
  more: boolean;
  resumeAfter?: string;
}

/** Declared tables a page that excludes them checks for data before it ends short (see page). */
const MIN_CHECKS = 100;

/** What a change made of a child: visible or gone, with data or not. */
export interface Made {
  visible: boolean;
  data: boolean;
}

interface Truth extends Made {
  /** A create or drop is under way: its own settle will come. */
  busy: boolean;
}

interface Pending {
  key: string;
  until: number;
}

/** Reads the index's names in order, a stretch at a time, from the store or from a snapshot. */
interface IndexCursor {
  /** The next names (at most LIST_PAGE, and `room` + 1); `exhausted` when none follow. */
  next(room: number): Promise<{ names: string[]; exhausted: boolean }>;
  /** Names in (lower, upper] that the index says have data (a set that may hold others too). */
  withData(lower: string | undefined, upper: string | undefined): Promise<Set<string>>;
}

function pendingByName(entries: PendingEntry[]): Map<string, Pending[]> {
  const byName = new Map<string, Pending[]>();
  for (const { name, key, until } of entries) byName.set(name, [...(byName.get(name) ?? []), { key, until }]);
  return byName;
}

const stretchSize = (room: number): number => Math.min(LIST_PAGE, Number.isFinite(room) ? room + 1 : LIST_PAGE);

/** A cursor over a snapshot's names, after `after`. */
function snapshotCursor(names: string[], data: Set<string>, after: string | undefined): IndexCursor {
  // The first name past `after`: names are in compareNames order.
  let low = 0;
  let high = names.length;
  while (after !== undefined && low < high) {
    const mid = (low + high) >>> 1;
    if (compareNames(names[mid] ?? '', after) <= 0) low = mid + 1;
    else high = mid;
  }
  let at = low;
  return {
    next: async (room) => {
      const stretch = names.slice(at, at + stretchSize(room));
      at += stretch.length;
      return { names: stretch, exhausted: at >= names.length };
    },
    withData: async () => data,
  };
}

export class ListingIndex {
  private readonly snapshots: ListingSnapshots;

  constructor(
    private readonly store: ObjectStore,
    private readonly locations: Locations,
    private readonly leaseMs: number,
  ) {
    this.snapshots = new ListingSnapshots(store);
  }

  /** Announces a change of the name's state; returns the pending key to pass to `settle`. */
  async begin(kind: ChildKind, ref: TableRef, op: string = randomUUID()): Promise<string> {
    const key = indexPendingKey(kind, ref, Date.parse(leaseUntil(this.leaseMs)), op);
    // Snapshots taken before this change stop holding before it changes anything (listing-snapshot.ts).
    await Promise.all([this.store.put(key, ''), this.snapshots.invalidate(ref.namespace, kind)]);
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
      // Kept changing: the pending entries stay, and listings read the state.
      if (round === SETTLE_ROUNDS - 1) return;
      truth = again;
    }
    // Snapshots of the index no longer hold (listing-snapshot.ts): their stamp goes before the pending entry.
    await this.snapshots.invalidate(ref.namespace, kind);
    for (const key of pending) await this.store.delete(key);
  }

  /** Settles the name and deletes every pending entry of the operation `op` (a batch's transaction, which another process may finish). */
  async settleOp(kind: ChildKind, ref: TableRef, op: string): Promise<void> {
    const { objects } = await this.store.list(indexPendingNameDirKey(kind, ref), { delimiter: '/' });
    await this.settle(kind, ref, objects.map((o) => o.key).filter((k) => isPendingOf(k, op)));
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
      truth.visible ? this.store.put(visible, '') : this.store.delete(visible),
      kind === 'table' ? (truth.visible && truth.data ? this.store.put(indexDataKey(ref), '') : this.store.delete(indexDataKey(ref))) : undefined,
    ]);
  }

  private async observe(kind: ChildKind, ref: TableRef): Promise<Truth> {
    if (kind === 'namespace') {
      const record = await readNamespace(this.store, [...ref.namespace, ref.name]);
      const dropping = record?.value.state === 'dropping' && !leaseExpired(record.value.dropping_until);
      return { visible: record !== null, data: false, busy: dropping };
    }
    // A name whose directory is reached through a symbolic link holds no table (see LinkedTableDir).
    const state = await readTableState(this.store, ref).catch((e: unknown) => {
      if (e instanceof LinkedTableDir) return null;
      throw e;
    });
    if (state === null) return { visible: false, data: false, busy: false };
    const visible = isVisible(state);
    return { visible, data: visible && (await tableHasData(this.locations, state)), busy: state.creating?.live === true || state.dropUnderWay };
  }

  /**
   * One page of a ListTables or ListNamespaces: the page token resumes after the last name (or
   * where a short page ended), and the namespace must exist (checked at once with the reads).
   */
  async listPage(
    kind: ChildKind,
    ns: string[],
    page: { pageToken?: string | null | undefined; limit?: number | null | undefined },
    tokens: PageTokens,
    namespaceExists: () => Promise<unknown>,
    includeDeclared = true,
  ): Promise<{ names: string[]; pageToken: string | null }> {
    const tokenKind = kind === 'table' ? 'tables' : 'namespaces';
    const scope = JSON.stringify(ns);
    const after = tokens.decode(tokenKind, scope, page.pageToken);
    const limit = page.limit ?? undefined;
    // An empty page ends the listing (see paginate).
    if (limit === 0) {
      await namespaceExists();
      return { names: [], pageToken: null };
    }
    const { names, more, resumeAfter } = await this.page(kind, ns, after, limit ?? Infinity, { includeDeclared, namespaceExists });
    const last = resumeAfter ?? names[names.length - 1];
    return { names, pageToken: more && last !== undefined ? tokens.encode(tokenKind, scope, last) : null };
  }

  /**
   * Up to `want` child names of `ns` after `after` (in compareNames order), tables only with data
   * unless `includeDeclared`. The index and its pending entries come from its snapshot when the
   * stamp says it holds (a listing of every name builds it), else from a LIST of the pending entries
   * and delimited LISTs of the index sized to the page. State is read only for names on the page with a pending entry, and for declared
   * tables when they are excluded: then, `bounded`, a page that has checked many of them ends short
   * (resumeAfter), so that no request reads a number of tables beyond its page.
   */
  async page(
    kind: ChildKind,
    ns: string[],
    after: string | undefined,
    want: number,
    options: { includeDeclared?: boolean; bounded?: boolean; namespaceExists?: () => Promise<unknown> } = {},
  ): Promise<IndexPage> {
    const { includeDeclared = true, bounded = true } = options;
    const from = after === '' ? undefined : after;
    const kept = this.snapshots.keptFor(ns, kind);
    // A snapshot is worth a look when this process keeps one, or when every name is wanted (which
    // builds one if it is stale), unless the namespace is known to be too large for one.
    const whole = from === undefined && want === Infinity;
    const bySnapshot = kept ? kept.names !== null : whole;
    const fromStore = this.storeCursor(kind, ns, from);
    const isReady = async () => (await this.store.head(indexReadyKey(ns))) !== null;
    const indexedFirst = async () => {
      await this.build(ns);
      return this.page(kind, ns, after, want, { includeDeclared, bounded });
    };
    // The reads of a page do not depend on each other: one round trip (with the caller's check
    // that the namespace exists, which must pass before an index is built for it). A snapshot
    // under the current stamp was built after the index was found ready, and no stamp outlives a
    // drop of the namespace's catalog, so the ready marker is looked at only when no snapshot holds.
    const [readyListed, stamp, stored, firstStretch, pendingListed] = await Promise.all([
      bySnapshot ? undefined : isReady(),
      bySnapshot ? this.snapshots.stamp(ns, kind) : null,
      bySnapshot && !kept ? this.snapshots.read(ns, kind) : null,
      bySnapshot ? undefined : fromStore.next(want),
      bySnapshot ? undefined : this.pendingOf(kind, ns),
      options.namespaceExists?.(),
    ]);
    if (readyListed === false) return indexedFirst();
    let cursor = fromStore;
    let pending: Map<string, Pending[]>;
    let prefetched = firstStretch;
    const snapshot = [kept, stored].find((s): s is IndexSnapshot => s !== undefined && s !== null && stamp !== null && s.stamp === stamp);
    if (pendingListed) pending = pendingListed;
    else if (snapshot?.names) {
      cursor = snapshotCursor(snapshot.names, snapshot.data, from);
      pending = pendingByName(snapshot.pending);
    } else if (whole && !snapshot) {
      this.snapshots.forget(ns, kind);
      if (!(await isReady())) return indexedFirst();
      const built = await this.buildSnapshot(kind, ns, stamp);
      cursor = snapshotCursor(built.names, built.data, from);
      pending = pendingByName(built.pending);
    } else {
      // A stale snapshot, or a current one that only says the index is too large for it: the index itself.
      if (!snapshot) this.snapshots.forget(ns, kind);
      let ready: boolean;
      [pending, prefetched, ready] = await Promise.all([this.pendingOf(kind, ns), fromStore.next(want), snapshot !== undefined || isReady()]);
      if (!ready) return indexedFirst();
    }
    const pendingNames = [...pending.keys()].filter((n) => from === undefined || compareNames(n, from) > 0).sort(compareNames);
    let names: string[] = [];
    let settledElsewhere = 0;
    let checked = 0;
    let lower = from;
    for (;;) {
      const stretch = prefetched ?? (await cursor.next(want - names.length));
      prefetched = undefined;
      const indexed = stretch.names;
      const exhausted = stretch.exhausted;
      const upper = exhausted ? undefined : indexed[indexed.length - 1];
      // The names of this stretch: those indexed, and those only a pending entry knows of (a create that died before settling).
      const inRange = (n: string) => (lower === undefined || compareNames(n, lower) > 0) && (upper === undefined || compareNames(n, upper) <= 0);
      const unindexed = pendingNames.filter(inRange);
      // The index lists in this order already; only names a pending entry adds need sorting in.
      const candidates = unindexed.length === 0 ? indexed : [...new Set([...indexed, ...unindexed])].sort(compareNames);
      const withData = includeDeclared || kind !== 'table' || candidates.length === 0 ? null : await cursor.withData(lower, upper);
      // Nothing to look at (no pending entry, no declared table to check): the stretch is the page.
      if (withData === null && (pending.size === 0 || !candidates.some((name) => pending.has(name)))) {
        if (names.length === 0) names = candidates;
        else for (const name of candidates) names.push(name);
      } else {
        for (const name of await this.keepVisible(kind, ns, candidates, pending, withData, includeDeclared, () => checked++)) names.push(name);
      }
      if (names.length > want) return { names: names.slice(0, want), more: true };
      if (exhausted) break;
      if (names.length === want) return { names, more: true };
      // Many declared tables skipped: a short page, which the next one resumes after what was read.
      if (bounded && upper !== undefined && checked >= Math.max(MIN_CHECKS, 2 * want)) return { names, more: true, resumeAfter: upper };
      lower = upper;
    }
    // Dead pending entries elsewhere are settled a few at a time, so that they do not pile up.
    for (const [name, entries] of pending) {
      if (settledElsewhere >= SETTLE_ELSEWHERE) break;
      if (entries.some((e) => e.until > Date.now())) continue;
      settledElsewhere++;
      const ref = { namespace: ns, name };
      if (!(await this.observe(kind, ref)).busy) await this.settle(kind, ref, entries.map((e) => e.key)).catch(() => undefined);
    }
    return { names, more: false };
  }

  /** A cursor over the index as the store holds it: delimited LISTs sized to the page. */
  private storeCursor(kind: ChildKind, ns: string[], after: string | undefined): IndexCursor {
    const prefix = indexVisibleDirKey(kind, ns);
    let startAfter = after === undefined ? undefined : indexNameDirKey(prefix, after);
    return {
      next: async (room) => {
        const listing = await this.store.list(prefix, { delimiter: '/', maxKeys: stretchSize(room), ...(startAfter ? { startAfter } : {}) });
        startAfter = listing.nextStartAfter;
        return { names: listing.commonPrefixes.map((p) => nameInIndexDir(prefix, p)), exhausted: !listing.nextStartAfter };
      },
      withData: (lower, upper) => this.namesWithData(ns, lower, upper),
    };
  }

  /**
   * Lists the whole index (names, and for tables which have data) after reading the stamp, and
   * stores it as the snapshot of that stamp (listing-snapshot.ts); returns what it listed.
   */
  private async buildSnapshot(kind: ChildKind, ns: string[], stampRead: string | null): Promise<{ names: string[]; data: Set<string>; pending: PendingEntry[] }> {
    const stamp = stampRead ?? (await this.snapshots.createStamp(ns, kind));
    const [names, data, pendingByNames] = await Promise.all([
      this.allNames(indexVisibleDirKey(kind, ns)),
      kind === 'table' ? this.allNames(indexDataDirKey(ns)) : [],
      this.pendingOf(kind, ns),
    ]);
    const withData = new Set(data);
    const pending = [...pendingByNames].flatMap(([name, entries]) => entries.map((e) => ({ name, ...e })));
    await this.snapshots.write(ns, kind, stamp, names, withData, pending);
    return { names, data: withData, pending };
  }

  /** Every name (sub-directory) under an index folder, in order. */
  private async allNames(prefix: string): Promise<string[]> {
    const names: string[] = [];
    let startAfter: string | undefined;
    for (;;) {
      const listing = await this.store.list(prefix, { delimiter: '/', maxKeys: LIST_PAGE, ...(startAfter ? { startAfter } : {}) });
      for (const p of listing.commonPrefixes) names.push(nameInIndexDir(prefix, p));
      if (!listing.nextStartAfter) return names;
      startAfter = listing.nextStartAfter;
    }
  }

  /** The candidates a listing shows: a name with a pending entry by its state (settling it when dead), a declared one if it has data where wanted. */
  private async keepVisible(
    kind: ChildKind,
    ns: string[],
    candidates: string[],
    pending: Map<string, Pending[]>,
    withData: Set<string> | null,
    includeDeclared: boolean,
    countCheck: () => void,
  ): Promise<string[]> {
    const limit = pLimit(CHECK_CONCURRENCY);
    const keep = await Promise.all(
      candidates.map((name) =>
        limit(async () => {
          const ref = { namespace: ns, name };
          const entries = pending.get(name);
          if (entries) {
            const truth = await this.observe(kind, ref);
            if (!truth.busy && entries.every((e) => e.until <= Date.now())) await this.settle(kind, ref, entries.map((e) => e.key)).catch(() => undefined);
            return truth.visible && (includeDeclared || truth.data);
          }
          if (withData === null || withData.has(name)) return true;
          // Declared here; a Lance client may have written its first data directly since: a look
          // at its state (where its dataset lives) and its versions.
          countCheck();
          const truth = await this.observe(kind, ref);
          return truth.visible && truth.data;
        }),
      ),
    );
    return candidates.filter((_, i) => keep[i]);
  }

  /** Every pending entry of the namespace, by table name: operations under way and dead ones. */
  private async pendingOf(kind: ChildKind, ns: string[]): Promise<Map<string, Pending[]>> {
    const prefix = indexPendingDirKey(kind, ns);
    const byName = new Map<string, Pending[]>();
    let startAfter: string | undefined;
    for (;;) {
      const listing = await this.store.list(prefix, { maxKeys: LIST_PAGE, ...(startAfter ? { startAfter } : {}) });
      for (const o of listing.objects) {
        const entry = parsePendingKey(prefix, o.key);
        if (entry) byName.set(entry.name, [...(byName.get(entry.name) ?? []), { key: o.key, until: entry.until }]);
      }
      if (!listing.nextStartAfter) return byName;
      startAfter = listing.nextStartAfter;
    }
  }

  /** The names in (lower, upper] that the index says have data. */
  private async namesWithData(ns: string[], lower: string | undefined, upper: string | undefined): Promise<Set<string>> {
    const prefix = indexDataDirKey(ns);
    const found = new Set<string>();
    let startAfter = lower !== undefined && lower !== '' ? indexNameDirKey(prefix, lower) : undefined;
    for (;;) {
      const listing = await this.store.list(prefix, { delimiter: '/', maxKeys: LIST_PAGE, ...(startAfter ? { startAfter } : {}) });
      for (const p of listing.commonPrefixes) {
        const name = nameInIndexDir(prefix, p);
        if (upper !== undefined && compareNames(name, upper) > 0) return found;
        found.add(name);
      }
      if (!listing.nextStartAfter) return found;
      startAfter = listing.nextStartAfter;
    }
  }

  /** Builds the index of a namespace that has none yet (see the header); safe to run on several replicas at once. */
  private async build(ns: string[]): Promise<void> {
    const dirKey = namespaceDirKey(ns);
    const limit = pLimit(CHECK_CONCURRENCY);
    let startAfter: string | undefined;
    for (;;) {
      const page = await this.store.list(dirKey, { delimiter: '/', maxKeys: LIST_PAGE, ...(startAfter ? { startAfter } : {}) });
      const children = page.commonPrefixes.map((p) => childOfPrefix(dirKey, p)).filter((c) => c !== null);
      // Each under a pending entry of its own, like any change: a rebuild that dies half-way through a
      // settle, racing an operation on the name, leaves the name to be read from its state.
      await Promise.all(children.map((c) => limit(() => this.around(c.kind, { namespace: ns, name: c.name }, async () => undefined))));
      if (!page.nextStartAfter) break;
      startAfter = page.nextStartAfter;
    }
    // Also when there was no child to settle: a snapshot from before a rebuild must not pass.
    await Promise.all([this.snapshots.invalidate(ns, 'table'), this.snapshots.invalidate(ns, 'namespace')]);
    await this.markReady(ns);
  }

  /** Marks a namespace's index complete: a new namespace has no children to index. */
  async markReady(ns: string[]): Promise<void> {
    await this.store.put(indexReadyKey(ns), '', { ifNoneMatch: '*' }).catch((e: unknown) => {
      if (!(e instanceof PreconditionFailedError)) throw e;
    });
  }
}
