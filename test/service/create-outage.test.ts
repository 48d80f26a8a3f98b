import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LancedbEngine } from '../../src/engine/lancedb/engine.js';
import { ErrorCode, NamespaceError } from '../../src/model/errors.js';
import { NamespaceService } from '../../src/service/catalog/namespace-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { StoreUnavailableError } from '../../src/store/object-store.js';
import { peopleStream, readRows } from '../support/arrow-data.js';
import { localCatalogDeps, useLocalRoot, withSettings } from '../support/local-catalog.js';
import { storeDouble } from '../support/store-double.js';

// A create whose data write fails while the store cannot delete (an outage) must not leave a
// record that blocks the name. The old code's undo was one delete of the
// record: when it failed, the bare record stayed, was listed as a declared table nobody declared,
// and every later create answered 409 "being created by another request" forever.

const ctx: RequestContext = { requestId: 'outage', principal: null, context: {} };
const LEASE_MS = 600;

describe('CreateTable during a store outage', () => {
  const root = useLocalRoot('lance-ns-outage-');
  let engine: LancedbEngine;
  beforeAll(async () => {
    engine = await LancedbEngine.start();
  });
  afterAll(() => engine?.close());

  it('a failed create whose clean-up also failed blocks the name only for its lease', async () => {
    // Deletes in the table's directory (the create's clean-up) fail while the store is down, as they
    // do when the S3 endpoint is unreachable.
    const outage = { down: false };
    const down = () => Promise.reject(new StoreUnavailableError('the store is unreachable'));
    const inTable = (key: string) => key.startsWith('ns/t.lance/');
    const store = storeDouble(root.store, {
      delete: (key) => (outage.down && inTable(key) ? down() : root.store.delete(key)),
      deletePrefix: (prefix, options) => (outage.down && inTable(prefix) ? down() : root.store.deletePrefix(prefix, options)),
    });
    const deps = withSettings(localCatalogDeps(store, root.dir, engine), { managedVersioningDefault: false, leaseMs: LEASE_MS });
    const tables = new TableService(deps, () => {
      throw new Error('no managed tables here');
    });
    await new NamespaceService(deps).create(ctx, ['ns'], {});
    outage.down = true;
    await expect(tables.create(ctx, ['ns', 't'], { arrowIpcStream: Buffer.from('not an arrow stream') })).rejects.toBeInstanceOf(NamespaceError);
    outage.down = false;
    // Whatever stayed behind is not a table.
    expect((await tables.list(ctx, ['ns'], { includeDeclared: true })).tables).toEqual([]);
    await expect(tables.describe(ctx, ['ns', 't'], {}, { withTableUri: false, loadDetailedMetadata: false, checkDeclared: false })).rejects.toSatisfy(
      (e: unknown) => e instanceof NamespaceError && e.code === ErrorCode.TableNotFound,
    );
    // Within the dead create's lease the name is held; after it, a create takes the name over.
    const started = Date.now();
    let created: Awaited<ReturnType<TableService['create']>> | undefined;
    while (!created && Date.now() - started < LEASE_MS * 10) {
      created = await tables.create(ctx, ['ns', 't'], { arrowIpcStream: peopleStream([4, 5]) }).catch((e: unknown) => {
        if (e instanceof NamespaceError && e.code === ErrorCode.TableAlreadyExists) return undefined;
        throw e;
      });
      if (!created) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(created?.version).toBe(1);
    expect((await readRows(String(created?.location))).map((r) => r.id)).toEqual([4, 5]);
    expect((await tables.list(ctx, ['ns'], {})).tables).toEqual(['t']);
  });
});
