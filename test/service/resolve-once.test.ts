import { describe, expect, it } from 'vitest';
import { NamespaceService } from '../../src/service/catalog/namespace-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { resolveTable } from '../../src/service/tables/resolved-table.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import type { ObjectStore } from '../../src/store/object-store.js';
import { catalogRootKinds, useCatalogRoot } from '../support/local-catalog.js';
import { manifestBytes } from '../support/manifests.js';
import { readLog } from '../support/store-double.js';

// A request resolves what it touches once: these count the reads of the
// records that resolution is made of.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };

describe.each(catalogRootKinds)('one resolution per request (%s)', (kind) => {
  const root = useCatalogRoot(kind);

  const services = (store: ObjectStore) => {
    const deps = root.deps(store);
    const versions = new TableVersionService(deps, new TransactionLog(store), { leaseMs: 30_000 });
    return { deps, versions, namespaces: new NamespaceService(deps), tables: new TableService(deps, (...a) => versions.coordinatorFor(...a)) };
  };

  it('declare reads its namespace once, its ancestors for the inherited flag, and once more after the put', async () => {
    await services(root.store).namespaces.create(ctx, ['a'], {});
    await services(root.store).namespaces.create(ctx, ['a', 'b'], {});
    const { store, reads } = readLog(root.store);
    await services(store).tables.declare(ctx, ['a', 'b', 't'], {});
    // ['a','b'] resolved, then 'a' and the root for the managed flag, then ['a','b'] after the put.
    expect(reads.filter((k) => k.endsWith('.lance-namespace'))).toEqual([
      'a/b/.lance-namespace',
      'a/.lance-namespace',
      '.lance-namespace',
      'a/b/.lance-namespace',
    ]);
  });

  it('the engine’s version callbacks work on the resolved table: no callback reads its record or lists its directory again', async () => {
    const setup = services(root.store);
    await setup.tables.declare(ctx, ['t'], {});
    const { store, reads } = readLog(root.store);
    const { deps, versions } = services(store);
    const table = await resolveTable(deps, ['t']);
    reads.length = 0;
    const coordinator = versions.coordinatorFor(ctx, table, true);
    expect(await coordinator.latest()).toBeNull();
    await root.store.put('t.lance/_versions/1.manifest-staged', manifestBytes(1));
    expect((await coordinator.create({ version: 1, manifestPath: '_versions/1.manifest-staged' })).version).toBe(1);
    expect((await coordinator.latest())?.version).toBe(1);
    expect(await coordinator.list()).toHaveLength(1);
    expect(reads.filter((k) => k === 't.lance/.lance-table.json' || k === 'list t.lance/')).toEqual([]);
    // Without a write lease, a commit looks again at the table once, holding the slot: one read of the record.
    const unfenced = versions.coordinatorFor(ctx, await resolveTable(deps, ['t']), false);
    reads.length = 0;
    await root.store.put('t.lance/_versions/2.manifest-staged', manifestBytes(2));
    expect((await unfenced.create({ version: 2, manifestPath: '_versions/2.manifest-staged' })).version).toBe(2);
    expect(reads.filter((k) => k === 't.lance/.lance-table.json' || k === 'list t.lance/')).toEqual(['t.lance/.lance-table.json']);
  });
});
