import fsSync, { promises as fs, constants as fsc } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { type CollectedPage, DirCache } from './local-dir-cache.js';
import {
  asBuffer,
  errCode,
  existingRealPath,
  ignoreFailure,
  isInternalName,
  objectInfo,
  portError,
  pruneEmptyDirs,
  readWhole,
  TEMP_MARK,
} from './local-file-io.js';
import { KeyLocks, LOCK_SUFFIX_BYTES } from './local-lock.js';
import { SpareFiles } from './local-spare-files.js';
import { syncDir, syncPlacedDir, TEMP_SUFFIX_BYTES, type TempContent, TempFiles } from './local-temp.js';
import {
  type DeleteOptions,
  InvalidKeyError,
  type ListOptions,
  type ListPage,
  type ObjectInfo,
  type ObjectStore,
  PreconditionFailedError,
  type PutCondition,
  type PutOptions,
  type StoredObject,
} from './object-store.js';

// Local-directory adapter: a key is a file under the root, its prefixes directories.
//
// Invariants:
// - create-if-absent is `link(tmp, final)`, or for an empty body that need not be durable the
//   exclusive open(2) of the final name itself (no bytes to show half-written): the kernel refuses
//   an existing name (EEXIST), so of any number of concurrent creators, in this process or others
//   on the same file system, exactly one wins.
// - replace-if-unchanged holds a per-key lock (an in-process queue plus an O_EXCL lock file shared
//   with other processes, see local-lock.ts) across "stat, compare etag, rename": no two such
//   replaces interleave.
// - every acknowledged write was fsynced, file and directory, before the call returned (unless
//   the caller said it need not be, see PutOptions: then neither is). See local-temp.ts.
// - a symbolic link is no object: listings skip it, a get or head of one finds nothing, and
//   deletePrefix deletes nothing through one (a prefix that is a link loses the link, never what
//   it leads to). Other calls do not look at the directories on a key's path (a syscall each):
//   the catalog asks linkOnPath and linksIn where it resolves a table, a dataset or a namespace,
//   and refuses one reached through a link or holding one.
// Temporary, spare and lock files carry a marker in their names and are never listed.
//
// What it does with the hints of the port (PutHints, DeleteOptions in object-store.ts): a put
// `sameAs` a staged object hard-links that object's file if it still holds the body; one
// `besideExisting` makes no missing directory and is refused instead; a `shortLived` create links
// a spare file (local-spare-files.ts); a delete that keeps its directory does not rmdir it.
//
// The small steps of a read or a write (stat, open, read, write, link, rename, unlink, close) are
// synchronous calls: on a local file system each is a few microseconds of kernel time, while the
// asynchronous form of each costs a round trip through libuv's thread pool, and one commit makes
// dozens of them in a row. Only fsync, which waits for the device, leaves the event loop (and
// concurrent ones share the journal's commit). A root on a network file system would block the
// event loop on the network: use the S3 adapter for remote storage.

const DEFAULT_MAX_KEYS = 1000;

/** Linux NAME_MAX and PATH_MAX (terminator excluded). */
const NAME_MAX_BYTES = 255;
const PATH_MAX_BYTES = 4095;
/** A written file's name also carries the temporary or lock suffix for a while. */
const WRITE_SUFFIX_BYTES = Math.max(TEMP_SUFFIX_BYTES, LOCK_SUFFIX_BYTES);

/** A key with a segment that is empty (but a trailing one), '.' or '..', or with a NUL. */
const INVALID_KEY = /\/\/|(?:^|\/)\.\.?(?:\/|$)|\0/;
/** Whether `text` exceeds `max` bytes of UTF-8; at most 3 bytes a UTF-16 unit, so only a long one is measured (every request resolves several keys). */
const tooLong = (text: string, max: number): boolean => text.length * 3 > max && Buffer.byteLength(text) > max;

