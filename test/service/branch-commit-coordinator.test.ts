import { describe, expect, it } from 'vitest';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { resolveTable } from '../../src/service/tables/resolved-table.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import { localCatalogDeps, useLocalRoot } from '../support/local-catalog.js';
import { manifestBytes } from '../support/manifests.js';

// The engine's commit path on a branch (coordinatorFor with a branch): what a write of the
// service's own on a branch of a managed table commits through. Every callback works on the
// branch's own history; main does not move.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };

describe("the engine's commit coordinator on a branch", () => {
  const root = useLocalRoot('lance-ns-branch-coordinator-');

  it('reads and commits the branch’s own history, as a client committing on that branch would', async () => {
    const deps = localCatalogDeps(root.store, root.dir);
    const versions = new TableVersionService(deps, new TransactionLog(root.store), { leaseMs: 30_000 });
    const tables = new TableService(deps, (...a) => versions.coordinatorFor(...a));
    await tables.declare(ctx, ['t'], {});
    const stage = async (v: number, line: string) => {
      const key = `t.lance/${line}_versions/${v}.manifest-staged`;
      await root.store.put(key, manifestBytes(v));
      return root.store.objectPath(key);
    };
    await versions.create(ctx, ['t'], { version: 1, manifest_path: await stage(1, '') });
    await root.store.put('t.lance/_refs/branches/dev.json', JSON.stringify({ parentVersion: 1, createAt: 1, manifestSize: 1 }));

    const onDev = versions.coordinatorFor(ctx, await resolveTable(deps, ['t']), false, 'dev');
    expect(await onDev.latest()).toBeNull();
    const created = await onDev.create({ version: 1, manifestPath: await stage(1, 'tree/dev/'), namingScheme: 'V2' });
    expect(created.manifestPath).toContain('t.lance/tree/dev/_versions/');
    await expect(onDev.create({ version: 3, manifestPath: await stage(3, 'tree/dev/') })).rejects.toMatchObject({ kind: 'conflict' });
    expect((await onDev.create({ version: 2, manifestPath: await stage(2, 'tree/dev/') })).version).toBe(2);
    expect((await onDev.latest())?.version).toBe(2);
    expect((await onDev.list()).map((v) => v.version)).toEqual([1, 2]);
    expect((await onDev.describe(1))?.manifestPath).toBe(created.manifestPath);
    await versions.settled();

    const listed = async (branch?: string) => (await versions.list(ctx, ['t'], { branch })).versions.map((v) => v.version);
    expect(await listed('dev')).toEqual([1, 2]);
    expect(await listed()).toEqual([1]);
    expect((await versions.coordinatorFor(ctx, await resolveTable(deps, ['t']), false).latest())?.version).toBe(1);
  });
});
