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
// - A spare is rewritten only while that name is its inode's only link (fstat: nlink 1) and the key
//   it was last placed under is absent: no key shows what is rewritten, and its key let go of it
//   by a delete, not a replace. Every step from those checks to the link under the new key is
//   synchronous, so no other put of this process can take the same spare in between, and spares
//   are named per process.
// - Each content an inode holds gets a later mtime than the one before (else the spare is not used
//   this time), so the store's etag (inode, mtime, size) of a spare never repeats: a
//   replace-if-unchanged from an etag read of any earlier content fails, under any key.
// - A rewrite first cuts the file to its first byte, then writes the new content (longer than
//   one byte) over it: whatever the moment a reader's fstat meets, the size it sees is the final
//   one only once the whole new content is in, so the etag of the new content comes with other
//   bytes only from a read a later rewrite tore, by when no key shows that etag any more. (Cut to one byte, not to nothing: freeing the file's block cost the file system
//   several times what the rest of the rewrite does.) A reader that opened the inode under its old
//   key, before that key let go of it, may read torn bytes (test/store/local-spare-files.test.ts
//   has seen the new content padded with zeros to the old length), but only with the etag of a
//   content no key shows any more. Its key was deleted by then, so the read stands for one of a
//   key that is absent: read as expired or as held by someone, never as holding something a
//   protocol must wait for that is not there. (After a replace, say a writer's lease renewed, the
//   key's current holder is live, and a reader that opened the file before the replace must still
//   read the live lease it held: so the file waits until that key is deleted too.) A failed parse
//   must not be taken for the key's current state, nor a later HEAD's etag for the read's (see
//   readReservation).

/** Bound on the directories that keep spares (least recently used first out) and on spares per directory. */
const MAX_DIRS = 256;
const MAX_PER_DIR = 4;

/** A spare's hidden path, and the path of the key it was last placed under (null: never placed). */
interface Spare {
  file: string;
  placedAt: string | null;
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
   * Keeps `file`, a hidden name this process made in its directory and placed under the key at
   * `placedAt` (null: placed under none), as a spare: false when the directory has its share, and
   * then the caller unlinks it.
   */
  keep(file: string, placedAt: string | null): boolean {
    const dir = path.dirname(file);
    const spares = this.byDir.get(dir) ?? [];
    if (spares.length >= MAX_PER_DIR) return false;
    spares.push({ file, placedAt });
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
