import { randomBytes } from 'node:crypto';
import fsSync, { type BigIntStats, promises as fs, constants as fsc } from 'node:fs';
import path from 'node:path';
import { asBuffer, errCode, etagOf, ignoreFailure, makeDirs, objectInfo, pruneEmptyDirs, readWhole, TEMP_MARK, writeWhole } from './local-file-io.js';
import { type ObjectInfo, PreconditionFailedError } from './object-store.js';

// The writes of a local store: a body is written under a temporary name beside its key (never
// listed: it carries TEMP_MARK), fsynced when it must be durable, and only then moved under its
// key, by link(2) for a create-if-absent (the adapter's) or rename(2) for a replace; then the
// directory is fsynced, so the name is durable too. So a key shows a whole body or none. A failed
// write removes its temporary file; one a killed process left is never listed, and a drop removes it.

/** Temporary names: a random prefix per process (several processes share a root) and a counter. */
const TEMP_PREFIX = randomBytes(4).toString('hex');
let tempCounter = 0;
const tempSuffix = (): string => `${TEMP_PREFIX}${(tempCounter++ % 0x10000).toString(16).padStart(4, '0')}`;
/** How much longer than its key a temporary file's name is (TEMP_MARK and the 12 hex digits of tempSuffix). */
export const TEMP_SUFFIX_BYTES = TEMP_MARK.length + 12;

/** fsync(2) on libuv's thread pool (looked up at each call, so tests can count them). */
const fsyncFd = (fd: number): Promise<void> => new Promise((resolve, reject) => fsSync.fsync(fd, (e) => (e ? reject(e) : resolve())));

/** Makes the open file or directory durable without holding the event loop, then closes it. */
async function syncAndClose(fd: number): Promise<void> {
  try {
    await fsyncFd(fd);
  } finally {
    fsSync.closeSync(fd);
  }
}

/** Makes a directory's entries durable. */
export async function syncDir(dir: string): Promise<void> {
  await syncAndClose(fsSync.openSync(dir, 'r'));
}

/** Makes a placed file's directory entry durable; a directory deleted since (a drop) has nothing left to keep. */
export async function syncPlacedDir(target: string): Promise<void> {
  await syncDir(path.dirname(target)).catch((e: unknown) => {
    if (errCode(e) !== 'ENOENT') throw e;
  });
}

/**
 * A put beside what exists (PutOptions.besideExisting) found its directory gone: the condition it
 * was given did not hold, as a create-if-absent's does not when another writer got there first.
 */
const directoryGone = (key: string): PreconditionFailedError => new PreconditionFailedError(key, 'its directory does not exist');

/** What a temporary file is made of: the body, or the file of the object it is the content of (PutOptions.sameAs). */
export interface TempContent {
  body: Buffer | string;
  /** The file of PutOptions.sameAs's key, and the etag it was read at. */
  sameAs?: { file: string; etag: string } | undefined;
  /** PutOptions.besideExisting: a missing directory fails the write instead of being made. */
  besideExisting?: boolean;
}

export class TempFiles {
  /** `root`: the store's root, up to which a failed write's directories are pruned. */
  constructor(private readonly root: string) {}

  /**
   * Writes `content` and moves it into place with `place`; returns the file's stat. A concurrent
   * delete of the directory (a drop) may remove the temporary file and the directory in between:
   * then the write starts again, as a put on an object store would simply land. The stat is taken
   * before the move (a link or rename keeps inode, mtime and size), because the placed file may be
   * deleted by such a drop right after it landed. With `placeAfter`, the temporary file (fsynced if
   * durable) waits for it; if it rejects, the file goes unplaced.
   */
  async place(
    key: string,
    target: string,
    content: TempContent,
    durable: boolean,
    placeAfter: Promise<unknown> | undefined,
    place: (tmp: string, st: BigIntStats) => Promise<void>,
  ): Promise<BigIntStats> {
    for (let attempt = 0; ; attempt++) {
      const tmp =
        (content.sameAs && (await this.link(target, content.sameAs, asBuffer(content.body), durable))) ||
        (await this.write(key, target, content.body, durable, content.besideExisting));
      if (placeAfter) {
        try {
          await placeAfter;
        } catch (e) {
          ignoreFailure(() => fsSync.unlinkSync(tmp));
          pruneEmptyDirs(this.root, path.dirname(target));
          throw e;
        }
      }
      try {
        const st = fsSync.statSync(tmp, { bigint: true });
        await place(tmp, st);
        return st;
      } catch (e) {
        if (errCode(e) === 'ENOENT' && attempt < 5) continue;
        throw e;
      }
    }
  }

  /** Places `content` under `target` whatever is there (rename), durable with its directory if `durable`. */
  async replace(key: string, target: string, content: TempContent, durable: boolean, placeAfter?: Promise<unknown>): Promise<ObjectInfo> {
    const st = await this.place(key, target, content, durable, placeAfter, async (tmp) => {
      try {
        fsSync.renameSync(tmp, target);
      } catch (e) {
        ignoreFailure(() => fsSync.unlinkSync(tmp));
        throw e;
      }
    });
    if (durable) await syncPlacedDir(target);
    return objectInfo(key, st);
  }

