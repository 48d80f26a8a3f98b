import type { ObjectStore } from '../../store/object-store.js';
import {
  type ChildKind,
  compareNames,
  indexDataDirKey,
  indexNameDirKey,
  indexPendingDirKey,
  indexVisibleDirKey,
  nameInIndexDir,
  parsePendingKey,
} from './layout.js';
import type { PendingEntry } from './listing-snapshot.js';

// The reads of a namespace's listing index (listing-index.ts): its names a stretch at a time,
// from the store or from a snapshot, the names it says have data, and its pending entries.

/** Keys one LIST asks for: S3 answers at most 1,000 whatever is asked, a local root all of them (a large page in one call). */
export const LIST_PAGE = 10_000;
/** Children whose state is read (checked or settled) at once. */
export const CHECK_CONCURRENCY = 16;

/** A pending entry of a name: its key, and until when its operation is trusted. */
export interface Pending {
  key: string;
  until: number;
}

/** Reads the index's names in order, a stretch at a time, from the store or from a snapshot. */
export interface IndexCursor {
  /** The next names (at most LIST_PAGE, and `room` + 1); `exhausted` when none follow. */
  next(room: number): Promise<{ names: string[]; exhausted: boolean }>;
  /** Names in (lower, upper] that the index says have data (a set that may hold others too). */
  withData(lower: string | undefined, upper: string | undefined): Promise<Set<string>>;
}

export function pendingByName(entries: PendingEntry[]): Map<string, Pending[]> {
  const byName = new Map<string, Pending[]>();
  for (const { name, key, until } of entries) byName.set(name, [...(byName.get(name) ?? []), { key, until }]);
  return byName;
}

const stretchSize = (room: number): number => Math.min(LIST_PAGE, Number.isFinite(room) ? room + 1 : LIST_PAGE);

/** Index of the first of `names` (in compareNames order, as a snapshot holds them) past `after`. */
export function firstAfter(names: string[], after: string): number {
  let low = 0;
  let high = names.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (compareNames(names[mid] ?? '', after) <= 0) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** A cursor over a snapshot's names, after `after`. */
export function snapshotCursor(names: string[], data: Set<string>, after: string | undefined): IndexCursor {
  let at = after === undefined ? 0 : firstAfter(names, after);
  return {
    next: async (room) => {
      const stretch = names.slice(at, at + stretchSize(room));
      at += stretch.length;
      return { names: stretch, exhausted: at >= names.length };
    },
    withData: async () => data,
  };
}

/** A cursor over the index as the store holds it: delimited LISTs sized to the page. */
export function storeCursor(store: ObjectStore, kind: ChildKind, ns: string[], after: string | undefined): IndexCursor {
  const prefix = indexVisibleDirKey(kind, ns);
  let startAfter = after === undefined ? undefined : indexNameDirKey(prefix, after);
  return {
    next: async (room) => {
      const listing = await store.list(prefix, { delimiter: '/', maxKeys: stretchSize(room), ...(startAfter ? { startAfter } : {}) });
      startAfter = listing.nextStartAfter;
      return { names: listing.commonPrefixes.map((p) => nameInIndexDir(prefix, p)), exhausted: !listing.nextStartAfter };
    },
    withData: (lower, upper) => namesWithData(store, ns, lower, upper),
  };
}

/** Every name (sub-directory) under an index folder, in order. */
export async function allNames(store: ObjectStore, prefix: string): Promise<string[]> {
  const names: string[] = [];
  let startAfter: string | undefined;
  for (;;) {
    const listing = await store.list(prefix, { delimiter: '/', maxKeys: LIST_PAGE, ...(startAfter ? { startAfter } : {}) });
    for (const p of listing.commonPrefixes) names.push(nameInIndexDir(prefix, p));
    if (!listing.nextStartAfter) return names;
    startAfter = listing.nextStartAfter;
  }
}

/** Every pending entry of the namespace, by child name: operations under way and dead ones. */
export async function pendingOf(store: ObjectStore, kind: ChildKind, ns: string[]): Promise<Map<string, Pending[]>> {
  const prefix = indexPendingDirKey(kind, ns);
  const byName = new Map<string, Pending[]>();
  let startAfter: string | undefined;
  for (;;) {
    const listing = await store.list(prefix, { maxKeys: LIST_PAGE, ...(startAfter ? { startAfter } : {}) });
    for (const o of listing.objects) {
      const entry = parsePendingKey(prefix, o.key);
      if (entry) byName.set(entry.name, [...(byName.get(entry.name) ?? []), { key: o.key, until: entry.until }]);
    }
    if (!listing.nextStartAfter) return byName;
    startAfter = listing.nextStartAfter;
  }
}

/** The names in (lower, upper] that the index says have data. */
async function namesWithData(store: ObjectStore, ns: string[], lower: string | undefined, upper: string | undefined): Promise<Set<string>> {
  const prefix = indexDataDirKey(ns);
  const found = new Set<string>();
  let startAfter = lower !== undefined && lower !== '' ? indexNameDirKey(prefix, lower) : undefined;
  for (;;) {
    const listing = await store.list(prefix, { delimiter: '/', maxKeys: LIST_PAGE, ...(startAfter ? { startAfter } : {}) });
    for (const p of listing.commonPrefixes) {
      const name = nameInIndexDir(prefix, p);
      if (upper !== undefined && compareNames(name, upper) > 0) return found;
      found.add(name);
    }
    if (!listing.nextStartAfter) return found;
    startAfter = listing.nextStartAfter;
  }
}
