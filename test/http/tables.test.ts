import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../support/app.js';
import { connectTable, peopleStream, readRows } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

describe.each(backends())('tables on $name', (backend) => {
  const fx = useTestApp(backend);
  let engineOptions: Record<string, string>;
  beforeAll(async () => {
    engineOptions = fx.root.store.engineStorageOptions();
    await fx.t.call('POST', '/v1/namespace/ns/create', {});
  });

  const create = (id: string, ids: number[], query = '') => fx.t.call('POST', `/v1/table/${encodeURIComponent(id)}/create${query}`, peopleStream(ids), ARROW);

  it('declares a table: reserved marker, location, properties, and declared state', async () => {
    const res = await fx.t.call('POST', '/v1/table/ns%24decl/declare', { properties: { team: 'a' } });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ properties: { team: 'a' }, managed_versioning: false });
    expect(String(res.json.location)).toBe(fx.root.store.location('ns/decl.lance'));
    expect(await fx.root.store.head('ns/decl.lance/.lance-reserved')).not.toBeNull();
    const again = await fx.t.call('POST', '/v1/table/ns%24decl/declare', {});
    expect(again.status).toBe(409);
    expect(again.json.code).toBe(5);
    const described = await fx.t.call('POST', '/v1/table/ns%24decl/describe?check_declared=true', {});
    expect(described.json).toMatchObject({ is_only_declared: true, properties: { team: 'a' } });
    const plain = await fx.t.call('POST', '/v1/table/ns%24decl/describe', {});
    expect(plain.json.is_only_declared).toBeUndefined();
    const detailed = await fx.t.call('POST', '/v1/table/ns%24decl/describe', { load_detailed_metadata: true });
    expect(detailed.status).toBe(409);
    expect(detailed.json.code).toBe(19);
    expect((await fx.t.call('GET', '/v1/namespace/ns/table/list')).json.tables).toContain('decl');
    expect((await fx.t.call('GET', '/v1/namespace/ns/table/list?include_declared=false')).json.tables).not.toContain('decl');
  });

  it('switches managed versioning on with the managed_versioning property', async () => {
    const res = await fx.t.call('POST', '/v1/table/ns%24managed/declare', { properties: { managed_versioning: 'true' } });
    expect(res.json.managed_versioning).toBe(true);
    expect((await fx.t.call('POST', '/v1/table/ns%24managed/describe', {})).json.managed_versioning).toBe(true);
  });

  it('refuses a declare location other than the table directory', async () => {
    const res = await fx.t.call('POST', '/v1/table/ns%24elsewhere/declare', { location: 'other/place.lance' });
    expect(res.status).toBe(400);
    expect(res.json.code).toBe(13);
    expect((await fx.t.call('POST', '/v1/table/ns%24elsewhere/exists', {})).status).toBe(404);
  });

  it('refuses a create location other than the table directory, as declare does', async () => {
    const q = (location: string) => `?location=${encodeURIComponent(location)}`;
    const declared = await fx.t.call('POST', '/v1/table/ns%24placed/declare', { location: 'other/place.lance' });
    const created = await create('ns$placed', [1], q('other/place.lance'));
    for (const res of [declared, created]) {
      expect(res.status, res.text).toBe(400);
      expect(res.json.code).toBe(13);
      expect(String(res.json.error)).toMatch(/^location "other\/place\.lance" differs from the table's location ns\/placed\.lance; /);
    }
    expect((await fx.t.call('POST', '/v1/table/ns%24placed/exists', {})).status).toBe(404);
    expect((await fx.root.store.list('other/')).objects).toEqual([]);
    // Where the table goes anyway is accepted, in any form; an existing table keeps its place.
    const own = await create('ns$placed', [1, 2], q(fx.root.store.location('ns/placed.lance')));
    expect(own.status, own.text).toBe(200);
    expect((await create('ns$placed', [3], `${q('ns/placed.lance')}&mode=overwrite`)).status).toBe(200);
    const moved = await create('ns$placed', [4], `${q('ns/moved.lance')}&mode=overwrite`);
    expect(moved.status).toBe(400);
    expect(String(moved.json.error)).toMatch(/^location "ns\/moved\.lance" differs from the table's location ns\/placed\.lance; /);
    expect((await readRows(String(own.json.location), engineOptions)).map((r) => r.id)).toEqual([3]);
  });

  it('creates a table from an Arrow IPC stream and the rows are in the dataset', async () => {
    const res = await create('ns$people', [1, 2, 3], `?properties=${encodeURIComponent('{"owner":"bo"}')}`);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ version: 1, properties: { owner: 'bo' } });
    expect(res.json.location).toBe(fx.root.store.location('ns/people.lance'));
    expect(await readRows(String(res.json.location), engineOptions)).toEqual([
      { id: 1, name: 'name-1' },
      { id: 2, name: 'name-2' },
      { id: 3, name: 'name-3' },
    ]);
    const described = await fx.t.call('POST', '/v1/table/ns%24people/describe?load_detailed_metadata=true&with_table_uri=true', {});
    expect(described.json).toMatchObject({ version: 1, table: 'people', namespace: ['ns'], is_only_declared: false, properties: { owner: 'bo' } });
    expect(String(described.json.table_uri)).toMatch(/^(file|s3):\/\//);
    expect((await fx.t.call('POST', '/v1/table/ns%24people/exists', { version: 1 })).status).toBe(200);
    const noVersion = await fx.t.call('POST', '/v1/table/ns%24people/exists', { version: 7 });
    expect(noVersion.status).toBe(404);
    expect(noVersion.json.code).toBe(11);
  });

  it('honours the create modes on an existing table', async () => {
    await create('ns$modes', [1]);
    const again = await create('ns$modes', [2]);
    expect(again.status).toBe(409);
    expect(again.json.code).toBe(5);
    const existOk = await create('ns$modes', [3], '?mode=exist_ok');
    expect(existOk.json.version).toBe(1);
    const overwrite = await create('ns$modes', [4, 5], '?mode=Overwrite');
    expect(overwrite.status).toBe(200);
    expect(overwrite.json.version).toBe(2);
    expect((await readRows(String(overwrite.json.location), engineOptions)).map((r) => r.id)).toEqual([4, 5]);
  });

  it('describes detailed metadata: JSON Arrow schema, stats, and any earlier version', async () => {
    const created = await create('ns$detail', [1, 2, 3, 4]);
    const location = String(created.json.location);
    // Delete two rows behind the service's back, as a client writing directly would.
    const table = await connectTable(location, engineOptions);
    await table.delete('id <= 2');
    table.close();
    const res = await fx.t.call('POST', '/v1/table/ns%24detail/describe', { load_detailed_metadata: true });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      version: 2,
      table: 'detail',
      namespace: ['ns'],
      stats: { num_deleted_rows: 2, num_fragments: 1 },
      metadata: {},
      schema: {
        fields: [
          { name: 'id', nullable: false, type: { type: 'int64' } },
          { name: 'name', nullable: true, type: { type: 'utf8' } },
        ],
      },
    });
    const first = await fx.t.call('POST', '/v1/table/ns%24detail/describe', { load_detailed_metadata: true, version: 1 });
    expect(first.json).toMatchObject({ version: 1, stats: { num_deleted_rows: 0, num_fragments: 1 } });
    const missing = await fx.t.call('POST', '/v1/table/ns%24detail/describe', { load_detailed_metadata: true, version: 40 });
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe(11);
  });

  it('makes an empty table from a schema-only stream and rejects a missing or broken body', async () => {
    const empty = await create('ns$empty', []);
    expect(empty.status).toBe(200);
    expect(empty.json.version).toBe(1);
    expect(await readRows(String(empty.json.location), engineOptions)).toEqual([]);
    const none = await fx.t.call('POST', '/v1/table/ns%24nobody/create', Buffer.alloc(0), ARROW);
    expect(none.status).toBe(400);
    expect(none.json.code).toBe(13);
    expect(String(none.json.error)).toMatch(/Arrow IPC/);
    const junk = await fx.t.call('POST', '/v1/table/ns%24junk/create', Buffer.from('not arrow at all'), ARROW);
    expect(junk.status).toBe(400);
    for (const name of ['nobody', 'junk']) expect((await fx.t.call('POST', `/v1/table/ns%24${name}/exists`, {})).status).toBe(404);
    const badProps = await fx.t.call('POST', `/v1/table/ns%24bp/create?properties=${encodeURIComponent('[1]')}`, peopleStream([1]), ARROW);
    expect(badProps.status).toBe(400);
    expect(String(badProps.json.error)).toContain('properties');
  });

  it('fills a declared table with create, after which it is no longer declared-only', async () => {
    await fx.t.call('POST', '/v1/table/ns%24later/declare', { properties: { p: '1' } });
    const res = await create('ns$later', [9]);
    expect(res.status).toBe(200);
    expect(res.json.properties).toEqual({ p: '1' });
    expect((await fx.t.call('POST', '/v1/table/ns%24later/describe?check_declared=true', {})).json.is_only_declared).toBe(false);
    expect(await fx.root.store.head('ns/later.lance/.lance-reserved')).toBeNull();
  });

  it('needs the namespace to exist', async () => {
    const res = await create('ghost$t', [1]);
    expect(res.status).toBe(404);
    expect(res.json.code).toBe(1);
    const declared = await fx.t.call('POST', '/v1/table/ghost%24t/declare', {});
    expect(declared.json.code).toBe(1);
  });

  it('deregisters (hides, keeps data, frees the name) and registers a dataset again, also under a new name', async () => {
    const created = await create('ns$reg', [1, 2]);
    const location = String(created.json.location);
    const dereg = await fx.t.call('POST', '/v1/table/ns%24reg/deregister', {});
    expect(dereg.status).toBe(200);
    expect(dereg.json).toMatchObject({ id: ['ns', 'reg'], location });
    expect((await fx.t.call('POST', '/v1/table/ns%24reg/exists', {})).status).toBe(404);
    expect((await fx.t.call('GET', '/v1/namespace/ns/table/list')).json.tables).not.toContain('reg');
    expect(await readRows(location, engineOptions)).toHaveLength(2);
    // The name is free, as in Lance's own directory catalog: no table to drop, and a new table of
    // the name goes to a directory of its own, leaving the deregistered data as it is.
    expect((await fx.t.call('POST', '/v1/table/ns%24reg/drop')).json.code).toBe(4);
    const again = await create('ns$reg', [5]);
    expect(again.status, again.text).toBe(200);
    const newLocation = String(again.json.location);
    expect(newLocation).not.toBe(location);
    expect(newLocation.startsWith(fx.root.store.location('ns/.lance-table-'))).toBe(true);
    expect((await fx.t.call('POST', '/v1/table/ns%24reg/describe', {})).json.location).toBe(newLocation);
    expect((await fx.t.call('GET', '/v1/namespace/ns/table/list')).json.tables).toContain('reg');
    expect((await fx.t.call('POST', '/v1/table/ns%24reg/count_rows', {})).json).toEqual({ value: 1 });
    expect(await readRows(location, engineOptions)).toHaveLength(2);
    const copy = await fx.t.call('POST', '/v1/table/ns%24regcopy/register', { location, properties: { src: 'reg' } });
    expect(copy.status).toBe(200);
    expect(copy.json).toEqual({ location, properties: { src: 'reg' } });
    const described = await fx.t.call('POST', '/v1/table/ns%24regcopy/describe?load_detailed_metadata=true', {});
    expect(described.json).toMatchObject({ location, version: 1, properties: { src: 'reg' } });
    // While the new table holds the name, the old data cannot be registered under it.
    const taken = await fx.t.call('POST', '/v1/table/ns%24reg/register', { location: 'reg.lance' });
    expect(taken.json.code).toBe(5);
    // Dropped, the new table takes only its own directory along.
    expect((await fx.t.call('POST', '/v1/table/ns%24reg/drop')).status).toBe(200);
    expect((await fx.root.store.list(newLocation.slice(fx.root.store.location('').length).replace(/^\/+/, ''))).objects).toEqual([]);
    expect(await readRows(location, engineOptions)).toHaveLength(2);
    // A relative location is one in the directory that holds the namespace's tables; registering
    // the deregistered data where it lies brings it back under its name.
    const back = await fx.t.call('POST', '/v1/table/ns%24reg/register', { location: 'reg.lance' });
    expect(back.status).toBe(200);
    // Answered with the location as sent (as Lance's reference server does); described as resolved.
    expect(back.json.location).toBe('reg.lance');
    expect((await fx.t.call('POST', '/v1/table/ns%24reg/describe', {})).json.location).toBe(location);
    expect((await fx.t.call('POST', '/v1/table/ns%24reg/exists', {})).status).toBe(200);
    expect(await fx.root.store.head('ns/reg.lance/.lance-deregistered')).toBeNull();
    const dup = await fx.t.call('POST', '/v1/table/ns%24reg/register', { location });
    expect(dup.status).toBe(409);
    expect(dup.json.code).toBe(5);
    const over = await fx.t.call('POST', '/v1/table/ns%24reg/register', { location, mode: 'overwrite', properties: { v: '2' } });
    expect(over.status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/ns%24reg/describe', {})).json.properties).toEqual({ v: '2' });
    // Dropping a registration leaves the data at its location, which another table may share.
    expect((await fx.t.call('POST', '/v1/table/ns%24regcopy/drop')).status).toBe(200);
    expect(await readRows(location, engineOptions)).toHaveLength(2);
    expect((await fx.t.call('POST', '/v1/table/ns%24reg/describe', { load_detailed_metadata: true })).json.version).toBe(1);
  });

  it("refuses absolute locations outside the catalog and `..` in the words of Lance's reference server", async () => {
    // Lance's own REST namespace tests match these phrases exactly; what follows each says why here.
    const refusals: Array<[string, string]> = [
      ['s3://some-other-bucket/table.lance', 'Absolute URIs are not allowed'],
      ['gs://bucket/table.lance', 'Absolute URIs are not allowed'],
      ['/elsewhere/table.lance', 'Absolute paths are not allowed'],
      ['../outside/table.lance', 'Path traversal is not allowed'],
      ['ns/../../x', 'Path traversal is not allowed'],
    ];
    for (const [location, phrase] of refusals) {
      const res = await fx.t.call('POST', '/v1/table/ns%24refused/register', { location });
      expect(res.status, location).toBe(400);
      expect(res.json.code, location).toBe(13);
      const message = String(res.json.error);
      expect(message.startsWith(phrase), message).toBe(true);
      expect(message, location).toContain(JSON.stringify(location));
    }
    expect((await fx.t.call('POST', '/v1/table/ns%24refused/exists', {})).status).toBe(404);
  });

  it('refuses to register what is not a readable Lance dataset', async () => {
    await fx.t.call('POST', '/v1/table/ns%24d2/declare', {});
    for (const location of ['ns/d2.lance', 'ns/nothing-here', '../escape', 'ns/../../x', 'gs://bucket/t', '']) {
      const res = await fx.t.call('POST', '/v1/table/ns%24notds/register', { location });
      expect(res.status, location).toBe(400);
      expect(res.json.code, location).toBe(13);
    }
    expect((await fx.t.call('POST', '/v1/table/ns%24notds/exists', {})).status).toBe(404);
  });

  it('drops a table and its data', async () => {
    const created = await create('ns$gone', [1]);
    expect(created.status).toBe(200);
    const dropped = await fx.t.call('POST', '/v1/table/ns%24gone/drop');
    expect(dropped.status).toBe(200);
    expect(dropped.json).toMatchObject({ id: ['ns', 'gone'], location: created.json.location });
    expect((await fx.t.call('POST', '/v1/table/ns%24gone/exists', {})).status).toBe(404);
    // Only the tombstone stays, so that nothing a late writer leaves is taken for the table.
    expect((await fx.root.store.list('ns/gone.lance/')).objects.map((o) => o.key)).toEqual(['ns/gone.lance/.lance-deregistered']);
    const again = await fx.t.call('POST', '/v1/table/ns%24gone/drop');
    expect(again.status).toBe(404);
    expect(again.json.code).toBe(4);
    // The name is free again, and the new table clears the tombstone.
    expect((await create('ns$gone', [2])).status).toBe(200);
    expect(await fx.root.store.head('ns/gone.lance/.lance-deregistered')).toBeNull();
  });

  it('renames atomically on a local root and answers 406 on an object store', async () => {
    await create('ns$before', [1]);
    const res = await fx.t.call('POST', '/v1/table/ns%24before/rename', { new_table_name: 'after' });
    if (backend.name === 'local') {
      expect(res.status).toBe(200);
      expect((await fx.t.call('POST', '/v1/table/ns%24before/exists', {})).status).toBe(404);
      const described = await fx.t.call('POST', '/v1/table/ns%24after/describe?load_detailed_metadata=true', {});
      expect(described.json.version).toBe(1);
      await create('ns$taken', [1]);
      const clash = await fx.t.call('POST', '/v1/table/ns%24after/rename', { new_table_name: 'taken' });
      expect(clash.status).toBe(409);
      expect(clash.json.code).toBe(5);
    } else {
      expect(res.status).toBe(406);
      expect(res.json.code).toBe(0);
      expect(String(res.json.error)).toContain('rename');
    }
  });

  it('lists tables with pagination and lists all tables across namespaces', async () => {
    await fx.t.call('POST', '/v1/namespace/la/create', {});
    await fx.t.call('POST', '/v1/namespace/la%24sub/create', {});
    for (const id of ['la$t1', 'la$t2', 'la$t3', 'la$sub$deep']) await fx.t.call('POST', `/v1/table/${encodeURIComponent(id)}/declare`, {});
    const seen: string[] = [];
    let token: unknown = null;
    do {
      const q = token ? `?limit=2&page_token=${encodeURIComponent(String(token))}` : '?limit=2';
      const res = await fx.t.call('GET', `/v1/namespace/la/table/list${q}`);
      seen.push(...(res.json.tables as string[]));
      token = res.json.page_token;
    } while (token);
    expect(seen).toEqual(['t1', 't2', 't3']);
    const all = await fx.t.call('GET', '/v1/table');
    const ids = all.json.tables as string[];
    expect(ids).toEqual(expect.arrayContaining(['la$t1', 'la$t2', 'la$t3', 'la$sub$deep', 'ns$people']));
    expect([...ids].sort()).toEqual(ids.slice().sort());
    const paged: string[] = [];
    token = null;
    do {
      const q = token ? `?limit=3&page_token=${encodeURIComponent(String(token))}` : '?limit=3';
      const res = await fx.t.call('GET', `/v1/table${q}`);
      paged.push(...(res.json.tables as string[]));
      token = res.json.page_token;
    } while (token);
    expect(paged).toEqual(ids);
    const dotted = await fx.t.call('GET', '/v1/table?delimiter=.');
    expect(dotted.json.tables).toContain('la.sub.deep');
  });

  it('lets query flags win over body flags and rejects a body id that disagrees with the path', async () => {
    await create('ns$flags', [1]);
    const res = await fx.t.call('POST', '/v1/table/ns%24flags/describe?with_table_uri=true', { with_table_uri: false });
    expect(res.json.table_uri).toBeDefined();
    const off = await fx.t.call('POST', '/v1/table/ns%24flags/describe?with_table_uri=false', { with_table_uri: true });
    expect(off.json.table_uri).toBeUndefined();
    const bodyOnly = await fx.t.call('POST', '/v1/table/ns%24flags/describe', { with_table_uri: true });
    expect(bodyOnly.json.table_uri).toBeDefined();
    const mismatch = await fx.t.call('POST', '/v1/table/ns%24flags/describe', { id: ['ns', 'other'] });
    expect(mismatch.status).toBe(400);
    expect(mismatch.json.code).toBe(13);
    const matching = await fx.t.call('POST', '/v1/table/ns%24flags/describe', { id: ['ns', 'flags'] });
    expect(matching.status).toBe(200);
  });
});
