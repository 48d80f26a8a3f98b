import type { LatestCommitted } from '../dataset-location.js';

/** Between a location and a branch in the key of a branch's kept handle: no location holds it. */
const BRANCH_SEPARATOR = '\n';

/** The key a dataset is kept under: its location for main, the location and the branch for a branch. */
export const branchKey = (location: string, branch: string | undefined): string =>
  branch === undefined ? location : `${location}${BRANCH_SEPARATOR}${branch}`;

// Open datasets kept across requests, one per location, so that a data operation does not open
// its dataset afresh (a describe through the resolver, the latest-version lookup, the manifest
// read) every time.
//
// Invariant: a kept handle serves a request only at a version at least as new as the latest
// committed version the caller read from the store for that request (LatestCommitted), and only
// for the table the caller found there. Before each use the handle is checked against it:
// - another incarnation at the location (the table was dropped and re-created): the handle is
//   closed and the location opened afresh;
// - the handle is behind: it loads exactly that version from the location (a checkout of the
//   version: cheaper than asking Lance for its latest, and what the caller checked), one load at a
//   time per handle;
// - the handle is ahead of the store (a commit that landed after the lookup): served, except for a
//   table without an incarnation (it may have been re-created with fewer versions), which is
//   opened afresh;
// - same version: served when the manifest's ETag is the one the handle was checked at, or, for a
//   table whose catalog record names its incarnation, when the handle reached that version by its
//   own reload or write. A table without a record (no incarnation) needs the ETag to match.
// Handles only move forward: a kept handle is checked out only at a version above its own
// (requests for an explicit version open their own), so a handle checked for one request cannot
// go stale under another that checked it too. A handle in use is closed only when its last user is
// done.
//
// Writes. A write the caller may run on the kept handle (useToWrite: an unmanaged table's, on main,
// at its latest) runs on it when the handle is current as it is (the same check, no reload) and was
// never checked out at a version: Lance refuses writes on a handle checked out at a version, so a
// handle a reload brought forward is read through only. Lance takes no lock across a write (a read
// of the handle during it is served from the version before, which is still at least the version
// its caller checked), and concurrent writes on one handle commit as on handles of their own (the
// later rebases); the handle's version only grows, and the entry takes it from the handle after the
// write. A reload never runs while a writer uses the handle (it would pin the handle under the
// writer): a read that finds such a handle behind opens afresh. Every other write runs on a handle
// of its own (a managed table's commits go through the writing request's coordinator, which a kept
// handle's version calls need not reach); the writer's handle, current after its commit, then
// replaces the kept one (adopt). Sparing the open saves about 2 ms of a one-row update or delete
// on a local disk (docs/benchmarks: the update/delete row).
//
// Bounds: at most `maxEntries` handles and `maxBytes` charged bytes, least recently used evicted
// first. A handle is charged its manifest's size (the dataset metadata it holds in memory grows
// with it) plus a fixed overhead; Lance's session caches (index and file metadata) are shared by
// every handle of the connection and bounded on their own (table-access.ts).

/** What the cache needs of an open dataset. */
export interface KeptHandle {
  version(): Promise<number>;
  /** Loads that version from the dataset's location. */
  checkout(version: number): Promise<void>;
  close(): void;
}

export interface HandleCacheLimits {
  /** Kept handles at most; 0 keeps none. */
  maxEntries: number;
  /** Charged bytes at most (see the header). */
  maxBytes: number;
}

export const DEFAULT_HANDLE_CACHE_LIMITS: HandleCacheLimits = { maxEntries: 256, maxBytes: 256 * 1024 * 1024 };

/** Charged per handle on top of its manifest: the dataset object, its schema, the resolver entry. */
export const HANDLE_OVERHEAD_BYTES = 64 * 1024;

interface Entry<H> {
  location: string;
  handle: H;
  incarnation: string | null;
  /** The version the handle is at; it only grows. */
  version: number;
  /** ETag of the manifest of `version` when it was checked against the store; undefined when not. */
  manifestETag: string | undefined;
  bytes: number;
  users: number;
  /** Out of the cache: closed as soon as `users` is 0. */
  evicted: boolean;
  refreshing: Promise<void> | undefined;
  /** Checked out at a version (by a reload, or by its writer): Lance refuses writes on it. */
  pinned: boolean;
  /** Writes running on the handle (useToWrite); no reload while there are any. */
  writers: number;
}

interface Opening<H> {
  promise: Promise<Entry<H>>;
  /** Requests waiting for this open; each is a user of the entry from the moment it exists. */
  waiters: { count: number };
}

export interface HandleCacheStats {
  entries: number;
  bytes: number;
  /** Datasets opened for the cache since it started. */
  opens: number;
  /** Kept handles reloaded because the store had a newer version. */
  reloads: number;
  /** Requests served by a kept handle, writes on it included. */
  hits: number;
}

export class HandleCache<H extends KeptHandle> {
  /** Least recently used first. */
  private readonly entries = new Map<string, Entry<H>>();
  private readonly opening = new Map<string, Opening<H>>();
  private bytes = 0;
  private counters = { opens: 0, reloads: 0, hits: 0 };

