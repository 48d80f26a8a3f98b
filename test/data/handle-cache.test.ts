import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { startTestApp, type TestApp, useNamespaceFixture } from '../support/app.js';
import { connectTable, peopleStream } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';

// Datasets the engine keeps open across requests (src/engine/lancedb/handle-cache.ts), tried
// against everything that can change a table behind a kept handle: another replica's writes, a
// Lance writer outside the service, a drop and re-create, reads at older versions, the bounds.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

describe.each(backends())('kept datasets on $name', (backend) => {
  const { fx, path, post, engineOptions } = useNamespaceFixture(backend);
  /** A second replica on the same root. */
  let other: TestApp;
  beforeAll(async () => {
    other = await startTestApp(fx.root);
  });
  afterAll(async () => {
    await other?.close();
  });

  const kept = () => fx.t.app.engine.keptStats();
  async function create(t: TestApp, table: string, ids: number[], mode?: string): Promise<string> {
    const res = await t.call('POST', path(table, 'create', mode ? `?mode=${mode}` : ''), peopleStream(ids), ARROW);
    expect(res.status, res.text).toBe(200);
    return String(res.json.location);
  }
  async function count(table: string, body: Record<string, unknown> = {}): Promise<number> {
    const res = await post(table, 'count_rows', body);
    expect(res.status, res.text).toBe(200);
    return Number(res.text);
  }

  it("serves another replica's append to the next read through the kept dataset", async () => {
    await create(fx.t, 'replica', [1, 2, 3]);
    expect(await count('replica')).toBe(3);
    const before = kept();
    const appended = await other.call('POST', path('replica', 'insert'), peopleStream([4, 5]), ARROW);
    expect(appended.status, appended.text).toBe(200);
    expect(await count('replica')).toBe(5);
    // Through the kept dataset, reloaded: not opened again.
    expect(kept().opens).toBe(before.opens);
    expect(kept().reloads).toBeGreaterThan(before.reloads);
  });

  it('serves a write Lance made outside the service to the next read', async () => {
    const location = await create(fx.t, 'outside', [1, 2]);
    expect(await count('outside')).toBe(2);
    const table = await connectTable(location, engineOptions());
    try {
      await table.add([{ id: 3n, name: 'name-3' }]);
    } finally {
      table.close();
    }
    expect(await count('outside')).toBe(3);
    expect(await count('outside', { predicate: 'id = 3' })).toBe(1);
  });

  it('never serves a table dropped and re-created by another replica from the old dataset, also at the same version', async () => {
    await create(fx.t, 'again', [1, 2, 3]);
    expect(await count('again', { predicate: 'id > 10' })).toBe(0);
    const dropped = await other.call('POST', path('again', 'drop'), {});
    expect(dropped.status, dropped.text).toBe(200);
    // The same number of rows and the same version (1), different rows.
    await create(other, 'again', [11, 12, 13]);
    expect(await count('again', { predicate: 'id > 10' })).toBe(3);
    // Re-created with more versions than the first table had, and with fewer.
    await other.call('POST', path('again', 'drop'), {});
    await create(other, 'again', [21]);
    for (const id of [22, 23]) expect((await other.call('POST', path('again', 'insert'), peopleStream([id]), ARROW)).status).toBe(200);
    expect(await count('again', { predicate: 'id > 20' })).toBe(3);
    await other.call('POST', path('again', 'drop'), {});
    await create(other, 'again', [31, 32]);
    expect(await count('again')).toBe(2);
    expect(await count('again', { predicate: 'id > 30' })).toBe(2);
  });

  it('never serves a dataset Lance re-created at the same location (no catalog record) from the old one', async () => {
    // Written by Lance straight into the namespace directory: a table without a record or incarnation.
    const location = fx.t.app.store.location('ns/lance_only.lance');
    const write = async (ids: number[], mode: 'create' | 'overwrite') => {
      const slash = location.lastIndexOf('/');
      const lancedb = await import('@lancedb/lancedb');
      const db = await lancedb.connect(location.slice(0, slash), { storageOptions: engineOptions() });
      const table = await db.createTable(
        'lance_only',
        ids.map((id) => ({ id: BigInt(id), name: `n${id}` })),
        { mode },
      );
      table.close();
      db.close();
    };
    await write([1, 2], 'create');
    expect(await count('lance_only', { predicate: 'id < 10' })).toBe(2);
    await fx.root.store.deletePrefix('ns/lance_only.lance/');
    await write([11, 12], 'create');
    expect(await count('lance_only', { predicate: 'id < 10' })).toBe(0);
    expect(await count('lance_only', { predicate: 'id > 10' })).toBe(2);
  });

  it('reads an explicit older version while the kept dataset is at a newer one, and the latest after', async () => {
    await create(fx.t, 'older', [1, 2]);
    expect((await fx.t.call('POST', path('older', 'insert'), peopleStream([3, 4, 5]), ARROW)).status).toBe(200);
    expect(await count('older')).toBe(5);
    expect(await count('older', { version: 1 })).toBe(2);
    expect(await count('older')).toBe(5);
    const described = await post('older', 'describe', { version: 1, load_detailed_metadata: true });
    expect(described.json.version).toBe(1);
    expect((await post('older', 'describe', { load_detailed_metadata: true })).json.version).toBe(2);
  });

  it('leaves the kept dataset current after a write through the service: the next read neither opens nor reloads', async () => {
    await create(fx.t, 'own', [1]);
    expect(await count('own')).toBe(1);
    for (const id of [2, 3]) expect((await fx.t.call('POST', path('own', 'insert'), peopleStream([id]), ARROW)).status).toBe(200);
    const before = kept();
    expect(await count('own')).toBe(3);
    expect(await post('own', 'update', { updates: [['name', "'x'"]], predicate: 'id = 1' }).then((r) => r.status)).toBe(200);
    expect(await count('own', { predicate: "name = 'x'" })).toBe(1);
    expect(await post('own', 'restore', { version: 1 }).then((r) => r.status)).toBe(200);
    expect(await count('own')).toBe(1);
    expect(kept().opens).toBe(before.opens);
    expect(kept().reloads).toBe(before.reloads);
  });

  it('runs writes on the kept dataset while it is current, and on one of their own once a reload checked it out', async () => {
    await create(fx.t, 'onkept', [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(await count('onkept')).toBe(10);
    const before = kept();
    for (const id of [1, 2]) expect((await post('onkept', 'delete', { predicate: `id = ${id}` })).json.version).toBe(id + 1);
    expect((await post('onkept', 'update', { updates: [['name', "'u'"]], predicate: 'id = 3' })).json.version).toBe(4);
    // Each write on the kept dataset, which each left current: nothing opened, nothing reloaded.
    expect(kept()).toMatchObject({ opens: before.opens, reloads: before.reloads, hits: before.hits + 3 });
    // Concurrent writes on it commit one version each.
    const versions = await Promise.all([4, 5, 6, 7].map(async (id) => (await post('onkept', 'delete', { predicate: `id = ${id}` })).json.version));
    expect([...versions].sort()).toEqual([5, 6, 7, 8]);
    expect(await count('onkept')).toBe(4);
    expect(await count('onkept', { predicate: "name = 'u'" })).toBe(1);
    // Another replica's write: the next read reloads the kept dataset (checked out at a version,
    // which Lance refuses to write through), and the write after it commits all the same.
    expect((await other.call('POST', path('onkept', 'insert'), peopleStream([11, 12]), ARROW)).status).toBe(200);
    expect(await count('onkept')).toBe(6);
    const deleted = await post('onkept', 'delete', { predicate: 'id = 11' });
    expect(deleted.json.version, deleted.text).toBe(10);
    expect((await post('onkept', 'delete', { predicate: 'id = 12' })).json.version).toBe(11);
    expect(await count('onkept')).toBe(4);
  });

  it("keeps the kept dataset current after writes that change no row (the version their results name is the handle's)", async () => {
    await create(fx.t, 'noop', [1, 2]);
    expect(await count('noop')).toBe(2);
    const before = kept();
    const deleted = await post('noop', 'delete', { predicate: 'id = 99' });
    const updated = await post('noop', 'update', { updates: [['name', "'n'"]], predicate: 'id = 99' });
    expect([deleted.status, updated.status]).toEqual([200, 200]);
    expect((await post('noop', 'delete', { predicate: 'id = 1' })).json.version).toBe(Math.max(Number(deleted.json.version), Number(updated.json.version)) + 1);
    expect(await count('noop')).toBe(1);
    expect(kept()).toMatchObject({ opens: before.opens, reloads: before.reloads, hits: before.hits + 4 });
  });

  it('opens a table once for concurrent first reads', async () => {
    await create(other, 'crowd', [1, 2, 3, 4]);
    const before = kept();
    const counts = await Promise.all(Array.from({ length: 8 }, () => count('crowd')));
    expect(counts).toEqual(Array(8).fill(4));
    expect(kept().opens).toBe(before.opens + 1);
  });

  it("forgets a dropped table's dataset on the replica that dropped it", async () => {
    await create(fx.t, 'gone', [1]);
    expect(await count('gone')).toBe(1);
    const before = kept().entries;
    expect((await post('gone', 'drop', {})).status).toBe(200);
    expect(kept().entries).toBe(before - 1);
    expect((await post('gone', 'count_rows', {})).status).toBe(404);
  });

  it('forgets the dataset of a deregistered and of a renamed table', async () => {
    await create(fx.t, 'dereg', [1, 2]);
    expect(await count('dereg')).toBe(2);
    let entries = kept().entries;
    expect((await post('dereg', 'deregister', {})).status).toBe(200);
    expect(kept().entries).toBe(entries - 1);
    if (backend.name !== 'local') return; // an object store cannot rename
    await create(fx.t, 'before', [1, 2, 3]);
    expect(await count('before')).toBe(3);
    entries = kept().entries;
    expect((await post('before', 'rename', { new_table_name: 'after' })).status).toBe(200);
    expect(kept().entries).toBe(entries - 1);
    expect(await count('after')).toBe(3);
    // The old name is free again, for another table.
    await create(fx.t, 'before', [7]);
    expect(await count('before')).toBe(1);
  });
});

describe.each(backends())('kept datasets bounded in number on $name', (backend) => {
  const { fx, path, post } = useNamespaceFixture(backend, { keptDatasets: 2 });

  it('keeps at most the configured number of datasets, opening an evicted one again', async () => {
    for (const t of ['b1', 'b2', 'b3']) {
      expect((await fx.t.call('POST', path(t, 'create'), peopleStream([1, 2]), ARROW)).status).toBe(200);
      expect((await post(t, 'count_rows', {})).text).toBe('2');
      expect(fx.t.app.engine.keptStats().entries).toBeLessThanOrEqual(2);
    }
    const opens = fx.t.app.engine.keptStats().opens;
    expect((await post('b1', 'count_rows', {})).text).toBe('2');
    expect(fx.t.app.engine.keptStats().opens).toBe(opens + 1);
    expect(fx.t.app.engine.keptStats().entries).toBe(2);
  });
});

describe.each(backends())('no kept datasets on $name', (backend) => {
  const { fx, path, post } = useNamespaceFixture(backend, { keptDatasets: 0 });

  it('opens the dataset for every request when keeping none', async () => {
    expect(
      (
        await fx.t.call(
          'POST',
          path('k0', 'create'),
          Buffer.from(arrow.tableToIPC(new arrow.Table({ id: arrow.vectorFromArray(Int32Array.from([1])) }), 'stream')),
          ARROW,
        )
      ).status,
    ).toBe(200);
    expect((await post('k0', 'count_rows', {})).text).toBe('1');
    expect((await post('k0', 'count_rows', {})).text).toBe('1');
    expect(fx.t.app.engine.keptStats()).toMatchObject({ entries: 0, opens: 0 });
  });
});
