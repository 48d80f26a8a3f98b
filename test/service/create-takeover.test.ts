import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LanceEngine } from '../../src/engine/lance-engine.js';
import { LancedbEngine } from '../../src/engine/lancedb/engine.js';
import { ErrorCode, NamespaceError } from '../../src/model/errors.js';
import { tableRecordKey } from '../../src/service/catalog/layout.js';
import { NamespaceService } from '../../src/service/catalog/namespace-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { peopleStream, readRows } from '../support/arrow-data.js';
import { localCatalogDeps, useLocalRoot, withSettings } from '../support/local-catalog.js';
import { storeDouble } from '../support/store-double.js';

// A create whose claim on the name is taken over while it still writes (its lease ran out: the
// process stalled, the store was slow) keeps writing its dataset: the claim stops other creates of
// the catalog, not a Lance write already under way. Here that dead-seeming create (A) writes its
// dataset after the create that took its claim over (B) cleared the directory and before B
// writes: B finds a dataset where it creates one. Neither may answer that the table exists, as
// none does once they have failed; both answer 409 "retry" and the name is free.

const ctxOf = (requestId: string): RequestContext => ({ requestId, principal: null, context: {} });
const LEASE_MS = 300;
const ref = { namespace: ['ns'], name: 't' };

const claimOf = (record: string | undefined) =>
  record ? (JSON.parse(record) as { creating?: { request_id: string; lease_until: string } }).creating : undefined;

const deferred = () => {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

describe('CreateTable whose claim is taken over while it writes', () => {
  const root = useLocalRoot('lance-ns-takeover-');
  let engine: LancedbEngine;
  beforeAll(async () => {
    engine = await LancedbEngine.start();
  });
  afterAll(() => engine?.close());

  it('answers 409 "retry" to both creates, not "already exists", and leaves the name free', async () => {
    // A's renewals of its claim are held back until B has taken the claim over.
    const takenOver = deferred();
    const store = storeDouble(root.store, {
      put: async (key, body, condition, options) => {
        const renewalOfA =
          key === tableRecordKey(ref) && condition !== undefined && 'ifMatch' in condition && claimOf(String(body))?.request_id.startsWith('A/') === true;
        if (renewalOfA) await takenOver.promise;
        return root.store.put(key, body, condition, options);
      },
    });
    // A's dataset write waits until B's begins; B's waits until A's has landed.
    const aMayWrite = deferred();
    const aWrote = deferred();
    let calls = 0;
    const gated: LanceEngine = new Proxy(engine, {
      get(target, name) {
        if (name === 'createDataset') {
          return async (...args: Parameters<LanceEngine['createDataset']>) => {
            if (++calls === 1) {
              await aMayWrite.promise;
              try {
                return await target.createDataset(...args);
              } finally {
                aWrote.resolve();
              }
            }
            takenOver.resolve();
            aMayWrite.resolve();
            await aWrote.promise;
            return target.createDataset(...args);
          };
        }
        const value: unknown = Reflect.get(target, name, target);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const deps = withSettings(localCatalogDeps(store, root.dir, gated), { managedVersioningDefault: false, leaseMs: LEASE_MS });
    const tables = new TableService(deps, () => {
      throw new Error('no managed tables here');
    });
    await new NamespaceService(deps).create(ctxOf('setup'), ['ns'], {});

    const a = tables.create(ctxOf('A'), ['ns', 't'], { arrowIpcStream: peopleStream([1, 2]) }).catch((e: unknown) => e);
    // B comes once A's claim has run out unrenewed.
    for (const deadline = Date.now() + 20 * LEASE_MS; ; ) {
      const until = claimOf((await root.store.get(tableRecordKey(ref)))?.body.toString('utf8'))?.lease_until;
      if (until !== undefined && Date.parse(until) < Date.now()) break;
      if (Date.now() > deadline) throw new Error(`A's claim never ran out (lease_until ${String(until)}): its renewals were not held back`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const b = await tables.create(ctxOf('B'), ['ns', 't'], { arrowIpcStream: peopleStream([3]) }).catch((e: unknown) => e);
    const retry = (e: unknown) => e instanceof NamespaceError && e.code === ErrorCode.ConcurrentModification;
    expect(b, String(b)).toSatisfy(retry);
    expect(await a, String(await a)).toSatisfy(retry);

    // Nothing of this name exists, and a create takes it.
    expect(await tables.exists(ctxOf('check'), ['ns', 't'], undefined).catch((e: unknown) => (e as NamespaceError).code)).toBe(ErrorCode.TableNotFound);
    const created = await tables.create(ctxOf('C'), ['ns', 't'], { arrowIpcStream: peopleStream([4, 5]) });
    expect(created.version).toBe(1);
    expect((await readRows(String(created.location))).map((r) => r.id)).toEqual([4, 5]);
  });
});
