import fsSync, { type BigIntStats, type Dirent, promises as fs } from 'node:fs';
import path from 'node:path';
import { errCode, isInternalName } from './local-file-io.js';
import { compareKeys } from './object-store.js';

// A local store's LIST: a page of keys in byte order (as S3 lists them), walked from the sorted
// names of the directories under the prefix. Directories are not sorted on disk, so a directory's
// sorted names are kept between reads while its inode, mtime and ctime show it unchanged (see
// DirCache.sortedEntries for when that is proof), and those of one that changed are merged with
// what was kept rather than sorted again. Temporary, spare and lock files are never listed, nor
// are symbolic links: the same read names them apart (DirCache.linksIn), for the catalog, which
// follows none.

/**
 * Directories smaller than this are kept only once their listing is trusted: one that is changing
 * costs less to read again than to merge, and a settled one (a table's directory, which every
 * DescribeTable lists) then costs a stat instead of a read.
 */
const DIR_CACHE_MIN_ENTRIES = 64;
/** Bound on the directories kept, however small. */
const DIR_CACHE_MAX_DIRS = 50_000;
/** Directories up to this size on disk (some hundreds of entries on ext4) are read synchronously. */
const SMALL_DIR_BYTES = 16_384n;
/** Bound on the names kept in all sorted listings together (some tens of MB). */
const DIR_CACHE_MAX_NAMES = 1_000_000;
/** Far beyond a kernel clock tick (1-10 ms): a directory changed this recently is not trusted to show it in its mtime. */
const DIR_CLOCK_MARGIN_NS = 100_000_000n;

interface CachedDir {
  ino: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
  /** The directory's mtime was old enough at the read that any later change shows in it. */
  trusted: boolean;
  names: string[];
  /** The entries that are symbolic links (never listed), by name. */
  links: string[];
  /** The names as keys (the directory's key before each), made by the first listing that needs them. */
  keys: { dirKey: string; keys: string[] } | null;
}

/** What a kept listing counts against DIR_CACHE_MAX_NAMES: its names, and its keys once made. */
const weightOf = (dir: CachedDir): number => dir.names.length * (dir.keys ? 2 : 1);

/** What one read of a directory says: its sorted names, its links, and the kept listing they came from (if kept). */
interface DirEntries {
  names: string[];
  links: string[];
  kept: CachedDir | null;
}

const NO_ENTRIES: DirEntries = { names: [], links: [], kept: null };

/** A page being listed: its keys and common prefixes, the room left, the last one taken, and whether one more was seen. */
export interface CollectedPage {
  keys: string[];
  prefixes: string[];
  room: number;
  last: string | undefined;
  more: boolean;
}

