import { describe, expect, it } from 'vitest';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import { useCatalogRoot } from '../support/local-catalog.js';
import { manifestBytes } from '../support/manifests.js';

// Lance's hint on a local disk: the service places it only where the writer does not keep it
// (TableVersions.hintWanted). Whoever keeps it, it is never more than one version behind, and the
// latest version is found exactly either way.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };
const HINT = 't.lance/_versions/latest_version_hint.json';

describe("Lance's hint after single commits (local disk)", () => {
  const root = useCatalogRoot('local');

  async function service() {
    const deps = root.deps(root.store);
    const versions = new TableVersionService(deps, new TransactionLog(root.store), { leaseMs: 30_000 });
    const tables = new TableService(deps, (...a) => versions.coordinatorFor(...a));
    await tables.declare(ctx, ['t'], {});
    const commit = async (v: number) => {
      await root.store.put(`t.lance/_versions/${v}.manifest-staged`, manifestBytes(v));
      await versions.create(ctx, ['t'], { version: v, manifest_path: `_versions/${v}.manifest-staged`, naming_scheme: 'V2' });
      await versions.settled();
    };
    const hint = async () => {
      const object = await root.store.get(HINT);
      return object ? (JSON.parse(object.body.toString('utf8')) as { version: number }).version : undefined;
    };
    const latest = async () => (await versions.describe(ctx, ['t'], undefined)).version.version;
    return { commit, hint, latest };
  }

  it('is kept at most one version behind for a writer that never places it', async () => {
    const { commit, hint, latest } = await service();
    for (let v = 1; v <= 9; v++) {
      await commit(v);
      expect(await hint()).toBeGreaterThanOrEqual(v - 1);
      expect(await latest()).toBe(v);
    }
  });

  it('is left to a writer that places it itself after each commit, as Lance does', async () => {
    const { commit, hint, latest } = await service();
    for (let v = 1; v <= 5; v++) {
      await commit(v);
      // The service placed the first (there was none); after that, only the writer's own remain.
      expect(await hint()).toBe(v === 1 ? 1 : v - 1);
      await root.store.put(HINT, JSON.stringify({ version: v }));
      expect(await latest()).toBe(v);
    }
  });

  it('is placed again when the one found is stale or unreadable', async () => {
    const { commit, hint } = await service();
    await commit(1);
    await commit(2);
    await commit(3); // the hint was 1: placed
    expect(await hint()).toBe(3);
    await root.store.put(HINT, 'not json');
    await commit(4);
    expect(await hint()).toBe(4);
  });
});
