import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LancedbEngine } from '../../src/engine/lancedb/engine.js';
import { ErrorCode, NamespaceError } from '../../src/model/errors.js';
import type { CatalogDeps } from '../../src/service/catalog.js';
import { Locations } from '../../src/service/locations.js';
import { NamespaceService } from '../../src/service/namespaces.js';
import { PageTokens } from '../../src/service/page-token.js';
import type { RequestContext } from '../../src/service/request-context.js';
import { TableService } from '../../src/service/tables.js';
import { LocalObjectStore } from '../../src/store/local-store.js';
import { type ObjectStore, StoreUnavailableError } from '../../src/store/object-store.js';
import { peopleStream, readRows } from '../support/arrow-data.js';

// A create whose data write fails while the store cannot delete (an outage) must not leave a
// record that blocks the name (issue 8, point 3). The old code's undo was one delete of the
// record: when it failed, the bare record stayed, was listed as a declared table nobody declared,
// and every later create answered 409 "being created by another request" forever.

const ctx: RequestContext = { requestId: 'outage', principal: null, context: {} };
const LEASE_MS = 600;

/** A store whose deletes fail while `down` is set, as they do when the S3 endpoint is unreachable. */
function flakyDeletes(inner: ObjectStore, state: { down: boolean }): ObjectStore {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      const fn = (value as (...a: unknown[]) => unknown).bind(target);
      if (prop !== 'delete' && prop !== 'deletePrefix') return fn;
      return (...args: unknown[]) => (state.down ? Promise.reject(new StoreUnavailableError('the store is unreachable')) : fn(...args));
    },
  });
}

describe('CreateTable during a store outage', () => {
  let dir: string;
  let engine: LancedbEngine;
  const outage = { down: false };
  let tables: TableService;
  let namespaces: NamespaceService;
  let store: ObjectStore;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'lance-ns-outage-'));
    const base = new LocalObjectStore(dir);
    await base.init();
    store = flakyDeletes(base, outage);
    engine = await LancedbEngine.start();
    const deps: CatalogDeps = {
      store,
      engine,
      locations: new Locations(store, { kind: 'local', dir }, { region: 'x', forcePathStyle: true }),
      pageTokens: new PageTokens('k'),
      settings: { managedVersioningDefault: false, leaseMs: LEASE_MS },
    };
    namespaces = new NamespaceService(deps);
    tables = new TableService(deps, () => {
      throw new Error('no managed tables here');
    });
    await namespaces.create(ctx, ['ns'], {});
  });
  afterAll(async () => {
    await engine?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('a failed create whose clean-up also failed blocks the name only for its lease', async () => {
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
