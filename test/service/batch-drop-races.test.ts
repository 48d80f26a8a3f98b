import { describe, expect, it } from 'vitest';
import { ErrorCode, NamespaceError } from '../../src/model/errors.js';
import { deregisteredMarkerKey, tableRefOf } from '../../src/service/catalog/layout.js';
import { NamespaceService } from '../../src/service/catalog/namespace-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { readTableState } from '../../src/service/tables/table-state.js';
import { TransactionLog, type TransactionRecord } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import type { ObjectStore, PutCondition, PutOptions } from '../../src/store/object-store.js';
import { useCatalogRoot, withSettings } from '../support/local-catalog.js';
import { manifestBytes } from '../support/manifests.js';
import { storeDouble } from '../support/store-double.js';

// A batch committing versions of tables and a drop of one of them (the invariant is in
// src/service/tables/table-fences.ts): the interleavings no timing forces, with a coordinator that
// dies at a chosen step. The process test (test/process/batch-drop.test.ts) races a live one.
// - A drop that meets a dead batch's slot brings the batch to its end before it deletes anything:
//   rolled back before its commit point, forward past it. It used to judge the slot by the
//   reservation's own lease and delete under a batch that had committed: rolling that batch
//   forward then met the missing staged manifest and stayed stuck, holding its other slots.
// - Rolling forward a batch whose table was dropped and taken anew since (a drop that died while
//   it waited) leaves that entry be and finishes the rest.
// - A batch cannot declare a name while a drop of it is at work.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };
const LEASE = 200;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const TABLES = ['t1', 't2'];
const STAGED = '_versions/1.manifest-staged';
/** A committed manifest's name (V1 or V2), not a staged one. */
const FINAL_MANIFEST = /\/_versions\/\d+\.manifest$/;

/** A store whose every put from the first that `dies` matches fails: the coordinator's process died there. */
function dyingStore(inner: ObjectStore, dies: (key: string, body: string) => boolean): ObjectStore {
  let dead = false;
  return storeDouble(inner, {
    put: async (k: string, body: Buffer | string, condition?: PutCondition, options?: PutOptions) => {
      dead ||= dies(k, body.toString());
      if (dead) {
        // A put placed after another write waits for it (PutOptions.placeAfter), its failure included.
        await options?.placeAfter?.catch(() => undefined);
        throw new Error('the coordinator process died');
      }
      return inner.put(k, body, condition, options);
    },
  });
}

