// Contract of the ObjectStore port, run against every store of this test run (local disk and memory
// always, radosgw always unless LANCE_NS_TEST_S3=off, MinIO when Docker answers). Every test gets a fresh,
// empty root, so tests never see each other's keys.

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fsSync, { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LocalObjectStore } from '../../src/store/local-store.js';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import {
  compareKeys,
  type ListedObject,
  type ListOptions,
  listAll,
  type ObjectStore,
  PreconditionFailedError,
  type PutCondition,
  type PutOptions,
} from '../../src/store/object-store.js';
import { localBackend, memoryBackend, storeBackends, type TestRoot } from '../support/backends.js';

function fulfilledIndexes<T>(results: PromiseSettledResult<T>[]): number[] {
  return results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
}

function rejectionReasons<T>(results: PromiseSettledResult<T>[]): unknown[] {
  return results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
}

async function bodyOf(store: ObjectStore, key: string): Promise<string | null> {
  const got = await store.get(key);
  return got ? got.body.toString('utf8') : null;
}

async function putAll(store: ObjectStore, keys: string[]): Promise<void> {
  for (const key of keys) await store.put(key, `body of ${key}`);
}

const sortedKeys = (keys: string[]): string[] => [...keys].sort(compareKeys);
const keysOf = (objects: ListedObject[]): string[] => objects.map((o) => o.key);

/** Pages through a listing one `list` call at a time, returning every page. */
async function pages(store: ObjectStore, prefix: string, options: ListOptions): Promise<Array<{ objects: string[]; commonPrefixes: string[] }>> {
  const out: Array<{ objects: string[]; commonPrefixes: string[] }> = [];
  let startAfter = options.startAfter;
  for (let i = 0; i < 100; i++) {
    const page = await store.list(prefix, { ...options, ...(startAfter !== undefined ? { startAfter } : {}) });
    out.push({ objects: keysOf(page.objects), commonPrefixes: page.commonPrefixes });
    if (!page.nextStartAfter) return out;
    expect(page.nextStartAfter === startAfter, 'nextStartAfter must advance').toBe(false);
    startAfter = page.nextStartAfter;
  }
  throw new Error('listing did not terminate within 100 pages');
}

// Byte order differs from JavaScript's UTF-16 order for U+FF21 (EF BC A1) versus U+1F600 (F0 9F 98 80,
// a surrogate pair D83D DE00 in UTF-16): bytes put U+FF21 first, UTF-16 the emoji. Also
// '-' (2D) < '/' (2F) < 'B' (42) < 'a' (61), so 'l/a-b' sorts before the prefix 'l/a/'.
const WIDE_A = '\uFF21';
const EMOJI = '\u{1F600}';
const LISTING_KEYS = ['l/B', 'l/a-b', 'l/a/1', 'l/a/2/deep', 'l/z', `l/${WIDE_A}`, `l/${EMOJI}`, `l/${EMOJI}dir/k`, 'l/é/x', 'lz', 'other/x'];

