import fsSync from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tableRefOf } from '../../src/service/catalog/layout.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import { localCatalogDeps, useLocalRoot } from '../support/local-catalog.js';
import { manifestBytes } from '../support/manifests.js';

// On a local disk a version slot's reservation file is kept under a hidden name once released,
// for the next claim (src/store/local-spare-files.ts). A hidden file left in a table's directory
// would keep the directory, and a name whose directory stays looks taken: a drop takes them too.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };

describe('reservation files kept for reuse, and drops (local disk)', () => {
  const root = useLocalRoot('lance-ns-spares-');
  /** The catalog's services over the root, as one process has them. */
  const services = () => {
    const deps = localCatalogDeps(root.store, root.dir);
    const versions = new TableVersionService(deps, new TransactionLog(root.store), { leaseMs: 30_000 });
    return { deps, versions, tables: new TableService(deps, (...a) => versions.coordinatorFor(...a)) };
  };

  it('commits reuse one reservation file; a drop leaves none of them behind, and the name can be declared again', async () => {
    const { versions, tables } = services();
    await tables.declare(ctx, ['t'], {});
    const reservations = path.join(root.dir, 't.lance/_catalog/reservations');
    const inodes = new Set<number>();
    for (let v = 1; v <= 4; v++) {
      await root.store.put(`t.lance/_versions/${v}.manifest-staged`, manifestBytes(v));
      await versions.create(ctx, ['t'], { version: v, manifest_path: `_versions/${v}.manifest-staged`, naming_scheme: 'V2' });
      await versions.settled();
      const hidden = fsSync.readdirSync(reservations);
      expect(hidden.every((n) => n.includes('.~tmp~'))).toBe(true);
      for (const n of hidden) inodes.add(fsSync.statSync(path.join(reservations, n)).ino);
      // A kernel clock tick, so that the file may be written again (its mtime must move).
      await new Promise((r) => setTimeout(r, 15));
    }
    expect(inodes.size).toBe(1);

    await tables.drop(ctx, ['t']);
    // Nothing but the drop's marker stays (see table-fences.ts).
    expect(fsSync.readdirSync(path.join(root.dir, 't.lance'), { recursive: true })).toEqual(['.lance-deregistered']);
    await tables.declare(ctx, ['t'], {});
    await root.store.put('t.lance/_versions/1.manifest-staged', manifestBytes(1));
    await versions.create(ctx, ['t'], { version: 1, manifest_path: '_versions/1.manifest-staged', naming_scheme: 'V2' });
    expect((await versions.describe(ctx, ['t'], undefined)).version.version).toBe(1);
    await versions.stop();
  });

  it('write leases reuse one file in a directory kept for the next writer; a failed write takes what its lease made; a drop leaves none of it', async () => {
    const { deps, versions, tables } = services();
    await tables.declare(ctx, ['w'], {});
    const writers = path.join(root.dir, 'w.lance/_catalog/writers');
    const inodes = new Set<number>();
    for (let i = 0; i < 4; i++) {
      await deps.fences.whileWritingTo(tableRefOf(['w']), 'test', async () => {
        for (const n of fsSync.readdirSync(writers)) if (!n.includes('.~tmp~')) inodes.add(fsSync.statSync(path.join(writers, n)).ino);
      });
      // Kept for the next writer, with the spare of the lease's file in it.
      expect(fsSync.readdirSync(writers).every((n) => n.includes('.~tmp~'))).toBe(true);
      await new Promise((r) => setTimeout(r, 15)); // a kernel clock tick: the file's mtime must move
    }
    expect(inodes.size).toBe(1);
    // A write that fails (here as one to a missing table does, after its lease) leaves no directory.
    const missing = deps.fences.whileWritingTo(tableRefOf(['ghost']), 'test', () => Promise.reject(new Error('no such table')));
    await expect(missing).rejects.toThrow('no such table');
    expect(fsSync.existsSync(path.join(root.dir, 'ghost.lance'))).toBe(false);

    await tables.drop(ctx, ['w']);
    expect(fsSync.readdirSync(path.join(root.dir, 'w.lance'), { recursive: true })).toEqual(['.lance-deregistered']);
    await versions.stop();
  });
});
