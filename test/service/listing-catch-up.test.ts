import { describe, expect, it } from 'vitest';
import type { CatalogDeps } from '../../src/service/catalog/catalog-deps.js';
import { compareNames } from '../../src/service/catalog/layout.js';
import { COMPACT_AT } from '../../src/service/catalog/listing-catch-up.js';
import { NamespaceService } from '../../src/service/catalog/namespace-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { listAll, type ObjectStore, type PutCondition, type PutOptions } from '../../src/store/object-store.js';
import { type Backend, backends, type TestRoot } from '../support/backends.js';
import { pages } from '../support/listing-services.js';
import { testRootCatalogDeps } from '../support/local-catalog.js';
import { readLog, storeDouble } from '../support/store-double.js';

// The listing snapshot's catch-up (src/service/catalog/listing-catch-up.ts, its invariants in
// listing-snapshot.ts) when the store fails a step: of a change (the pending entry, the stamp's
// deletes, the index, the log key, the pending entry's delete), and of a compaction (the snapshot's
// put, the log's deletes). Each "process" is a CatalogDeps of its own, with its own snapshots; after
// each failure, every other process's next list (whole, paged, and a new process's) shows exactly
// the tables that exist.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };

const depsOf = testRootCatalogDeps;

function servicesOver(deps: CatalogDeps) {
  return {
    namespaces: new NamespaceService(deps),
    tables: new TableService(deps, () => {
      throw new Error('no managed tables here');
    }),
  };
}

type Step = { method: 'put' | 'delete'; key: (k: string) => boolean; nth?: number };

/** `inner`, failing the `nth` (from 1) put or delete that `step` names, once armed; how many it failed. */
function failing(inner: ObjectStore, step: Step) {
  let seen = 0;
  let armed = false;
  const state = { failed: 0, arm: () => (armed = true) };
  const fails = (method: Step['method'], key: string) => {
    if (!armed || method !== step.method || !step.key(key)) return false;
    seen++;
    if (seen !== (step.nth ?? 1)) return false;
    state.failed++;
    return true;
  };
  const store = storeDouble(inner, {
    put: (k: string, b: Buffer | string, c?: PutCondition, o?: PutOptions) =>
      fails('put', k) ? Promise.reject(new Error(`store failed: put ${k}`)) : inner.put(k, b, c, o),
    delete: (k: string, o?: Parameters<ObjectStore['delete']>[1]) =>
      fails('delete', k) ? Promise.reject(new Error(`store failed: delete ${k}`)) : inner.delete(k, o),
  });
  return { store, state };
}

/** A promise and what resolves it. */
function signal(): { promise: Promise<void>; resolve: () => void } {
  const made: { promise?: Promise<void>; resolve: () => void } = { resolve: () => undefined };
  made.promise = new Promise<void>((resolve) => {
    made.resolve = resolve;
  });
  return { promise: made.promise, resolve: () => made.resolve() };
}

const ns = ['ns'];

/** Runs `test` on a new root of `backend` whose namespace ns holds `tables`, with services whose store does not fail. */
async function onNewRoot(backend: Backend, tables: string[], test: (root: TestRoot, healthy: ReturnType<typeof servicesOver>) => Promise<void>): Promise<void> {
  const root = await backend.newRoot();
  try {
    const healthy = servicesOver(depsOf(root));
    await healthy.namespaces.create(ctx, ns, {});
    for (const t of tables) await healthy.tables.declare(ctx, [...ns, t], {});
    await test(root, healthy);
  } finally {
    await root.dispose();
  }
}

const CHANGE_STEPS: Record<string, Step> = {
  'the pending entry': { method: 'put', key: (k) => k.includes('/_catalog/pending/') },
  "the stamp's delete before the change": { method: 'delete', key: (k) => k.endsWith('/tables.stamp'), nth: 1 },
  "the index's entry": { method: 'put', key: (k) => k.includes('/_catalog/tables/') },
  "the index's delete": { method: 'delete', key: (k) => k.includes('/_catalog/tables/') },
  'the log key': { method: 'put', key: (k) => k.includes('/_catalog/tables.log/') },
  "the stamp's delete after the change": { method: 'delete', key: (k) => k.endsWith('/tables.stamp'), nth: 2 },
  "the pending entry's delete": { method: 'delete', key: (k) => k.includes('/_catalog/pending/') },
};

