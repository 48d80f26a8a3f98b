import pLimit from 'p-limit';
import type { ObjectStore } from '../../store/object-store.js';
import { type ChildKind, compareNames } from './layout.js';
import type { IndexBuilder } from './listing-build.js';
import type { SnapshotCatchUp } from './listing-catch-up.js';
import type { IndexEntries } from './listing-entries.js';
import { CHECK_CONCURRENCY, type Pending, pendingByName, pendingOf, snapshotCursor, storeCursor } from './listing-reads.js';
import type { ListingSnapshots } from './listing-snapshot.js';
import type { PageTokens } from './page-token.js';

// Pages of a namespace's children, read from its listing index (listing-index.ts): a page costs
// what the page costs, whatever the namespace holds. Names with a pending entry are read from
// their state (listing-entries.ts), and a dead operation's entries settled on the way.
//
// Data: a declared table that got its first data from a Lance client writing directly (the service
// never told) has no `t`; listings that exclude declared tables check the `_versions/` of the
// declared names on their page (one LIST each, bounded by the page), and do not record it.
//
// Listings that read every name (no limit) keep the index and its pending entries in one object as
// well, checked against a stamp that every begin and every settle deletes (listing-snapshot.ts), so
// that they read two keys instead of LISTing a key per name; a page after such a listing reads it
// from memory while the stamp matches, and catches it up by the index's log of changes when it does
// not (listing-catch-up.ts).

/** Declared tables a page that excludes them checks for data before it ends short (see page). */
const MIN_CHECKS = 100;
/** Dead pending entries off the page that one listing settles, so that they do not pile up. */
const SETTLE_ELSEWHERE = 8;

/** A page of names; `more` says whether names may follow, after `resumeAfter` when given (a short page), else after the last name. */
export interface IndexPage {
  names: string[];
  more: boolean;
  resumeAfter?: string;
}

export class IndexPages {
  constructor(
    private readonly store: ObjectStore,
    private readonly entries: IndexEntries,
    private readonly builder: IndexBuilder,
    private readonly snapshots: ListingSnapshots,
    private readonly catchUp: SnapshotCatchUp,
  ) {}

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
   * stamp says it holds, or once caught up by the index's log (a listing of every name builds it,
   * and a process that keeps one catches it up), else from a LIST of the pending entries and
   * delimited LISTs of the index sized to the page. State is read only for names on the page with a pending entry, and for declared
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
    const fromStore = storeCursor(this.store, kind, ns, from);
    const isReady = () => this.builder.isReady(ns);
    const indexedFirst = async () => {
      await this.builder.build(ns);
      return this.page(kind, ns, after, want, { includeDeclared, bounded });
    };
    // The reads of a page do not depend on each other: one round trip (with the caller's check
    // that the namespace exists, which must pass before an index is built for it). A snapshot
    // under the current stamp was built after the index was found ready, and no stamp outlives a
    // drop of the namespace's catalog, so the ready marker is looked at only when no snapshot holds.
    const [readyListed, stamp, stored, firstStretch, pendingListed] = await Promise.all([
      bySnapshot ? undefined : isReady(),
      bySnapshot ? this.snapshots.stampFor(ns, kind, kept) : null,
      bySnapshot && !kept ? this.snapshots.read(ns, kind) : null,
      bySnapshot ? undefined : fromStore.next(want),
      bySnapshot ? undefined : pendingOf(this.store, kind, ns),
      options.namespaceExists?.(),
    ]);
    if (readyListed === false) return indexedFirst();
    let cursor = fromStore;
    let pending: Map<string, Pending[]>;
    let prefetched = firstStretch;
    const had = kept ?? stored ?? undefined;
    let snapshot = stamp !== null && had?.stamp === stamp ? had : undefined;
    // Stale: caught up by the index's log (or, for a whole listing, rebuilt) when there is one to catch up.
    if (!pendingListed && !snapshot && (had?.names || whole)) snapshot = (await this.catchUp.current(kind, ns, stamp, had, whole)) ?? undefined;
    if (pendingListed) pending = pendingListed;
    else if (snapshot?.names) {
      cursor = snapshotCursor(snapshot.names, snapshot.data, from);
      pending = pendingByName(snapshot.pending);
    } else {
      // No snapshot, or a current one that only says the index is too large for it: the index itself.
      if (!snapshot) this.snapshots.forget(ns, kind);
      let ready: boolean;
      [pending, prefetched, ready] = await Promise.all([pendingOf(this.store, kind, ns), fromStore.next(want), snapshot !== undefined || isReady()]);
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
      if (!(await this.entries.observe(kind, ref)).busy)
        await this.entries
          .settle(
            kind,
            ref,
            entries.map((e) => e.key),
          )
          .catch(() => undefined);
    }
    return { names, more: false };
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
            const truth = await this.entries.observe(kind, ref);
            if (!truth.busy && entries.every((e) => e.until <= Date.now()))
              await this.entries
                .settle(
                  kind,
                  ref,
                  entries.map((e) => e.key),
                )
                .catch(() => undefined);
            return truth.visible && (includeDeclared || truth.data);
          }
          if (withData === null || withData.has(name)) return true;
          // Declared here; a Lance client may have written its first data directly since: a look
          // at its state (where its dataset lives) and its versions.
          countCheck();
          const truth = await this.entries.observe(kind, ref);
          return truth.visible && truth.data;
        }),
      ),
    );
    return candidates.filter((_, i) => keep[i]);
  }
}
