import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * A small ext4 file system on a loop device, mounted for a local root, whose disk can then fail
 * for real: `fail()` aborts the journal, as ext4 does on I/O errors (writes get EROFS), and takes
 * the device's blocks away (reads of what is not cached get EIO, or EBADMSG where ext4 checks
 * metadata). Needs root and loop devices; where the machine has none, `create` says why.
 */
export class FailingDisk {
  private constructor(
    private readonly dir: string,
    private readonly image: string,
    private readonly device: string,
    /** Where the file system is mounted. */
    readonly mountPoint: string,
  ) {}

  static create(): FailingDisk | { skipped: string } {
    if (process.platform !== 'linux' || process.getuid?.() !== 0) return { skipped: 'a failing disk needs root on Linux (a loop device and mount)' };
    for (const tool of ['losetup', 'mkfs.ext4', 'mount', 'umount']) {
      if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) return { skipped: `a failing disk needs ${tool}` };
    }
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lance-ns-disk-'));
    const image = path.join(dir, 'disk.img');
    const mountPoint = path.join(dir, 'mnt');
    let device = '';
    try {
      writeFileSync(image, Buffer.alloc(0));
      execFileSync('truncate', ['-s', '256M', image]);
      device = execFileSync('losetup', ['-f', '--show', image], { encoding: 'utf8' }).trim();
      execFileSync('mkfs.ext4', ['-q', device]);
      execFileSync('mkdir', ['-p', mountPoint]);
      execFileSync('mount', [device, mountPoint]);
      return new FailingDisk(dir, image, device, mountPoint);
    } catch (e) {
      if (device) spawnSync('losetup', ['-d', device]);
      rmSync(dir, { recursive: true, force: true });
      return { skipped: `no loop-mounted file system here: ${(e as Error).message.split('\n')[0]}` };
    }
  }

  /** The journal is aborted and the device loses its blocks: from now on writes fail with EROFS, reads with EIO. */
  fail(): void {
    // First no more writes (which would grow the backing file again), as ext4 does on I/O errors.
    execFileSync('mount', ['-o', 'remount,abort', this.mountPoint]);
    // Then a device of no blocks: reads fail (a shorter backing file alone would read as zeros).
    execFileSync('truncate', ['-s', '0', this.image]);
    execFileSync('losetup', ['-c', this.device]);
    // What the caches hold (pages, and what was read as zeros meanwhile) would still be read: drop
    // them (the machine's clean pages, dentries and inodes only).
    writeFileSync('/proc/sys/vm/drop_caches', '3');
  }

  dispose(): void {
    spawnSync('umount', ['-l', this.mountPoint]);
    spawnSync('losetup', ['-d', this.device]);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
