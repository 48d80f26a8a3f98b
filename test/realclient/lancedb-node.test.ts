import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { tableDirKey } from '../../src/service/catalog/layout.js';
import { listAll } from '../../src/store/object-store.js';
import { committedVersions } from '../support/app.js';
import { connectTable } from '../support/arrow-data.js';
import { backends, type TestRoot } from '../support/backends.js';
import { lancedb, useLancedbRestClient } from '../support/lancedb-client.js';

// The real @lancedb/lancedb client (its REST namespace implementation) against the running
// service. The client talks REST only for the catalog (namespaces, declare/describe/drop of
// tables) and reads and writes the table data straight on storage at the location the service
// answers; so for S3 roots it needs the credentials, which the service never vends (see
// useClientCredentials).

type Table = import('@lancedb/lancedb').Table;

const DIM = 4;

const schema = new arrow.Schema([
  new arrow.Field('id', new arrow.Int64(), false),
  new arrow.Field('name', new arrow.Utf8(), true),
  new arrow.Field('vec', new arrow.FixedSizeList(DIM, new arrow.Field('item', new arrow.Float32(), true)), true),
]);

interface Row {
  id: bigint;
  name: string;
  vec: number[];
}

/** Rows whose float values are exact in float32. */
function makeRows(from: number, count: number): Row[] {
  return Array.from({ length: count }, (_, i) => {
    const n = from + i;
    return { id: BigInt(n), name: `row-${n}`, vec: Array.from({ length: DIM }, (_, j) => n + j / 4) };
  });
}

/** An Arrow table with exactly `schema` (no inferred types, no dictionary strings). */
function arrowTable(rows: Row[]): import('apache-arrow').Table {
  const vecType = schema.fields[2]?.type as import('apache-arrow').FixedSizeList<import('apache-arrow').Float32>;
  const data = arrow.makeData({
    type: new arrow.Struct(schema.fields),
    length: rows.length,
    nullCount: 0,
    children: [
      arrow.vectorFromArray(
        rows.map((r) => r.id),
        new arrow.Int64(),
      ).data[0],
      arrow.vectorFromArray(
        rows.map((r) => r.name),
        new arrow.Utf8(),
      ).data[0],
      arrow.makeData({
        type: vecType,
        length: rows.length,
        nullCount: 0,
        child: arrow.makeData({ type: new arrow.Float32(), length: rows.length * DIM, data: Float32Array.from(rows.flatMap((r) => r.vec)) }),
      }),
    ].map((d) => {
      if (!d) throw new Error('empty column');
      return d;
    }),
  });
  return new arrow.Table(schema, new arrow.RecordBatch(schema, data));
}

/** All rows of a table, normalized and sorted by id. */
async function readAll(table: Table): Promise<Row[]> {
  const result = await table.query().toArrow();
  const ids = result.getChild('id');
  const names = result.getChild('name');
  const vecs = result.getChild('vec');
  if (!ids || !names || !vecs) throw new Error(`unexpected columns: ${result.schema.fields.map((f) => f.name).join(', ')}`);
  const rows: Row[] = [];
  for (let i = 0; i < result.numRows; i++) {
    const vec = vecs.get(i) as import('apache-arrow').Vector<import('apache-arrow').Float32> | null;
    rows.push({ id: BigInt(ids.get(i) as bigint), name: String(names.get(i)), vec: vec ? Array.from(vec.toArray()) : [] });
  }
  return rows.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/** Keys of the table's directory in the catalog root, relative to it (looked at behind the service's back). */
async function tableFiles(root: TestRoot, namespace: string[], name: string): Promise<string[]> {
  const dir = tableDirKey({ namespace, name });
  return (await listAll(root.store, dir)).objects.map((o) => o.key.slice(dir.length));
}

const manifests = (files: string[]) => files.filter((f) => /^_versions\/[^/]+\.manifest$/.test(f));

/** The service's own view of a table the client created: declared only, or with data. */
async function serviceSeesData(url: string, id: string[]): Promise<{ isOnlyDeclared: unknown; listedWithDataOnly: boolean }> {
  const enc = (parts: string[]) => encodeURIComponent(parts.join('$'));
  const described = await fetch(`${url}/v1/table/${enc(id)}/describe`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id, check_declared: true }),
  });
  expect(described.status).toBe(200);
  const body = (await described.json()) as { is_only_declared?: unknown };
  const listed = await fetch(`${url}/v1/namespace/${enc(id.slice(0, -1))}/table/list?include_declared=false`);
  expect(listed.status).toBe(200);
  const tables = ((await listed.json()) as { tables?: unknown }).tables;
  return { isOnlyDeclared: body.is_only_declared, listedWithDataOnly: Array.isArray(tables) && tables.includes(id.at(-1)) };
}