export class LocalObjectStore implements ObjectStore {
  readonly rootUri: string;
  readonly listsWholeDirectory = true;
  private readonly root: string;
  /** The root with one trailing '/': keys are appended to it. */
  private readonly rootSlash: string;
  /** Held by a replace-if-unchanged across "stat, compare etag, rename" (see local-lock.ts). */
  private readonly locks: KeyLocks;
  /** Writes bodies out of sight and moves them into place (see local-temp.ts). */
  private readonly temps: TempFiles;
  /** Sorted listings of large directories (see local-dir-cache.ts). */
  private readonly dirCache = new DirCache();
  /** Inodes kept for the next short-lived create in their directory (see local-spare-files.ts). */
  private readonly spares = new SpareFiles();
  /** The root's real path (the root itself may be, or lie under, a symbolic link), read when first needed. */
  private realRoot: string | null = null;

  constructor(rootDir: string) {
    this.root = path.resolve(rootDir);
    this.rootSlash = path.join(this.root, '/');
    this.rootUri = pathToFileURL(this.root).href;
    this.locks = new KeyLocks(this.root);
    this.temps = new TempFiles(this.root);
  }

  /** Creates the root directory if needed. */
  async init(): Promise<void> {
    await fs.mkdir(this.root, { recursive: true });
  }

  private pathOf(key: string): string {
    // What a key must not hold, in one scan: a leading '/', an empty segment (but for a trailing
    // '/'), a '.' or '..' segment, a NUL. (Every store call resolves its key here.)
    if (key.startsWith('/') || INVALID_KEY.test(key)) throw new InvalidKeyError(`invalid store key: ${JSON.stringify(key)}`);
    if (isInternalName(key.slice(key.lastIndexOf('/') + 1))) throw new InvalidKeyError(`reserved store key: ${JSON.stringify(key)}`);
    const relative = key.endsWith('/') ? key.slice(0, -1) : key;
    const full = relative === '' ? this.root : `${this.rootSlash}${relative}`;
    // Checked here rather than met as ENAMETOOLONG halfway through a multi-step write. A key of
    // at most NAME_MAX bytes has no segment longer.
    if (tooLong(full, PATH_MAX_BYTES) || (tooLong(key, NAME_MAX_BYTES) && key.split('/').some((p) => tooLong(p, NAME_MAX_BYTES)))) {
      throw new InvalidKeyError(`the key ${JSON.stringify(key)} is too long for the store`);
    }
    return full;
  }

  location(key: string): string {
    return key === '' ? this.root : this.pathOf(key.replace(/\/$/, ''));
  }

  objectPath(key: string): string {
    return this.location(key).replace(/^\/+/, '');
  }

  uri(key: string): string {
    return pathToFileURL(this.location(key)).href;
  }

  engineStorageOptions(): Record<string, string> {
    return {};
  }

  clientStorageOptions(): Record<string, string> {
    return {};
  }

  async close(): Promise<void> {
    this.spares.clear();
  }

  async head(key: string): Promise<ObjectInfo | null> {
    try {
      // A missing file is the common answer (markers, the version above the latest): no exception for it.
      const st = fsSync.lstatSync(this.pathOf(key), { bigint: true, throwIfNoEntry: false });
      return st?.isFile() ? objectInfo(key, st) : null;
    } catch (e) {
      if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR') return null;
      throw portError(e, key);
    }
  }

  async get(key: string): Promise<StoredObject | null> {
    let fd: number;
    try {
      fd = fsSync.openSync(this.pathOf(key), fsc.O_RDONLY | fsc.O_NOFOLLOW);
    } catch (e) {
      // ELOOP: the key is a symbolic link (see the invariants).
      if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR' || errCode(e) === 'EISDIR' || errCode(e) === 'ELOOP') return null;
      throw portError(e, key);
    }
    try {
      const st = fsSync.fstatSync(fd, { bigint: true });
      if (!st.isFile()) return null;
      return { ...objectInfo(key, st), body: readWhole(fd, Number(st.size)) };
    } catch (e) {
      if (errCode(e) === 'EISDIR') return null;
      throw portError(e, key);
    } finally {
      fsSync.closeSync(fd);
    }
  }