describe.each(storeBackends())('ObjectStore contract on $name', (backend) => {
  let root: TestRoot;
  let store: ObjectStore;
  beforeEach(async () => {
    root = await backend.newRoot();
    store = root.store;
  });
  afterEach(async () => {
    await root.dispose();
  });

  describe('get / head / put', () => {
    it('returns null for absent keys', async () => {
      expect(await store.get('nope/missing.json')).toBeNull();
      expect(await store.head('nope/missing.json')).toBeNull();
      expect(await store.get('missing-at-root')).toBeNull();
      expect(await store.head('missing-at-root')).toBeNull();
    });

    it('round-trips bytes with size and etag', async () => {
      const body = Buffer.from([0, 1, 2, 255, 254, 10, 13, 0]);
      const put = await store.put('ns/t.lance/data.bin', body);
      expect(put.key).toBe('ns/t.lance/data.bin');
      expect(put.size).toBe(body.length);
      expect(put.etag).toEqual(expect.any(String));
      expect(put.etag.length).toBeGreaterThan(0);

      const got = await store.get('ns/t.lance/data.bin');
      expect(got).not.toBeNull();
      expect(got?.body.equals(body)).toBe(true);
      expect(got?.size).toBe(body.length);
      expect(got?.etag).toBe(put.etag);
      expect(got?.lastModified).toBeInstanceOf(Date);

      const head = await store.head('ns/t.lance/data.bin');
      expect(head).toMatchObject({ key: 'ns/t.lance/data.bin', size: body.length, etag: put.etag });

      // Strings are stored as UTF-8; an empty body is a real (empty) object.
      await store.put('s.txt', 'grüße');
      expect(await bodyOf(store, 's.txt')).toBe('grüße');
      const empty = await store.put('empty', Buffer.alloc(0));
      expect(empty.size).toBe(0);
      expect((await store.get('empty'))?.body.length).toBe(0);
    });

    it('unconditional put replaces and changes the etag', async () => {
      const first = await store.put('k', 'one');
      const second = await store.put('k', 'two, longer');
      expect(second.etag).not.toBe(first.etag);
      expect(await bodyOf(store, 'k')).toBe('two, longer');
      expect((await store.head('k'))?.etag).toBe(second.etag);
    });

    it('ifNoneMatch creates an absent key and refuses an existing one, leaving it untouched', async () => {
      const created = await store.put('m/1.manifest', 'first', { ifNoneMatch: '*' });
      expect(created.size).toBe(5);
      expect(await bodyOf(store, 'm/1.manifest')).toBe('first');

      const err = await store.put('m/1.manifest', 'second', { ifNoneMatch: '*' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PreconditionFailedError);
      expect((err as PreconditionFailedError).key).toBe('m/1.manifest');
      const after = await store.get('m/1.manifest');
      expect(after?.body.toString()).toBe('first');
      expect(after?.etag).toBe(created.etag);
    });

    it('ifMatch replaces with the current etag and refuses a stale etag or an absent key', async () => {
      const v1 = await store.put('state.json', '{"v":1}');
      const v2 = await store.put('state.json', '{"v":2,"x":true}', { ifMatch: v1.etag });
      expect(v2.etag).not.toBe(v1.etag);
      expect(await bodyOf(store, 'state.json')).toBe('{"v":2,"x":true}');
      expect((await store.head('state.json'))?.etag).toBe(v2.etag);

      await expect(store.put('state.json', '{"v":3}', { ifMatch: v1.etag })).rejects.toBeInstanceOf(PreconditionFailedError);
      expect(await bodyOf(store, 'state.json')).toBe('{"v":2,"x":true}');

      await expect(store.put('absent.json', 'x', { ifMatch: v2.etag })).rejects.toBeInstanceOf(PreconditionFailedError);
      expect(await store.head('absent.json')).toBeNull();

      // The etag returned by a conditional replace is itself usable for the next one.
      const v3 = await store.put('state.json', '{"v":3}', { ifMatch: v2.etag });
      expect(v3.etag).toBe((await store.head('state.json'))?.etag);
    });

    it.each([{ durable: false }, { durable: false, shortLived: true }])(
      'a put with %o keeps its condition: created once, replaced only from its etag',
      async (options) => {
        // Twice: a short-lived create's second round may reuse the file of the first.
        for (const round of [1, 2]) {
          const created = await store.put('r/1.json', `held ${round}`, { ifNoneMatch: '*' }, options);
          await expect(store.put('r/1.json', 'again', { ifNoneMatch: '*' }, options)).rejects.toBeInstanceOf(PreconditionFailedError);
          expect(await bodyOf(store, 'r/1.json')).toBe(`held ${round}`);
          await expect(store.put('r/1.json', 'stale', { ifMatch: '"not-it"' }, options)).rejects.toBeInstanceOf(PreconditionFailedError);
          const replaced = await store.put('r/1.json', 'taken over', { ifMatch: created.etag }, options);
          expect((await store.head('r/1.json'))?.etag).toBe(replaced.etag);
          expect(await bodyOf(store, 'r/1.json')).toBe('taken over');
          await store.delete('r/1.json', { keepDirectory: true });
        }
      },
    );

    it('a put placed after another is invisible until that one settles, and places nothing if it fails', async () => {
      let allow = () => {};
      const gate = new Promise<void>((resolve) => (allow = resolve));
      const placed = store.put('after/ok.json', 'second', { ifNoneMatch: '*' }, { placeAfter: gate });
      await new Promise((r) => setImmediate(r)); // a local store has written its temporary file by now
      expect(await store.head('after/ok.json')).toBeNull();
      expect(keysOf((await store.list('after/')).objects)).toEqual([]);
      allow();
      expect((await placed).key).toBe('after/ok.json');
      expect(await bodyOf(store, 'after/ok.json')).toBe('second');

      const refused = new PreconditionFailedError('after/first', 'object exists');
      await expect(store.put('after/never.json', 'x', undefined, { placeAfter: Promise.reject(refused) })).rejects.toBe(refused);
      await expect(store.put('after/ok.json', 'x', undefined, { placeAfter: Promise.reject(refused) })).rejects.toBe(refused);
      expect(await store.head('after/never.json')).toBeNull();
      expect(await bodyOf(store, 'after/ok.json')).toBe('second');
      expect(keysOf((await store.list('after/')).objects)).toEqual(['after/ok.json']);
    });

    it('a put as another object (sameAs) stores the body whether or not that object changed or went since it was read', async () => {
      const source = await store.put('same/staged', 'validated');
      const placed = await store.put('same/final', 'validated', { ifNoneMatch: '*' }, { sameAs: { key: 'same/staged', etag: source.etag } });
      expect(await bodyOf(store, 'same/final')).toBe('validated');
      expect((await store.head('same/final'))?.etag).toBe(placed.etag);
      await expect(store.put('same/final', 'validated', { ifNoneMatch: '*' }, { sameAs: { key: 'same/staged', etag: source.etag } })).rejects.toBeInstanceOf(
        PreconditionFailedError,
      );
      // Changed after it was read: the body read is what lands, never the object's new bytes.
      await store.put('same/staged', 'changed since');
      await store.put('same/other', 'validated', { ifNoneMatch: '*' }, { sameAs: { key: 'same/staged', etag: source.etag } });
      expect(await bodyOf(store, 'same/other')).toBe('validated');
      await store.delete('same/staged');
      await store.put('same/third', 'validated', undefined, { sameAs: { key: 'same/staged', etag: source.etag } });
      expect(await bodyOf(store, 'same/third')).toBe('validated');
      // Deleting the source takes nothing from the object placed as it.
      expect(await bodyOf(store, 'same/final')).toBe('validated');
    });

    it('of 30 concurrent create-if-absent puts exactly one wins and its body is stored', async () => {
      const results = await Promise.allSettled(Array.from({ length: 30 }, (_, i) => store.put('race/1.manifest', `writer-${i}`, { ifNoneMatch: '*' })));
      const winners = fulfilledIndexes(results);
      expect(winners).toHaveLength(1);
      const reasons = rejectionReasons(results);
      expect(reasons).toHaveLength(29);
      for (const reason of reasons) expect(reason).toBeInstanceOf(PreconditionFailedError);
      expect(await bodyOf(store, 'race/1.manifest')).toBe(`writer-${winners[0]}`);
    });

    it('of 20 concurrent replace-if-unchanged puts from one read exactly one wins', async () => {
      await store.put('race/state.json', 'base');
      // Two rounds: on RGW the first one also makes the adapter learn its If-Match quoting, the
      // second races with the learned form from the start.
      for (const round of [1, 2]) {
        const read = await store.get('race/state.json');
        expect(read).not.toBeNull();
        const etag = read?.etag ?? '';
        const results = await Promise.allSettled(
          Array.from({ length: 20 }, (_, i) => store.put('race/state.json', `round-${round}-replacer-${i}`, { ifMatch: etag })),
        );
        const winners = fulfilledIndexes(results);
        expect(winners).toHaveLength(1);
        for (const reason of rejectionReasons(results)) expect(reason).toBeInstanceOf(PreconditionFailedError);
        const final = await store.get('race/state.json');
        expect(final?.body.toString()).toBe(`round-${round}-replacer-${winners[0]}`);
        const won = results[winners[0] ?? -1];
        expect(won?.status === 'fulfilled' ? won.value.etag : undefined).toBe(final?.etag);
      }
    });

    it('round-trips a large (>16 MiB) unconditional put', async () => {
      const body = randomBytes(17 * 1024 * 1024 + 123);
      const put = await store.put('big/data.lance', body);
      expect(put.size).toBe(body.length);
      const head = await store.head('big/data.lance');
      expect(head?.size).toBe(body.length);
      const got = await store.get('big/data.lance');
      expect(got?.size).toBe(body.length);
      expect(got?.body.equals(body)).toBe(true);
    });
  });

  describe('list', () => {
    it('with a delimiter returns the objects and the common prefixes one level down, in byte order', async () => {
      await putAll(store, LISTING_KEYS);
      const page = await store.list('l/', { delimiter: '/', details: true });
      expect(keysOf(page.objects)).toEqual(['l/B', 'l/a-b', 'l/z', `l/${WIDE_A}`, `l/${EMOJI}`]);
      expect(page.commonPrefixes).toEqual(['l/a/', 'l/é/', `l/${EMOJI}dir/`]);
      expect(page.nextStartAfter).toBeUndefined();
      for (const o of page.objects) {
        expect(o.size).toBe(Buffer.byteLength(`body of ${o.key}`));
        expect(o.etag.length).toBeGreaterThan(0);
        expect(o.etag).toBe((await store.head(o.key))?.etag);
        expect(o.lastModified.getTime()).toBeGreaterThan(0);
      }
      // Byte order, not UTF-16 order: the emoji sorts after U+FF21.
      expect([`l/${EMOJI}`, `l/${WIDE_A}`].sort()).toEqual([`l/${EMOJI}`, `l/${WIDE_A}`]);

      // A prefix that is not a directory matches names that start with it.
      const partial = await store.list('l/a', { delimiter: '/' });
      expect(keysOf(partial.objects)).toEqual(['l/a-b']);
      expect(partial.commonPrefixes).toEqual(['l/a/']);

      // The root itself.
      const top = await store.list('', { delimiter: '/' });
      expect(keysOf(top.objects)).toEqual(['lz']);
      expect(top.commonPrefixes).toEqual(['l/', 'other/']);

      // An absent prefix is an empty listing.
      expect(await store.list('nothing/', { delimiter: '/' })).toEqual({ objects: [], commonPrefixes: [] });
    });

    it('without a delimiter lists recursively in byte order', async () => {
      await putAll(store, LISTING_KEYS);
      const page = await store.list('l/');
      const expected = sortedKeys(LISTING_KEYS.filter((k) => k.startsWith('l/')));
      expect(keysOf(page.objects)).toEqual(expected);
      expect(page.commonPrefixes).toEqual([]);
      expect(keysOf((await store.list('')).objects)).toEqual(sortedKeys(LISTING_KEYS));
      expect(keysOf((await store.list('l')).objects)).toEqual(sortedKeys(LISTING_KEYS.filter((k) => k.startsWith('l'))));
    });

    it.each([1, 2, 3])('pages with maxKeys=%i visit every entry exactly once', async (maxKeys) => {
      await putAll(store, LISTING_KEYS);
      const full = await store.list('l/', { delimiter: '/' });
      const paged = await pages(store, 'l/', { delimiter: '/', maxKeys });
      for (const p of paged) expect(p.objects.length + p.commonPrefixes.length).toBeLessThanOrEqual(maxKeys);
      expect(paged.length).toBeGreaterThan(1);
      const objects = paged.flatMap((p) => p.objects);
      const prefixes = paged.flatMap((p) => p.commonPrefixes);
      expect(objects).toEqual(keysOf(full.objects));
      expect(prefixes).toEqual(full.commonPrefixes);
      // Across pages the merged entries stay in byte order.
      const merged = paged.flatMap((p) => sortedKeys([...p.objects, ...p.commonPrefixes]));
      expect(merged).toEqual(sortedKeys([...objects, ...prefixes]));

      const recursive = await pages(store, 'l/', { maxKeys });
      expect(recursive.flatMap((p) => p.objects)).toEqual(sortedKeys(LISTING_KEYS.filter((k) => k.startsWith('l/'))));

      // listAll follows the same pages.
      const all = await listAll(store, 'l/', { delimiter: '/', maxKeys });
      expect(keysOf(all.objects)).toEqual(keysOf(full.objects));
      expect(all.commonPrefixes).toEqual(full.commonPrefixes);
    });

    it('startAfter returns only later entries; one ending in "/" skips everything under it', async () => {
      // 'm/d0' is the first key after everything under 'm/d/' ('0' is the byte after '/').
      await putAll(store, ['m/c', 'm/d/x', 'm/d/y/z', 'm/d0', 'm/d1/q', 'm/e']);

      const delimited = await store.list('m/', { delimiter: '/', startAfter: 'm/d/' });
      expect(keysOf(delimited.objects)).toEqual(['m/d0', 'm/e']);
      expect(delimited.commonPrefixes).toEqual(['m/d1/']);

      const recursive = await store.list('m/', { startAfter: 'm/d/' });
      expect(keysOf(recursive.objects)).toEqual(['m/d0', 'm/d1/q', 'm/e']);

      const afterKey = await store.list('m/', { delimiter: '/', startAfter: 'm/d0' });
      expect(keysOf(afterKey.objects)).toEqual(['m/e']);
      expect(afterKey.commonPrefixes).toEqual(['m/d1/']);

      const afterPrefix = await store.list('m/', { delimiter: '/', startAfter: 'm/d1/' });
      expect(keysOf(afterPrefix.objects)).toEqual(['m/e']);
      expect(afterPrefix.commonPrefixes).toEqual([]);

      const beforeAll = await store.list('m/', { delimiter: '/', startAfter: 'm/' });
      expect(keysOf(beforeAll.objects)).toEqual([]);
      expect(beforeAll.commonPrefixes).toEqual([]);

      const fromStart = await store.list('m/', { delimiter: '/', startAfter: 'm/a' });
      expect(keysOf(fromStart.objects)).toEqual(['m/c', 'm/d0', 'm/e']);
      expect(fromStart.commonPrefixes).toEqual(['m/d/', 'm/d1/']);
    });

    it('startAfter and maxKeys at the edges: absent keys, inside a subdirectory, outside the prefix, exact fits', async () => {
      await putAll(store, ['n/a', 'n/b/1', 'n/b/2', 'n/b/3/x', 'n/c', 'n/ca', 'n/d']);
      // An absent key between entries.
      expect(keysOf((await store.list('n/', { delimiter: '/', startAfter: 'n/bz' })).objects)).toEqual(['n/c', 'n/ca', 'n/d']);
      // Inside a subdirectory: recursively, the rest of it follows; delimited, the directory was listed already.
      expect(keysOf((await store.list('n/', { startAfter: 'n/b/1' })).objects)).toEqual(['n/b/2', 'n/b/3/x', 'n/c', 'n/ca', 'n/d']);
      expect(keysOf((await store.list('n/', { startAfter: 'n/b/2', maxKeys: 1 })).objects)).toEqual(['n/b/3/x']);
      const delimited = await store.list('n/', { delimiter: '/', startAfter: 'n/b/1' });
      expect(delimited.commonPrefixes).toEqual([]);
      expect(keysOf(delimited.objects)).toEqual(['n/c', 'n/ca', 'n/d']);
      // Before the prefix: everything; after it: nothing.
      expect(keysOf((await store.list('n/', { delimiter: '/', startAfter: 'a' })).objects)).toEqual(['n/a', 'n/c', 'n/ca', 'n/d']);
      expect(await store.list('n/', { delimiter: '/', startAfter: 'o' })).toEqual({ objects: [], commonPrefixes: [] });
      // A partial name prefix together with startAfter.
      expect(keysOf((await store.list('n/c', { delimiter: '/', startAfter: 'n/c' })).objects)).toEqual(['n/ca']);
      // A page that holds exactly what is left says nothing follows; one short of it says where to go on.
      const exact = await store.list('n/', { delimiter: '/', startAfter: 'n/c', maxKeys: 2 });
      expect(keysOf(exact.objects)).toEqual(['n/ca', 'n/d']);
      expect(exact.nextStartAfter).toBeUndefined();
      const short = await store.list('n/', { delimiter: '/', maxKeys: 2 });
      expect([...keysOf(short.objects), ...short.commonPrefixes]).toEqual(['n/a', 'n/b/']);
      expect(short.nextStartAfter).toBe('n/b/');
      // More than S3 answers at once (1,000) may be asked for: the listing index asks for 10,000.
      const generous = await store.list('n/', { delimiter: '/', maxKeys: 10_000 });
      expect([...keysOf(generous.objects), ...generous.commonPrefixes]).toEqual(['n/a', 'n/c', 'n/ca', 'n/d', 'n/b/']);
      expect(generous.nextStartAfter).toBeUndefined();
    });

    it('a large directory pages in order while keys come and go between pages', async () => {
      const name = (i: number) => `big/k${String(i).padStart(4, '0')}`;
      await Promise.all(Array.from({ length: 150 }, (_, i) => store.put(name(i * 2), 'x')));
      const seen: string[] = [];
      let startAfter: string | undefined;
      for (let round = 0; ; round++) {
        const page = await store.list('big/', { delimiter: '/', maxKeys: 17, ...(startAfter ? { startAfter } : {}) });
        seen.push(...keysOf(page.objects));
        if (!page.nextStartAfter) break;
        startAfter = page.nextStartAfter;
        // Between pages: one key appears after the cursor, one before it, and one after it goes.
        await store.put(name(299 - round * 2), 'x');
        await store.put(name(1 + round * 2), 'x');
        await store.delete(name(298 - round * 2));
      }
      expect(seen).toEqual(sortedKeys(seen));
      expect(new Set(seen).size).toBe(seen.length);
      const now = keysOf((await listAll(store, 'big/', { delimiter: '/' })).objects);
      // Every key present throughout was seen; nothing was seen that never existed.
      const always = Array.from({ length: 150 }, (_, i) => name(i * 2)).filter((k) => now.includes(k));
      for (const k of always) expect(seen).toContain(k);
      for (const k of seen) expect(k).toMatch(/^big\/k\d{4}$/);
    });
  });

  describe('keys with characters that URIs and XML reserve', () => {
    const ODD = ['sp ace', 'a+b', 'a&b', '50%', 'x=y', 'q?r', 'h#t', '<tag>', '"q"', "it's", '~t', 's;c', 'p,(x)!*', '&amp;'];
    it('round-trip through put, get, head, list (with startAfter and a delimiter) and delete', async () => {
      const objects = ODD.map((n) => `r/${n}`).sort(compareKeys);
      await putAll(store, [...objects, ...ODD.map((n) => `r/${n}.d/leaf`)]);
      for (const key of objects) {
        expect(await bodyOf(store, key)).toBe(`body of ${key}`);
        expect((await store.head(key))?.size).toBe(Buffer.byteLength(`body of ${key}`));
      }
      const page = await store.list('r/', { delimiter: '/' });
      expect(keysOf(page.objects)).toEqual(objects);
      expect(page.commonPrefixes).toEqual(ODD.map((n) => `r/${n}.d/`).sort(compareKeys));
      const from = objects[3] ?? '';
      const later = await store.list('r/', { startAfter: from, maxKeys: 3 });
      const all = [...objects, ...ODD.map((n) => `r/${n}.d/leaf`)].sort(compareKeys);
      expect(keysOf(later.objects)).toEqual(all.filter((k) => compareKeys(k, from) > 0).slice(0, 3));
      for (const key of objects) await store.delete(key);
      expect(keysOf((await store.list('r/', { delimiter: '/' })).objects)).toEqual([]);
    });
  });

  describe('delete', () => {
    it('deletes a key and accepts absent keys', async () => {
      await store.delete('never/was/here');
      await store.delete('never-here');
      await store.put('d/a/b', 'x');
      await store.put('d/keep', 'y');
      await store.delete('d/a/b');
      expect(await store.get('d/a/b')).toBeNull();
      await store.delete('d/a/b');
      const page = await store.list('d/', { delimiter: '/' });
      expect(keysOf(page.objects)).toEqual(['d/keep']);
      expect(page.commonPrefixes).toEqual([]);
    });

    it('deletePrefix removes everything under the prefix but the kept keys', async () => {
      await putAll(store, ['p/a', 'p/b/c', 'p/b/d/e', 'p/keep', 'p/b/d/kept', 'pz', 'q/x']);
      expect(await store.deletePrefix('p/', { keep: ['p/keep', 'p/b/d/kept', 'p/not-there'] })).toBe(3);
      expect(keysOf((await store.list('')).objects)).toEqual(['p/b/d/kept', 'p/keep', 'pz', 'q/x']);
      expect(await bodyOf(store, 'p/keep')).toBe('body of p/keep');
      const p = await store.list('p/', { delimiter: '/' });
      expect(keysOf(p.objects)).toEqual(['p/keep']);
      expect(p.commonPrefixes).toEqual(['p/b/']);

      expect(await store.deletePrefix('p/')).toBe(2);
      const top = await store.list('', { delimiter: '/' });
      expect(keysOf(top.objects)).toEqual(['pz']);
      expect(top.commonPrefixes).toEqual(['q/']);

      expect(await store.deletePrefix('absent/')).toBe(0);
    });

    it('deletePrefix keeping only absent keys leaves no trace of the prefix', async () => {
      await putAll(store, ['r/a', 'r/s/t', 'x']);
      expect(await store.deletePrefix('r/', { keep: ['r/none'] })).toBe(2);
      const top = await store.list('', { delimiter: '/' });
      expect(keysOf(top.objects)).toEqual(['x']);
      expect(top.commonPrefixes).toEqual([]);
    });
  });

  describe('copy', () => {
    it('copies, and with ifNoneMatch refuses an existing destination', async () => {
      await store.put('c/src', 'source body');
      const copied = await store.copy('c/src', 'c/dst');
      expect(copied).toMatchObject({ key: 'c/dst', size: 11 });
      expect(await bodyOf(store, 'c/dst')).toBe('source body');
      expect(await bodyOf(store, 'c/src')).toBe('source body');

      await store.put('c/other', 'other body');
      await expect(store.copy('c/other', 'c/dst', { ifNoneMatch: '*' })).rejects.toBeInstanceOf(PreconditionFailedError);
      expect(await bodyOf(store, 'c/dst')).toBe('source body');

      const fresh = await store.copy('c/other', 'c/fresh', { ifNoneMatch: '*' });
      expect(fresh.key).toBe('c/fresh');
      expect(await bodyOf(store, 'c/fresh')).toBe('other body');
    });

    it('rejects a copy from an absent key', async () => {
      await expect(store.copy('c/missing', 'c/dst')).rejects.toThrow();
      await expect(store.copy('c/missing', 'c/dst2', { ifNoneMatch: '*' })).rejects.toThrow();
      expect(await store.head('c/dst')).toBeNull();
    });
  });

  describe('locations', () => {
    it('has URIs under the root URI and engine locations for them', async () => {
      const scheme = backend.name === 'local' ? 'file://' : backend.name === 'memory' ? 'memory://' : 's3://';
      expect(store.rootUri.startsWith(scheme)).toBe(true);
      expect(store.rootUri.endsWith('/')).toBe(false);
      expect(store.uri('ns/t.lance')).toBe(`${store.rootUri}/ns/t.lance`);
      expect(store.uri('ns/t.lance/')).toBe(`${store.rootUri}/ns/t.lance`);
      if (backend.name === 'local') {
        expect(path.isAbsolute(store.location('ns/t.lance'))).toBe(true);
        expect(store.location('ns/t.lance')).toBe(fileURLToPath(store.uri('ns/t.lance')));
        expect(store.location('ns/t.lance/')).toBe(store.location('ns/t.lance'));
        expect(store.location('')).toBe(fileURLToPath(store.rootUri));
      } else {
        expect(store.location('ns/t.lance')).toBe(store.uri('ns/t.lance'));
        expect(store.location('ns/t.lance/')).toBe(store.uri('ns/t.lance'));
      }
    });

    it('never hands secrets to clients', async () => {
      const client = store.clientStorageOptions();
      for (const name of Object.keys(client)) expect(name).not.toMatch(/secret|session_token|access_key/i);
      const engine = store.engineStorageOptions();
      if (backend.name === 'local' || backend.name === 'memory') {
        expect(engine).toEqual({});
        expect(client).toEqual({});
      } else {
        expect(engine).toMatchObject({ aws_access_key_id: root.s3.accessKeyId, aws_secret_access_key: root.s3.secretAccessKey });
        expect(client).toMatchObject({ aws_endpoint: root.s3.endpoint, allow_http: 'true', aws_region: root.s3.region });
      }
    });
  });
});

describe('LocalObjectStore specifics', () => {
  let root: TestRoot;
  let store: LocalObjectStore;
  beforeEach(async () => {
    root = await localBackend.newRoot();
    expect(root.store).toBeInstanceOf(LocalObjectStore);
    store = root.store as LocalObjectStore;
  });
  afterEach(async () => {
    await root.dispose();
  });

  it('a listing shows every file another process created or deleted before it began (the kept sorted listing is never stale)', async () => {
    const pad = (i: number) => String(i).padStart(4, '0');
    // Files the writer will delete; enough of them that the directory's sorted listing is kept between calls (see sortedEntries).
    await Promise.all(Array.from({ length: 400 }, (_, i) => store.put(`race/d${pad(i)}`, '')));
    const dir = path.join(root.root, 'race');
    const staging = path.join(root.root, 'staging');
    await fs.mkdir(staging);
    // The writer creates c<i> (by a rename, as the store places files) and deletes d<i>, in bursts
    // with pauses both shorter and longer than a clock tick and than the listing's trust margin,
    // and reports each finished step on stdout.
    const script = `
      const fs = require('node:fs'); const path = require('node:path');
      const [dir, staging] = process.argv.slice(1);
      const wait = (ms) => new Promise((r) => setTimeout(r, ms));
      const pad = (i) => String(i).padStart(4, '0');
      (async () => {
        for (let i = 0; i < 400; i++) {
          fs.writeFileSync(path.join(staging, 'c'), '');
          fs.renameSync(path.join(staging, 'c'), path.join(dir, 'c' + pad(i)));
          process.stdout.write('c' + i + '\\n');
          fs.unlinkSync(path.join(dir, 'd' + pad(i)));
          process.stdout.write('d' + i + '\\n');
          const r = Math.random();
          if (r < 0.1) await wait(120 + Math.random() * 60); else if (r < 0.4) await wait(Math.random() * 12);
        }
      })();`;
    const { spawn } = await import('node:child_process');
    const writer = spawn(process.execPath, ['-e', script, dir, staging], { stdio: ['ignore', 'pipe', 'inherit'] });
    let created = -1;
    let deleted = -1;
    let buffered = '';
    writer.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        if (line.startsWith('c')) created = Number(line.slice(1));
        if (line.startsWith('d')) deleted = Number(line.slice(1));
      }
    });
    let running = true;
    const exited = new Promise<void>((resolve) => writer.on('exit', () => resolve()));
    void exited.then(() => (running = false));
    let listings = 0;
    while (running || listings < 10) {
      const [createdBefore, deletedBefore] = [created, deleted];
      const page = await store.list('race/', { delimiter: '/', maxKeys: 1000 });
      const shown = new Set(keysOf(page.objects).map((k) => k.slice('race/'.length)));
      for (let i = 0; i <= createdBefore; i++) expect(shown.has(`c${pad(i)}`), `c${i} created before the listing began`).toBe(true);
      for (let i = 0; i <= deletedBefore; i++) expect(shown.has(`d${pad(i)}`), `d${i} deleted before the listing began`).toBe(false);
      listings++;
      // A local store answers small listings synchronously: let the writer's output and exit be heard.
      await new Promise((resolve) => setImmediate(resolve));
    }
    await exited;
    expect(created).toBe(399);
  }, 30_000);

  it('rejects keys that are absolute, empty-segmented or climb out of the root', async () => {
    const outside = path.join(path.dirname(root.root), `escape-${path.basename(root.root)}`);
    const bad = [`../${path.basename(outside)}`, 'a/../../x', 'a/..', '..', 'a/./b', '/etc/passwd', 'a//b', 'a/.', '.', 'a/b\0c'];
    for (const key of bad) {
      await expect(store.put(key, 'x'), key).rejects.toThrow(/invalid store key/);
      await expect(store.get(key), key).rejects.toThrow(/invalid store key/);
      await expect(store.head(key), key).rejects.toThrow(/invalid store key/);
      await expect(store.put(key, 'x', { ifNoneMatch: '*' }), key).rejects.toThrow(/invalid store key/);
    }
    await expect(store.list('../', { delimiter: '/' })).rejects.toThrow(/invalid store key/);
    await expect(store.deletePrefix('../')).rejects.toThrow(/invalid store key/);
    await expect(fs.stat(outside)).rejects.toMatchObject({ code: 'ENOENT' });
    // Names reserved for temporary and lock files cannot be keys either.
    await expect(store.put('a/x.~tmp~1', 'x')).rejects.toThrow(/reserved store key/);
    await expect(store.put('a/x.~lock~', 'x')).rejects.toThrow(/reserved store key/);
  });

  it('takes keys longer than a file name whose every segment fits, and refuses a segment that does not', async () => {
    // Segments are measured only in a key longer than NAME_MAX (255 bytes): 'é' is 2 bytes of UTF-8.
    const fits = `${'é'.repeat(120)}/${'b'.repeat(255)}/${'c'.repeat(200)}`; // the last leaves room for a temporary suffix
    await store.put(fits, 'x');
    expect((await store.get(fits))?.body.toString()).toBe('x');
    for (const key of [`a/${'é'.repeat(128)}`, `${'b'.repeat(256)}/c`]) {
      await expect(store.put(key, 'x'), key).rejects.toThrow(/too long for the store/);
      await expect(store.head(key), key).rejects.toThrow(/too long for the store/);
    }
  });

  it('never lists temporary or lock files', async () => {
    await putAll(store, ['t/a', 't/sub/b']);
    const dir = path.join(root.root, 't');
    await fs.writeFile(path.join(dir, 'a.~tmp~0123abcd'), 'partial');
    await fs.writeFile(path.join(dir, 'c.~lock~'), ''); // a lock on a key that does not exist
    await fs.writeFile(path.join(dir, 'sub', 'b.~lock~'), '');
    await fs.mkdir(path.join(dir, 'x.~tmp~dir'));

    const delimited = await store.list('t/', { delimiter: '/' });
    expect(keysOf(delimited.objects)).toEqual(['t/a']);
    expect(delimited.commonPrefixes).toEqual(['t/sub/']);
    expect(keysOf((await store.list('t/')).objects)).toEqual(['t/a', 't/sub/b']);
    expect(keysOf((await store.list('t/a')).objects)).toEqual(['t/a']);
    expect(keysOf((await listAll(store, '', { maxKeys: 1 })).objects)).toEqual(['t/a', 't/sub/b']);

    // While replace-if-unchanged puts hold their lock files, listings still show only real keys.
    const etag = (await store.head('t/a'))?.etag ?? '';
    const writes = Promise.allSettled(Array.from({ length: 10 }, (_, i) => store.put('t/a', `v${i}`, { ifMatch: etag })));
    const listings = await Promise.all(Array.from({ length: 10 }, () => store.list('t/', { delimiter: '/' })));
    for (const listing of listings) {
      for (const key of [...keysOf(listing.objects), ...listing.commonPrefixes]) expect(key).not.toMatch(/\.~(tmp|lock)~/);
    }
    expect(fulfilledIndexes(await writes)).toHaveLength(1);
  });

  it("breaks at once the lock of a replace-if-unchanged whose process died, never a live holder's", async () => {
    const etag = (await store.put('held/state.json', '{"v":1}')).etag;
    const lock = path.join(root.root, 'held', 'state.json.~lock~');
    // A process of this host that is gone (it ran and exited) held the lock: the put takes it over
    // at once (it used to wait 10 s and answer unavailable, the lock being younger than 30 s).
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    await fs.writeFile(lock, `${os.hostname()}\n${dead.stdout}\nnonce\n`);
    const replaced = await store.put('held/state.json', '{"v":2}', { ifMatch: etag });
    expect((await store.get('held/state.json'))?.body.toString()).toBe('{"v":2}');
    await expect(fs.stat(lock)).rejects.toMatchObject({ code: 'ENOENT' });
    // A live holder (this process) keeps it: the put waits until the lock goes.
    await fs.writeFile(lock, `${os.hostname()}\n${process.pid}\nnonce\n`);
    let placed = false;
    const waiting = store.put('held/state.json', '{"v":3}', { ifMatch: replaced.etag }).then((info) => {
      placed = true;
      return info;
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(placed).toBe(false);
    await fs.unlink(lock);
    await waiting;
    expect((await store.get('held/state.json'))?.body.toString()).toBe('{"v":3}');
  });

  it('a put as another object links its file, keeping its etag and time, and fsyncs it; never a symbolic link', async () => {
    const source = await store.put('v/staged', 'manifest bytes', undefined, { durable: false });
    const fsyncs = vi.spyOn(fsSync, 'fsync');
    const placed = await store.put('v/final', 'manifest bytes', { ifNoneMatch: '*' }, { sameAs: { key: 'v/staged', etag: source.etag } });
    expect(fsyncs).toHaveBeenCalledTimes(2); // the file (its writer did not), then the directory
    fsyncs.mockRestore();
    expect(placed.etag).toBe(source.etag);
    expect(placed.lastModified.getTime()).toBe(source.lastModified.getTime());
    expect((await store.head('v/final'))?.etag).toBe(source.etag);
    expect((await fs.stat(path.join(root.root, 'v/final'))).ino).toBe((await fs.stat(path.join(root.root, 'v/staged'))).ino);
    // The etag is the one Lance (object_store) computes for the file: inode, mtime in microseconds, size, in hex.
    const st = await fs.stat(path.join(root.root, 'v/final'), { bigint: true });
    expect(placed.etag).toBe(`"${st.ino.toString(16)}-${(st.mtimeNs / 1000n).toString(16)}-${st.size.toString(16)}"`);
    // A symbolic link named as the object is never linked: its target's bytes could be anything later.
    await fs.writeFile(path.join(root.root, 'outside'), 'manifest bytes');
    await fs.symlink(path.join(root.root, 'outside'), path.join(root.root, 'v/link'));
    // (A link is no object, see below: the etag given is its target's.)
    const viaLink = (await store.head('outside'))?.etag ?? '';
    const copied = await store.put('v/from-link', 'manifest bytes', { ifNoneMatch: '*' }, { sameAs: { key: 'v/link', etag: viaLink } });
    expect((await fs.lstat(path.join(root.root, 'v/from-link'))).isSymbolicLink()).toBe(false);
    expect(copied.etag).not.toBe(viaLink);
    expect((await fs.readdir(path.join(root.root, 'v'))).sort()).toEqual(['final', 'from-link', 'link', 'staged']);
    // A file rewritten in place with other bytes of the same size, its time set back: the etag is
    // the same, but the bytes are not the body read, so it is not linked and the body is written.
    const rewritten = path.join(root.root, 'v/rewritten');
    await fs.writeFile(rewritten, 'manifest bytes');
    const then = new Date('2026-01-01T00:00:00Z');
    await fs.utimes(rewritten, then, then);
    const read = (await store.head('v/rewritten'))?.etag ?? '';
    await fs.writeFile(rewritten, 'MANIFEST BYTES');
    await fs.utimes(rewritten, then, then);
    expect((await store.head('v/rewritten'))?.etag).toBe(read);
    const written = await store.put('v/from-rewritten', 'manifest bytes', { ifNoneMatch: '*' }, { sameAs: { key: 'v/rewritten', etag: read } });
    expect(written.etag).not.toBe(read);
    expect((await store.get('v/from-rewritten'))?.body.toString()).toBe('manifest bytes');
  });

  it('a symbolic link is no object, and no delete goes through one', async () => {
    const elsewhere = await fs.mkdtemp(path.join(os.tmpdir(), 'lance-ns-elsewhere-'));
    try {
      await fs.mkdir(path.join(elsewhere, 'd', 'sub'), { recursive: true });
      for (const f of ['d/a', 'd/sub/b', 'file']) await fs.writeFile(path.join(elsewhere, f), f);
      await store.put('ns/kept', 'x');
      await fs.symlink(path.join(elsewhere, 'file'), path.join(root.root, 'ns', 'file-link'));
      await fs.symlink(path.join(elsewhere, 'd'), path.join(root.root, 'ns', 'dir-link'));
      await fs.symlink(path.join(elsewhere, 'nothing'), path.join(root.root, 'ns', 'dangling'));
      // Neither read nor listed.
      expect(await store.get('ns/file-link')).toBeNull();
      expect(await store.head('ns/file-link')).toBeNull();
      expect(keysOf((await store.list('ns/', { delimiter: '/' })).objects)).toEqual(['ns/kept']);
      expect((await store.list('ns/', { delimiter: '/' })).commonPrefixes).toEqual([]);
      // Where a link lies on a key's path: none, the key itself, a directory above it, a dangling one.
      expect(store.linkOnPath('ns/')).toBeNull();
      expect(store.linkOnPath('ns/missing/deeper/')).toBeNull();
      expect(store.linkOnPath('')).toBeNull();
      expect(store.linkOnPath('ns/dir-link/')).toBe('ns/dir-link/');
      expect(store.linkOnPath('ns/dir-link/sub/')).toBe('ns/dir-link/');
      expect(store.linkOnPath('ns/dir-link/missing/')).toBe('ns/dir-link/');
      expect(store.linkOnPath('ns/dangling/')).toBe('ns/dangling/');
      expect(store.linkOnPath('ns/dangling/x/')).toBe('ns/dangling/');
      // What the links among a directory's entries are, from the read a listing makes: all three, wherever they lead.
      expect(store.linksIn('ns/').sort()).toEqual(['ns/dangling/', 'ns/dir-link/', 'ns/file-link/']);
      expect(store.linksIn('ns/missing/')).toEqual([]);
      expect(store.linksIn('ns/kept/')).toEqual([]);
      expect(store.linksIn('')).toEqual([]);
      // A settled directory's read is kept (a stat, then: the clock moved on, so it is trusted), and a link planted since is seen all the same.
      await fs.mkdir(path.join(root.root, 'settled'));
      await fs.writeFile(path.join(root.root, 'settled', 'a'), 'a');
      vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 10_000 });
      try {
        expect(store.linksIn('settled/')).toEqual([]);
        expect(keysOf((await store.list('settled/', { delimiter: '/' })).objects)).toEqual(['settled/a']);
        await fs.symlink(path.join(elsewhere, 'd'), path.join(root.root, 'settled', 'planted'));
        expect(keysOf((await store.list('settled/', { delimiter: '/' })).objects)).toEqual(['settled/a']);
        expect(store.linksIn('settled/')).toEqual(['settled/planted/']);
      } finally {
        vi.useRealTimers();
      }
      await fs.rm(path.join(root.root, 'settled'), { recursive: true });
      // A delete under a link deletes nothing; a delete of the link removes the link, not its target.
      expect(await store.deletePrefix('ns/dir-link/sub/')).toBe(0);
      expect(await fs.readdir(path.join(root.root, 'ns'))).toContain('dir-link');
      expect(await store.deletePrefix('ns/dir-link/')).toBe(0);
      await fs.symlink(path.join(elsewhere, 'd'), path.join(root.root, 'ns', 'dir-link'));
      expect(await store.deletePrefix('ns/dir-link/', { keep: ['ns/dir-link/a'] })).toBe(0);
      await store.delete('ns/file-link');
      expect((await fs.readdir(path.join(root.root, 'ns'))).sort()).toEqual(['dangling', 'kept']);
      expect((await fs.readdir(elsewhere, { recursive: true })).sort()).toEqual(['d', 'd/a', 'd/sub', 'd/sub/b', 'file']);
      // A root that is itself a link is no link below the root.
      const viaLink = path.join(elsewhere, 'root-link');
      await fs.symlink(root.root, viaLink);
      const linked = new LocalObjectStore(viaLink);
      expect(linked.linkOnPath('ns/')).toBeNull();
      expect(linked.linkOnPath('ns/dangling/')).toBe('ns/dangling/');
    } finally {
      await fs.rm(elsewhere, { recursive: true, force: true });
    }
  });

  it('a put whose placement is refused leaves no temporary file behind', async () => {
    await store.put('w/kept', 'x');
    await expect(store.put('w/never', 'y', undefined, { placeAfter: Promise.reject(new Error('refused')) })).rejects.toThrow('refused');
    await expect(store.put('v/never', 'y', undefined, { placeAfter: Promise.reject(new Error('refused')) })).rejects.toThrow('refused');
    expect(await fs.readdir(path.join(root.root, 'w'))).toEqual(['kept']);
    expect(await fs.readdir(root.root)).toEqual(['w']);
  });

  it('a delete that keeps its directory leaves it for the next write, holding no key', async () => {
    await putAll(store, ['s/r/1.json']);
    await store.delete('s/r/1.json', { keepDirectory: true });
    expect(await fs.readdir(path.join(root.root, 's', 'r'))).toEqual([]);
    expect((await store.list('s/')).objects).toEqual([]);
    expect(await store.head('s/r/1.json')).toBeNull();
    await store.put('s/r/2.json', 'x', { ifNoneMatch: '*' }, { durable: false });
    expect(keysOf((await store.list('s/')).objects)).toEqual(['s/r/2.json']);
  });

  it('a put beside what exists makes no directory: every kind of put fails where its directory went, and works where it is', async () => {
    await putAll(store, ['t/_versions/1.manifest']);
    const puts: Array<[string, PutCondition | undefined, PutOptions]> = [
      ['best effort', undefined, { durable: false, besideExisting: true }],
      ['durable', undefined, { besideExisting: true }],
      ['create-if-absent', { ifNoneMatch: '*' }, { besideExisting: true }],
      ['create-if-absent, not durable', { ifNoneMatch: '*' }, { durable: false, besideExisting: true }],
    ];
    // A replace-if-unchanged of a key whose directory went: refused, and its lock leaves no directory behind.
    const { etag } = await store.put('gone/_versions/r.json', 'x');
    await store.deletePrefix('gone/');
    await expect(store.put('gone/_versions/r.json', 'y', { ifMatch: etag }, { besideExisting: true })).rejects.toBeInstanceOf(PreconditionFailedError);
    await expect(store.put('gone/_versions/r.json', 'y', { ifMatch: etag })).rejects.toBeInstanceOf(PreconditionFailedError);
    for (const [what, condition, options] of puts) {
      // A condition that did not hold, as a lost create-if-absent: contention, not a failure of the store.
      await expect(store.put(`gone/_versions/${what}.json`, 'x', condition, options), what).rejects.toBeInstanceOf(PreconditionFailedError);
      await store.put(`t/_versions/${what}.json`, 'x', condition, options);
      expect(await bodyOf(store, `t/_versions/${what}.json`), what).toBe('x');
    }
    expect(await fs.readdir(root.root)).toEqual(['t']);
    // Without it, a put makes the directories it needs, as an object store's would exist.
    await store.put('made/_versions/hint.json', 'x', undefined, { durable: false });
    expect(await bodyOf(store, 'made/_versions/hint.json')).toBe('x');
  });

  it('an empty put nobody needs durable is made in place: of processes racing to create the same keys exactly one wins each, a replace is a new file, a link is never followed', async () => {
    // Separate processes, each with its own store, creating the same empty keys create-if-absent
    // (each in a directory of its own, which the first to come makes) and unconditionally.
    const script = `
      const { LocalObjectStore } = await import(${JSON.stringify(path.resolve('src/store/local-store.ts'))});
      const { PreconditionFailedError } = await import(${JSON.stringify(path.resolve('src/store/object-store.ts'))});
      const store = new LocalObjectStore(process.argv[1]);
      const won = [];
      for (let i = 0; i < 100; i++) {
        try {
          await store.put('race/' + i + '/e', '', { ifNoneMatch: '*' }, { durable: false });
          won.push(i);
        } catch (e) {
          if (!(e instanceof PreconditionFailedError)) throw e;
        }
        await store.put('all/' + i + '/v', '', undefined, { durable: false });
      }
      process.stdout.write(JSON.stringify(won));
    `;
    const { spawn } = await import('node:child_process');
    const racers = Array.from({ length: 4 }, () => {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, root.root], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString('utf8');
      });
      return new Promise<number[]>((resolve, reject) =>
        child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as number[]) : reject(new Error(`racer exited ${code}`)))),
      );
    });
    const won = (await Promise.all(racers)).flat().sort((a, b) => a - b);
    expect(won).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect((await store.list('all/')).objects).toHaveLength(100);
    expect((await store.list('race/')).objects).toHaveLength(100);
    // In this process too: the second create is refused, and no temporary file is ever left.
    await expect(store.put('race/0/e', '', { ifNoneMatch: '*' }, { durable: false })).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(await fs.readdir(path.join(root.root, 'race', '0'))).toEqual(['e']);
    // An unconditional one over an existing object replaces it by a new file (a new etag), as any put does.
    const before = await store.put('k/v', 'something');
    const after = await store.put('k/v', '', undefined, { durable: false });
    expect(after.etag).not.toBe(before.etag);
    expect(await bodyOf(store, 'k/v')).toBe('');
    // A symbolic link at the key is never written through, whether or not it leads anywhere.
    await fs.writeFile(path.join(root.root, 'outside'), 'kept');
    await fs.symlink(path.join(root.root, 'outside'), path.join(root.root, 'k', 'link'));
    await fs.symlink(path.join(root.root, 'nowhere'), path.join(root.root, 'k', 'dangling'));
    await expect(store.put('k/link', '', { ifNoneMatch: '*' }, { durable: false })).rejects.toBeInstanceOf(PreconditionFailedError);
    await expect(store.put('k/dangling', '', { ifNoneMatch: '*' }, { durable: false })).rejects.toBeInstanceOf(PreconditionFailedError);
    await store.put('k/link', '', undefined, { durable: false });
    expect(await fs.readFile(path.join(root.root, 'outside'), 'utf8')).toBe('kept');
    await expect(fs.stat(path.join(root.root, 'nowhere'))).rejects.toMatchObject({ code: 'ENOENT' });
    // Beside what exists: refused where the directory went, made no directory.
    await expect(store.put('gone/e', '', undefined, { durable: false, besideExisting: true })).rejects.toBeInstanceOf(PreconditionFailedError);
    await expect(store.put('gone/e', '', { ifNoneMatch: '*' }, { durable: false, besideExisting: true })).rejects.toBeInstanceOf(PreconditionFailedError);
    await expect(fs.stat(path.join(root.root, 'gone'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('leaves no empty directory behind when the last key of a directory goes', async () => {
    await putAll(store, ['x/y/z/k', 'x/y/other']);
    await store.delete('x/y/z/k');
    expect(await store.list('x/y/', { delimiter: '/' })).toMatchObject({ commonPrefixes: [] });
    await store.delete('x/y/other');
    expect(await store.list('', { delimiter: '/' })).toEqual({ objects: [], commonPrefixes: [] });
    expect(await fs.readdir(root.root)).toEqual([]);
  });
});

// Only stores with a real rename implement renameDir: the local disk, and the memory store after it.
describe.each([localBackend, memoryBackend])('renameDir on $name', (backend) => {
  let root: TestRoot;
  beforeEach(async () => {
    root = await backend.newRoot();
  });
  afterEach(async () => {
    await root.dispose();
  });

  it('moves a directory and refuses an existing destination', async () => {
    const store = root.store;
    expect(store.renameDir).toBeTypeOf('function');
    await putAll(store, ['ns/src.lance/_versions/1.manifest', 'ns/src.lance/data/a.lance', 'ns/other.lance/x']);
    await store.renameDir?.('ns/src.lance/', 'moved/deeper/dst.lance/');
    expect(keysOf((await store.list('moved/')).objects)).toEqual(['moved/deeper/dst.lance/_versions/1.manifest', 'moved/deeper/dst.lance/data/a.lance']);
    expect(await bodyOf(store, 'moved/deeper/dst.lance/data/a.lance')).toBe('body of ns/src.lance/data/a.lance');
    expect((await store.list('ns/', { delimiter: '/' })).commonPrefixes).toEqual(['ns/other.lance/']);

    await expect(store.renameDir?.('moved/deeper/dst.lance/', 'ns/other.lance/')).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(await bodyOf(store, 'moved/deeper/dst.lance/data/a.lance')).toBe('body of ns/src.lance/data/a.lance');
    expect(await bodyOf(store, 'ns/other.lance/x')).toBe('body of ns/other.lance/x');

    // Moving the last entry out of a directory leaves no empty directory behind.
    await store.renameDir?.('ns/other.lance/', 'moved/other.lance/');
    expect(await store.list('', { delimiter: '/' })).toEqual({ objects: [], commonPrefixes: ['moved/'] });
  });
});

describe('MemoryObjectStore specifics', () => {
  it('keeps its bytes to itself: neither the put buffer nor a read body reaches the stored object', async () => {
    const store = new MemoryObjectStore();
    const body = Buffer.from('abc');
    await store.put('k', body);
    body.fill(0);
    const got = await store.get('k');
    got?.body.fill(0);
    expect(await bodyOf(store, 'k')).toBe('abc');
  });
});