  /**
   * A replace written and renamed into place through the thread pool, not fsynced: for a put that
   * no condition guards and nobody needs durable (see the adapter's putAt).
   */
  async replaceOffLoop(key: string, target: string, body: Buffer, besideExisting: boolean): Promise<ObjectInfo> {
    for (let attempt = 0; ; attempt++) {
      const tmp = `${target}${TEMP_MARK}${tempSuffix()}`;
      try {
        await fs.writeFile(tmp, body, { flag: 'wx', mode: 0o644 });
        const st = await fs.stat(tmp, { bigint: true });
        await fs.rename(tmp, target);
        return objectInfo(key, st);
      } catch (e) {
        // A temporary name still taken (EEXIST, from the exclusive create) is another writer's file: it stays.
        if (errCode(e) !== 'EEXIST') await fs.unlink(tmp).catch(() => undefined);
        // No directory yet (or a concurrent delete pruned it), or a temporary name still taken: again.
        if (errCode(e) === 'ENOENT' && besideExisting) throw directoryGone(key);
        if (errCode(e) === 'ENOENT' && attempt < 5) makeDirs(path.dirname(target));
        else if (!(errCode(e) === 'EEXIST' && attempt < 5)) throw e;
      }
    }
  }

  /**
   * An empty object that need not be durable, created under `target` itself if no entry has that
   * name (open with O_CREAT | O_EXCL, which also refuses a symbolic link): its stat, or null when
   * the name is taken. There are no bytes to show half-written, so nothing is written out of
   * sight first; a listing index's empty entries (service/catalog/listing-entries.ts) are each
   * one open, fstat and close instead of a temporary file's write, link or rename and unlink.
   */
  createEmpty(key: string, target: string, besideExisting: boolean): BigIntStats | null {
    for (let attempt = 0; ; attempt++) {
      let fd: number;
      try {
        fd = fsSync.openSync(target, fsc.O_CREAT | fsc.O_EXCL | fsc.O_WRONLY, 0o644);
      } catch (e) {
        if (errCode(e) === 'EEXIST') return null;
        if (errCode(e) === 'ENOENT' && besideExisting) throw directoryGone(key);
        // No directory yet, or a concurrent delete pruned the one just made: make it (again).
        if (errCode(e) !== 'ENOENT' || attempt >= 5) throw e;
        makeDirs(path.dirname(target));
        continue;
      }
      try {
        return fsSync.fstatSync(fd, { bigint: true });
      } finally {
        fsSync.closeSync(fd);
      }
    }
  }

  /**
   * Writes a temporary file (fsynced if `durable`) next to `target`, creating parent directories
   * unless `besideExisting`; on failure none is left behind.
   */
  private async write(key: string, target: string, body: Buffer | string, durable: boolean, besideExisting = false): Promise<string> {
    const dir = path.dirname(target);
    let tmp = `${target}${TEMP_MARK}${tempSuffix()}`;
    for (let attempt = 0; ; attempt++) {
      try {
        // The directory usually exists: make it only when the open says it does not.
        if (attempt > 0 && !besideExisting) makeDirs(dir);
        const fd = fsSync.openSync(tmp, fsc.O_CREAT | fsc.O_EXCL | fsc.O_WRONLY, 0o644);
        try {
          writeWhole(fd, asBuffer(body));
          if (durable) await fsyncFd(fd);
        } catch (e) {
          // A partial file (a full disk) would stay forever: it is never listed, so no delete finds
          // it, and it and the directories made for it keep a Restrict drop of the namespace out.
          try {
            fsSync.closeSync(fd);
          } catch {
            // already failing
          }
          ignoreFailure(() => fsSync.unlinkSync(tmp));
          pruneEmptyDirs(this.root, dir);
          throw e;
        }
        fsSync.closeSync(fd);
        return tmp;
      } catch (e) {
        // No directory yet, or a concurrent delete pruned the one just made: make it (again).
        if (errCode(e) === 'ENOENT' && attempt < 5 && !besideExisting) continue;
        if (errCode(e) === 'ENOENT' && besideExisting) throw directoryGone(key);
        // A temporary name still taken (the counter came round to a file still being written): another.
        if (errCode(e) === 'EEXIST' && attempt < 5) {
          tmp = `${target}${TEMP_MARK}${tempSuffix()}`;
          continue;
        }
        throw e;
      }
    }
  }

  /**
   * A temporary hard link next to `target` to `sameAs.file`, if that is still the object read at
   * `sameAs.etag` and holds exactly `body` (a regular file: a symbolic link is never linked; the
   * bytes are compared too, since a rewrite of the same size within one mtime tick keeps the
   * etag), fsynced if `durable` (its writer need not have); null when it cannot be made or is not
   * that object, and then the caller writes the body.
   */
  private async link(target: string, sameAs: { file: string; etag: string }, body: Buffer, durable: boolean): Promise<string | null> {
    const tmp = `${target}${TEMP_MARK}${tempSuffix()}`;
    try {
      fsSync.linkSync(sameAs.file, tmp);
    } catch {
      return null;
    }
    try {
      const st = fsSync.lstatSync(tmp, { bigint: true });
      const fd = st.isFile() && etagOf(st) === sameAs.etag ? fsSync.openSync(tmp, fsc.O_RDONLY | fsc.O_NOFOLLOW) : null;
      let same = false;
      try {
        same = fd !== null && readWhole(fd, body.length).equals(body);
      } finally {
        if (fd !== null && !(same && durable)) fsSync.closeSync(fd);
      }
      if (!same) {
        fsSync.unlinkSync(tmp);
        return null;
      }
      if (durable && fd !== null) await syncAndClose(fd);
      return tmp;
    } catch (e) {
      ignoreFailure(() => fsSync.unlinkSync(tmp));
      throw e;
    }
  }
}
