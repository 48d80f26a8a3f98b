import { describe, expect, it } from 'vitest';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import type { ObjectStore, PutCondition, PutOptions } from '../../src/store/object-store.js';
import { ctx, pages, servicesOver } from '../support/listing-services.js';
import { memoryCatalogDeps } from '../support/local-catalog.js';
import { storeDouble } from '../support/store-double.js';

// A crash of the machine under the model the design states (a journaling file system keeps the
// order of metadata changes): every change the store made is in one sequence; a durable put (an
// fsync) commits everything before it; a crash keeps the changes up to the last durable one and
// any prefix of those after it. Deletes are never fsynced. After the crash, a new process's lists
// (whole and paged) must show exactly the tables that exist, and every declare acknowledged
// before the crash (and not dropped after) must be there.

type Op = { durable: boolean; replay: (s: MemoryObjectStore) => Promise<unknown> };

function recording(inner: MemoryObjectStore) {
  const ops: Op[] = [];
  const store: ObjectStore = storeDouble(inner, {
    put: async (k: string, b: Buffer | string, c?: PutCondition, o?: PutOptions) => {
      const r = await inner.put(k, b, c, o);
      ops.push({ durable: o?.durable !== false, replay: (s) => s.put(k, b) });
      return r;
    },
    delete: async (k) => {
      const r = await inner.delete(k);
      ops.push({ durable: false, replay: (s) => s.delete(k) });
      return r;
    },
    deletePrefix: async (p: string, o?: { keep?: string[] }) => {
      const r = await inner.deletePrefix(p, o);
      ops.push({ durable: false, replay: (s) => s.deletePrefix(p, o) });
      return r;
    },
  });
  return { store, ops };
}

function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const ns = ['ns'];

describe('a crash of the machine', () => {
  for (const [seed, ordered] of [
    [1, true],
    [2, true],
    [3, true],
    [4, true],
    [5, true],
  ] as const) {
    it(`seed ${seed}, ${ordered ? 'metadata order kept (ext4, xfs)' : 'only fsynced files kept since the last commit (btrfs-like)'}: after the crash every list is exact and no acknowledged declare is missing`, async () => {
      const rand = rng(seed);
      const inner = new MemoryObjectStore();
      const { store, ops } = recording(inner);
      const writer = servicesOver(memoryCatalogDeps(store));
      const listers = [servicesOver(memoryCatalogDeps(store)), servicesOver(memoryCatalogDeps(store))];
      await writer.namespaces.create(ctx, ns, {});
      // Acknowledged ops: the op count at the ack, the name, and what it made.
      const acks: Array<{ at: number; startedAt: number; name: string; visible: boolean }> = [];
      const state = new Map<string, boolean>();
      let stop = false;
      const writing = (async () => {
        for (let i = 0; i < 250; i++) {
          const name = `t${Math.floor(rand() * 8)}`;
          const startedAt = ops.length;
          if (state.get(name)) {
            await writer.tables.drop(ctx, [...ns, name]);
            state.set(name, false);
          } else {
            await writer.tables.declare(ctx, [...ns, name], {});
            state.set(name, true);
          }
          acks.push({ at: ops.length, startedAt, name, visible: state.get(name) ?? false });
        }
        stop = true;
      })();
      const listing = listers.map(async (l) => {
        while (!stop) {
          if (rand() < 0.5) await l.tables.list(ctx, ns, {});
          else await pages(l.tables, ns, 3);
          await new Promise((r) => setImmediate(r));
        }
      });
      await Promise.all([writing, ...listing]);
      const failures: string[] = [];
      for (let trial = 0; trial < 60; trial++) {
        const crashAt = 1 + Math.floor(rand() * ops.length);
        let lastDurable = -1;
        for (let i = 0; i < crashAt; i++) if (ops[i]?.durable) lastDurable = i;
        const kept = lastDurable + 1 + Math.floor(rand() * (crashAt - lastDurable));
        const recovered = new MemoryObjectStore();
        if (ordered) for (const op of ops.slice(0, kept)) await op.replay(recovered);
        else {
          // The last periodic commit was 40 changes ago: since, only fsynced puts survive.
          const commit = Math.max(0, crashAt - 40);
          for (const [i, op] of ops.slice(0, crashAt).entries()) if (i < commit || op.durable) await op.replay(recovered);
        }
        const fresh = servicesOver(memoryCatalogDeps(recovered));
        const exists = new Set<string>();
        for (let n = 0; n < 8; n++) {
          const ok = await fresh.tables.exists(ctx, [...ns, `t${n}`], undefined).then(
            () => true,
            () => false,
          );
          if (ok) exists.add(`t${n}`);
        }
        const expected = [...exists].sort();
        const whole = (await fresh.tables.list(ctx, ns, {})).tables;
        const paged = await pages(servicesOver(memoryCatalogDeps(recovered)).tables, ns, 2);
        if (JSON.stringify(whole) !== JSON.stringify(expected)) failures.push(`crash at ${crashAt} kept ${kept}: whole ${whole} vs exists ${expected}`);
        if (JSON.stringify(paged) !== JSON.stringify(expected)) failures.push(`crash at ${crashAt} kept ${kept}: pages ${paged} vs exists ${expected}`);
        // The last acknowledged op on each name before the crash, with no later op on it started before the crash.
        const last = new Map<string, { visible: boolean; at: number }>();
        for (const a of acks) if (a.at <= crashAt) last.set(a.name, a);
        for (const [name, a] of last) {
          const later = acks.find((b) => b.name === name && b.at > a.at && b.startedAt < crashAt);
          if (later) continue;
          if (a.visible && !whole.includes(name))
            failures.push(`crash at ${crashAt} kept ${kept}: acknowledged declare of ${name} missing (exists: ${exists.has(name)})`);
          if (!a.visible && exists.has(name)) failures.push(`crash at ${crashAt} kept ${kept}: acknowledged drop of ${name} undone`);
        }
      }
      expect(failures.slice(0, 6)).toEqual([]);
    });
  }
});
