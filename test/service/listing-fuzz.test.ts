import { describe, expect, it } from 'vitest';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import type { ObjectStore } from '../../src/store/object-store.js';
import { ctx, pages, servicesOver } from '../support/listing-services.js';
import { memoryCatalogDeps } from '../support/local-catalog.js';
import { storeDouble } from '../support/store-double.js';

// Writers on disjoint names and listers in several "processes", every store call delayed by a
// random number of event-loop turns so that catch-ups, compactions and settles interleave. Each
// list must show exactly the state of every name no operation touched while the list ran.

const ns = ['ns'];

function jittery(inner: ObjectStore, rand: () => number): ObjectStore {
  const turns = async () => {
    const n = Math.floor(rand() * 4);
    for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
  };
  const wrap =
    <A extends unknown[], R>(f: (...a: A) => Promise<R>) =>
    async (...a: A): Promise<R> => {
      await turns();
      const r = await f(...a);
      await turns();
      return r;
    };
  return storeDouble(inner, {
    get: wrap(inner.get.bind(inner)),
    head: wrap(inner.head.bind(inner)),
    put: wrap(inner.put.bind(inner)),
    delete: wrap(inner.delete.bind(inner)),
    list: wrap(inner.list.bind(inner)) as ObjectStore['list'],
  });
}

/** Fails a share of the puts and deletes under the namespace's _catalog/ (the index, the log, the stamp, the snapshot). */
function flaky(inner: ObjectStore, rand: () => number, share: number, stats: Record<string, number>): ObjectStore {
  const fails = (k: string) => k.startsWith('ns/_catalog/') && rand() < share;
  return storeDouble(inner, {
    put: (k, b, c, o) => {
      if (k.endsWith('tables.snapshot')) stats.snapshotPuts = (stats.snapshotPuts ?? 0) + 1;
      if (fails(k)) return Promise.reject(new Error(`store failed: put ${k}`));
      return inner.put(k, b, c, o);
    },
    delete: (k, o) => {
      if (k.includes('tables.log/')) stats.logDeletes = (stats.logDeletes ?? 0) + 1;
      if (fails(k)) return Promise.reject(new Error(`store failed: delete ${k}`));
      return inner.delete(k, o);
    },
  });
}

function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

type Services = ReturnType<typeof servicesOver>;

/** What the writers did: each name's state, operations in flight and begun on it, and what the listers found wrong. */
interface World {
  state: Map<string, boolean>;
  busy: Map<string, number>;
  touched: Map<string, number>;
  failures: string[];
  stopped: () => boolean;
}

/**
 * Listers that list until the writers stop, whole or by pages of a random size (`list` with
 * pageSize null: whole), each list checked against the state of every name no operation touched
 * while it ran; a list that fails (the store failing) is not checked.
 */
function checkedListers(
  listers: Services[],
  world: World,
  rand: () => number,
  list: (l: Services, pageSize: number | null) => Promise<string[]>,
): Promise<void>[] {
  const { state, busy, touched, failures } = world;
  return listers.map(async (l, li) => {
    while (!world.stopped()) {
      const before = new Map(state);
      const touchedBefore = new Map(touched);
      const busyBefore = new Set([...busy].filter(([, n]) => n > 0).map(([k]) => k));
      const whole = rand() < 0.5;
      let names: string[];
      try {
        names = await list(l, whole ? null : 1 + Math.floor(rand() * 5));
      } catch {
        continue;
      }
      for (const [name, was] of before) {
        if (busyBefore.has(name) || touched.get(name) !== touchedBefore.get(name)) continue;
        if (names.includes(name) !== was)
          failures.push(`lister ${li} (${whole ? 'whole' : 'pages'}): ${name} should be ${was ? 'listed' : 'absent'}: got ${names.join(',')}`);
      }
    }
  });
}

describe('interleaved writers and listers', () => {
  for (const [seed, share] of [
    [1, 0],
    [2, 0],
    [3, 0],
    [4, 0.05],
    [5, 0.1],
    [6, 0.1],
    [7, 0.2],
    [8, 0.05],
  ] as const) {
    it(`seed ${seed}, store failing ${share}`, async () => {
      const stats: Record<string, number> = {};
      const rand = rng(seed);
      const store = new MemoryObjectStore();
      const setup = servicesOver(memoryCatalogDeps(store));
      await setup.namespaces.create(ctx, ns, {});
      const WRITERS = 3;
      const NAMES_PER_WRITER = 4;
      const state = new Map<string, boolean>();
      const busy = new Map<string, number>(); // ops in flight
      const touched = new Map<string, number>(); // op count (start), to detect overlap
      const writers = Array.from({ length: WRITERS }, () => servicesOver(memoryCatalogDeps(flaky(jittery(store, rand), rand, share, stats))));
      const listers = Array.from({ length: 3 }, () => servicesOver(memoryCatalogDeps(flaky(jittery(store, rand), rand, share, stats))));
      let stop = false;
      const failures: string[] = [];
      const writing = writers.map(async (w, wi) => {
        for (let op = 0; op < 120; op++) {
          const name = `w${wi}n${Math.floor(rand() * NAMES_PER_WRITER)}`;
          busy.set(name, (busy.get(name) ?? 0) + 1);
          touched.set(name, (touched.get(name) ?? 0) + 1);
          try {
            if (state.get(name)) {
              await w.tables.drop(ctx, [...ns, name]);
              state.set(name, false);
            } else {
              await w.tables.declare(ctx, [...ns, name], {});
              state.set(name, true);
            }
          } catch {
            // failed before its change (a failure in its settle is swallowed): the state is unchanged
          } finally {
            busy.set(name, (busy.get(name) ?? 1) - 1);
          }
        }
      });
      const listing = checkedListers(listers, { state, busy, touched, failures, stopped: () => stop }, rand, async (l, pageSize) =>
        pageSize === null ? (await l.tables.list(ctx, ns, {})).tables : pages(l.tables, ns, pageSize),
      );
      await Promise.all(writing);
      stop = true;
      await Promise.all(listing);
      console.log(`seed ${seed}: ${JSON.stringify(stats)}`);
      expect(failures.slice(0, 5)).toEqual([]);
      // Settled: every process lists exactly.
      const expected = [...state]
        .filter(([, v]) => v)
        .map(([k]) => k)
        .sort();
      for (const l of [...listers.map(() => servicesOver(memoryCatalogDeps(store))), servicesOver(memoryCatalogDeps(store))]) {
        expect([...(await l.tables.list(ctx, ns, {})).tables].sort()).toEqual(expected);
        expect([...(await pages(l.tables, ns, 3))].sort()).toEqual(expected);
      }
    });
  }
});