  constructor(
    private readonly limits: HandleCacheLimits,
    /** Whether a failure during a use means the handle itself may be bad (then it is evicted). */
    private readonly suggestsBadHandle: (e: unknown) => boolean,
  ) {}

  get enabled(): boolean {
    return this.limits.maxEntries > 0;
  }

  stats(): HandleCacheStats {
    return { entries: this.entries.size, bytes: this.bytes, ...this.counters };
  }

  /** Runs `fn` on the kept handle of `location`, checked against `latest` (see the invariant); `open` opens it afresh. */
  async use<T>(location: string, latest: LatestCommitted, open: () => Promise<H>, fn: (handle: H) => Promise<T>): Promise<T> {
    const entry = await this.acquire(location, latest, open);
    try {
      return await fn(entry.handle);
    } catch (e) {
      if (this.suggestsBadHandle(e)) this.evict(entry);
      throw e;
    } finally {
      this.release(entry);
    }
  }

  /**
   * Keeps `handle`, which a writer has just committed through at `version`, as the location's
   * handle, unless the kept one is of the same table and as new. The cache owns the handle after.
   */
  adopt(location: string, incarnation: string | null, handle: H, version: number, manifestSize: number, pinned = false): void {
    if (!this.enabled) {
      handle.close();
      return;
    }
    const entry = this.newEntry(location, handle, incarnation, version, undefined, manifestSize, pinned);
    // Held while installing, so that a handle not kept is closed by the release.
    entry.users = 1;
    this.install(entry);
    this.release(entry);
  }

  /**
   * Runs the write `fn` on the handle kept for `location` when it is current for `latest` as it is,
   * may be written through (see Writes in the header) and `accepts` it; undefined, without running
   * `fn`, otherwise (the caller writes on a handle of its own). The entry's version is the
   * handle's after the write: the version `committed` reads off the write's result when given (the
   * handle is at least there; concurrent writes on it only take it further), else the handle's.
   */
  async useToWrite<T>(
    location: string,
    latest: LatestCommitted,
    accepts: (handle: H) => boolean,
    fn: (handle: H) => Promise<T>,
    committed?: (value: T) => number,
  ): Promise<{ value: T } | undefined> {
    const kept = this.entries.get(location);
    const writable = kept && !kept.evicted && !kept.pinned && kept.refreshing === undefined && kept.incarnation === latest.incarnation;
    if (!writable || !this.current(kept, latest) || !accepts(kept.handle)) return undefined;
    kept.users++;
    kept.writers++;
    this.counters.hits++;
    this.touch(kept);
    try {
      const value = await fn(kept.handle);
      const version = committed ? committed(value) : await kept.handle.version().catch(() => undefined);
      if (version === undefined) this.evict(kept);
      else if (version > kept.version) {
        kept.version = version;
        // Reached by its own write: current for a table with an incarnation (see current).
        kept.manifestETag = undefined;
      }
      return { value };
    } catch (e) {
      if (this.suggestsBadHandle(e)) this.evict(kept);
      throw e;
    } finally {
      kept.writers--;
      this.release(kept);
    }
  }

  /**
   * Runs `fn` on the handle kept for `location` as it is, unchecked against any version (for work
   * that reads nothing of its own version: opening another line of history from it); undefined,
   * without running `fn`, when none is kept.
   */
  async withKeptAsIs<T>(location: string, fn: (handle: H) => Promise<T>): Promise<{ value: T } | undefined> {
    const kept = this.entries.get(location);
    if (!kept || kept.evicted) return undefined;
    kept.users++;
    try {
      return { value: await fn(kept.handle) };
    } finally {
      this.release(kept);
    }
  }

  /**
   * Closes the handles kept for `location` and for its branches (keyed by branchKey; its table was
   * dropped, deregistered or renamed) and discards the opens in flight.
   */
  forget(location: string): void {
    const ofLocation = (key: string) => key === location || key.startsWith(`${location}${BRANCH_SEPARATOR}`);
    for (const [key, entry] of [...this.entries]) if (ofLocation(key)) this.evict(entry);
    // Whoever waits for an open in flight still gets it, but it is not kept.
    for (const key of [...this.opening.keys()]) if (ofLocation(key)) this.opening.delete(key);
  }

  /** Closes every handle not in use; the ones in use close when their last user is done. */
  clear(): void {
    for (const entry of [...this.entries.values()]) this.evict(entry);
    this.opening.clear();
  }

  private async acquire(location: string, latest: LatestCommitted, open: () => Promise<H>): Promise<Entry<H>> {
    const kept = this.entries.get(location);
    if (kept) {
      kept.users++;
      let usable = false;
      try {
        // Behind while a writer uses it: not reloaded under the writer (see Writes in the header).
        if (kept.incarnation === latest.incarnation && !(kept.writers > 0 && kept.version < latest.version)) {
          await this.reload(kept, latest);
          usable = !kept.evicted && this.current(kept, latest);
        }
      } catch {
        usable = false;
      }
      if (usable) {
        this.counters.hits++;
        this.touch(kept);
        return kept;
      }
      this.evict(kept);
      this.release(kept);
    }
    return this.openShared(location, latest, open);
  }

