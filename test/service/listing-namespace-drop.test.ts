import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LocalObjectStore } from '../../src/store/local-store.js';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import { compareKeys, type ObjectStore, type PutCondition, type PutOptions } from '../../src/store/object-store.js';
import { ctx, keysUnder, pages, servicesOver, signal } from '../support/listing-services.js';
import { localCatalogDeps, memoryCatalogDeps } from '../support/local-catalog.js';
import { storeDouble } from '../support/store-double.js';

// The log of changes makes a stored snapshot a base that a stale listing trusts, whatever its
// stamp. A namespace drop deletes `<ns>/_catalog/` as a whole; what if part of it goes, or a slow
// maker's snapshot lands after it went?

const ns = ['ns'];

describe('namespace drops and the listing log', () => {
  it('a drop whose deletion of _catalog/ stops after the log keys (S3 deletes in key order, 1,000 a batch): the namespace stays, and lists a dropped table', async () => {
    const store = new MemoryObjectStore();
    const healthy = servicesOver(memoryCatalogDeps(store));
    await healthy.namespaces.create(ctx, ns, {});
    await healthy.tables.declare(ctx, [...ns, 't'], {});
    // A whole listing stores a snapshot {t}.
    expect((await healthy.tables.list(ctx, ns, {})).tables).toEqual(['t']);
    await healthy.tables.drop(ctx, [...ns, 't']);
    // The drop of ns (Restrict: it is empty) deletes its catalog as S3's deletePrefix does, in key
    // order, and the store fails after the batch that held the log keys (the drop deleted the snapshots and the ready marker first).
    const failingDelete = storeDouble(store, {
      deletePrefix: async (prefix: string, options?: { keep?: string[] }) => {
        if (prefix !== 'ns/_catalog/') return store.deletePrefix(prefix, options);
        const keys = (await keysUnder(store, prefix)).sort(compareKeys);
        for (const k of keys) if (compareKeys(k, 'ns/_catalog/tables.log0') < 0) await store.delete(k);
        throw new Error('store failed: DeleteObjects (second batch)');
      },
    });
    const dropper = servicesOver(memoryCatalogDeps(failingDelete));
    await expect(dropper.namespaces.drop(ctx, ns, {})).rejects.toThrow(/store failed/);
    // The namespace is back (the record the drop replaced), and holds no table.
    await healthy.namespaces.describe(ctx, ns);
    await expect(healthy.tables.exists(ctx, [...ns, 't'], undefined)).rejects.toThrow();
    const fresh = servicesOver(memoryCatalogDeps(store));
    expect((await fresh.tables.list(ctx, ns, {})).tables, 'a new process lists ns whole').toEqual([]);
  });

  it("a listing's rebuilt snapshot that lands after the namespace's drop becomes the base of the namespace created again", async () => {
    const store = new MemoryObjectStore();
    const healthy = servicesOver(memoryCatalogDeps(store));
    await healthy.namespaces.create(ctx, ns, {});
    await healthy.tables.declare(ctx, [...ns, 't'], {});
    // A listing (a fresh process: no snapshot stored yet, so it rebuilds) whose snapshot put is slow.
    const { slow, atPut, gate } = snapshotPutHeld(store);
    const lister = servicesOver(memoryCatalogDeps(slow));
    const listed = lister.tables.list(ctx, ns, {});
    await atPut.promise;
    // Meanwhile the namespace is dropped with its table.
    await healthy.namespaces.drop(ctx, ns, { behavior: 'Cascade' });
    gate.resolve();
    expect((await listed).tables).toEqual(['t']); // concurrent with the drop: either answer is right
    // Left behind in the dropped namespace:
    const leftover = await keysUnder(store, 'ns/');
    // The namespace is created again, empty.
    await healthy.namespaces.create(ctx, ns, {});
    const fresh = servicesOver(memoryCatalogDeps(store));
    expect((await fresh.tables.list(ctx, ns, {})).tables, `a new process lists the new ns whole (left behind: ${leftover.join(', ')})`).toEqual([]);
    expect(await pages(fresh.tables, ns, 1), 'and by pages').toEqual([]);
  });

  it('on a local disk too, when the namespace is created again before the slow snapshot lands', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'review-s6b-'));
    try {
      const store = new LocalObjectStore(dir);
      await store.init();
      const depsOf = (s: ObjectStore) => localCatalogDeps(s, dir);
      const healthy = servicesOver(depsOf(store));
      await healthy.namespaces.create(ctx, ns, {});
      await healthy.tables.declare(ctx, [...ns, 't'], {});
      const { slow, atPut, gate } = snapshotPutHeld(store);
      const lister = servicesOver(depsOf(slow));
      const listed = lister.tables.list(ctx, ns, {});
      await atPut.promise;
      await healthy.namespaces.drop(ctx, ns, { behavior: 'Cascade' });
      await healthy.namespaces.create(ctx, ns, {});
      gate.resolve();
      expect((await listed).tables).toEqual(['t']);
      const fresh = servicesOver(depsOf(store));
      expect((await fresh.tables.list(ctx, ns, {})).tables, 'a new process lists the new ns whole').toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/** `store` with its put of ns's tables snapshot held: `atPut` once it is reached, held until `gate` resolves. */
function snapshotPutHeld(store: ObjectStore) {
  const atPut = signal();
  const gate = signal();
  const slow: ObjectStore = storeDouble(store, {
    put: async (k: string, b: Buffer | string, c?: PutCondition, o?: PutOptions) => {
      if (k === 'ns/_catalog/tables.snapshot') {
        atPut.resolve();
        await gate.promise;
      }
      return store.put(k, b, c, o);
    },
  });
  return { slow, atPut, gate };
}
