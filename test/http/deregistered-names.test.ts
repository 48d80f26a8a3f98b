import { describe, expect, it } from 'vitest';
import { encodeRecord } from '../../src/service/catalog/records.js';
import { listAll } from '../../src/store/object-store.js';
import { useNamespaceFixture } from '../support/app.js';
import { peopleStream, readRows } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';

// The edges of a deregistered name (the invariant in
// src/service/tables/table-state.ts): what else meets a name whose directory holds a deregistered
// table's data. The races and crashes are in test/process/deregistered-names.test.ts.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

describe.each(backends())('deregistered names on $name', (backend) => {
  const { fx, path } = useNamespaceFixture(backend);
  const create = (table: string, ids: number[]) => fx.t.call('POST', path(table, 'create'), peopleStream(ids), ARROW);
  const marker = async (table: string) =>
    JSON.parse((await fx.root.store.get(`ns/${table}.lance/.lance-deregistered`))?.body.toString() ?? 'null') as Record<string, unknown> | null;
  /** The dataset files under a key with their etags (not the name's own files: its record and markers). */
  const files = async (key: string) =>
    (await listAll(fx.root.store, key, { details: true })).objects
      .filter((o) => !o.key.includes('/.lance-'))
      .map((o) => `${o.key} ${o.etag}`)
      .sort();

  it('a table declared over deregistered data lives elsewhere: listings see its data once Lance writes it there', async () => {
    await create('decl', [1]);
    expect((await fx.t.call('POST', path('decl', 'deregister'), {})).status).toBe(200);
    const declared = await fx.t.call('POST', path('decl', 'declare'), {});
    expect(declared.status, declared.text).toBe(200);
    const location = String(declared.json.location);
    expect(location.startsWith(fx.root.store.location('ns/.lance-table-'))).toBe(true);
    // A location the client asks for must be the one the table gets.
    const elsewhere = await fx.t.call('POST', path('decl2', 'declare'), { location: 'ns/decl.lance' });
    expect(elsewhere.status).toBe(400);
    const listed = async () => (await fx.t.call('GET', '/v1/namespace/ns/table/list?include_declared=false')).json.tables;
    expect(await listed()).not.toContain('decl');
    expect((await fx.t.call('POST', path('decl', 'describe?check_declared=true'), {})).json.is_only_declared).toBe(true);
    // A Lance client writes the declared table's first version at its location, behind the catalog.
    const key = `${location.slice(fx.root.store.location('').replace(/\/+$/, '').length).replace(/^\/+/, '')}/`;
    await fx.root.store.put(`${key}_versions/1.manifest`, 'x');
    expect(await listed()).toContain('decl');
    expect((await fx.t.call('POST', path('decl', 'describe?check_declared=true'), {})).json.is_only_declared).toBe(false);
  });

  it('deregistering the table made over deregistered data keeps both, in a batch too', async () => {
    const first = await create('twice', [1]);
    expect((await fx.t.call('POST', path('twice', 'deregister'), {})).status).toBe(200);
    const firstFiles = await files('ns/twice.lance/');
    const second = await create('twice', [2, 3]);
    const batch = await fx.t.call('POST', '/v1/table/batch-commit', { operations: [{ deregister_table: { id: ['ns', 'twice'] } }] });
    expect(batch.status, batch.text).toBe(200);
    expect(batch.json.results).toEqual([{ deregister_table: { id: ['ns', 'twice'], location: second.json.location, properties: null } }]);
    expect((await fx.t.call('POST', path('twice', 'exists'), {})).status).toBe(404);
    expect(await marker('twice')).toMatchObject({ retired: true });
    const third = await create('twice', [4]);
    expect(third.status).toBe(200);
    expect(new Set([first.json.location, second.json.location, third.json.location]).size).toBe(3);
    expect(await files('ns/twice.lance/')).toEqual(firstFiles);
    expect((await readRows(String(first.json.location), fx.root.store.engineStorageOptions())).map((r) => r.id)).toEqual([1]);
    expect((await fx.t.call('POST', path('twiceback', 'register'), { location: second.json.location })).status).toBe(200);
    expect((await fx.t.call('POST', path('twiceback', 'count_rows'), {})).json).toEqual({ value: 2 });
  });

  it('a batch cannot declare a name whose directory holds deregistered data (its versions are staged there); DeclareTable can', async () => {
    await create('batched', [1]);
    expect((await fx.t.call('POST', path('batched', 'deregister'), {})).status).toBe(200);
    const batch = await fx.t.call('POST', '/v1/table/batch-commit', { operations: [{ declare_table: { id: ['ns', 'batched'] } }] });
    expect(batch.status).toBe(409);
    expect(batch.json.code).toBe(5);
    expect(String(batch.json.error)).toContain('deregistered');
    expect((await fx.t.call('POST', path('batched', 'declare'), {})).status).toBe(200);
  });

  it("a registered table deregistered leaves its name's directory free: the next table of the name lives in it again, in a batch too", async () => {
    const source = await create('src', [1]);
    expect((await fx.t.call('POST', path('alias', 'register'), { location: source.json.location })).status).toBe(200);
    expect((await fx.t.call('POST', path('alias', 'deregister'), {})).status).toBe(200);
    const batch = await fx.t.call('POST', '/v1/table/batch-commit', { operations: [{ declare_table: { id: ['ns', 'alias'] } }] });
    expect(batch.status, batch.text).toBe(200);
    expect((await fx.t.call('POST', path('alias', 'describe'), {})).json.location).toBe(fx.root.store.location('ns/alias.lance'));
    expect(await fx.root.store.head('ns/alias.lance/.lance-deregistered')).toBeNull();
    expect((await fx.t.call('POST', path('src', 'count_rows'), {})).json).toEqual({ value: 1 });
  });

  it('a deregistered marker of an earlier version (no incarnation) retires the directory and is rewritten before a new table takes the name', async () => {
    const made = await create('legacy', [1, 2]);
    const before = await files('ns/legacy.lance/_versions/');
    await fx.root.store.put('ns/legacy.lance/.lance-deregistered', encodeRecord({ deregistered_at: '2026-01-01T00:00:00.000Z' }));
    expect((await fx.t.call('POST', path('legacy', 'exists'), {})).status).toBe(404);
    expect((await fx.t.call('POST', path('legacy', 'drop'), {})).status).toBe(404);
    const again = await create('legacy', [3]);
    expect(again.status, again.text).toBe(200);
    expect(again.json.location).not.toBe(made.json.location);
    expect(await marker('legacy')).toMatchObject({ deregistered_at: '2026-01-01T00:00:00.000Z', retired: true });
    expect((await fx.t.call('POST', path('legacy', 'drop'), {})).status).toBe(200);
    expect(await files('ns/legacy.lance/_versions/')).toEqual(before);
    // Registered in place under its own name, the data is the name's table again, and its drop takes it.
    expect((await fx.t.call('POST', path('legacy', 'register'), { location: 'legacy.lance' })).status).toBe(200);
    expect(await marker('legacy')).toBeNull();
    expect((await fx.t.call('POST', path('legacy', 'count_rows'), {})).json).toEqual({ value: 2 });
    expect((await fx.t.call('POST', path('legacy', 'drop'), {})).status).toBe(200);
    expect(await files('ns/legacy.lance/_versions/')).toEqual([]);
  });

  it.runIf(backend.name === 'local')('rename refuses to move deregistered data: from a table made over it, or onto its name (406)', async () => {
    await create('moved', [1]);
    expect((await fx.t.call('POST', path('moved', 'deregister'), {})).status).toBe(200);
    await create('moved', [2]);
    const from = await fx.t.call('POST', path('moved', 'rename'), { new_table_name: 'moved2' });
    expect(from.status).toBe(406);
    expect(String(from.json.error)).toContain('deregistered');
    await create('other', [3]);
    const onto = await fx.t.call('POST', path('other', 'rename'), { new_table_name: 'moved' });
    expect(onto.status).toBe(406);
    expect((await fx.t.call('POST', path('other', 'count_rows'), {})).json).toEqual({ value: 1 });
  });
});
