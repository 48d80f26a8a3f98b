import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersions } from '../../src/service/versions/dataset-versions.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import { useCatalogRoot } from '../support/local-catalog.js';
import { manifestBytes } from '../support/manifests.js';

// Lance's hint is written after a commit's answer (after-answer.ts), and nothing stops a rename
// from moving the table in between. The late hint must not make the old name's directory again:
// a directory holding only a hint would make the name look taken to a rename onto it.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };

describe('a hint written after its table moved (local disk)', () => {
  const root = useCatalogRoot('local');

  it('leaves nothing at the old name, and the name can be taken by a rename', async () => {
    const deps = root.deps(root.store);
    const versions = new TableVersionService(deps, new TransactionLog(root.store), { leaseMs: 30_000 });
    const tables = new TableService(deps, (...a) => versions.coordinatorFor(...a));
    await tables.declare(ctx, ['t'], {});
    await root.store.put('t.lance/_versions/1.manifest-staged', manifestBytes(1));
    await versions.create(ctx, ['t'], { version: 1, manifest_path: '_versions/1.manifest-staged' });
    await versions.settled();
    const old = new TableVersions({ store: root.store, key: 't.lance/', owned: true });

    await tables.rename(ctx, ['t'], { new_table_name: 'moved' });
    // The hint of a version committed just before the rename, arriving after it.
    await old.writeHint(1);
    const rootDir = path.dirname(root.store.location('t.lance'));
    expect((await fs.readdir(rootDir)).filter((name) => name.startsWith('t.lance'))).toEqual([]);

    await tables.declare(ctx, ['u'], {});
    await tables.rename(ctx, ['u'], { new_table_name: 't' });
    expect(await tables.exists(ctx, ['t'], undefined)).toBeUndefined();
  });
});