  private current(entry: Entry<H>, latest: LatestCommitted): boolean {
    // Ahead of the store: a newer commit of the same table, unless a table without an incarnation
    // was re-created with fewer versions.
    if (entry.version > latest.version) return latest.incarnation !== null;
    if (entry.version < latest.version) return false;
    if (entry.manifestETag !== undefined) return entry.manifestETag === latest.manifestETag;
    return latest.incarnation !== null;
  }

  /** Brings the handle up to `latest.version`, one checkout at a time per handle (the others wait for it, then go on if still behind). */
  private async reload(entry: Entry<H>, latest: LatestCommitted): Promise<void> {
    while (entry.version < latest.version && !entry.evicted) {
      entry.refreshing ??= this.checkout(entry, latest);
      await entry.refreshing;
    }
  }

  private async checkout(entry: Entry<H>, latest: LatestCommitted): Promise<void> {
    try {
      entry.pinned = true;
      await entry.handle.checkout(latest.version);
      this.counters.reloads++;
      entry.version = await entry.handle.version();
      entry.manifestETag = entry.version === latest.version ? latest.manifestETag : undefined;
      if (entry.version === latest.version) this.recharge(entry, latest.manifestSize);
      // Not where it was asked to go: not to be trusted (and the caller's loop must end).
      else this.evict(entry);
    } catch (e) {
      this.evict(entry);
      throw e;
    } finally {
      entry.refreshing = undefined;
    }
  }

  /** Opens the location once for every request that finds it not kept at the same time. */
  private async openShared(location: string, latest: LatestCommitted, open: () => Promise<H>): Promise<Entry<H>> {
    const inFlight = this.opening.get(location);
    if (inFlight) {
      inFlight.waiters.count++;
      return inFlight.promise;
    }
    const waiters = { count: 1 };
    const ours = () => this.opening.get(location)?.waiters === waiters;
    const promise = (async () => {
      try {
        const handle = await open();
        this.counters.opens++;
        let version: number;
        try {
          version = await handle.version();
        } catch (e) {
          handle.close();
          throw e;
        }
        const entry = this.newEntry(
          location,
          handle,
          latest.incarnation,
          version,
          version === latest.version ? latest.manifestETag : undefined,
          latest.manifestSize,
        );
        entry.users = waiters.count;
        // Forgotten while opening (a drop): serve the waiters, keep nothing.
        if (ours()) this.install(entry);
        else entry.evicted = true;
        return entry;
      } finally {
        if (ours()) this.opening.delete(location);
      }
    })();
    this.opening.set(location, { promise, waiters });
    return promise;
  }

  private newEntry(
    location: string,
    handle: H,
    incarnation: string | null,
    version: number,
    manifestETag: string | undefined,
    manifestSize: number,
    pinned = false,
  ): Entry<H> {
    return {
      location,
      handle,
      incarnation,
      version,
      manifestETag,
      bytes: manifestSize + HANDLE_OVERHEAD_BYTES,
      users: 0,
      evicted: false,
      refreshing: undefined,
      pinned,
      writers: 0,
    };
  }

  /** Keeps `entry` for its location, unless the one kept there is of the same table and as new; then evicts down to the bounds. */
  private install(entry: Entry<H>): void {
    const existing = this.entries.get(entry.location);
    if (existing) {
      if (existing.incarnation === entry.incarnation && existing.version >= entry.version) {
        entry.evicted = true;
        return;
      }
      this.evict(existing);
    }
    this.entries.set(entry.location, entry);
    this.bytes += entry.bytes;
    for (const oldest of this.entries.values()) {
      if (this.entries.size <= this.limits.maxEntries && this.bytes <= this.limits.maxBytes) break;
      this.evict(oldest);
    }
  }

  private recharge(entry: Entry<H>, manifestSize: number): void {
    const bytes = manifestSize + HANDLE_OVERHEAD_BYTES;
    if (!entry.evicted) this.bytes += bytes - entry.bytes;
    entry.bytes = bytes;
    if (this.bytes > this.limits.maxBytes) {
      for (const oldest of this.entries.values()) {
        if (this.bytes <= this.limits.maxBytes) break;
        if (oldest !== entry) this.evict(oldest);
      }
    }
  }

  private touch(entry: Entry<H>): void {
    this.entries.delete(entry.location);
    this.entries.set(entry.location, entry);
  }

  private evict(entry: Entry<H>): void {
    if (entry.evicted) return;
    entry.evicted = true;
    if (this.entries.get(entry.location) === entry) {
      this.entries.delete(entry.location);
      this.bytes -= entry.bytes;
    }
    if (entry.users === 0) entry.handle.close();
  }

  private release(entry: Entry<H>): void {
    entry.users--;
    if (entry.evicted && entry.users === 0) entry.handle.close();
  }
}