  /** The file of PutOptions.sameAs's key, and its etag; none for a key this store refuses (the body is written then). */
  private fileOf(sameAs: PutOptions['sameAs']): TempContent['sameAs'] {
    if (!sameAs) return undefined;
    try {
      return { file: this.pathOf(sameAs.key), etag: sameAs.etag };
    } catch {
      return undefined;
    }
  }

  async put(key: string, body: Buffer | string, condition?: PutCondition, options?: PutOptions): Promise<ObjectInfo> {
    try {
      // Awaited only once the body is written: its failure must not go unhandled meanwhile.
      options?.placeAfter?.catch(() => undefined);
      return await this.putAt(key, body, condition, options ?? {});
    } catch (e) {
      throw portError(e, key);
    }
  }

  private async putAt(key: string, body: Buffer | string, condition: PutCondition | undefined, options: PutOptions): Promise<ObjectInfo> {
    const { durable = true, placeAfter, sameAs, besideExisting = false, shortLived = false } = options;
    const target = this.pathOf(key);
    if (Buffer.byteLength(path.basename(target)) + WRITE_SUFFIX_BYTES > NAME_MAX_BYTES || Buffer.byteLength(target) + WRITE_SUFFIX_BYTES > PATH_MAX_BYTES) {
      throw new InvalidKeyError(`the key ${JSON.stringify(key)} is too long for the store`);
    }
    if (condition && 'ifMatch' in condition) {
      // The etag is compared under the key's lock, after the wait: nothing to write ahead.
      if (placeAfter) await placeAfter;
      return this.locks.run(target, async () => {
        const current = await this.head(key);
        if (!current) throw new PreconditionFailedError(key, 'object does not exist');
        if (current.etag !== condition.ifMatch) throw new PreconditionFailedError(key, 'etag changed');
        return this.temps.replace(key, target, { body, besideExisting }, durable);
      });
    }
    if (!durable && !sameAs && !placeAfter && !(condition && 'ifMatch' in condition) && body.length === 0) {
      // An empty object nobody needs durable, where none is yet: made in place (TempFiles.createEmpty).
      const made = this.temps.createEmpty(key, target, besideExisting);
      if (made) return objectInfo(key, made);
      if (condition) throw new PreconditionFailedError(key, 'object exists');
      // Something is there: replaced by a new inode, as any put replaces (below).
    }
    if (condition && 'ifNoneMatch' in condition) {
      // A short-lived create (a slot's reservation) reuses the file of an earlier one (see local-spare-files.ts).
      const recycled = shortLived && !durable && !sameAs && !placeAfter;
      if (recycled) {
        let placed: import('node:fs').BigIntStats | null;
        try {
          placed = this.spares.place(target, asBuffer(body));
        } catch (e) {
          if (errCode(e) === 'EEXIST') throw new PreconditionFailedError(key, 'object exists');
          throw e;
        }
        if (placed) return objectInfo(key, placed);
      }
      const st = await this.temps.place(key, target, { body, sameAs: this.fileOf(sameAs), besideExisting }, durable, placeAfter, async (tmp, tmpStat) => {
        try {
          fsSync.linkSync(tmp, target);
          if (recycled) this.spares.keep(tmp, tmpStat, target);
        } catch (e) {
          if (errCode(e) === 'EEXIST') {
            if (recycled) this.spares.keep(tmp, tmpStat, null);
            throw new PreconditionFailedError(key, 'object exists');
          }
          throw e;
        } finally {
          ignoreFailure(() => fsSync.unlinkSync(tmp));
        }
      });
      if (durable) await syncPlacedDir(target);
      return objectInfo(key, st);
    }
    // A put that no condition guards and nobody needs durable (Lance's hint, a listing snapshot)
    // goes through the thread pool: right after another request's fsync its rename can wait
    // milliseconds on the file system's journal, which would hold every request up on the event loop.
    if (!condition && !durable && !sameAs && !placeAfter) return this.temps.replaceOffLoop(key, target, asBuffer(body), besideExisting);
    return this.temps.replace(key, target, { body, sameAs: this.fileOf(sameAs), besideExisting }, durable, placeAfter);
  }