// On a local root: a batch resolves the locations its record names, which a root in memory has none of.
describe.each(['local'] as const)('a batch and a drop of one of its tables (%s)', (kind) => {
  const root = useCatalogRoot(kind);

  /** One process over `store`, its leases (the drop's tombstone's too) LEASE long. */
  function services(store: ObjectStore = root.store) {
    const deps = withSettings(root.deps(store), { leaseMs: LEASE });
    const versions = new TableVersionService(deps, new TransactionLog(store), { leaseMs: LEASE });
    return { deps, versions, namespaces: new NamespaceService(deps), tables: new TableService(deps, (...a) => versions.coordinatorFor(...a)) };
  }
  const onlyRecord = async (): Promise<TransactionRecord> => {
    const { objects } = await root.store.list('_catalog/transactions/', {});
    expect(objects).toHaveLength(1);
    return JSON.parse((await root.store.get(objects[0]?.key ?? ''))?.body.toString('utf8') ?? '{}') as TransactionRecord;
  };
  const reservations = async (t: string) => (await root.store.list(`ns/${t}.lance/_catalog/reservations/`, {})).objects;
  const versionsOf = async (t: string) => (await services().versions.list(ctx, ['ns', t], {})).versions.map((v) => v.version);
  const stage = (t: string) => root.store.put(`ns/${t}.lance/${STAGED}`, manifestBytes(1));

  /** Declares t1 and t2, stages version 1 of each, and runs a batch of both on a coordinator that dies at the first write `dies` matches. */
  async function deadBatch(dies: (key: string, body: string) => boolean): Promise<TransactionRecord> {
    const { namespaces, tables } = services();
    await namespaces.create(ctx, ['ns'], {});
    for (const t of TABLES) {
      await tables.declare(ctx, ['ns', t], {});
      await stage(t);
    }
    const entries = TABLES.map((t) => ({ id: ['ns', t], version: 1, manifest_path: STAGED }));
    await expect(services(dyingStore(root.store, dies)).versions.batchCreate(ctx, entries)).rejects.toThrow('died');
    return onlyRecord();
  }

  /** What every end must leave: no reservation, no unfinished batch, and both kinds of commit going on as usual. */
  async function nothingLeft(record: TransactionRecord, status: 'Succeeded' | 'Failed', t2Versions: number[]) {
    expect(await onlyRecord()).toMatchObject({ id: record.id, status, phase: 'done', cleaned_up: true });
    expect((await root.store.list('_catalog/batches/', {})).objects).toEqual([]);
    for (const t of TABLES) expect(await reservations(t), t).toEqual([]);
    expect(await versionsOf('t2')).toEqual(t2Versions);
    const next = t2Versions.length + 1;
    await root.store.put(`ns/t2.lance/_versions/${next}.manifest-next`, manifestBytes(next));
    const { version } = await services().versions.create(ctx, ['ns', 't2'], { version: next, manifest_path: `_versions/${next}.manifest-next` });
    expect(version.version).toBe(next);
  }

  it('a drop meeting the slot of a batch that died before its commit point rolls the batch back first', async () => {
    const record = await deadBatch((k, body) => k.startsWith('_catalog/transactions/') && body.includes('"committing"'));
    expect(record.phase).toBe('reserving');
    await sleep(Date.parse(record.lease_until ?? '') - Date.now() + 5);
    await services().tables.drop(ctx, ['ns', 't1']);
    // Right after the drop, without any poller: the batch was brought to its end by the drop.
    await nothingLeft(record, 'Failed', []);
  });

  it('a drop meeting the slot of a batch that died past its commit point rolls the batch forward first', async () => {
    const record = await deadBatch((k) => FINAL_MANIFEST.test(k));
    expect(record.phase).toBe('committing');
    await sleep(Date.parse(record.lease_until ?? '') - Date.now() + 5);
    await services().tables.drop(ctx, ['ns', 't1']);
    await nothingLeft(record, 'Succeeded', [1]);
  });

  it('rolling forward leaves be the entry of a table dropped and taken anew since, and finishes the rest', async () => {
    const record = await deadBatch((k) => FINAL_MANIFEST.test(k));
    // A drop that died right after its tombstone, before it looked for the batch...
    const { deps, tables, versions } = services();
    const begun = await deps.fences.beginDrop(await readTableState(root.store, tableRefOf(['ns', 't1'])));
    await begun?.renewal.stop();
    await sleep(Math.max(Date.parse(record.lease_until ?? ''), Date.now() + LEASE) - Date.now() + 5);
    // ...and the name taken anew once the tombstone's lease ran out: what the drop left goes, the batch's staged manifest too.
    await tables.declare(ctx, ['ns', 't1'], {});
    expect(await root.store.head(`ns/t1.lance/${STAGED}`)).toBeNull();
    await versions.pollBatches();
    await nothingLeft(record, 'Succeeded', [1]);
    // The new t1 is none of the batch's: no version of it, and its own first commit goes through.
    expect(await versionsOf('t1')).toEqual([]);
    await stage('t1');
    expect((await versions.create(ctx, ['ns', 't1'], { version: 1, manifest_path: STAGED })).version.version).toBe(1);
  });

  it('a batch cannot declare a name while a drop of it is at work', async () => {
    const { namespaces, tables, deps, versions } = services();
    await namespaces.create(ctx, ['ns'], {});
    await tables.declare(ctx, ['ns', 't1'], {});
    // A write under way keeps the drop at work (it waits for the write's lease) after its tombstone.
    const write = await deps.fences.enterWrite(await readTableState(root.store, tableRefOf(['ns', 't1'])), 'writer');
    const dropping = tables.drop(ctx, ['ns', 't1']);
    await expect.poll(() => root.store.head(deregisteredMarkerKey(tableRefOf(['ns', 't1']))), { interval: 5 }).not.toBeNull();
    const refused = await versions.batchCommit(ctx, [{ declare_table: { id: ['ns', 't1'] } }]).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(NamespaceError);
    expect((refused as NamespaceError).code).toBe(ErrorCode.ConcurrentModification);
    expect((refused as NamespaceError).message).toContain('is being dropped; retry');
    await write.release().catch(() => undefined);
    await dropping;
    // Once the drop is done, the name is free for a batch.
    await versions.batchCommit(ctx, [{ declare_table: { id: ['ns', 't1'] } }]);
    await tables.exists(ctx, ['ns', 't1'], undefined);
  });
});
