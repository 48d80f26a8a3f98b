import { createRequire } from 'node:module';
import { beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { type JsonArrowSchema, schemaToJson } from '../../src/engine/json-arrow-schema.js';
import { formatFieldPath, parseFieldPath } from '../../src/model/columns.js';
import { committedVersions, useTestApp } from '../support/app.js';
import { connectTable } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';

const lancedb = createRequire(import.meta.url)('@lancedb/lancedb') as typeof import('@lancedb/lancedb');

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

/** Rows {id: int64, name: utf8, score: float64, qty: int32, s: struct{x: int32, `y.z`: utf8}} as an Arrow IPC stream. */
function richStream(ids: number[]): Buffer {
  const struct = new arrow.Struct([new arrow.Field('x', new arrow.Int32(), true), new arrow.Field('y.z', new arrow.Utf8(), true)]);
  const table = new arrow.Table({
    id: arrow.vectorFromArray(BigInt64Array.from(ids.map(BigInt))),
    name: arrow.vectorFromArray(
      ids.map((i) => `name-${i}`),
      new arrow.Utf8(),
    ),
    score: arrow.vectorFromArray(
      ids.map((i) => i + 0.5),
      new arrow.Float64(),
    ),
    qty: arrow.vectorFromArray(
      ids.map((i) => i * 10),
      new arrow.Int32(),
    ),
    s: arrow.vectorFromArray(
      ids.map((i) => ({ x: i, 'y.z': `yz-${i}` })),
      struct,
    ),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

/** Plain JSON-able values: bigints become numbers, Arrow rows and structs plain objects. */
function plain(value: unknown): unknown {
  if (typeof value === 'bigint') return Number(value);
  if (value === null || typeof value !== 'object') return value;
  if (ArrayBuffer.isView(value)) return Array.from(value as unknown as ArrayLike<number>);
  if (Array.isArray(value)) return value.map(plain);
  const source = typeof (value as { toJSON?: unknown }).toJSON === 'function' ? (value as { toJSON(): unknown }).toJSON() : value;
  if (source === null || typeof source !== 'object') return source;
  return Object.fromEntries(Object.entries(source as Record<string, unknown>).map(([k, v]) => [k, plain(v)]));
}

interface Snapshot {
  version: number;
  schema: JsonArrowSchema;
  rows: Array<Record<string, unknown>>;
}

describe.each(backends())('columns and stats on $name', (backend) => {
  const fx = useTestApp(backend);
  let engineOptions: Record<string, string>;
  let seq = 0;
  beforeAll(async () => {
    engineOptions = fx.root.store.engineStorageOptions();
    expect((await fx.t.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
  });

  /** A fresh table ns$<prefix><n> with rows `ids`; returns its path id and location. */
  async function newTable(prefix: string, ids = [1, 2, 3]): Promise<{ path: string; location: string }> {
    const name = `${prefix}${++seq}`;
    const res = await fx.t.call('POST', `/v1/table/ns%24${name}/create`, richStream(ids), ARROW);
    expect(res.status).toBe(200);
    return { path: `/v1/table/ns%24${name}`, location: String(res.json.location) };
  }

  /** The dataset as the engine reads it directly: version, schema, rows by id. */
  async function snapshot(location: string): Promise<Snapshot> {
    const table = await connectTable(location, engineOptions);
    try {
      const rows = ((await table.query().toArray()) as unknown[]).map((r) => plain(r) as Record<string, unknown>);
      rows.sort((a, b) => Number(a.id) - Number(b.id));
      return { version: await table.version(), schema: schemaToJson(await table.schema()), rows };
    } finally {
      table.close();
    }
  }

  const field = (s: Snapshot, name: string) => s.schema.fields.find((f) => f.name === name);

  /** Expects an error response with the code, and that the dataset did not change. */
  async function expectRefused(
    location: string,
    call: () => Promise<{ status: number; json: Record<string, unknown> }>,
    status: number,
    code: number,
    message?: RegExp,
  ) {
    const before = await snapshot(location);
    const res = await call();
    expect(res.status, JSON.stringify(res.json)).toBe(status);
    expect(res.json.code).toBe(code);
    if (message) expect(String(res.json.error)).toMatch(message);
    expect(await snapshot(location)).toEqual(before);
    return res;
  }

  describe('alter_columns', () => {
    it('renames, casts and changes nullability in one commit, nested and quoted paths included', async () => {
      const { path, location } = await newTable('alter');
      const before = await snapshot(location);
      const res = await fx.t.call('POST', `${path}/alter_columns`, {
        alterations: [
          { path: 'name', rename: 'title' },
          { path: 'score', data_type: { type: 'float32' } },
          { path: 'qty', data_type: { type: 'int64' }, nullable: true },
          { path: 'id', nullable: true },
          { path: 's.x', rename: 'xx' },
          { path: 's.`y.z`', rename: 'yz' },
        ],
      });
      expect(res.status, res.text).toBe(200);
      expect(res.json).toEqual({ version: before.version + 1 });
      const after = await snapshot(location);
      expect(after.version).toBe(before.version + 1);
      expect(after.schema.fields.map((f) => [f.name, f.type.type])).toEqual([
        ['id', 'int64'],
        ['title', 'utf8'],
        ['score', 'float32'],
        ['qty', 'int64'],
        ['s', 'struct'],
      ]);
      expect(field(after, 's')?.type.fields?.map((f) => f.name)).toEqual(['xx', 'yz']);
      expect(field(after, 'id')?.nullable).toBe(true);
      // The values are the same values under the new names and types.
      expect(after.rows).toEqual(
        before.rows.map((r) => ({
          id: r.id,
          title: r.name,
          score: r.score,
          qty: r.qty,
          s: { xx: (r.s as { x: number }).x, yz: (r.s as Record<string, unknown>)['y.z'] },
        })),
      );
      // Describe serves the new schema in the JSON Arrow form.
      const described = await fx.t.call('POST', `${path}/describe`, { load_detailed_metadata: true });
      expect((described.json.schema as JsonArrowSchema).fields.map((f) => f.type.type)).toEqual(['int64', 'utf8', 'float32', 'int64', 'struct']);
    });

    it('maps JSON Arrow names to Lance casts: large_utf8, timestamp, fixed_size_list', async () => {
      const { path, location } = await newTable('cast');
      const res = await fx.t.call('POST', `${path}/alter_columns`, { alterations: [{ path: 'name', data_type: { type: 'large_utf8' } }] });
      expect(res.status, res.text).toBe(200);
      expect(field(await snapshot(location), 'name')?.type).toEqual({ type: 'large_utf8' });
      const table = await connectTable(location, engineOptions);
      try {
        await table.addColumns([
          { name: 'ts', valueSql: "arrow_cast(to_timestamp_millis(id * 1000), 'Timestamp(Millisecond, None)')" },
          { name: 'vec', valueSql: "arrow_cast(make_array(cast(id as float), cast(id as float)), 'FixedSizeList(2, Float32)')" },
        ]);
      } finally {
        table.close();
      }
      const before = await snapshot(location);
      const cast = await fx.t.call('POST', `${path}/alter_columns`, {
        alterations: [
          { path: 'ts', data_type: { type: 'timestamp' } },
          { path: 'vec', data_type: { type: 'fixed_size_list', length: 2, fields: [{ name: 'item', nullable: true, type: { type: 'float16' } }] } },
        ],
      });
      expect(cast.status, cast.text).toBe(200);
      const after = await snapshot(location);
      expect(after.version).toBe(before.version + 1);
      const conn = await connectTable(location, engineOptions);
      try {
        const schema = await conn.schema();
        expect(String(schema.fields.find((f) => f.name === 'ts')?.type)).toBe('Timestamp<MICROSECOND>');
        expect(String(schema.fields.find((f) => f.name === 'vec')?.type)).toBe('FixedSizeList[2]<Float16>');
      } finally {
        conn.close();
      }
      expect(after.rows.map((r) => r.id)).toEqual(before.rows.map((r) => r.id));
    });

    it('refuses unknown columns (404 code 12) and impossible or malformed changes (400 code 13), changing nothing', async () => {
      const { path, location } = await newTable('alterbad');
      const alter = (alterations: unknown) => () => fx.t.call('POST', `${path}/alter_columns`, { alterations });
      await expectRefused(
        location,
        alter([
          { path: 'name', rename: 'ok' },
          { path: 'nope', rename: 'x' },
        ]),
        404,
        12,
        /nope/,
      );
      await expectRefused(location, alter([{ path: 's.nope', rename: 'x' }]), 404, 12, /s\.nope/);
      // A leaf name alone names only a top-level field.
      await expectRefused(location, alter([{ path: 'x', rename: 'y' }]), 404, 12);
      await expectRefused(location, alter([{ path: 'name', data_type: { type: 'int64' } }]), 400, 13, /Cannot cast/);
      await expectRefused(location, alter([{ path: 'score', data_type: { type: 'no_such_type' } }]), 400, 13, /no_such_type/);
      await expectRefused(location, alter([{ path: 'score', data_type: { type: 'time64' } }]), 400, 13, /time64/);
      await expectRefused(location, alter([{ path: 'name', rename: 'id' }]), 400, 13, /Duplicate field name/);
      await expectRefused(location, alter([{ path: 's.`x', rename: 'y' }]), 400, 13, /unterminated/);
      await expectRefused(location, alter([{ path: 'name' }]), 400, 13, /changes nothing/);
      await expectRefused(location, alter([{ path: 'name', rename: '' }]), 400, 13);
      await expectRefused(
        location,
        () => fx.t.call('POST', `${path}/alter_columns`, { alterations: [{ path: 'name', rename: 'x' }], branch: 'dev' }),
        404,
        22,
        /branch/,
      );
    });

    it('answers 406 for virtual columns, naming the reason', async () => {
      const { path, location } = await newTable('virt');
      const udf = await expectRefused(
        location,
        () => fx.t.call('POST', `${path}/alter_columns`, { alterations: [{ path: 'score', virtual_column: { udf: 'gASV', udf_backend: 'DockerUDFSpecV1' } }] }),
        406,
        0,
      );
      expect(String(udf.json.error)).toMatch(/Python UDFs \(udf_backend DockerUDFSpecV1\) are run only by a service started with udf_execution/);
      const binding = await expectRefused(
        location,
        () => fx.t.call('POST', `${path}/alter_columns`, { alterations: [{ path: 'score', virtual_column: { input_columns: ['id'] } }] }),
        406,
        0,
      );
      expect(String(binding.json.error)).toMatch(/a virtual_column without udf_backend is not supported; this service runs SQL bindings/);
      const other = await expectRefused(
        location,
        () => fx.t.call('POST', `${path}/alter_columns`, { alterations: [{ path: 'score', virtual_column: { udf: 'x', udf_backend: 'WasmUDF' } }] }),
        406,
        0,
      );
      expect(String(other.json.error)).toMatch(/udf_backend "WasmUDF" is not supported/);
    });

    it('commits nothing for an empty list and refuses tables that are missing or declared only', async () => {
      const { path, location } = await newTable('empty');
      const before = await snapshot(location);
      const res = await fx.t.call('POST', `${path}/alter_columns`, { alterations: [] });
      expect(res.json).toEqual({ version: before.version });
      expect(await snapshot(location)).toEqual(before);
      const missing = await fx.t.call('POST', '/v1/table/ns%24nosuch/alter_columns', { alterations: [{ path: 'a', rename: 'b' }] });
      expect([missing.status, missing.json.code]).toEqual([404, 4]);
      expect((await fx.t.call('POST', '/v1/table/ns%24declaredonly/declare', {})).status).toBe(200);
      const declared = await fx.t.call('POST', '/v1/table/ns%24declaredonly/alter_columns', { alterations: [{ path: 'a', rename: 'b' }] });
      expect([declared.status, declared.json.code]).toEqual([409, 19]);
    });
  });

  describe('drop_columns', () => {
    it('drops top-level and nested columns in one commit and keeps the rest', async () => {
      const { path, location } = await newTable('drop');
      const before = await snapshot(location);
      const res = await fx.t.call('POST', `${path}/drop_columns`, { columns: ['name', 's.`y.z`'] });
      expect(res.status, res.text).toBe(200);
      expect(res.json).toEqual({ version: before.version + 1 });
      const after = await snapshot(location);
      expect(after.schema.fields.map((f) => f.name)).toEqual(['id', 'score', 'qty', 's']);
      expect(field(after, 's')?.type.fields?.map((f) => f.name)).toEqual(['x']);
      expect(after.rows).toEqual(before.rows.map((r) => ({ id: r.id, score: r.score, qty: r.qty, s: { x: (r.s as { x: number }).x } })));
    });

    it('refuses an unknown column (404 code 12), a repeated one and a bad path (400 code 13), changing nothing', async () => {
      const { path, location } = await newTable('dropbad');
      await expectRefused(location, () => fx.t.call('POST', `${path}/drop_columns`, { columns: ['name', 'nope'] }), 404, 12, /nope/);
      await expectRefused(location, () => fx.t.call('POST', `${path}/drop_columns`, { columns: ['name', 'name'] }), 400, 13, /twice/);
      await expectRefused(location, () => fx.t.call('POST', `${path}/drop_columns`, { columns: ['s.'] }), 400, 13);
      await expectRefused(location, () => fx.t.call('POST', `${path}/drop_columns`, { columns: [''] }), 400, 13);
    });
  });

  describe('add_columns', () => {
    it('adds expression columns evaluated over the existing rows', async () => {
      const { path, location } = await newTable('addexpr');
      const before = await snapshot(location);
      const res = await fx.t.call('POST', `${path}/add_columns`, {
        new_columns: [
          { name: 'double_id', expression: 'id * 2' },
          { name: 'label', expression: "concat('row-', cast(id as string))" },
        ],
      });
      expect(res.status, res.text).toBe(200);
      expect(res.json).toEqual({ version: before.version + 1 });
      const after = await snapshot(location);
      expect(after.rows).toEqual(before.rows.map((r) => ({ ...r, double_id: Number(r.id) * 2, label: `row-${r.id}` })));
    });

    it('declares computed columns all-null with the expression kept in field metadata', async () => {
      const { path, location } = await newTable('addcomp');
      const before = await snapshot(location);
      const res = await fx.t.call('POST', `${path}/add_columns`, { new_columns: [{ name: 'dbl', computed: 'id * 2' }] });
      expect(res.status, res.text).toBe(200);
      expect(res.json).toEqual({ version: before.version + 1 });
      const after = await snapshot(location);
      expect(after.rows).toEqual(before.rows.map((r) => ({ ...r, dbl: null })));
      expect(field(after, 'dbl')).toMatchObject({
        type: { type: 'int64' },
        nullable: true,
        metadata: { computed_column: 'true', 'computed_column.expression': 'id * 2', 'computed_column.inputs': '["id"]', 'computed_column.kind': 'sql' },
      });
      const described = await fx.t.call('POST', `${path}/describe`, { load_detailed_metadata: true });
      const dbl = (described.json.schema as JsonArrowSchema).fields.find((f) => f.name === 'dbl');
      expect(dbl?.metadata?.['computed_column.expression']).toBe('id * 2');
    });

    it('refuses bad SQL (400 code 13), unknown columns (404 code 12), taken names, mixed kinds and virtual columns, changing nothing', async () => {
      const { path, location } = await newTable('addbad');
      const add = (new_columns: unknown) => () => fx.t.call('POST', `${path}/add_columns`, { new_columns });
      await expectRefused(location, add([{ name: 'a', expression: 'id +* 2' }]), 400, 13, /sql parser error|Error parsing/);
      await expectRefused(location, add([{ name: 'a', computed: 'id +* 2' }]), 400, 13, /sql parser error|Error parsing/);
      await expectRefused(
        location,
        add([
          { name: 'ok', expression: 'id' },
          { name: 'a', expression: 'nope * 2' },
        ]),
        404,
        12,
        /nope/,
      );
      await expectRefused(location, add([{ name: 'a', computed: 'nope * 2' }]), 404, 12, /nope/);
      await expectRefused(location, add([{ name: 'name', expression: 'id' }]), 400, 13, /already exists/);
      await expectRefused(
        location,
        add([
          { name: 'a', expression: 'id' },
          { name: 'a', expression: 'id' },
        ]),
        400,
        13,
        /twice/,
      );
      await expectRefused(
        location,
        add([
          { name: 'a', expression: 'id' },
          { name: 'b', computed: 'id' },
        ]),
        400,
        13,
        /same request/,
      );
      await expectRefused(location, add([{ name: 'a' }]), 400, 13, /exactly one/);
      await expectRefused(location, add([{ name: 'a', expression: 'id', computed: 'id' }]), 400, 13, /exactly one/);
      const virtual = {
        name: 'v',
        virtual_column: { input_columns: ['id'], outputs: [], image: 'img', udf: 'gASV', udf_name: 'f', udf_version: '1', udf_backend: 'DockerUDFSpecV1' },
      };
      await expectRefused(location, add([virtual]), 406, 0, /Python UDFs \(udf_backend DockerUDFSpecV1\) are run only by a service started with udf_execution/);
    });
  });

  describe('update_field_metadata', () => {
    it('merges, deletes and replaces field metadata and returns the result by canonical path', async () => {
      const { path, location } = await newTable('meta');
      const v0 = (await snapshot(location)).version;
      const first = await fx.t.call('POST', `${path}/update_field_metadata`, {
        updates: [
          { path: 'name', metadata: { a: '1', b: '2' } },
          { path: 's.`y.z`', metadata: { k: 'v' } },
          // A second update of the same field applies after the first.
          { path: 'name', metadata: { c: '3' } },
        ],
      });
      expect(first.status, first.text).toBe(200);
      expect(first.json).toEqual({ version: v0 + 1, fields: { name: { a: '1', b: '2', c: '3' }, 's.`y.z`': { k: 'v' } } });
      const merged = await fx.t.call('POST', `${path}/update_field_metadata`, { updates: [{ path: 'name', metadata: { a: null, d: '4' } }] });
      expect(merged.json).toEqual({ version: v0 + 2, fields: { name: { b: '2', c: '3', d: '4' } } });
      const replaced = await fx.t.call('POST', `${path}/update_field_metadata`, {
        updates: [
          { path: 's.x', metadata: { only: 'this' }, replace: true },
          { path: 'name', metadata: { z: '9' }, replace: true },
        ],
      });
      expect(replaced.json).toEqual({ version: v0 + 3, fields: { 's.x': { only: 'this' }, name: { z: '9' } } });
      const after = await snapshot(location);
      expect(after.version).toBe(v0 + 3);
      expect(field(after, 'name')?.metadata).toEqual({ z: '9' });
      expect(field(after, 's')?.type.fields?.map((f) => f.metadata)).toEqual([{ only: 'this' }, { k: 'v' }]);
      expect(field(after, 'id')?.metadata).toBeUndefined();
    });

    it('refuses unknown fields (404 code 12) and bad paths (400 code 13), changing nothing', async () => {
      const { path, location } = await newTable('metabad');
      const update = (updates: unknown) => () => fx.t.call('POST', `${path}/update_field_metadata`, { updates });
      await expectRefused(
        location,
        update([
          { path: 'name', metadata: { a: '1' } },
          { path: 'nope', metadata: { a: '1' } },
        ]),
        404,
        12,
        /nope/,
      );
      await expectRefused(location, update([{ path: 's.y.z', metadata: { a: '1' } }]), 404, 12);
      await expectRefused(location, update([{ path: 'a``b', metadata: { a: '1' } }]), 400, 13);
      await expectRefused(location, update([{ path: 'name', metadata: { a: 5 } }]), 400, 13);
    });
  });

  describe('schema_metadata/update', () => {
    it('replaces the schema metadata in a new version; the data, indices and history stay', async () => {
      const { path, location } = await newTable('schemameta', [1, 2, 3]);
      const direct = await connectTable(location, engineOptions);
      const before = await direct.version();
      await direct.createIndex('id', { config: (await import('@lancedb/lancedb')).Index.btree() });
      direct.close();
      const res = await fx.t.call('POST', `${path}/schema_metadata/update`, { owner: 'me', team: 'data' });
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ owner: 'me', team: 'data' });
      const replaced = await fx.t.call('POST', `${path}/schema_metadata/update`, { owner: 'you' });
      expect(replaced.json).toEqual({ owner: 'you' });
      const table = await connectTable(location, engineOptions);
      try {
        expect(Object.fromEntries((await table.schema()).metadata)).toEqual({ owner: 'you' });
        expect(await table.version()).toBe(before + 3);
        expect(await table.countRows()).toBe(3);
        expect((await table.listIndices()).map((i) => i.name)).toEqual(['id_idx']);
        // The engine keeps writing on top of the service's commit, and the metadata stays.
        await table.add(arrow.tableFromIPC(richStream([4])));
        expect(await table.countRows()).toBe(4);
        expect(Object.fromEntries((await table.schema()).metadata)).toEqual({ owner: 'you' });
        await table.checkout(before + 2);
        expect(Object.fromEntries((await table.schema()).metadata)).toEqual({ owner: 'me', team: 'data' });
      } finally {
        table.close();
      }
      const described = await fx.t.call('POST', `${path}/describe`, { load_detailed_metadata: true });
      expect((described.json.schema as { metadata?: unknown }).metadata).toEqual({ owner: 'you' });
      const missing = await fx.t.call('POST', '/v1/table/ns%24nosuch/schema_metadata/update', { owner: 'me' });
      expect([missing.status, missing.json.code]).toEqual([404, 4]);
      const bad = await fx.t.call('POST', `${path}/schema_metadata/update`, { owner: 5 });
      expect([bad.status, bad.json.code]).toEqual([400, 13]);
    });
  });

  describe('stats', () => {
    it('reports rows, bytes, indices and fragment lengths, by GET and POST', async () => {
      const { path, location } = await newTable('stats', [1, 2, 3]);
      const table = await connectTable(location, engineOptions);
      let expected: Awaited<ReturnType<typeof table.stats>>;
      try {
        await table.add(arrow.tableFromIPC(richStream([4, 5])));
        await table.delete('id = 1');
        expected = await table.stats();
      } finally {
        table.close();
      }
      const post = await fx.t.call('POST', `${path}/stats`, {});
      expect(post.status, post.text).toBe(200);
      const l = expected.fragmentStats.lengths;
      expect(post.json).toEqual({
        total_bytes: expected.totalBytes,
        num_rows: expected.numRows,
        num_indices: 0,
        fragment_stats: {
          num_fragments: expected.fragmentStats.numFragments,
          num_small_fragments: expected.fragmentStats.numSmallFragments,
          lengths: { min: l.min, max: l.max, mean: l.mean, p25: l.p25, p50: l.p50, p75: l.p75, p99: l.p99 },
        },
      });
      // 3 + 2 rows in two fragments, one deleted.
      expect(post.json).toMatchObject({ num_rows: 4, fragment_stats: { num_fragments: 2 } });
      expect(post.json.total_bytes).toBeGreaterThan(0);
      const get = await fx.t.call('GET', `${path}/stats`);
      expect(get.json).toEqual(post.json);
      const missing = await fx.t.call('GET', '/v1/table/ns%24nosuch/stats');
      expect([missing.status, missing.json.code]).toEqual([404, 4]);
      const branch = await fx.t.call('POST', `${path}/stats`, { branch: 'dev' });
      expect([branch.status, branch.json.code]).toEqual([404, 22]);
    });
  });

  describe('index stats', () => {
    it('describes an index at the latest and at an earlier version, by GET and POST', async () => {
      const { path, location } = await newTable('idx', [1, 2, 3]);
      const table = await connectTable(location, engineOptions);
      let indexedAt: number;
      try {
        await table.createIndex('id', { config: lancedb.Index.btree() });
        indexedAt = await table.version();
        await table.add(arrow.tableFromIPC(richStream([4, 5])));
      } finally {
        table.close();
      }
      const latest = await fx.t.call('POST', `${path}/index/id_idx/stats`, {});
      expect(latest.status, latest.text).toBe(200);
      expect(latest.json).toEqual({ index_type: 'BTREE', distance_type: null, num_indexed_rows: 3, num_unindexed_rows: 2, num_indices: 1 });
      expect((await fx.t.call('GET', `${path}/index/id_idx/stats`)).json).toEqual(latest.json);
      const atIndex = await fx.t.call('POST', `${path}/index/id_idx/stats`, { version: indexedAt, index_name: 'id_idx' });
      expect(atIndex.json).toMatchObject({ num_indexed_rows: 3, num_unindexed_rows: 0 });
      expect((await fx.t.call('GET', `${path}/index/id_idx/stats?version=${indexedAt}`)).json).toEqual(atIndex.json);
      // Table stats count the index too.
      expect((await fx.t.call('GET', `${path}/stats`)).json.num_indices).toBe(1);
    });

    it('reports the distance type of a vector index', async () => {
      const { path, location } = await newTable('vidx', [1, 2, 3, 4, 5, 6, 7, 8]);
      const table = await connectTable(location, engineOptions);
      try {
        await table.addColumns([{ name: 'vec', valueSql: "arrow_cast(make_array(cast(id as float), cast(qty as float)), 'FixedSizeList(2, Float32)')" }]);
        await table.createIndex('vec', { config: lancedb.Index.ivfFlat({ numPartitions: 1, distanceType: 'cosine' }) });
      } finally {
        table.close();
      }
      const res = await fx.t.call('POST', `${path}/index/vec_idx/stats`, {});
      expect(res.status, res.text).toBe(200);
      expect(res.json).toEqual({ index_type: 'IVF_FLAT', distance_type: 'cosine', num_indexed_rows: 8, num_unindexed_rows: 0, num_indices: 1 });
    });

    it('answers 404 code 6 for a missing index, 404 code 11 for a missing version, 400 for a mismatched name', async () => {
      const { path, location } = await newTable('idxbad');
      const table = await connectTable(location, engineOptions);
      try {
        await table.createIndex('id', { config: lancedb.Index.btree() });
      } finally {
        table.close();
      }
      const missing = await fx.t.call('POST', `${path}/index/nope_idx/stats`, {});
      expect([missing.status, missing.json.code]).toEqual([404, 6]);
      // Version 1 predates the index.
      const before = await fx.t.call('POST', `${path}/index/id_idx/stats`, { version: 1 });
      expect([before.status, before.json.code]).toEqual([404, 6]);
      const noVersion = await fx.t.call('POST', `${path}/index/id_idx/stats`, { version: 99 });
      expect([noVersion.status, noVersion.json.code]).toEqual([404, 11]);
      const mismatch = await fx.t.call('POST', `${path}/index/id_idx/stats`, { index_name: 'other' });
      expect([mismatch.status, mismatch.json.code]).toEqual([400, 13]);
    });
  });
});

describe.each(backends())('column writes on managed tables on $name', (backend) => {
  const fx = useTestApp(backend);

  it('commit every version through the service (each counted)', async () => {
    expect((await fx.t.call('POST', '/v1/namespace/mv/create', { properties: { managed_versioning: 'true' } })).status).toBe(200);
    const created = await fx.t.call('POST', '/v1/table/mv%24t/create', richStream([1, 2]), ARROW);
    expect(created.json.version).toBe(1);
    const steps = [
      () => fx.t.call('POST', '/v1/table/mv%24t/alter_columns', { alterations: [{ path: 'name', rename: 'title' }] }),
      () => fx.t.call('POST', '/v1/table/mv%24t/add_columns', { new_columns: [{ name: 'twice', expression: 'id * 2' }] }),
      () => fx.t.call('POST', '/v1/table/mv%24t/update_field_metadata', { updates: [{ path: 'twice', metadata: { k: 'v' } }] }),
      () => fx.t.call('POST', '/v1/table/mv%24t/drop_columns', { columns: ['qty'] }),
    ];
    const before = await committedVersions(fx.t);
    for (const [i, step] of steps.entries()) {
      const res = await step();
      expect(res.status, res.text).toBe(200);
      expect(res.json.version).toBe(i + 2);
      expect((await committedVersions(fx.t)) - before, `version ${i + 2}`).toBe(i + 1);
    }
    const table = await connectTable(String(created.json.location), fx.root.store.engineStorageOptions());
    try {
      expect(await table.version()).toBe(5);
      expect((await table.schema()).fields.map((f) => f.name)).toEqual(['id', 'title', 'score', 's', 'twice']);
    } finally {
      table.close();
    }
  });
});

describe('field paths', () => {
  it('parse dots, backtick quoting and doubled backticks, and format canonically', () => {
    expect(parseFieldPath('a')).toEqual({ ok: true, segments: ['a'] });
    expect(parseFieldPath('a.b.c')).toEqual({ ok: true, segments: ['a', 'b', 'c'] });
    expect(parseFieldPath('a.`b.c`')).toEqual({ ok: true, segments: ['a', 'b.c'] });
    expect(parseFieldPath('`a``b`.c')).toEqual({ ok: true, segments: ['a`b', 'c'] });
    for (const bad of ['', '.a', 'a.', 'a..b', '`a', 'a`b', '`a`b', '``']) expect(parseFieldPath(bad).ok, bad).toBe(false);
    expect(formatFieldPath(['a', 'b.c', 'd`e'])).toBe('a.`b.c`.`d``e`');
    for (const p of ['a.`b.c`', '`a``b`.c', 'x.y']) {
      const parsed = parseFieldPath(p);
      expect(parsed.ok && formatFieldPath(parsed.segments)).toBe(p);
    }
  });
});
