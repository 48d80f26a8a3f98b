import fsSync, { type BigIntStats } from 'node:fs';
import path from 'node:path';
import { InvalidKeyError, type ObjectInfo, StoreUnavailableError } from './object-store.js';

// Small synchronous file steps the local store's modules share (and the catalog's allowed
// locations, see service/catalog/locations.ts), and what a file-system failure means to the port.

/** In the name of every file the local store keeps out of sight (never listed; a drop removes them). */
export const TEMP_MARK = '.~tmp~';
/** In the name of a key's lock file (local-lock.ts), also never listed. */
export const LOCK_MARK = '.~lock~';

/** A name the local store keeps out of sight: a temporary, spare or lock file. */
export function isInternalName(name: string): boolean {
  return name.includes(TEMP_MARK) || name.includes(LOCK_MARK);
}

/**
 * What the store reports of the object a file holds. A replace is a rename of a new inode, so
 * inode + mtime + size changes on every write. The etag's form is Lance's (object_store's: mtime
 * in microseconds), so the etag a Lance client computes for a file it wrote is the one this store
 * reports for it, under any name it is linked to.
 */
export function etagOf(st: BigIntStats): string {
  return `"${st.ino.toString(16)}-${(st.mtimeNs / 1000n).toString(16)}-${st.size.toString(16)}"`;
}

export function objectInfo(key: string, st: BigIntStats): ObjectInfo {
  return { key, size: Number(st.size), etag: etagOf(st), lastModified: new Date(Number(st.mtimeMs)) };
}

/** The real path of `p` (symbolic links resolved), or null when it does not exist. */
export function existingRealPath(p: string): string | null {
  try {
    return fsSync.realpathSync.native(p);
  } catch (e) {
    if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR') return null;
    throw e;
  }
}

/** The `code` of a file-system error (ENOENT, EEXIST, ...), if it has one. */
export function errCode(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e ? String((e as { code: unknown }).code) : undefined;
}

/** A body as bytes. */
export const asBuffer = (body: Buffer | string): Buffer => (typeof body === 'string' ? Buffer.from(body, 'utf8') : body);

/** Writes all of `body` at the file's position (a short write is continued). */
export function writeWhole(fd: number, body: Buffer): void {
  for (let off = 0; off < body.length; ) off += fsSync.writeSync(fd, body, off, body.length - off);
}

/** Reads `size` bytes (the whole file as stat saw it), and what a concurrent append added, up to a read that comes back short. */
export function readWhole(fd: number, size: number): Buffer {
  const chunks: Buffer[] = [];
  // One byte more than stat saw, so that the read reaching EOF needs no second buffer.
  let chunk = Buffer.allocUnsafe(Math.max(size + 1, 1024));
  let filled = 0;
  for (let read = 0; ; ) {
    const wanted = chunk.length - filled;
    const n = fsSync.readSync(fd, chunk, filled, wanted, null);
    if (n === 0) break;
    filled += n;
    read += n;
    // A regular file's read comes back short only at its end: once what stat saw is in, no second read to hear it.
    if (n < wanted && read >= size) break;
    if (filled === chunk.length) {
      chunks.push(chunk);
      chunk = Buffer.allocUnsafe(chunk.length);
      filled = 0;
    }
  }
  chunks.push(chunk.subarray(0, filled));
  return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
}

/**
 * mkdir -p. Node's recursive mkdir says ENOENT where the file system refuses a directory on the
 * way (EROFS from an ext4 remounted read-only after I/O errors): then each missing level is made
 * by hand, which fails with the real reason.
 */
export function makeDirs(dir: string): void {
  try {
    fsSync.mkdirSync(dir, { recursive: true });
  } catch (e) {
    if (errCode(e) !== 'ENOENT') throw e;
    makeDirsOneByOne(dir);
  }
}

function makeDirsOneByOne(dir: string): void {
  try {
    fsSync.mkdirSync(dir);
  } catch (e) {
    if (errCode(e) === 'EEXIST') return;
    if (errCode(e) !== 'ENOENT' || path.dirname(dir) === dir) throw e;
    makeDirsOneByOne(path.dirname(dir));
    makeDirsOneByOne(dir);
  }
}

/** Object stores have no empty directories; removes the ones deletes leave behind, from `dir` up to `root` (kept). */
export function pruneEmptyDirs(root: string, dir: string): void {
  let current = dir;
  while (current.startsWith(root + path.sep)) {
    try {
      fsSync.rmdirSync(current);
    } catch {
      return; // not empty, or already gone
    }
    current = path.dirname(current);
  }
}

export function ignoreFailure(fn: () => void): void {
  try {
    fn();
  } catch {
    // best effort: what is left behind is never listed
  }
}

/** What a failing disk or a dead network mount answers: EIO, and NFS's or FUSE's ENOTCONN, ESTALE, ETIMEDOUT. */
const DISK_FAILURES = new Set(['EIO', 'ENOTCONN', 'ESTALE', 'ETIMEDOUT']);
/** Linux's EBADMSG (ext4's checksum failures) and EUCLEAN (corruption found), which libuv does not name. */
const DISK_FAILURE_ERRNOS = new Set([-74, -117]);

/**
 * Port errors for the file-system failures that are not bugs: a full disk, a failing one (I/O or
 * checksum errors, a remount read-only after them) or a dead network mount is a temporary
 * unavailability (the messages have no path: they reach clients), a name too long is bad input.
 */
export function portError(e: unknown, key: string): unknown {
  const code = errCode(e);
  if (code === 'ENOSPC' || code === 'EDQUOT') return new StoreUnavailableError('the disk of the store is full', { cause: e });
  if (code === 'EROFS') return new StoreUnavailableError('the file system of the store is read-only', { cause: e });
  const errno = typeof e === 'object' && e !== null ? (e as { errno?: unknown }).errno : undefined;
  if ((code !== undefined && DISK_FAILURES.has(code)) || (typeof errno === 'number' && DISK_FAILURE_ERRNOS.has(errno))) {
    return new StoreUnavailableError('the disk of the store cannot be read or written', { cause: e });
  }
  if (code === 'ENAMETOOLONG') return new InvalidKeyError(`the key ${JSON.stringify(key)} is too long for the store`, { cause: e });
  return e;
}
