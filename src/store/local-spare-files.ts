import fsSync, { constants as fsc, type BigIntStats } from 'node:fs';
import path from 'node:path';
import { errCode, writeWhole } from './local-file-io.js';

// Spare files of a local store: the inodes of short-lived create-if-absent puts that need not be
// durable (a version slot's reservation, a writer's lease), kept under hidden names after their key
// is deleted and written again for the next such put in the same directory. Making and freeing an
// inode costs the file system far more kernel time than rewriting a small file in place (about
// 1.4 ms of system CPU per version-slot claim and release, measured with pylance appends).
//
// A spare is a hidden (never listed) name of this process, linked to an inode that such a put made
// and linked under its key too. Invariants:
// - A spare is rewritten only while that name is its inode's only link (fstat: nlink 1), so no key
//   shows what is being rewritten: the key it was placed under has been deleted or replaced since.
//   Every step from that check to the link under the new key is synchronous, so no other put of
//   this process can take the same spare in between, and spares are named per process.
// - Each content an inode holds gets a later mtime than the one before (else the spare is not used
//   this time), so the store's etag (inode, mtime, size) of a spare never repeats: a
//   replace-if-unchanged from an etag read of any earlier content fails, under any key.
// - A rewrite truncates first, then writes: a reader that opened the inode under its old key, before
//   that key let go of it, reads the old content, nothing, or the new content whole, always with the
//   etag of the old content. What it reads is stale either way, as the read of a deleted file would
//   be, and a failed parse must not be taken for the key's current state (see readReservation).

/** Bound on the directories that keep spares (least recently used first out) and on spares per directory. */
const MAX_DIRS = 256;
const MAX_PER_DIR = 4;

export class SpareFiles {
  /** Spare paths by directory, least recently used directory first. */
  private readonly byDir = new Map<string, string[]>();

  /**
   * Writes `body` into a free spare of `target`'s directory and links it under `target`: the stat
   * of the placed file, or null when no spare could serve (the caller writes a new file). A link
   * refused because `target` exists throws EEXIST, and the spare stays free.
   */
  place(target: string, body: Buffer): BigIntStats | null {
    const dir = path.dirname(target);
    const spares = this.byDir.get(dir);
    if (!spares) return null;
    for (const spare of [...spares]) {
      const written = this.rewrite(spare, body);
      if (written === 'gone') {
        this.forget(dir, spare);
        continue;
      }
      if (written === 'busy') continue;
      try {
        fsSync.linkSync(spare, target);
      } catch (e) {
        if (errCode(e) === 'EEXIST') throw e;
        // The directory went (a drop, a rename) or the link failed: a new file is written instead.
        this.drop(dir, spare);
        return null;
      }
      this.byDir.delete(dir); // most recently used last
      this.byDir.set(dir, spares);
      return written;
    }
    return null;
  }

  /** The spare written with `body`, 'busy' while it is still placed (or this clock tick wrote it), 'gone' when it cannot be used. */
  private rewrite(spare: string, body: Buffer): BigIntStats | 'busy' | 'gone' {
    let fd: number;
    try {
      fd = fsSync.openSync(spare, fsc.O_RDWR | fsc.O_NOFOLLOW);
    } catch {
      return 'gone';
    }
    try {
      const before = fsSync.fstatSync(fd, { bigint: true });
      if (!before.isFile()) return 'gone';
      if (before.nlink !== 1n) return 'busy';
      fsSync.ftruncateSync(fd, 0);
      writeWhole(fd, body);
      const after = fsSync.fstatSync(fd, { bigint: true });
      // Written within the clock tick of its previous content: the etag could repeat, so not placed now.
      return after.mtimeNs > before.mtimeNs ? after : 'busy';
    } catch {
      // A full disk, say: the caller's new file meets the same failure and reports it.
      return 'gone';
    } finally {
      fsSync.closeSync(fd);
    }
  }

  /**
   * Keeps `file`, a hidden name this process made in its directory (placed under a key or not), as
   * a spare: false when the directory has its share, and then the caller unlinks it.
   */
  keep(file: string): boolean {
    const dir = path.dirname(file);
    const spares = this.byDir.get(dir) ?? [];
    if (spares.length >= MAX_PER_DIR) return false;
    spares.push(file);
    this.byDir.delete(dir);
    this.byDir.set(dir, spares);
    for (const [oldest] of this.byDir) {
      if (this.byDir.size <= MAX_DIRS) break;
      this.discard(oldest);
    }
    return true;
  }

  /** Unlinks the spares of `dir` (its last key goes, and the directory must be able to go too). */
  discard(dir: string): void {
    for (const spare of this.byDir.get(dir) ?? []) unlinkQuietly(spare);
    this.byDir.delete(dir);
  }

  /** Unlinks every spare (the store closes). */
  clear(): void {
    for (const dir of [...this.byDir.keys()]) this.discard(dir);
  }

  private forget(dir: string, spare: string): void {
    const spares = this.byDir.get(dir);
    const at = spares?.indexOf(spare) ?? -1;
    if (spares && at >= 0) spares.splice(at, 1);
    if (spares?.length === 0) this.byDir.delete(dir);
  }

  private drop(dir: string, spare: string): void {
    this.forget(dir, spare);
    unlinkQuietly(spare);
  }
}

/** Unlinking a spare's name never changes what a key shows: a placed inode keeps its key's link. */
function unlinkQuietly(file: string): void {
  try {
    fsSync.unlinkSync(file);
  } catch {
    // gone already
  }
}
