import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LancedbEngine } from '../../src/engine/lancedb/engine.js';
import { NO_METRICS } from '../../src/metrics/metrics.js';
import { catalogDeps } from '../../src/service/catalog/catalog-deps.js';
import { Locations } from '../../src/service/catalog/locations.js';
import { PageTokens } from '../../src/service/catalog/page-token.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { DataTables } from '../../src/service/data/data-tables.js';
import { RowService } from '../../src/service/data/rows.js';
import { TableCredentials } from '../../src/service/tables/credential-vending.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import { type ObjectStore, PreconditionFailedError, type PutCondition } from '../../src/store/object-store.js';
import { parseLocation, storeAt } from '../../src/store/open-store.js';
import { startTestApp } from '../support/app.js';
import { peopleStream, readRows } from '../support/arrow-data.js';
import { backends, type TestRoot } from '../support/backends.js';
import { storeDouble } from '../support/store-double.js';

// UpdateTable commits rows through the engine, then records its `properties` in the table record
// with a replace-if-unchanged. Losing that race (here: a store double that refuses the record's
// conditional put, again and again) must not turn the landed update into a 409.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };
const RECORD = 'up/t.lance/.lance-table.json';

/** A store whose conditional puts of `key` fail with PreconditionFailedError the first `times` times. */
function losingStore(inner: ObjectStore, key: string, times: number): { store: ObjectStore; refused: () => number } {
  let refused = 0;
  const store = storeDouble(inner, {
    put: async (k: string, body: Buffer | string, condition?: PutCondition) => {
      if (k === key && condition && refused < times) {
        refused++;
        throw new PreconditionFailedError(k, 'the record changed (store double)');
      }
      return inner.put(k, body, condition);
    },
  });
  return { store, refused: () => refused };
}

describe.each(backends())('an update whose properties keep losing races on $name', (backend) => {
  let root: TestRoot;
  let engine: LancedbEngine;
  beforeAll(async () => {
    root = await backend.newRoot();
    const t = await startTestApp(root);
    try {
      expect((await t.call('POST', '/v1/namespace/up/create', {})).status).toBe(200);
      expect((await t.call('POST', '/v1/table/up%24t/declare', { properties: { k: 'v' } })).status).toBe(200);
      const inserted = await t.call('POST', '/v1/table/up%24t/insert', peopleStream([1, 2, 3]), { 'content-type': 'application/vnd.apache.arrow.stream' });
      expect(inserted.status, inserted.text).toBe(200);
    } finally {
      await t.close();
    }
    engine = await LancedbEngine.start();
  });
  afterAll(async () => {
    await engine?.close();
    await root?.dispose();
  });

  const rowsOver = (store: ObjectStore, boundMs?: number) => {
    const location = parseLocation(root.root);
    if (!location) throw new Error(`bad root ${root.root}`);
    const deps = catalogDeps({
      store,
      engine,
      locations: new Locations(store, location, (at) => storeAt(at, root.s3)),
      pageTokens: new PageTokens('k'),
      settings: { managedVersioningDefault: false, leaseMs: 30_000 },
      credentials: new TableCredentials(null),
      metrics: NO_METRICS,
    });
    const warnings: string[] = [];
    const logger = { info: () => undefined, error: () => undefined, warn: (_: object, msg: string) => void warnings.push(msg) };
    const service = new RowService(
      new DataTables(deps, new TableVersionService(deps, new TransactionLog(store), { leaseMs: 1000 })),
      logger,
      boundMs === undefined ? {} : { recordPropertiesBoundMs: boundMs },
    );
    return { service, warnings };
  };
  const names = async () => (await readRows(root.store.location('up/t.lance'), root.store.engineStorageOptions())).map((r) => r.name);
  const recorded = async () =>
    (JSON.parse((await root.store.get(RECORD))?.body.toString('utf8') ?? '{}') as { properties?: Record<string, string> }).properties;

  it('records them after more lost races than the old limit of 5, and answers with the committed version', async () => {
    const { store, refused } = losingStore(root.store, RECORD, 12);
    const { service, warnings } = rowsOver(store);
    const res = await service.update(ctx, ['up', 't'], { updates: [['name', "'first'"]], predicate: 'id = 1', properties: { a: '1' } });
    expect(refused()).toBe(12);
    expect(res).toMatchObject({ updated_rows: 1, version: 2, properties: { k: 'v', a: '1' } });
    expect(warnings).toEqual([]);
    expect(await recorded()).toEqual({ k: 'v', a: '1' });
    expect(await names()).toEqual(['first', 'name-2', 'name-3']);
  });

  it('answers the landed update even when the time bound passes, with the properties the record holds', async () => {
    const { store, refused } = losingStore(root.store, RECORD, Number.POSITIVE_INFINITY);
    const { service, warnings } = rowsOver(store, 200);
    const res = await service.update(ctx, ['up', 't'], { updates: [['name', "'second'"]], predicate: 'id = 2', properties: { b: '2' } });
    expect(refused()).toBeGreaterThan(1); // retried (how often within the bound depends on the machine's load)
    expect(res).toMatchObject({ updated_rows: 1, version: 3, properties: { k: 'v', a: '1' } });
    expect(warnings).toHaveLength(1);
    expect(await recorded()).toEqual({ k: 'v', a: '1' });
    expect(await names()).toEqual(['first', 'second', 'name-3']);
  });
});
