import { randomBytes } from 'node:crypto';
import fsSync, { type BigIntStats, constants as fsc } from 'node:fs';
import path from 'node:path';
import { errCode, TEMP_MARK, writeWhole } from './local-file-io.js';

// Spare files of a local store: the inodes of short-lived create-if-absent puts that need not be
// durable (PutOptions.shortLived: a version slot's single-writer reservation), kept under hidden
// names and written again for the next such put in the same directory once their key is deleted.
// Making and freeing an inode costs the file system far more kernel time than rewriting a small
// file in place (about 1.4 ms of system CPU per version-slot claim and release, measured with
// pylance appends). A delete that does not keep its directory unlinks the directory's spares.
//
// A spare is a hidden (never listed) name of this process, linked to an inode that such a put made
// and linked under its key too. Invariants:
// - A spare is rewritten only while that name is its inode's only link (fstat: nlink 1) and the key
//   it was last placed under is absent: no key shows what is rewritten, and its key let go of it
//   by a delete, not a replace. Every step from those checks to the link under the new key is
//   synchronous, so no other put of this process can take the same spare in between, and spares
//   are named per process.
// - Each content placed under a key has a later mtime, at the etag's precision (microseconds), than
//   every content the inode held before (else the spare is not placed this time), so the store's
//   etag (inode, mtime, size) of a spare never repeats, even after the clock is set back: a
//   replace-if-unchanged from an etag read of any earlier content fails, under any key.
// - A spare's name is made once (a random prefix per process and a counter that does not wrap),
//   so a spare unlinked by others (a drop) is never confused with a file made under its name since.
// - A rewrite first cuts the file to its first byte, then writes the new content (longer than
//   one byte) over it: whatever the moment a reader's fstat meets, the size it sees is the final
//   one only once the whole new content is in, so the etag of the new content comes with other
//   bytes only from a read a later rewrite tore, by when no key shows that etag any more. (Cut to
//   one byte, not to nothing: freeing the file's block cost the file system several times what
//   the rest of the rewrite does.) A reader that opened the inode under its old
//   key, before that key let go of it, may read torn bytes (test/store/local-spare-files.test.ts
//   has seen the new content padded with zeros to the old length), but only with the etag of a
//   content no key shows any more. Its key was deleted by then, so the read stands for one of a
//   key that is absent: read as expired or as held by someone, never as holding something a
//   protocol must wait for that is not there. (After a replace, say an expired reservation taken
//   over, the key's current holder is live, and a reader that opened the file before the replace
//   must still read what it held then: so the file waits until that key is deleted too.) A
//   failed parse must not be taken for the key's current state, nor a later HEAD's etag for the
//   read's (see readReservation).

/** Spare names: hidden, this process's own, never made twice. */
const SPARE_PREFIX = `.spare${TEMP_MARK}${randomBytes(6).toString('hex')}-`;
let spareCounter = 0;

/** Bound on the directories that keep spares (least recently used first out) and on spares per directory. */
const MAX_DIRS = 256;
const MAX_PER_DIR = 4;

/** A spare: its hidden path, the path of the key it was last placed under (null: none), and the latest mtime it was written at, in microseconds. */
interface Spare {
  file: string;
  placedAt: string | null;
  writtenUs: bigint;
}

export class SpareFiles {
  /** Spares by directory, least recently used directory first. */
  private readonly byDir = new Map<string, Spare[]>();