const unique = (prefix: string) => `${prefix}_${randomBytes(4).toString('hex')}`;

const DOC_ROWS = 60;

/**
 * Rows id, text, vec for the hybrid search: every third row says "alpha", each with its own term
 * count and length, so that no two full-text scores tie (a tie could be ranked either way).
 */
function docsTable(): import('apache-arrow').Table {
  const ids = Array.from({ length: DOC_ROWS }, (_, i) => i);
  const text = (i: number) => {
    if (i % 3 !== 0) return `beta w${i}`;
    const m = i / 3;
    return [...Array<string>(1 + (m % 4)).fill('alpha'), ...Array<string>(Math.floor(m / 4)).fill('pad'), `w${i}`].join(' ');
  };
  return new arrow.Table({
    id: arrow.vectorFromArray(BigInt64Array.from(ids.map(BigInt))),
    text: arrow.vectorFromArray(ids.map(text), new arrow.Utf8()),
    vec: arrow.vectorFromArray(
      ids.map((i) => Array.from({ length: DIM }, (_, j) => Math.sin(i * DIM + j))),
      new arrow.FixedSizeList(DIM, new arrow.Field('item', new arrow.Float32(), true)),
    ),
  });
}

/** Result rows as plain values, in order (int64 as numbers, vectors as arrays). */
function plainRows(rows: Array<Record<string, unknown>>): Array<Record<string, unknown>> {
  const value = (v: unknown): unknown => (typeof v === 'bigint' ? Number(v) : v instanceof arrow.Vector ? Array.from(v.toArray() as Float32Array) : v);
  return rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, value(v)])));
}