/** Index of the first name not below `name` in a sorted array. */
function lowerBound(names: string[], name: string): number {
  let lo = 0;
  let hi = names.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareKeys(names[mid] ?? '', name) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The names of `fresh` in sorted order, reusing the sorted `previous` read of the same directory:
 * only the names added since are sorted, so a directory that gained a few entries costs a pass,
 * not a sort.
 */
function mergeSorted(previous: string[], fresh: string[]): string[] {
  const before = new Set(previous);
  const added = fresh.filter((n) => !before.has(n)).sort(compareKeys);
  // Nothing went unless fewer of the previous names are still there than were.
  const stayed = fresh.length - added.length;
  let kept = previous;
  if (stayed < previous.length) {
    const now = new Set(fresh);
    kept = previous.filter((n) => now.has(n));
  }
  if (added.length === 0) return kept;
  const merged: string[] = [];
  let i = 0;
  for (const name of added) {
    while (i < kept.length && compareKeys(kept[i] ?? '', name) < 0) merged.push(kept[i++] ?? '');
    merged.push(name);
  }
  while (i < kept.length) merged.push(kept[i++] ?? '');
  return merged;
}

export class DirCache {
  /** Sorted listings of large directories, least recently used first (see sortedEntries). */
  private readonly dirs = new Map<string, CachedDir>();
  /** The names (and keys) all kept listings hold together (see weightOf). */
  private cachedNames = 0;

  /**
   * Adds to `out`, in byte order, the keys under `dirKey` whose name in it starts with `namePrefix`
   * and that sort after `after` (one ending in '/' also skips what lies under it), until its room
   * is used and one more is seen; with `delimited`, a subdirectory is one entry (a common prefix,
   * its key ending in '/'), else its keys, recursively. A directory's entries are contiguous in key
   * order, so the walk stops as soon as the page is full and skips every subtree wholly before
   * `after` unread.
   */
  async collect(dirPath: string, dirKey: string, namePrefix: string, after: string | undefined, delimited: boolean, out: CollectedPage): Promise<void> {
    if (after?.endsWith('/') && dirKey.startsWith(after)) return; // all of it lies under `after`
    if (after !== undefined && !after.startsWith(dirKey)) {
      if (compareKeys(after, dirKey) > 0) return; // every key here sorts before `after`
      after = undefined;
    }
    const { names: entries, kept } = await this.sortedEntries(dirPath);
    // A trusted kept listing keeps its keys too: a directory listed again costs no string per entry.
    const keys = kept?.trusted ? this.keysOf(dirPath, dirKey, kept) : null;
    const relAfter = after?.slice(dirKey.length);
    let i = lowerBound(entries, namePrefix);
    if (relAfter !== undefined && compareKeys(relAfter, namePrefix) > 0) {
      // The entry `relAfter` falls in, or the first after it; a directory containing `after` is entered.
      const cut = relAfter.indexOf('/');
      i = Math.max(i, lowerBound(entries, cut >= 0 ? relAfter.slice(0, cut + 1) : relAfter));
    }
    // Only the first few entries from `i` can sort at or before `after`: once one does not, no later one does.
    let skipping = after !== undefined;
    for (; i < entries.length && !out.more; i++) {
      const entry = entries[i] ?? '';
      if (!entry.startsWith(namePrefix)) break;
      const key = keys?.[i] ?? dirKey + entry;
      const isDir = entry.endsWith('/');
      if (skipping && after !== undefined) {
        if (compareKeys(key, after) <= 0 && !(!delimited && isDir && after.startsWith(key) && after !== key)) continue;
        skipping = false;
      }
      if (!isDir || delimited) {
        if (out.room === 0) out.more = true;
        else {
          out.room--;
          out.last = key;
          if (isDir) out.prefixes.push(key);
          else out.keys.push(key);
        }
      } else await this.collect(path.join(dirPath, entry.slice(0, -1)), key, '', after?.startsWith(key) ? after : undefined, false, out);
    }
  }

  /**
   * The names in a directory, sorted in byte order, a subdirectory's with a trailing '/'.
   *
   * Directories are not sorted on disk, so large ones (and settled small ones, see
   * DIR_CACHE_MIN_ENTRIES) are kept sorted here between reads, and a kept listing is used only
   * while it provably still matches the directory. Every change of the entries of a directory
   * sets its mtime from the kernel's clock, which advances in coarse ticks,
   * so a change in the same tick as a read can leave mtime unchanged. Hence a listing is trusted
   * only if the mtime it was read at lies more than DIR_CLOCK_MARGIN_NS before the moment the read
   * began: any later change, by this process or another on this machine, then sets an mtime after
   * that moment and so differs. A listing read too soon after a change is used for that call only.
   * (A root shared over a network file system, whose clocks differ, must not be used.)
   */
  private async sortedEntries(dirPath: string): Promise<DirEntries> {
    const began = BigInt(Date.now()) * 1_000_000n;
    let st: BigIntStats;
    try {
      st = fsSync.statSync(dirPath, { bigint: true });
    } catch (e) {
      if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR') return NO_ENTRIES;
      throw e;
    }
    if (!st.isDirectory()) return NO_ENTRIES;
    const kept = this.keptUnchanged(dirPath, st);
    if (kept) return kept;
    let dirents: Dirent[];
    try {
      // A small directory (its size on disk says so) is read at once; a large one without holding the event loop.
      dirents = st.size <= SMALL_DIR_BYTES ? fsSync.readdirSync(dirPath, { withFileTypes: true }) : await fs.readdir(dirPath, { withFileTypes: true });
    } catch (e) {
      if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR') return NO_ENTRIES;
      throw e;
    }
    return this.read(dirPath, st, began, dirents);
  }

  /**
   * The names of the entries of a directory that are symbolic links (none for a directory that
   * does not exist), from the same read as its listing: a directory listed (or looked at here)
   * and kept unchanged since costs a stat. Synchronous: for the small directories of a table or a
   * dataset, or one whose listing was just kept.
   */
  linksIn(dirPath: string): string[] {
    const began = BigInt(Date.now()) * 1_000_000n;
    let st: BigIntStats | undefined;
    let dirents: Dirent[];
    try {
      st = fsSync.statSync(dirPath, { bigint: true, throwIfNoEntry: false });
      if (!st?.isDirectory()) return [];
      const kept = this.keptUnchanged(dirPath, st);
      if (kept) return kept.links;
      dirents = fsSync.readdirSync(dirPath, { withFileTypes: true });
    } catch (e) {
      if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR') return [];
      throw e;
    }
    return this.read(dirPath, st, began, dirents).links;
  }

  /** The kept listing of a directory, when it provably still matches it (see sortedEntries); most recently used from now on. */
  private keptUnchanged(dirPath: string, st: BigIntStats): DirEntries | null {
    const cached = this.dirs.get(dirPath);
    if (!(cached?.trusted && cached.ino === st.ino && cached.mtimeNs === st.mtimeNs && cached.ctimeNs === st.ctimeNs)) return null;
    this.dirs.delete(dirPath); // most recently used last
    this.dirs.set(dirPath, cached);
    return { names: cached.names, links: cached.links, kept: cached };
  }

  /** A directory's entries as read (`st` stat'ed before `dirents` were read, the read begun at `began`), kept for the next read if they may be. */
  private read(dirPath: string, st: BigIntStats, began: bigint, dirents: Dirent[]): DirEntries {
    const cached = this.dirs.get(dirPath);
    const fresh: string[] = [];
    const links: string[] = [];
    for (const d of dirents) {
      if (isInternalName(d.name)) continue;
      if (d.isDirectory()) fresh.push(`${d.name}/`);
      else if (d.isFile()) fresh.push(d.name);
      else if (d.isSymbolicLink()) links.push(d.name);
    }
    const names = cached ? mergeSorted(cached.names, fresh) : fresh.sort(compareKeys);
    this.dirs.delete(dirPath);
    const trusted = st.mtimeNs < began - DIR_CLOCK_MARGIN_NS && st.ctimeNs < began - DIR_CLOCK_MARGIN_NS;
    if (names.length >= DIR_CACHE_MIN_ENTRIES || trusted) {
      const kept: CachedDir = { ino: st.ino, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs, trusted, names, links, keys: null };
      this.dirs.set(dirPath, kept);
      this.cachedNames += names.length - (cached ? weightOf(cached) : 0);
      this.evictOverBound();
      return { names, links, kept };
    }
    if (cached) this.cachedNames -= weightOf(cached);
    return { names, links, kept: null };
  }

  /** The keys of a kept listing's names under `dirKey`, made once. */
  private keysOf(dirPath: string, dirKey: string, kept: CachedDir): string[] {
    if (kept.keys?.dirKey === dirKey) return kept.keys.keys;
    const counted = this.dirs.get(dirPath) === kept;
    if (counted) this.cachedNames -= weightOf(kept);
    kept.keys = { dirKey, keys: kept.names.map((name) => dirKey + name) };
    if (counted) {
      this.cachedNames += weightOf(kept);
      this.evictOverBound();
    }
    return kept.keys.keys;
  }

  /** Drops the least recently used kept listings until the rest are within DIR_CACHE_MAX_NAMES and DIR_CACHE_MAX_DIRS. */
  private evictOverBound(): void {
    for (const [oldest, dir] of this.dirs) {
      if (this.cachedNames <= DIR_CACHE_MAX_NAMES && this.dirs.size <= DIR_CACHE_MAX_DIRS) break;
      this.dirs.delete(oldest);
      this.cachedNames -= weightOf(dir);
    }
  }
}
