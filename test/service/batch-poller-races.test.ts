import { beforeEach, describe, expect, it } from 'vitest';
import { ErrorCode, NamespaceError } from '../../src/model/errors.js';
import { NamespaceService } from '../../src/service/catalog/namespace-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog, type TransactionRecord } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import type { ObjectStore, PutCondition } from '../../src/store/object-store.js';
import { catalogRootKinds, useCatalogRoot } from '../support/local-catalog.js';
import { storeDouble } from '../support/store-double.js';

// Tries to break the dead-batch protocol of src/service/versions/ (a marker per unfinished batch, pollers
// on every replica finishing a batch once its lease has run out): several pollers at once on one
// dead batch, pollers before the lease ends, and a coordinator that outlives its lease and meets
// a poller at its commit point. The process tests (test/process/batch-poller.test.ts) kill a real
// process; these force the interleavings no timing can.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };
const declareT = [{ declare_table: { id: ['ns', 't'], properties: { k: 'v' } } }];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A store that acts as the coordinator's process dying: from the first write `dies` matches,
 * that write and every later one fail (so the coordinator cannot roll itself back either).
 */
function dyingStore(inner: ObjectStore, dies: (key: string, body: string) => boolean, before?: () => Promise<void>): ObjectStore {
  let dead = false;
  const died = () => new Error('the coordinator process died');
  return storeDouble(inner, {
    put: async (k: string, body: Buffer | string, condition?: PutCondition) => {
      if (!dead && dies(k, body.toString())) {
        if (before) await before();
        else dead = true;
      }
      if (dead) throw died();
      return inner.put(k, body, condition);
    },
    delete: async (k: string) => {
      if (dead) throw died();
      return inner.delete(k);
    },
    copy: async (from: string, to: string, condition?: { ifNoneMatch: '*' }) => {
      if (dead) throw died();
      return inner.copy(from, to, condition);
    },
  });
}

