// The local store reuses the inodes of short-lived create-if-absent puts (src/store/local-spare-files.ts).
// These tests try to break what that must keep: a key never shows a rewrite while it holds the file,
// an etag never repeats, a directory with nothing but spares left goes like an empty one, and
// several processes claiming one key never both hold it.

import { spawn } from 'node:child_process';
import fsSync, { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LocalObjectStore } from '../../src/store/local-store.js';
import { PreconditionFailedError, type PutCondition, type PutOptions } from '../../src/store/object-store.js';
import { localBackend, type TestRoot } from '../support/backends.js';

const claim: [PutCondition, PutOptions] = [{ ifNoneMatch: '*' }, { durable: false, shortLived: true }];
/** Longer than a kernel clock tick (1-10 ms): a spare written before it may be written again. */
const nextTick = () => new Promise((r) => setTimeout(r, 15));

describe('LocalObjectStore spare files', () => {
  let root: TestRoot;
  let store: LocalObjectStore;
  const inode = (key: string) => fsSync.statSync(path.join(root.root, key)).ino;
  const hidden = (dir: string) => fsSync.readdirSync(path.join(root.root, dir)).filter((n) => n.includes('.~tmp~'));
  beforeEach(async () => {
    root = await localBackend.newRoot();
    store = root.store as LocalObjectStore;
  });
  afterEach(async () => {
    await root.dispose();
  });

  it('a claim after a release reuses its file, under the same key or another, and no etag repeats', async () => {
    const etags = new Set<string>();
    const inodes = new Set<bigint | number>();
    for (let i = 0; i < 6; i++) {
      const key = `t/_catalog/reservations/${i % 2 === 0 ? 'a' : 'b'}.json`;
      const { etag } = await store.put(key, `{"round": ${i}${' '.repeat((i * 7) % 5)}}`, ...claim);
      expect(etags.has(etag)).toBe(false);
      etags.add(etag);
      inodes.add(inode(key));
      expect((await store.head(key))?.etag).toBe(etag);
      expect((await store.get(key))?.body.toString()).toBe(`{"round": ${i}${' '.repeat((i * 7) % 5)}}`);
      await store.delete(key, { keepDirectory: true });
      await nextTick();
    }
    expect(inodes.size).toBe(1);
    // The spare is hidden: the directory lists nothing.
    expect(hidden('t/_catalog/reservations')).toHaveLength(1);
    expect((await store.list('t/')).objects).toEqual([]);
  });

  it('only a put that says it is short-lived keeps its file: other creates (a write lease) leave none', async () => {
    await store.put('t/w/1.json', 'lease', { ifNoneMatch: '*' }, { durable: false });
    await store.put('t/w/2.json', 'durable', { ifNoneMatch: '*' }, { shortLived: true });
    expect(hidden('t/w')).toEqual([]);
    await store.put('t/w/3.json', 'claim', ...claim);
    expect(hidden('t/w')).toHaveLength(1);
  });

  it('never rewrites a file a key still holds, and a claim that loses leaves the holder whole', async () => {
    const first = await store.put('t/r/1.json', 'one', ...claim);
    await nextTick();
    const second = await store.put('t/r/2.json', 'two', ...claim);
    expect(inode('t/r/2.json')).not.toBe(inode('t/r/1.json'));
    await expect(store.put('t/r/1.json', 'three, longer than one', ...claim)).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(await store.get('t/r/1.json')).toMatchObject({ etag: first.etag, body: Buffer.from('one') });
    expect(await store.get('t/r/2.json')).toMatchObject({ etag: second.etag, body: Buffer.from('two') });
  });

  it('a replace-if-unchanged from the etag of an earlier content of the file fails', async () => {
    const key = 't/r/1.json';
    const before = await store.put(key, 'same size', ...claim);
    await store.delete(key, { keepDirectory: true });
    // Within the clock tick of its last write a spare is not reused (its etag could repeat): a new file is made.
    const soon = await store.put(key, 'same size', ...claim);
    expect(soon.etag).not.toBe(before.etag);
    await store.delete(key, { keepDirectory: true });
    await nextTick();
    const reused = await store.put(key, 'same size', ...claim);
    expect(reused.etag).not.toBe(before.etag);
    await expect(store.put(key, 'taken over', { ifMatch: before.etag })).rejects.toBeInstanceOf(PreconditionFailedError);
    await expect(store.put(key, 'taken over', { ifMatch: soon.etag })).rejects.toBeInstanceOf(PreconditionFailedError);
    await store.put(key, 'taken over', { ifMatch: reused.etag });
    expect((await store.get(key))?.body.toString()).toBe('taken over');
  });

  it('is not written again when its new content would not have a later mtime (a clock tick, a clock set back)', async () => {
    await store.put('t/r/1.json', 'one', ...claim);
    const ino = inode('t/r/1.json');
    await store.delete('t/r/1.json', { keepDirectory: true });
    const [spare] = hidden('t/r');
    const later = new Date(Date.now() + 3_600_000);
    fsSync.utimesSync(path.join(root.root, 't/r', spare ?? ''), later, later);
    await store.put('t/r/2.json', 'two', ...claim);
    expect(inode('t/r/2.json')).not.toBe(ino);
  });

  it('keeps its files under names of their own, never made twice, apart from the temporary names of writes', async () => {
    await store.put('t/r/1.json', 'one', ...claim);
    const ino = inode('t/r/1.json');
    await store.delete('t/r/1.json', { keepDirectory: true });
    const [spare] = hidden('t/r');
    expect(spare).toMatch(/^\.spare\.~tmp~[0-9a-f]{12}-\d+$/);
    expect(fsSync.statSync(path.join(root.root, 't/r', spare ?? '')).ino).toBe(ino);
    // Unlinked by another (a drop): the next claim makes a new file, kept under a new name.
    fsSync.unlinkSync(path.join(root.root, 't/r', spare ?? ''));
    await nextTick();
    await store.put('t/r/2.json', 'two', ...claim);
    await store.delete('t/r/2.json', { keepDirectory: true });
    const [next] = hidden('t/r');
    expect(next).toMatch(/^\.spare\.~tmp~[0-9a-f]{12}-\d+$/);
    expect(next).not.toBe(spare);
  });

  it('a file its key let go of by a replace (a lease renewed) is rewritten only once that key is deleted', async () => {
    const key = 't/r/1.json';
    const held = await store.put(key, 'held', ...claim);
    const ino = inode(key);
    await store.put(key, 'renewed', { ifMatch: held.etag });
    await nextTick();
    // A reader that opened the file before the renewal must still read the lease it held.
    await store.put('t/r/2.json', 'next', ...claim);
    expect(inode('t/r/2.json')).not.toBe(ino);
    expect((await store.get(key))?.body.toString()).toBe('renewed');
    await store.delete(key, { keepDirectory: true });
    await store.put('t/r/3.json', 'after', ...claim);
    expect(inode('t/r/3.json')).toBe(ino);
  });

  it('goes with the last key of a directory that does not keep it, with a drop of the prefix, and with the store', async () => {
    await store.put('a/leases/1.json', 'xx', ...claim);
    await store.delete('a/leases/1.json');
    expect(fsSync.existsSync(path.join(root.root, 'a'))).toBe(false);

    // A drop keeping a marker: spares (this process's, and one a dead process left) go, and so do the directories.
    await store.put('t/_catalog/reservations/1.json', 'xx', ...claim);
    await store.delete('t/_catalog/reservations/1.json', { keepDirectory: true });
    await fs.writeFile(path.join(root.root, 't/_catalog/reservations/2.json.~tmp~deadbeef0001'), 'left by a dead process');
    await store.put('t/_catalog/marker', '');
    await store.deletePrefix('t/', { keep: ['t/_catalog/marker'] });
    expect(fsSync.readdirSync(path.join(root.root, 't'))).toEqual(['_catalog']);
    expect(fsSync.readdirSync(path.join(root.root, 't/_catalog'))).toEqual(['marker']);
    await store.delete('t/_catalog/marker');
    expect(fsSync.readdirSync(root.root)).toEqual([]);

    // A claim after the drop finds its spare gone and makes a new file.
    await store.put('t/_catalog/reservations/1.json', 'again', ...claim);
    expect((await store.get('t/_catalog/reservations/1.json'))?.body.toString()).toBe('again');
    await store.delete('t/_catalog/reservations/1.json', { keepDirectory: true });
    expect(hidden('t/_catalog/reservations')).toHaveLength(1);
    await store.close();
    expect(hidden('t/_catalog/reservations')).toHaveLength(0);
  });

  it('of processes claiming one key again and again, never two hold it, no holder sees its file rewritten, and no reader gets the etag of bytes it did not read', async () => {
    const start = path.join(root.root, 'start');
    const claimer = fileURLToPath(new URL('./slot-claimer.ts', import.meta.url));
    const run = (claims: string) => {
      const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), claimer, root.root, 't/_catalog/reservations/', claims, start], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      return new Promise<{ wins: number; violations: string[] }>((resolve, reject) =>
        child.on('exit', (code) =>
          code === 0 ? resolve(JSON.parse(out) as { wins: number; violations: string[] }) : reject(new Error(`claimer exited ${code}`)),
        ),
      );
    };
    const claimers = Array.from({ length: 3 }, () => run('40'));
    const reader = run('read');
    fsSync.writeFileSync(start, '');
    const results = await Promise.all(claimers);
    fsSync.writeFileSync(`${start}.stop`, '');
    const read = await reader;
    expect(results.flatMap((r) => r.violations)).toEqual([]);
    for (const { wins } of results) expect(wins).toBeGreaterThanOrEqual(40);
    expect(read.violations).toEqual([]);
    expect(read.wins).toBeGreaterThan(0);
    // Each process took its files back when it closed its store.
    expect(fsSync.readdirSync(path.join(root.root, 't/_catalog/reservations'))).toEqual([]);
  }, 60_000);
});