  async copy(fromKey: string, toKey: string, condition?: { ifNoneMatch: '*' }): Promise<ObjectInfo> {
    const source = await this.get(fromKey);
    if (!source) throw Object.assign(new Error(`no such object: ${fromKey}`), { code: 'ENOENT' });
    return this.put(toKey, source.body, condition);
  }

  async list(prefix: string, options: ListOptions & { details: true }): Promise<ListPage<ObjectInfo>>;
  async list(prefix: string, options?: ListOptions): Promise<ListPage>;
  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    const slash = prefix.lastIndexOf('/');
    const dirKey = slash >= 0 ? prefix.slice(0, slash + 1) : '';
    const namePrefix = prefix.slice(slash + 1);
    const dirPath = dirKey === '' ? this.root : this.pathOf(dirKey.slice(0, -1));
    const maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
    const page: CollectedPage = { keys: [], prefixes: [], room: maxKeys, last: undefined, more: false };
    await this.dirCache.collect(dirPath, dirKey, namePrefix, options.startAfter, options.delimiter === '/', page).catch((e: unknown) => {
      throw portError(e, prefix);
    });
    let objects: ListPage['objects'] = page.keys.map((key) => ({ key }));
    if (options.details) {
      const infos = await Promise.all(page.keys.map((k) => this.head(k)));
      objects = infos.filter((i) => i !== null); // deleted since the directory was read: skip, as S3 would
    }
    const { prefixes: commonPrefixes, last } = page;
    return page.more && last !== undefined ? { objects, commonPrefixes, nextStartAfter: last } : { objects, commonPrefixes };
  }

  async delete(key: string, options?: DeleteOptions): Promise<void> {
    const target = this.pathOf(key);
    try {
      fsSync.unlinkSync(target);
    } catch (e) {
      if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR') return;
      throw portError(e, key);
    }
    if (!options?.keepDirectory) {
      // Spares kept beside the key would keep its directory: they go with the last key.
      this.spares.discard(path.dirname(target));
      pruneEmptyDirs(this.root, path.dirname(target));
    }
  }

  /**
   * The key ('' or ending in '/') of the first directory on the path of `key` below the root that
   * is a symbolic link, `key` itself included (whether or not the link leads anywhere); null when
   * none is, up to where the path ends. One realpath(3) for a path that exists and holds no link;
   * lstats one part at a time only to name the link, or for a path that does not exist (yet).
   */
  linkOnPath(key: string): string | null {
    const parts = key.split('/').filter((p) => p !== '');
    if (parts.length === 0) return null;
    const full = this.pathOf(parts.join('/'));
    if (this.realRoot === null) {
      const realRoot = existingRealPath(this.root);
      if (realRoot === null) return null; // no root yet: nothing under it leads anywhere
      this.realRoot = realRoot;
    }
    try {
      if (fsSync.realpathSync.native(full) === `${this.realRoot}${full.slice(this.root.length)}`) return null;
    } catch (e) {
      if (errCode(e) !== 'ENOENT' && errCode(e) !== 'ENOTDIR' && errCode(e) !== 'ELOOP') throw e;
    }
    let at = this.root;
    for (const [i, part] of parts.entries()) {
      at = `${at}/${part}`;
      let st: import('node:fs').Stats | undefined;
      try {
        st = fsSync.lstatSync(at, { throwIfNoEntry: false });
      } catch (e) {
        if (errCode(e) === 'ENOTDIR') return null;
        throw e;
      }
      if (!st) return null;
      if (st.isSymbolicLink()) return `${parts.slice(0, i + 1).join('/')}/`;
    }
    return null;
  }

  linksIn(dirKey: string): string[] {
    const dirPath = dirKey === '' ? this.root : this.pathOf(dirKey.slice(0, -1));
    return this.dirCache.linksIn(dirPath).map((name) => `${dirKey}${name}/`);
  }

  async deletePrefix(prefix: string, options: { keep?: string[] } = {}): Promise<number> {
    if (prefix !== '' && !prefix.endsWith('/')) throw new Error(`deletePrefix needs '' or a prefix ending in '/': ${prefix}`);
    const dirPath = prefix === '' ? this.root : this.pathOf(prefix.slice(0, -1));
    // Never through a link (looked for here, where directories are removed): a prefix that is
    // one loses the link, one under one has nothing to delete.
    const link = this.linkOnPath(prefix);
    if (link !== null) {
      if (link === prefix) {
        await fs.unlink(dirPath).catch(() => undefined);
        pruneEmptyDirs(this.root, path.dirname(dirPath));
      }
      return 0;
    }
    const keep = new Set(options.keep ?? []);
    const doomed: string[] = [];
    // Temporary files go too: a spare (local-spare-files.ts) or a dead writer's partial file would
    // keep its directory, and a table's directory that stays looks like a table.
    const temps: string[] = [];
    await this.walk(
      dirPath,
      prefix,
      (key) => {
        if (!keep.has(key)) doomed.push(key);
      },
      (file) => temps.push(file),
    );
    if (keep.size === 0 && dirPath !== this.root) {
      // A concurrent writer may put a file in a directory being removed (ENOTEMPTY): remove again.
      await fs.rm(dirPath, { recursive: true, force: true, maxRetries: 5, retryDelay: 1 });
    } else {
      for (const key of doomed) await fs.unlink(this.pathOf(key)).catch(() => undefined);
      for (const file of temps) await fs.unlink(file).catch(() => undefined);
      await this.removeEmptyDirsBelow(dirPath);
    }
    // With `keep`, dirPath itself may now be empty too (nothing kept existed): prune from it.
    pruneEmptyDirs(this.root, keep.size === 0 ? path.dirname(dirPath) : dirPath);
    return doomed.length;
  }

  /** Visits every file under a directory, in no particular order, and every temporary file's path with `visitTemp`. */
  private async walk(dirPath: string, dirKey: string, visit: (key: string) => void, visitTemp: (file: string) => void): Promise<void> {
    let dirents: import('node:fs').Dirent[];
    try {
      dirents = await fs.readdir(dirPath, { withFileTypes: true });
    } catch (e) {
      if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR') return;
      throw e;
    }
    for (const d of dirents) {
      if (d.name.includes(TEMP_MARK)) visitTemp(path.join(dirPath, d.name));
      if (isInternalName(d.name)) continue;
      if (d.isDirectory()) await this.walk(path.join(dirPath, d.name), `${dirKey}${d.name}/`, visit, visitTemp);
      else if (d.isFile()) visit(`${dirKey}${d.name}`);
    }
  }

  /** Removes the empty directories inside `dir` (depth first), keeping `dir` itself. */
  private async removeEmptyDirsBelow(dir: string): Promise<void> {
    const dirents = await fs.readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const d of dirents) {
      if (!d.isDirectory()) continue;
      const sub = path.join(dir, d.name);
      await this.removeEmptyDirsBelow(sub);
      await fs.rmdir(sub).catch(() => undefined);
    }
  }

  async renameDir(fromPrefix: string, toPrefix: string): Promise<void> {
    try {
      await this.renameDirAt(fromPrefix, toPrefix);
    } catch (e) {
      throw portError(e, toPrefix);
    }
  }

  private async renameDirAt(fromPrefix: string, toPrefix: string): Promise<void> {
    const from = this.pathOf(fromPrefix.replace(/\/$/, ''));
    const to = this.pathOf(toPrefix.replace(/\/$/, ''));
    await fs.mkdir(path.dirname(to), { recursive: true });
    // rename(2) replaces an empty destination directory, so refuse any existing one first; table
    // directories are never empty, so a racing rename onto the same name fails with ENOTEMPTY.
    if (
      await fs.stat(to).then(
        () => true,
        () => false,
      )
    )
      throw new PreconditionFailedError(toPrefix, 'destination exists');
    try {
      await fs.rename(from, to);
    } catch (e) {
      if (errCode(e) === 'ENOTEMPTY' || errCode(e) === 'EEXIST') throw new PreconditionFailedError(toPrefix, 'destination exists');
      throw e;
    }
    await syncDir(path.dirname(to));
    await syncDir(path.dirname(from)).catch(() => undefined);
    pruneEmptyDirs(this.root, path.dirname(from));
  }
}
