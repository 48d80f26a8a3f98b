import { randomBytes } from 'node:crypto';
import fsSync, { promises as fs, constants as fsc } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { errCode, ignoreFailure, LOCK_MARK, makeDirs, pruneEmptyDirs } from './local-file-io.js';
import { StoreUnavailableError } from './object-store.js';

// The per-key lock of a local store, held across "stat, compare etag, rename" by a
// replace-if-unchanged: an in-process queue per key, plus a lock file beside the key
// (`<key>.~lock~`, create-if-absent with O_EXCL) shared with other processes on the root, which
// names its holder so that a waiter can break it once the holder is gone.
//
// Invariant: no two holders of a key's lock overlap, in this process or across processes, but
// for a holder that was declared gone after LOCK_STALE_MS (nobody's replace takes that long).
// A lock is broken only by a waiter that holds the key's break lock (`<lock>.break`,
// create-if-absent) and reads, while holding it, that the lock file still names the holder it
// found dead or stale; so two waiters never both break it, and a lock taken after a break is
// never broken for the dead holder before it.

/** Added to a lock file's name for its break lock (see breakAbandonedLock). */
const BREAK_MARK = '.break';
const LOCK_STALE_MS = 30_000;
const LOCK_WAIT_MS = 10_000;
const LOCK_HOST = os.hostname();

/** How much longer than its key a lock file's name can be (the break lock's included). */
export const LOCK_SUFFIX_BYTES = LOCK_MARK.length + BREAK_MARK.length;

export class KeyLocks {
  /** The last holder or waiter of each key's lock in this process; a new one queues behind it. */
  private readonly queues = new Map<string, Promise<unknown>>();

  /** `root`: the store's root, up to which a refused holder's directories are pruned. */
  constructor(private readonly root: string) {}

  /** Runs `fn` holding the lock of the key whose file is `target`, within this process and across processes. */
  async run<T>(target: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(target) ?? Promise.resolve();
    const run = previous
      .catch(() => undefined)
      .then(async () => {
        const lockPath = `${target}${LOCK_MARK}`;
        await acquireLockFile(lockPath);
        let placed = false;
        try {
          const result = await fn();
          placed = true;
          return result;
        } finally {
          ignoreFailure(() => fsSync.unlinkSync(lockPath));
          // The lock made the key's directory if it had gone (a drop, a rename): a refused put leaves none.
          if (!placed) pruneEmptyDirs(this.root, path.dirname(target));
        }
      });
    this.queues.set(target, run);
    try {
      return await run;
    } finally {
      if (this.queues.get(target) === run) this.queues.delete(target);
    }
  }
}

/**
 * Takes a key's lock file (create-if-absent), which names its holder: this host, this process and
 * a nonce. A holder that died (SIGKILL) leaves its lock behind: a waiter breaks it at once when the
 * holder was a process of this host that no longer exists, else once it is LOCK_STALE_MS old
 * (nobody can still be inside by then).
 */
async function acquireLockFile(lockPath: string): Promise<void> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  const holder = `${LOCK_HOST}\n${process.pid}\n${randomBytes(8).toString('hex')}\n`;
  for (let delay = 1; ; delay = Math.min(delay * 2, 50)) {
    try {
      makeDirs(path.dirname(lockPath));
      const fd = fsSync.openSync(lockPath, fsc.O_CREAT | fsc.O_EXCL | fsc.O_WRONLY, 0o644);
      try {
        fsSync.writeSync(fd, holder);
      } finally {
        fsSync.closeSync(fd);
      }
      return;
    } catch (e) {
      if (errCode(e) !== 'EEXIST') throw e;
    }
    await breakAbandonedLock(lockPath);
    if (Date.now() > deadline) throw new StoreUnavailableError(`timed out waiting for lock ${lockPath}`);
    await new Promise((r) => setTimeout(r, delay + Math.random() * delay));
  }
}

/** The holder a lock file names ('' for a lock written before holders were named), and whether it is gone. */
async function lockHolder(lockPath: string): Promise<{ text: string; gone: boolean } | null> {
  const [text, st] = await Promise.all([fs.readFile(lockPath, 'utf8').catch(() => null), fs.stat(lockPath).catch(() => null)]);
  if (text === null || st === null) return null;
  if (Date.now() - st.mtimeMs > LOCK_STALE_MS) return { text, gone: true };
  const [host, pid] = text.split('\n');
  return { text, gone: host === LOCK_HOST && pid !== undefined && /^\d+$/.test(pid) && !processAlive(Number(pid)) };
}

/** Whether a process of this host exists (signal 0 only asks). */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return errCode(e) !== 'ESRCH';
  }
}

/** Removes a lock whose holder is gone (see acquireLockFile), under the key's break lock. */
async function breakAbandonedLock(lockPath: string): Promise<void> {
  const seen = await lockHolder(lockPath);
  if (!seen?.gone) return;
  const breakPath = `${lockPath}${BREAK_MARK}`;
  try {
    fsSync.closeSync(fsSync.openSync(breakPath, fsc.O_CREAT | fsc.O_EXCL | fsc.O_WRONLY, 0o644));
  } catch (e) {
    if (errCode(e) !== 'EEXIST') throw e;
    // Another waiter is breaking it; a break lock as old as a stale lock was left by a waiter that died.
    const st = await fs.stat(breakPath).catch(() => null);
    if (st && Date.now() - st.mtimeMs > LOCK_STALE_MS) await fs.unlink(breakPath).catch(() => undefined);
    return;
  }
  try {
    const now = await lockHolder(lockPath);
    if (now?.gone && now.text === seen.text) await fs.unlink(lockPath).catch(() => undefined);
  } finally {
    await fs.unlink(breakPath).catch(() => undefined);
  }
}
