import pLimit from 'p-limit';
import { describe, expect, it } from 'vitest';
import { manifestFileName } from '../../src/engine/lance-format/manifest-names.js';
import { TableVersions } from '../../src/service/versions/dataset-versions.js';
import type { ObjectStore } from '../../src/store/object-store.js';
import { storeBackends } from '../support/backends.js';

/** Wraps a store and counts the calls of each method. */
function counting(inner: ObjectStore): { store: ObjectStore; calls: Record<string, number> } {
  const calls: Record<string, number> = {};
  const store = new Proxy(inner, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls[String(prop)] = (calls[String(prop)] ?? 0) + 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store, calls };
}

async function writeVersions(store: ObjectStore, dir: string, count: number, scheme: 'V1' | 'V2'): Promise<void> {
  const limit = pLimit(32);
  await Promise.all(Array.from({ length: count }, (_, i) => limit(() => store.put(`${dir}_versions/${manifestFileName(i + 1, scheme)}`, `m${i + 1}`))));
}

// The latest version of a V2 table is found with the same store calls whatever its history length.
describe.each(storeBackends())('latest-version lookup on $name', (backend) => {
  it('costs the same store calls at 10 and at 2,000 versions (V2), and is exact for V1', async () => {
    const root = await backend.newRoot();
    try {
      const sizes = backend.name === 'local' || backend.name === 'memory' ? [10, 2000] : [10, 400];
      const costs: Array<Record<string, number>> = [];
      for (const n of sizes) {
        const dir = `v2-${n}/t.lance/`;
        await writeVersions(root.store, dir, n, 'V2');
        const { store, calls } = counting(root.store);
        const latest = await new TableVersions({ store, key: dir, owned: true }).latest();
        expect(latest?.version).toBe(n);
        costs.push(calls);
      }
      expect(costs[1]).toEqual(costs[0]);
      expect(Object.values(costs[0] ?? {}).reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(4);
      // Where a LIST costs the page (object stores), the latest V2 version is one short LIST and nothing else.
      if (!root.store.listsWholeDirectory) expect(costs[0]).toEqual({ list: 1 });
      // V1 names do not sort by version; the lookup is still exact (hint, first page, upward probe).
      await writeVersions(root.store, 'v1/t.lance/', 250, 'V1');
      expect((await new TableVersions({ store: root.store, key: 'v1/t.lance/', owned: true }).latest())?.version).toBe(250);
      await root.store.put('v1/t.lance/_versions/latest_version_hint.json', JSON.stringify({ version: 120 }));
      expect((await new TableVersions({ store: root.store, key: 'v1/t.lance/', owned: true }).latest())?.version).toBe(250);
    } finally {
      await root.dispose();
    }
  });
});