describe.each(backends())('@lancedb/lancedb REST namespace client on $name', (backend) => {
  const client = useLancedbRestClient(backend);

  it('creates, lists and describes a namespace with properties', async () => {
    const ns = unique('ns');
    const created = await client.db.createNamespace([ns], { properties: { owner: 'alice', purpose: 'real-client test' } });
    expect(created.properties ?? {}).toMatchObject({ owner: 'alice', purpose: 'real-client test' });

    const listed = await client.db.listNamespaces();
    expect(listed.namespaces).toContain(ns);

    const described = await client.db.describeNamespace([ns]);
    expect(described.properties).toEqual({ owner: 'alice', purpose: 'real-client test' });

    await client.db.dropNamespace([ns]);
    expect((await client.db.listNamespaces()).namespaces).not.toContain(ns);
  });

  it('creates, reads, appends to, lists and drops tables; restrict-drops the namespace only once empty', async () => {
    const ns = unique('ns');
    await client.db.createNamespace([ns], { properties: { kind: 'tables' } });

    const name = unique('items');
    const first = makeRows(0, 10);
    const created = await client.db.createTable(name, arrowTable(first), [ns], { schema });
    expect(await created.countRows()).toBe(10);
    created.close();
    // The client wrote the dataset itself, into the table's directory under the catalog client.root.
    expect(manifests(await tableFiles(client.root, [ns], name))).toHaveLength(1);
    expect(await serviceSeesData(client.app.url, [ns, name])).toEqual({ isOnlyDeclared: false, listedWithDataOnly: true });

    expect((await client.db.listTables([ns])).tables).toEqual([name]);

    const table = await client.db.openTable(name, [ns]);
    const opened = await table.schema();
    expect(opened.fields.map((f) => [f.name, String(f.type)])).toEqual([
      ['id', 'Int64'],
      ['name', 'Utf8'],
      ['vec', 'FixedSizeList[4]<Float32>'],
    ]);
    expect(await readAll(table)).toEqual(first);

    const more = makeRows(10, 5);
    await table.add(arrowTable(more));
    expect(await table.countRows()).toBe(15);
    expect(await table.countRows('id >= 10')).toBe(5);
    table.close();
    expect(manifests(await tableFiles(client.root, [ns], name))).toHaveLength(2);

    // A second handle sees the appended rows too (they went to storage, not to a cache).
    const reopened = await client.db.openTable(name, [ns]);
    expect(await readAll(reopened)).toEqual([...first, ...more]);
    reopened.close();

    const emptyName = unique('empty');
    const empty = await client.db.createEmptyTable(emptyName, schema, [ns]);
    expect(await empty.countRows()).toBe(0);
    empty.close();
    expect(await serviceSeesData(client.app.url, [ns, emptyName])).toEqual({ isOnlyDeclared: false, listedWithDataOnly: true });
    const emptyOpened = await client.db.openTable(emptyName, [ns]);
    expect(await emptyOpened.countRows()).toBe(0);
    expect((await emptyOpened.schema()).fields.map((f) => f.name)).toEqual(['id', 'name', 'vec']);
    emptyOpened.close();
    expect([...(await client.db.listTables([ns])).tables].sort()).toEqual([emptyName, name].sort());

    await client.db.dropTable(emptyName, [ns]);
    expect((await client.db.listTables([ns])).tables).toEqual([name]);
    await expect(client.db.openTable(emptyName, [ns])).rejects.toThrow(/not found/i);
    // Only the drop's tombstone is left (see table-fences.ts).
    expect(await tableFiles(client.root, [ns], emptyName)).toEqual(['.lance-deregistered']);

    // Restrict (the default) refuses a namespace that still holds a table.
    await expect(client.db.dropNamespace([ns])).rejects.toThrow(/not empty/i);
    expect((await client.db.listNamespaces()).namespaces).toContain(ns);
    expect((await client.db.listTables([ns])).tables).toEqual([name]);

    await client.db.dropTable(name, [ns]);
    expect((await client.db.listTables([ns])).tables).toEqual([]);
    expect(await tableFiles(client.root, [ns], name)).toEqual(['.lance-deregistered']);
    await client.db.dropNamespace([ns]);
    expect((await client.db.listNamespaces()).namespaces).not.toContain(ns);
  });

  // @lancedb/lancedb 0.39 runs the hybrid search in the client (both searches, then RRF) and has no
  // setting to push queries down to QueryTable (its connectNamespace takes none); LanceDB Python's
  // pushed-down hybrid search is tested in lancedb_client.py.
  it.each([false, true])('runs a hybrid search as the same search on the table itself does (managed versioning: %s)', async (managed) => {
    const ns = unique('hybrid');
    await client.db.createNamespace([ns], managed ? { properties: { managed_versioning: 'true' } } : {});
    const name = unique('docs');
    const table = await client.db.createTable(name, docsTable(), [ns]);
    await table.createIndex('text', { config: lancedb.Index.fts() });
    const described = await fetch(`${client.app.url}/v1/table/${encodeURIComponent(`${ns}$${name}`)}/describe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({}),
    });
    const { location, managed_versioning } = (await described.json()) as { location: string; managed_versioning?: boolean };
    expect(managed_versioning ?? false).toBe(managed);
    const direct = await connectTable(location, client.root.store.engineStorageOptions());
    try {
      expect(await direct.version()).toBe(await table.version());
      if (managed) expect(await table.version()).toBe(2);
      const rrf = await lancedb.rerankers.RRFReranker.create();
      const v = Array.from({ length: DIM }, (_, j) => Math.sin(4 * DIM + j));
      type Build = (q: import('@lancedb/lancedb').VectorQuery) => import('@lancedb/lancedb').VectorQuery;
      const searches: Record<string, Build> = {
        plain: (q) => q.limit(10),
        filtered: (q) => q.where('id >= 20').select(['id', 'text']).limit(8),
        'post-filtered': (q) => q.where('id % 2 = 0').postfilter().select(['id']).limit(8),
        'with row ids': (q) => q.select(['id']).withRowId().limit(6),
        paged: (q) => q.select(['id']).limit(5).offset(2),
      };
      const run = async (t: import('@lancedb/lancedb').Table, build: Build) =>
        plainRows((await build(t.query().nearestTo(v).column('vec').fullTextSearch('alpha').rerank(rrf)).toArray()) as Array<Record<string, unknown>>);
      for (const [label, build] of Object.entries(searches)) {
        const got = await run(table, build);
        expect(got, label).toEqual(await run(direct, build));
        expect(got.length, label).toBeGreaterThan(0);
        expect(Object.keys(got[0] ?? {}), label).toContain('_relevance_score');
      }
      // Both kinds of match: row 4 (the query's own vector, no "alpha") and text matches.
      const ids = (await run(table, searches.plain as Build)).map((r) => r.id);
      expect(ids).toContain(4);
      expect(ids.some((id) => (id as number) % 3 === 0)).toBe(true);
    } finally {
      direct.close();
      table.close();
    }
    await client.db.dropTable(name, [ns]);
    await client.db.dropNamespace([ns]);
  });

  it('branches both ways: the client opens and writes a branch the service forked, the service lists and counts one the client forked', async () => {
    const ns = unique('ns');
    await client.db.createNamespace([ns]);
    const name = unique('items');
    (await client.db.createTable(name, arrowTable(makeRows(0, 4)), [ns], { schema })).close();
    const enc = encodeURIComponent(`${ns}$${name}`);
    const call = async (op: string, body: unknown) => {
      const res = await fetch(`${client.app.url}/v1/table/${enc}/${op}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, text: await res.text() };
    };
    expect((await call('branches/create', { name: 'dev' })).status).toBe(200);
    const dev = await client.db.openTable(name, [ns], { branch: 'dev' });
    try {
      expect(dev.currentBranch()).toBe('dev');
      await dev.add(arrowTable(makeRows(10, 2)));
      expect(await dev.countRows()).toBe(6);
    } finally {
      dev.close();
    }
    expect((await call('count_rows', { branch: 'dev' })).text).toBe('6');
    expect((await call('count_rows', {})).text).toBe('4');

    const main = await client.db.openTable(name, [ns]);
    try {
      (await (await main.branches()).create('client/fork')).close();
    } finally {
      main.close();
    }
    const listed = JSON.parse((await call('branches/list', {})).text) as { branches: Record<string, { parentVersion: number }> };
    expect(Object.keys(listed.branches).sort()).toEqual(['client/fork', 'dev']);
    expect((await call('delete', { branch: 'client/fork', predicate: 'id = 0' })).status).toBe(200);
    const fork = await client.db.openTable(name, [ns], { branch: 'client/fork' });
    try {
      expect(await fork.countRows()).toBe(3);
    } finally {
      fork.close();
    }
    expect((await call('branches/delete', { name: 'client/fork' })).status).toBe(200);
    expect((await call('branches/delete', { name: 'dev' })).status).toBe(200);
    expect(JSON.parse((await call('branches/list', {})).text)).toEqual({ branches: {}, page_token: null });
  });

  it('works in a nested namespace a/b', async () => {
    const a = unique('a');
    const b = unique('b');
    await client.db.createNamespace([a], { properties: { level: '1' } });
    await client.db.createNamespace([a, b], { properties: { level: '2' } });
    expect((await client.db.listNamespaces([a])).namespaces).toEqual([b]);
    expect((await client.db.describeNamespace([a, b])).properties).toEqual({ level: '2' });

    const name = unique('nested');
    const rows = makeRows(100, 7);
    (await client.db.createTable(name, arrowTable(rows), [a, b], { schema })).close();
    expect((await client.db.listTables([a, b])).tables).toEqual([name]);
    expect((await client.db.listTables([a])).tables).toEqual([]);

    expect(manifests(await tableFiles(client.root, [a, b], name))).toHaveLength(1);

    const table = await client.db.openTable(name, [a, b]);
    expect(await readAll(table)).toEqual(rows);
    table.close();

    // Not empty: the child namespace holds a table, the parent holds the child.
    await expect(client.db.dropNamespace([a, b])).rejects.toThrow(/not empty/i);
    await expect(client.db.dropNamespace([a])).rejects.toThrow(/not empty/i);

    await client.db.dropTable(name, [a, b]);
    await client.db.dropNamespace([a, b]);
    await client.db.dropNamespace([a]);
    expect((await client.db.listNamespaces()).namespaces).not.toContain(a);
    await expect(client.db.describeNamespace([a])).rejects.toThrow(/not found|does not exist/i);
  });

  it('creates a branch of a managed table and appends to it: every commit through the service, main unmoved', async () => {
    const ns = unique('branches');
    await client.db.createNamespace([ns], { properties: { managed_versioning: 'true' } });
    const name = unique('t');
    const table = await client.db.createTable(name, arrowTable(makeRows(0, 3)), [ns], { schema });
    await table.add(arrowTable(makeRows(3, 2)));
    const before = await committedVersions(client.app);
    // The engine asks for the branch's latest version (404 code 22: none yet), then commits its first manifest through the service.
    const dev = await (await table.branches()).create('dev');
    expect(await dev.version()).toBe(2);
    await dev.add(arrowTable(makeRows(10, 2)));
    const opened = await client.db.openTable(name, [ns], { branch: 'dev' });
    expect([await opened.version(), await opened.countRows()]).toEqual([3, 7]);
    await opened.add(arrowTable(makeRows(20, 1)));
    expect(await committedVersions(client.app)).toBe(before + 3);
    const main = await client.db.openTable(name, [ns]);
    expect([await main.version(), await main.countRows()]).toEqual([2, 5]);
    const listed = await fetch(`${client.app.url}/v1/table/${encodeURIComponent(`${ns}$${name}`)}/version/list?branch=dev`);
    expect(((await listed.json()) as { versions: Array<{ version: number }> }).versions.map((v) => v.version)).toEqual([2, 3, 4]);
    for (const t of [table, dev, opened, main]) t.close();
    await client.db.dropTable(name, [ns]);
    await client.db.dropNamespace([ns]);
  });
});