  /**
   * Writes `body` into a free spare of `target`'s directory and links it under `target`: the stat
   * of the placed file, or null when no spare could serve (the caller writes a new file). A link
   * refused because `target` exists throws EEXIST, and the spare stays free.
   */
  place(target: string, body: Buffer): BigIntStats | null {
    const dir = path.dirname(target);
    const spares = this.byDir.get(dir);
    if (!spares || body.length < 2) return null;
    for (const spare of [...spares]) {
      const written = this.rewrite(spare, body);
      if (written === 'gone') {
        this.drop(dir, spare);
        continue;
      }
      if (written === 'busy') continue;
      try {
        fsSync.linkSync(spare.file, target);
      } catch (e) {
        // Refused: the rewritten spare is placed nowhere, and a stale reader of its last key has seen that key absent.
        if (errCode(e) === 'EEXIST') {
          spare.placedAt = null;
          throw e;
        }
        // The directory went (a drop, a rename) or the link failed: a new file is written instead.
        this.drop(dir, spare);
        return null;
      }
      spare.placedAt = target;
      this.byDir.delete(dir); // most recently used last
      this.byDir.set(dir, spares);
      return written;
    }
    return null;
  }

  /**
   * The spare written with `body`; 'busy' while it is still placed, its last key still exists
   * (replaced, or created again), or this clock tick wrote it; 'gone' when it cannot be used.
   */
  private rewrite(spare: Spare, body: Buffer): BigIntStats | 'busy' | 'gone' {
    let fd: number;
    try {
      fd = fsSync.openSync(spare.file, fsc.O_RDWR | fsc.O_NOFOLLOW);
    } catch {
      return 'gone';
    }
    try {
      const before = fsSync.fstatSync(fd, { bigint: true });
      if (!before.isFile()) return 'gone';
      if (before.nlink !== 1n) return 'busy';
      if (spare.placedAt !== null && fsSync.statSync(spare.placedAt, { throwIfNoEntry: false }) !== undefined) return 'busy';
      fsSync.ftruncateSync(fd, 1);
      writeWhole(fd, body);
      const after = fsSync.fstatSync(fd, { bigint: true });
      const writtenUs = after.mtimeNs / 1000n;
      // Written within the clock tick of an earlier content (or the clock went back): the etag could repeat, so not placed now.
      const later = writtenUs > spare.writtenUs && writtenUs > before.mtimeNs / 1000n;
      if (writtenUs > spare.writtenUs) spare.writtenUs = writtenUs;
      return later ? after : 'busy';
    } catch {
      // A full disk, say: the caller's new file meets the same failure and reports it.
      return 'gone';
    } finally {
      fsSync.closeSync(fd);
    }
  }

  /**
   * Keeps the file of `tmp`, a temporary name this process made (`st` its stat) and placed under
   * the key at `placedAt` (null: placed under none), as a spare, under a spare name of its own
   * (the caller unlinks `tmp`), unless the directory has its share.
   */
  keep(tmp: string, st: BigIntStats, placedAt: string | null): void {
    const dir = path.dirname(tmp);
    const spares = this.byDir.get(dir) ?? [];
    if (spares.length >= MAX_PER_DIR) return;
    const file = path.join(dir, `${SPARE_PREFIX}${spareCounter++}`);
    try {
      fsSync.linkSync(tmp, file);
    } catch {
      return; // best effort: the next put makes a new file
    }
    spares.push({ file, placedAt, writtenUs: st.mtimeNs / 1000n });
    this.byDir.delete(dir);
    this.byDir.set(dir, spares);
    for (const [oldest] of this.byDir) {
      if (this.byDir.size <= MAX_DIRS) break;
      this.discard(oldest);
    }
  }

  /** Unlinks the spares of `dir` (its last key goes, and the directory must be able to go too). */
  discard(dir: string): void {
    for (const spare of this.byDir.get(dir) ?? []) unlinkQuietly(spare.file);
    this.byDir.delete(dir);
  }

  /** Unlinks every spare (the store closes). */
  clear(): void {
    for (const dir of [...this.byDir.keys()]) this.discard(dir);
  }

  /** Forgets a spare that cannot serve and unlinks its name (if it is still there, half written, say). */
  private drop(dir: string, spare: Spare): void {
    const spares = this.byDir.get(dir);
    const at = spares?.indexOf(spare) ?? -1;
    if (spares && at >= 0) spares.splice(at, 1);
    if (spares?.length === 0) this.byDir.delete(dir);
    unlinkQuietly(spare.file);
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