describe('interleaved declares, drops and renames across two namespaces', () => {
  for (const [seed, share] of [
    [11, 0],
    [12, 0],
    [13, 0.05],
    [14, 0.1],
    [15, 0.1],
    [16, 0],
  ] as const) {
    it(`seed ${seed}, store failing ${share}`, async () => {
      const stats: Record<string, number> = {};
      const rand = rng(seed);
      const store = new MemoryObjectStore();
      const setup = servicesOver(memoryCatalogDeps(store));
      await setup.namespaces.create(ctx, ns, {});
      await setup.namespaces.create(ctx, ['ns2'], {});
      const WRITERS = 3;
      const NAMES_PER_WRITER = 4;
      const state = new Map<string, boolean>();
      const busy = new Map<string, number>(); // ops in flight
      const touched = new Map<string, number>(); // op count (start), to detect overlap
      const writers = Array.from({ length: WRITERS }, () => servicesOver(memoryCatalogDeps(flaky(jittery(store, rand), rand, share, stats))));
      const listers = Array.from({ length: 3 }, () => servicesOver(memoryCatalogDeps(flaky(jittery(store, rand), rand, share, stats))));
      let stop = false;
      const failures: string[] = [];
      const writing = writers.map(async (w, wi) => {
        for (let op = 0; op < 120; op++) {
          const pick = () => `${rand() < 0.5 ? 'ns' : 'ns2'}|w${wi}n${Math.floor(rand() * NAMES_PER_WRITER)}`;
          const name = pick();
          const other = pick();
          const idOf = (n: string) => n.split('|') as [string, string];
          const involved = [name, other];
          for (const n of involved) {
            busy.set(n, (busy.get(n) ?? 0) + 1);
            touched.set(n, (touched.get(n) ?? 0) + 1);
          }
          try {
            if (state.get(name) && !state.get(other) && other !== name && rand() < 0.5) {
              const [fromNs, fromT] = idOf(name);
              const [toNs, toT] = idOf(other);
              await w.tables.rename(ctx, [fromNs, fromT], { new_table_name: toT, new_namespace_id: [toNs] });
              state.set(name, false);
              state.set(other, true);
              stats.renames = (stats.renames ?? 0) + 1;
            } else if (state.get(name)) {
              await w.tables.drop(ctx, idOf(name));
              state.set(name, false);
            } else {
              await w.tables.declare(ctx, idOf(name), {});
              state.set(name, true);
            }
          } catch (e) {
            stats.opFailures = (stats.opFailures ?? 0) + 1;
            if (share === 0) throw e;
          } finally {
            for (const n of involved) busy.set(n, (busy.get(n) ?? 1) - 1);
          }
        }
      });
      const listing = checkedListers(listers, { state, busy, touched, failures, stopped: () => stop }, rand, async (l, pageSize) => {
        const listNs = async (n: string) =>
          (pageSize === null ? (await l.tables.list(ctx, [n], {})).tables : await pages(l.tables, [n], pageSize)).map((t) => `${n}|${t}`);
        return [...(await listNs('ns')), ...(await listNs('ns2'))];
      });
      await Promise.all(writing);
      stop = true;
      await Promise.all(listing);
      console.log(`seed ${seed}: ${JSON.stringify(stats)}`);
      expect(failures.slice(0, 5)).toEqual([]);
      // Settled: every process lists exactly.
      const expected = [...state]
        .filter(([, v]) => v)
        .map(([k]) => k)
        .sort();
      for (const l of [...listers, servicesOver(memoryCatalogDeps(store))]) {
        const all = [
          ...(await l.tables.list(ctx, ns, {})).tables.map((t) => `ns|${t}`),
          ...(await l.tables.list(ctx, ['ns2'], {})).tables.map((t) => `ns2|${t}`),
        ];
        expect(all.sort()).toEqual(expected);
      }
    });
  }
});
