import { describe, expect, it } from 'vitest';
import { encodeRecord } from '../../src/service/catalog/records.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersions } from '../../src/service/versions/dataset-versions.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import type { ObjectStore } from '../../src/store/object-store.js';
import { catalogRootKinds, useCatalogRoot } from '../support/local-catalog.js';
import { manifestBytes } from '../support/manifests.js';

// A single writer's slot reservation is not fsynced (src/service/versions/version-slots.ts), nor
// is a write lease (src/service/tables/table-fences.ts): a crash of the machine may leave either
// empty or cut short. Neither may keep the slot, nor a drop, waiting for a holder that is gone.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };

describe.each(catalogRootKinds)('a slot reservation a crash cut short (%s)', (kind) => {
  const root = useCatalogRoot(kind);

  const services = () => {
    const deps = root.deps(root.store);
    // A long lease: only the reservation's unreadable body may free the slot here.
    const versions = new TableVersionService(deps, new TransactionLog(root.store), { leaseMs: 600_000 });
    return { versions, tables: new TableService(deps, (...a) => versions.coordinatorFor(...a)) };
  };

  it('is taken over by the next writer at once, and a drop does not wait for it', async () => {
    const { versions, tables } = services();
    await tables.declare(ctx, ['t'], {});
    const slots = new TableVersions({ store: root.store, key: 't.lance/', owned: true });
    for (const body of ['', '{"created_at": "2026-']) {
      await root.store.put(slots.reservationKey(1), body);
      expect((await slots.readReservation(1))?.value.expires_at).toBe(new Date(0).toISOString());
    }
    await root.store.put('t.lance/_versions/1.manifest-staged', manifestBytes(1));
    const { version } = await versions.create(ctx, ['t'], { version: 1, manifest_path: '_versions/1.manifest-staged' });
    expect(version.version).toBe(1);
    // Released after the answer (after-answer.ts).
    await versions.settled();
    expect(await root.store.head(slots.reservationKey(1))).toBeNull();

    // Nor does a drop wait for a reservation or a write lease (table-fences.ts, also not fsynced) cut short.
    await root.store.put(slots.reservationKey(2), '');
    await root.store.put('t.lance/_catalog/writers/cut-short.json', '{"request_id": "x", "expi');
    await tables.drop(ctx, ['t']);
    await expect(tables.describe(ctx, ['t'], {}, { withTableUri: false, loadDetailedMetadata: false, checkDeclared: false })).rejects.toThrow(/does not exist/);
  });

  it('is taken over only from the etag of what was read, never over a live reservation that replaced it meanwhile', async () => {
    const key = new TableVersions({ store: root.store, key: 't.lance/', owned: true }).reservationKey(1);
    const cut = await root.store.put(key, '{"created_at": "2026-');
    const live = encodeRecord({ created_at: new Date().toISOString(), expires_at: new Date(Date.now() + 600_000).toISOString() });
    // A local store rewrites a released reservation's file for the next claim, so a read can meet
    // a file its key let go of; here a live writer's reservation replaces the key just after the read.
    const racingStore: ObjectStore = Object.assign(Object.create(root.store) as ObjectStore, {
      get: async (k: string) => {
        const read = await root.store.get(k);
        if (k === key && read) await root.store.put(k, live, { ifMatch: read.etag });
        return read;
      },
    });
    const racing = new TableVersions({ store: racingStore, key: 't.lance/', owned: true });
    const held = await racing.readReservation(1);
    expect(held).toMatchObject({ etag: cut.etag, value: { expires_at: new Date(0).toISOString() } });
    expect(await racing.claim(1, { created_at: new Date().toISOString(), expires_at: new Date(Date.now() + 1000).toISOString() }, held?.etag)).toBe(false);
    expect((await root.store.get(key))?.body.toString()).toBe(live);
  });
});