describe.each(backends())('listing snapshot catch-up when the store fails a step, on $name', (backend: Backend) => {
  it.each(Object.keys(CHANGE_STEPS))(
    'a declare and a drop whose store fails %s: every other process lists exactly what exists',
    async (stepName) => {
      await onNewRoot(backend, ['a', 'm', 'z'], async (root, healthy) => {
        const reader = servicesOver(depsOf(root)).tables;
        const { store, state } = failing(root.store, CHANGE_STEPS[stepName] as Step);
        const writer = servicesOver(depsOf(root, store)).tables;
        const exists = (t: string) =>
          healthy.tables.exists(ctx, [...ns, t], undefined).then(
            () => true,
            () => false,
          );
        const check = async (what: string) => {
          const expected = [];
          for (const t of ['a', 'f', 'm', 'z']) if (await exists(t)) expected.push(t);
          const fresh = servicesOver(depsOf(root)).tables;
          expect((await reader.list(ctx, ns, {})).tables, `${what}: the reader's whole list`).toEqual(expected);
          expect(await pages(reader, ns, 1), `${what}: the reader's pages`).toEqual(expected);
          expect((await fresh.list(ctx, ns, {})).tables, `${what}: a new process's list`).toEqual(expected);
          expect((await writer.list(ctx, ns, {})).tables, `${what}: the writer's own list`).toEqual(expected);
        };
        // The reader and the writer keep a current snapshot.
        await check('before');
        state.arm();
        await writer.declare(ctx, [...ns, 'f'], {}).catch(() => undefined);
        await check('after the declare');
        await writer.drop(ctx, [...ns, 'f']).catch(() => undefined);
        await check('after the drop');
        expect(state.failed).toBe(1);
        // Changes after it, with the store well again, are seen by the next list of each.
        await writer.declare(ctx, [...ns, 'f'], {}).catch(() => undefined);
        await check('after a second declare');
        await healthy.tables.drop(ctx, [...ns, 'a']);
        await check('after a drop elsewhere');
      });
    },
    60_000,
  );

  it('a pending entry slow to land, then a change whose settle fails: a list made meanwhile does not outlive it', async () => {
    await onNewRoot(backend, ['a'], async (root) => {
      const reader = servicesOver(depsOf(root)).tables;
      expect((await reader.list(ctx, ns, {})).tables).toEqual(['a']);
      // The writer's pending entry waits until the reader has listed; its settle then fails at the index.
      const atPending = signal();
      const gate = signal();
      const slow = storeDouble(root.store, {
        put: async (k: string, b: Buffer | string, c?: PutCondition, o?: PutOptions) => {
          if (k.includes('/_catalog/pending/')) {
            atPending.resolve();
            await gate.promise;
          }
          if (k.includes('/_catalog/tables/')) throw new Error('store failed');
          return root.store.put(k, b, c, o);
        },
      });
      const writer = servicesOver(depsOf(root, slow)).tables;
      const declared = writer.declare(ctx, [...ns, 'b'], {});
      await atPending.promise;
      expect((await reader.list(ctx, ns, {})).tables).toEqual(['a']);
      gate.resolve();
      // Acknowledged (the settle's failure leaves the pending entry for listings to read the table by).
      await declared;
      expect((await reader.list(ctx, ns, {})).tables).toEqual(['a', 'b']);
      expect(await pages(reader, ns, 1)).toEqual(['a', 'b']);
    });
  });

  it('a catch-up held after its LIST of the log while another process drops a changed table and compacts the log: the drop is not lost', async () => {
    await onNewRoot(backend, ['a', 'm'], async (root) => {
      // The reader's HEAD of the stored snapshot waits, once armed, until the gate opens.
      const atHead = signal();
      const gate = signal();
      let armed = false;
      const held = storeDouble(root.store, {
        head: async (k: string) => {
          if (armed && k.endsWith('/tables.snapshot')) {
            armed = false;
            atHead.resolve();
            await gate.promise;
          }
          return root.store.head(k);
        },
      });
      const reader = servicesOver(depsOf(root, held)).tables;
      expect((await reader.list(ctx, ns, {})).tables).toEqual(['a', 'm']);
      const writerDeps = depsOf(root);
      const writer = servicesOver(writerDeps).tables;
      await writer.declare(ctx, [...ns, 'f'], {});
      // The reader lists the log (f's declare) and reads f's entries; its HEAD waits.
      armed = true;
      const listing = reader.list(ctx, ns, {});
      await atHead.promise;
      // Meanwhile f is dropped and the log compacted past it: its keys gone, a new snapshot stored.
      await writer.drop(ctx, [...ns, 'f']);
      const made = Array.from({ length: COMPACT_AT }, (_, i) => `g${String(i).padStart(3, '0')}`);
      for (const t of made) await writer.declare(ctx, [...ns, t], {});
      await writerDeps.listingIndex.settled();
      const logOfF = (await listAll(root.store, 'ns/_catalog/tables.log/')).objects.filter((o) => o.key.includes('/f/') || o.key.includes('/f.'));
      expect(logOfF).toEqual([]);
      gate.resolve();
      // Concurrent with the drop and the declares: the tables at some instant of it.
      const instants = [['a', 'f', 'm'], ...Array.from({ length: made.length + 1 }, (_, k) => ['a', ...made.slice(0, k), 'm'])];
      expect(instants).toContainEqual((await listing).tables);
      const expected = ['a', ...made, 'm'];
      expect((await reader.list(ctx, ns, {})).tables, "the reader's next list").toEqual(expected);
      expect(await pages(reader, ns, 7), "the reader's pages").toEqual(expected);
      expect((await servicesOver(depsOf(root)).tables.list(ctx, ns, {})).tables, "a new process's list").toEqual(expected);
    });
  });

  it('log keys of every form (flat, a long name nested, nested as written before the flat form) and names that look like log keys: every process lists exactly, and compaction deletes them', async () => {
    await onNewRoot(backend, ['a'], async (root, healthy) => {
      const reader = servicesOver(depsOf(root)).tables;
      expect((await reader.list(ctx, ns, {})).tables).toEqual(['a']);
      const long = `l${'x'.repeat(248)}`;
      const tricky = ['a.b', `t.${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`, long, 'z.'];
      for (const t of tricky) await healthy.tables.declare(ctx, [...ns, t], {});
      // A writer of the nested form only, as a process of the version before the flat one writes.
      const nestedOnly = storeDouble(root.store, {
        put: (k: string, b: Buffer | string, c?: PutCondition, o?: PutOptions) =>
          root.store.put(k.includes('/_catalog/tables.log/') ? k.replace(/\.([0-9a-f-]{36})$/, '/$1') : k, b, c, o),
      });
      const old = servicesOver(depsOf(root, nestedOnly)).tables;
      await old.declare(ctx, [...ns, 'old'], {});
      const logKeys = async () => (await listAll(root.store, 'ns/_catalog/tables.log/')).objects.map((o) => o.key.slice('ns/_catalog/tables.log/'.length));
      const keys = await logKeys();
      expect(keys.filter((k) => k.startsWith('old/'))).toHaveLength(1);
      expect(keys.filter((k) => k.startsWith(`${long}/`))).toHaveLength(1);
      expect(keys.filter((k) => k.startsWith('a.b.'))).toHaveLength(1);
      const all = [...tricky, 'a', 'old'].sort(compareNames);
      const check = async (expected: string[], what: string) => {
        expect((await reader.list(ctx, ns, {})).tables, `${what}: the reader`).toEqual(expected);
        expect(await pages(reader, ns, 2), `${what}: the reader's pages`).toEqual(expected);
        expect((await servicesOver(depsOf(root)).tables.list(ctx, ns, {})).tables, `${what}: a new process`).toEqual(expected);
      };
      await check(all, 'declared');
      await old.drop(ctx, [...ns, long]);
      await healthy.tables.drop(ctx, [...ns, 'a.b']);
      await healthy.tables.drop(ctx, [...ns, 'old']);
      const left = all.filter((t) => t !== long && t !== 'a.b' && t !== 'old');
      await check(left, 'dropped');
      // Enough writes to compact: every form's keys go.
      const made = Array.from({ length: COMPACT_AT }, (_, i) => `c${String(i).padStart(3, '0')}`);
      const compactor = depsOf(root);
      for (const t of made) await servicesOver(compactor).tables.declare(ctx, [...ns, t], {});
      await compactor.listingIndex.settled();
      expect((await logKeys()).filter((k) => !k.startsWith('c'))).toEqual([]);
      await check([...left, ...made].sort(compareNames), 'compacted');
    });
  });

  it('a list after a write of its own process creates the new stamp without reading it first, and is exact whatever other processes did since', async () => {
    await onNewRoot(backend, ['a'], async (root, healthy) => {
      const { store, reads } = readLog(root.store);
      const own = servicesOver(depsOf(root, store)).tables;
      const other = servicesOver(depsOf(root)).tables;
      const stampGets = () => reads.filter((k) => k.endsWith('/tables.stamp')).length;
      expect((await own.list(ctx, ns, {})).tables).toEqual(['a']);
      // Its own write, and nothing else: no GET of the stamp.
      await own.declare(ctx, [...ns, 'b'], {});
      reads.length = 0;
      expect((await own.list(ctx, ns, {})).tables).toEqual(['a', 'b']);
      expect(stampGets()).toBe(0);
      // Warm: the stamp read, as always.
      reads.length = 0;
      expect((await own.list(ctx, ns, {})).tables).toEqual(['a', 'b']);
      expect(stampGets()).toBe(1);
      // Its write, then another process's write.
      await own.declare(ctx, [...ns, 'c'], {});
      await other.declare(ctx, [...ns, 'd'], {});
      expect((await own.list(ctx, ns, {})).tables).toEqual(['a', 'b', 'c', 'd']);
      // Its write, then another process's list (which creates the stamp the create here then finds).
      await own.drop(ctx, [...ns, 'b']);
      expect((await other.list(ctx, ns, {})).tables).toEqual(['a', 'c', 'd']);
      expect((await own.list(ctx, ns, {})).tables).toEqual(['a', 'c', 'd']);
      // Its write, another process's list and write, another's page.
      await own.declare(ctx, [...ns, 'e'], {});
      expect((await other.list(ctx, ns, {})).tables).toEqual(['a', 'c', 'd', 'e']);
      await healthy.tables.drop(ctx, [...ns, 'c']);
      expect(await pages(other, ns, 1)).toEqual(['a', 'd', 'e']);
      expect((await own.list(ctx, ns, {})).tables).toEqual(['a', 'd', 'e']);
      expect(await pages(own, ns, 2)).toEqual(['a', 'd', 'e']);
      expect((await servicesOver(depsOf(root)).tables.list(ctx, ns, {})).tables).toEqual(['a', 'd', 'e']);
    });
  });

  const COMPACTION_STEPS: Record<string, Step> = {
    "the snapshot's put": { method: 'put', key: (k) => k.endsWith('/tables.snapshot') },
    "a log key's delete": { method: 'delete', key: (k) => k.includes('/_catalog/tables.log/'), nth: 3 },
  };
  it.each(Object.keys(COMPACTION_STEPS))(
    'a compaction whose store fails %s: every process lists exactly, and a later one compacts the log',
    async (stepName) => {
      await onNewRoot(backend, ['a'], async (root, healthy) => {
        const other = servicesOver(depsOf(root)).tables;
        expect((await other.list(ctx, ns, {})).tables).toEqual(['a']);
        const { store, state } = failing(root.store, COMPACTION_STEPS[stepName] as Step);
        const compacting = servicesOver(depsOf(root, store)).tables;
        expect((await compacting.list(ctx, ns, {})).tables).toEqual(['a']);
        const made = Array.from({ length: COMPACT_AT }, (_, i) => `c${String(i).padStart(3, '0')}`);
        const first = made.slice(0, -1);
        for (let i = 0; i < first.length; i += 16) await Promise.all(first.slice(i, i + 16).map((t) => healthy.tables.declare(ctx, [...ns, t], {})));
        const logKeys = async () => (await listAll(root.store, 'ns/_catalog/tables.log/')).objects.length;
        expect(await logKeys()).toBe(COMPACT_AT - 1);
        state.arm();
        // The write that makes the log COMPACT_AT keys long compacts it (after its answer), and that fails part-way.
        const compactor = depsOf(root, store);
        await servicesOver(compactor).tables.declare(ctx, [...ns, made[made.length - 1] ?? ''], {});
        await compactor.listingIndex.settled();
        expect(state.failed).toBe(1);
        expect(await logKeys()).toBeGreaterThan(0);
        // The list is still exact, from the snapshot caught up.
        expect((await compacting.list(ctx, ns, {})).tables).toEqual(['a', ...made]);
        for (const service of [other, compacting, servicesOver(depsOf(root)).tables]) {
          expect((await service.list(ctx, ns, {})).tables).toEqual(['a', ...made]);
          expect(await pages(service, ns, 7)).toEqual(['a', ...made]);
        }
        await healthy.tables.drop(ctx, [...ns, 'c005']);
        const after = ['a', ...made.filter((t) => t !== 'c005')];
        for (const service of [other, compacting, servicesOver(depsOf(root)).tables]) expect((await service.list(ctx, ns, {})).tables).toEqual(after);
        // Compacted by then (a later write's compaction stores its snapshot and deletes what it reflects).
        expect(await logKeys()).toBeLessThan(COMPACT_AT);
      });
    },
    60_000,
  );
});