describe.each(catalogRootKinds)('batches whose coordinator died (%s)', (kind) => {
  const root = useCatalogRoot(kind);
  let base: ObjectStore;
  beforeEach(async () => {
    base = root.store;
    await services(base, 1000).namespaces.create(ctx, ['ns'], {});
  });

  function services(store: ObjectStore, leaseMs: number) {
    const deps = root.deps(store);
    const versions = new TableVersionService(deps, new TransactionLog(store), { leaseMs });
    return { versions, namespaces: new NamespaceService(deps), tables: new TableService(deps, (...a) => versions.coordinatorFor(...a)) };
  }
  const onlyRecord = async (): Promise<TransactionRecord> => {
    const { objects } = await base.list('_catalog/transactions/', {});
    expect(objects).toHaveLength(1);
    return JSON.parse((await base.get(objects[0]?.key ?? ''))?.body.toString('utf8') ?? '{}') as TransactionRecord;
  };
  const markers = async () => (await base.list('_catalog/batches/', {})).objects.map((o) => o.key);
  const tableRecord = async () => base.get('ns/t.lance/.lance-table.json');

  for (const forward of [false, true]) {
    it(`five pollers at once bring it to one consistent end, and none acts before its lease ends (${forward ? 'past' : 'before'} its commit point)`, async () => {
      const LEASE = 400;
      // Dies at the commit point itself, or at the first write after it (settling the pending table record).
      const dies = forward
        ? (k: string, body: string) => k === 'ns/t.lance/.lance-table.json' && !body.includes('pending_transaction')
        : (k: string, body: string) => k.startsWith('_catalog/transactions/') && body.includes('"committing"');
      await expect(services(dyingStore(base, dies), LEASE).versions.batchCommit(ctx, declareT)).rejects.toThrow('died');
      const crashed = await onlyRecord();
      expect(crashed.phase).toBe(forward ? 'committing' : 'reserving');
      expect(await markers()).toEqual([`_catalog/batches/${crashed.id}.json`]);
      expect(await tableRecord()).not.toBeNull();

      const pollers = Array.from({ length: 5 }, () => services(base, LEASE).versions);
      const leaseEnd = Date.parse(crashed.lease_until ?? '');
      await Promise.all(pollers.map((p) => p.pollBatches()));
      // Within the lease the coordinator may be alive: a poll that ended before the lease did left it alone.
      if (Date.now() < leaseEnd) {
        expect((await onlyRecord()).phase).toBe(crashed.phase);
        expect(await markers()).toHaveLength(1);
      }
      await sleep(Math.max(0, leaseEnd - Date.now() + 5));
      await Promise.all(pollers.map((p) => p.pollBatches()));

      expect(await onlyRecord()).toMatchObject({ id: crashed.id, status: forward ? 'Succeeded' : 'Failed', phase: 'done', cleaned_up: true });
      expect(await markers()).toEqual([]);
      const { tables } = services(base, LEASE);
      if (forward) {
        await tables.exists(ctx, ['ns', 't'], undefined);
        expect(JSON.parse((await tableRecord())?.body.toString('utf8') ?? '{}')).not.toHaveProperty('pending_transaction');
        expect(await base.head('ns/t.lance/.lance-reserved')).not.toBeNull();
      } else {
        expect(await tableRecord()).toBeNull();
        await tables.declare(ctx, ['ns', 't'], {});
      }
    });
  }

  it('a coordinator that outlives its lease and meets a poller at its commit point is rolled back whole, and told so', async () => {
    let polled = false;
    // Right before the coordinator's commit-point write, a poller on another replica runs once the
    // 1 ms lease is over (a memory store gets there within that millisecond: wait it out).
    const store = dyingStore(
      base,
      (k, body) => k.startsWith('_catalog/transactions/') && body.includes('"committing"'),
      async () => {
        await sleep(5);
        await services(base, 1).versions.pollBatches();
        polled = true;
      },
    );
    const outcome = await services(store, 1)
      .versions.batchCommit(ctx, declareT)
      .catch((e: unknown) => e);
    expect(polled).toBe(true);
    expect(outcome).toBeInstanceOf(NamespaceError);
    expect((outcome as NamespaceError).code).toBe(ErrorCode.ConcurrentModification);
    expect(await onlyRecord()).toMatchObject({ status: 'Failed', phase: 'done', cleaned_up: true });
    expect(await markers()).toEqual([]);
    expect(await tableRecord()).toBeNull();
    await services(base, 1000).tables.declare(ctx, ['ns', 't'], {});
  });

  it('a coordinator whose batch is taken over while it claims names stops at its next step, claiming nothing more', async () => {
    const LEASE = 100;
    const claimed: string[] = [];
    /** While set, the coordinator's writes of its record wait: it stalls, alive (a long pause), and its renewals do not land. */
    let stalled: Promise<void> | null = null;
    const store = storeDouble(base, {
      put: async (k: string, body: Buffer | string, condition?: PutCondition) => {
        if (k.endsWith('/.lance-table.json') && condition && 'ifNoneMatch' in condition) {
          claimed.push(k.split('/')[1] ?? k);
          if (k === 'ns/t2.lance/.lance-table.json') {
            let resume = () => {};
            stalled = new Promise((resolve) => (resume = resolve));
            // Past its lease, a poller of another replica takes the batch over and rolls it back.
            await sleep(LEASE + 20);
            await services(base, LEASE).versions.pollBatches();
            resume();
            // The renewal that waited meets the poller's record, and fails.
            await sleep(LEASE);
          }
        }
        if (stalled && k.startsWith('_catalog/transactions/')) await stalled;
        return base.put(k, body, condition);
      },
    });
    const ops = ['t1', 't2', 't3'].map((name) => ({ declare_table: { id: ['ns', name] } }));
    const outcome = await services(store, LEASE)
      .versions.batchCommit(ctx, ops)
      .catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(NamespaceError);
    expect((outcome as NamespaceError).code).toBe(ErrorCode.ConcurrentModification);
    // It noticed before its next claim: t3 was never claimed, and nothing it claimed is left.
    expect(claimed).toEqual(['t1.lance', 't2.lance']);
    expect(await onlyRecord()).toMatchObject({ status: 'Failed', phase: 'done', cleaned_up: true });
    expect(await markers()).toEqual([]);
    for (const name of ['t1', 't2', 't3']) expect(await base.get(`ns/${name}.lance/.lance-table.json`), name).toBeNull();
  });
});
