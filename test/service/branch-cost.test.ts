import { describe, expect, it } from 'vitest';
import type { LanceEngine } from '../../src/engine/lance-engine.js';
import { branchRefKey } from '../../src/service/branches/branch-refs.js';
import { BranchService } from '../../src/service/branches/branch-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { DataTables } from '../../src/service/data/data-tables.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import type { ObjectStore } from '../../src/store/object-store.js';
import { catalogRootKinds, localCatalogDeps, noEngine, useCatalogRoot, useLocalRoot } from '../support/local-catalog.js';
import { manifestBytes } from '../support/manifests.js';
import { readLog } from '../support/store-double.js';

// What a branch costs in store calls: a page of ListTableBranches is one LIST of the refs and one
// GET per branch of the page, whatever the number of branches; a request on a branch reads its ref
// once. The figures are printed; the calls are pinned.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };

const ref = (parentVersion: number) =>
  JSON.stringify({ parentBranch: null, identifier: { version_mapping: [] }, parentVersion, createAt: 1795795132, manifestSize: 423, metadata: {} });

describe.each(catalogRootKinds)('branch costs (%s)', (kind) => {
  const root = useCatalogRoot(kind);

  const services = (store: ObjectStore) => {
    const deps = root.deps(store);
    const versions = new TableVersionService(deps, new TransactionLog(store), { leaseMs: 30_000 });
    const data = new DataTables(deps, versions);
    return { data, branches: new BranchService(data), tables: new TableService(deps, (...a) => versions.coordinatorFor(...a)) };
  };

  it('ListTableBranches of 1,000 branches: a page is one LIST of the refs and one GET per branch of the page', async () => {
    await services(root.store).tables.declare(ctx, ['t'], {});
    const dir = { store: root.store, key: 't.lance/', owned: true };
    const names = Array.from({ length: 1000 }, (_, i) => `b${String(i).padStart(4, '0')}`);
    for (let i = 0; i < names.length; i += 100) await Promise.all(names.slice(i, i + 100).map((n) => root.store.put(branchRefKey(dir, n), ref(1))));

    const { store, reads } = readLog(root.store);
    const { branches } = services(store);
    const refsOf = (r: string[]) => ({
      lists: r.filter((k) => k === 'list t.lance/_refs/branches/').length,
      gets: r.filter((k) => k.startsWith('t.lance/_refs/branches/')).length,
    });
    let started = performance.now();
    const first = await branches.list(ctx, ['t'], { limit: 100 });
    const pageMs = performance.now() - started;
    expect(Object.keys(first.branches)).toEqual(names.slice(0, 100));
    expect(refsOf(reads)).toEqual({ lists: 1, gets: 100 });
    reads.length = 0;
    const second = await branches.list(ctx, ['t'], { limit: 100, pageToken: first.page_token });
    expect(Object.keys(second.branches)).toEqual(names.slice(100, 200));
    expect(refsOf(reads)).toEqual({ lists: 1, gets: 100 });
    reads.length = 0;
    started = performance.now();
    const all = await branches.list(ctx, ['t'], {});
    const allMs = performance.now() - started;
    expect(Object.keys(all.branches)).toHaveLength(1000);
    expect(all.page_token).toBeNull();
    expect(refsOf(reads)).toEqual({ lists: 1, gets: 1000 });
    console.log(`ListTableBranches on ${kind}: a page of 100 of 1,000 branches ${pageMs.toFixed(1)} ms; all 1,000 in one page ${allMs.toFixed(1)} ms`);
  });

  it('a request on a branch reads its ref once', async () => {
    await services(root.store).tables.declare(ctx, ['t'], {});
    await root.store.put(branchRefKey({ store: root.store, key: 't.lance/', owned: true }, 'dev'), ref(1));
    const { store, reads } = readLog(root.store);
    const opened = await services(store).data.open(ctx, ['t'], { allowDeclared: true, branch: 'dev' });
    expect(opened.branch?.name).toBe('dev');
    expect(opened.versionsDir.key).toBe('t.lance/tree/dev/');
    expect(reads.filter((k) => k.startsWith('t.lance/_refs/'))).toEqual(['t.lance/_refs/branches/dev.json']);
    await expect(services(store).data.open(ctx, ['t'], { allowDeclared: true, branch: 'nope' })).rejects.toMatchObject({ code: 22 });
  });
});

describe('what a fork costs', () => {
  const root = useLocalRoot('lance-ns-fork-cost-');

  it('a fork of a new name reads its ref and lists its tree, and never lists the refs of the other branches', async () => {
    const dir = { store: root.store, key: 't.lance/', owned: true };
    // The engine's part (Lance's clone and ref) is not what is measured here: its double writes the ref.
    const engine = new Proxy(noEngine, {
      get: (target, name) =>
        name === 'branches'
          ? { create: async (_at: unknown, branch: string) => void (await root.store.put(branchRefKey(dir, branch), ref(1))) }
          : Reflect.get(target, name),
    }) as LanceEngine;
    const build = (store: ObjectStore) => {
      const deps = localCatalogDeps(store, root.dir, engine);
      const versions = new TableVersionService(deps, new TransactionLog(store), { leaseMs: 30_000 });
      return { branches: new BranchService(new DataTables(deps, versions)), versions, tables: new TableService(deps, (...a) => versions.coordinatorFor(...a)) };
    };
    const setup = build(root.store);
    await setup.tables.declare(ctx, ['t'], {});
    await root.store.put('t.lance/_versions/1.manifest-staged', manifestBytes(1));
    await setup.versions.create(ctx, ['t'], { version: 1, manifest_path: root.store.objectPath('t.lance/_versions/1.manifest-staged') });
    for (let i = 0; i < 50; i++) await root.store.put(branchRefKey(dir, `b${i}`), ref(1));

    const { store, reads } = readLog(root.store);
    await build(store).branches.create(ctx, ['t'], { name: 'dev' });
    expect(reads.filter((k) => k.includes('_refs/') || k.includes('tree/'))).toEqual(['t.lance/_refs/branches/dev.json', 'list t.lance/tree/dev/']);
    // A name with leftovers in its tree (a delete killed half-way) lists the refs nested in it alone.
    await root.store.put('t.lance/tree/old/_versions/1.manifest', manifestBytes(1));
    reads.length = 0;
    await build(store).branches.create(ctx, ['t'], { name: 'old' });
    expect(reads.filter((k) => k.startsWith('list t.lance/_refs/'))).toEqual(['list t.lance/_refs/branches/old%2F']);
    expect(await root.store.head('t.lance/tree/old/_versions/1.manifest')).toBeNull();
  });
});
