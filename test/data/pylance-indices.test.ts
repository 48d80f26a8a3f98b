import { existsSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { DEFAULT_INDEX_PYTHON } from '../../src/engine/pylance/pylance-worker.js';
import { committedVersions, useNamespaceFixture } from '../support/app.js';
import { connectTable } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';
import { describeRun, run } from '../support/python.js';

// The index types @lancedb/lancedb 0.39 cannot build (IVF_SQ, IVF_HNSW_FLAT, NGRAM, ZONEMAP,
// BLOOMFILTER, RTREE), built by pylance in the index worker (worker/index_worker.py) through the
// service, on every backend: each one's listing and stats with its true type (from the manifest),
// the plan of a query through the Node engine using it, and its answers against brute force; a
// managed table's builds committed through the service; builds racing appends losing no row.

const available = existsSync(DEFAULT_INDEX_PYTHON);
if (!available) console.warn(`skipping the pylance index tests: no ${DEFAULT_INDEX_PYTHON}; run scripts/install-index-worker.sh`);

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const DIM = 16;
/** Rows per insert; the table is made of three, so a ZONEMAP has zones to skip. */
const BATCH = 400;
const ROWS = 3 * BATCH;

const vectorOf = (i: number): number[] => Array.from({ length: DIM }, (_, j) => Math.sin(i * DIM + j));
const textOf = (i: number): string => `doc ${i} w${i % 37} ${i % 2 ? 'alpha' : 'beta'}`;
const tagOf = (i: number): string => `t${i % 50}`;
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

const vecType = new arrow.FixedSizeList(DIM, new arrow.Field('item', new arrow.Float32(), true));
const pointType = new arrow.Struct([new arrow.Field('x', new arrow.Float64(), false), new arrow.Field('y', new arrow.Float64(), false)]);
const SCHEMA = new arrow.Schema([
  new arrow.Field('id', new arrow.Int64(), false),
  new arrow.Field('text', new arrow.Utf8(), true),
  new arrow.Field('tag', new arrow.Utf8(), true),
  new arrow.Field('vec', vecType, true),
  new arrow.Field('vec2', vecType, true),
  // A GeoArrow point: what an RTREE indexes.
  new arrow.Field('point', pointType, true, new Map([['ARROW:extension:name', 'geoarrow.point']])),
]);

/** An Arrow IPC stream of the rows `ids`. */
function rowsStream(ids: number[]): Buffer {
  const table = new arrow.Table(SCHEMA, {
    id: arrow.vectorFromArray(BigInt64Array.from(ids.map(BigInt))),
    text: arrow.vectorFromArray(ids.map(textOf), new arrow.Utf8()),
    tag: arrow.vectorFromArray(ids.map(tagOf), new arrow.Utf8()),
    vec: arrow.vectorFromArray(ids.map(vectorOf), vecType),
    vec2: arrow.vectorFromArray(ids.map(vectorOf), vecType),
    point: arrow.vectorFromArray(
      ids.map((i) => ({ x: i % 100, y: Math.floor(i / 100) })),
      pointType,
    ),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

type Row = Record<string, unknown>;

/** The squared L2 distance of row `i`'s vector from `q`, as the engine computes it (float32 values). */
function l2(i: number, q: number[]): number {
  const v = Float32Array.from(vectorOf(i));
  return q.reduce((sum, x, j) => sum + (x - (v[j] ?? 0)) ** 2, 0);
}

describe.skipIf(!available).each(backends())('indices pylance builds, on $name', (backend) => {
  const { fx, path, post } = useNamespaceFixture(backend);
  let engineOptions: Record<string, string>;
  beforeAll(() => {
    engineOptions = fx.root.store.engineStorageOptions();
  });

  /** A table of ROWS rows in three fragments; its location. */
  async function createTable(table: string, ns = 'ns'): Promise<string> {
    const res = await fx.t.call('POST', `/v1/table/${ns}%24${table}/create`, rowsStream(range(0, BATCH)), ARROW);
    expect(res.status, res.text).toBe(200);
    for (const from of [BATCH, 2 * BATCH]) {
      const appended = await fx.t.call('POST', `/v1/table/${ns}%24${table}/insert`, rowsStream(range(from, BATCH)), ARROW);
      expect(appended.status, appended.text).toBe(200);
    }
    return String(res.json.location);
  }

  async function count(table: string, predicate: string): Promise<number> {
    const res = await post(table, 'count_rows', { predicate });
    expect(res.status, res.text).toBe(200);
    return Number(res.text);
  }

  async function query(table: string, body: Record<string, unknown>): Promise<{ status: number; rows: Row[]; json: Record<string, unknown> }> {
    const res = await fx.t.app.server.inject({
      method: 'POST',
      url: path(table, 'query'),
      payload: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    });
    if (res.statusCode !== 200) return { status: res.statusCode, rows: [], json: JSON.parse(res.body) as Record<string, unknown> };
    const rows = arrow
      .tableFromIPC(res.rawPayload)
      .toArray()
      .map((r: { toJSON(): Row }) => r.toJSON());
    return { status: 200, rows: rows.map((r) => ({ ...r, id: Number(r.id) })), json: {} };
  }

  async function plan(table: string, q: Record<string, unknown>): Promise<string> {
    const res = await post(table, 'explain_plan', { query: { k: 10_000, ...q } });
    expect(res.status, res.text).toBe(200);
    return JSON.parse(res.text) as string;
  }

  it('builds each type, lists it with its true type, reports its stats, and queries through the Node engine use it and answer as brute force', async () => {
    const location = await createTable('kinds');
    const builds: Array<[string, Record<string, unknown>]> = [
      ['create_index', { column: 'vec', index_type: 'ivf_sq', name: 'vec_sq', num_partitions: 2, distance_type: 'l2' }],
      ['create_index', { column: 'vec2', index_type: 'IVF_HNSW_FLAT', name: 'vec2_hnsw', num_partitions: 2, m: 12, ef_construction: 80 }],
      ['create_scalar_index', { column: 'text', index_type: 'NGRAM' }],
      ['create_scalar_index', { column: 'id', index_type: 'zonemap' }],
      ['create_scalar_index', { column: 'tag', index_type: 'BloomFilter' }],
      ['create_scalar_index', { column: 'point', index_type: 'RTREE' }],
    ];
    const before = await committedVersions(fx.t);
    for (const [op, body] of builds) {
      const res = await post('kinds', op, body);
      expect(res.status, `${op} ${JSON.stringify(body)}: ${res.text}`).toBe(200);
      expect(res.json).toEqual({});
    }
    // One version per build, each committed by pylance (not through the service: the table's versions are not managed).
    expect((await committedVersions(fx.t)) - before).toBe(0);
    const table = await connectTable(location, engineOptions);
    try {
      expect(await table.version()).toBe(3 + builds.length);
      expect(await table.countRows()).toBe(ROWS);
    } finally {
      table.close();
    }

    const listed = await post('kinds', 'index/list', {});
    expect(listed.status).toBe(200);
    const indexes = listed.json.indexes as Array<Record<string, unknown>>;
    expect(indexes.map((i) => [i.index_name, i.index_type, i.columns])).toEqual([
      ['id_idx', 'ZONEMAP', ['id']],
      ['point_idx', 'RTREE', ['point']],
      ['tag_idx', 'BLOOMFILTER', ['tag']],
      ['text_idx', 'NGRAM', ['text']],
      ['vec2_hnsw', 'IVF_HNSW_FLAT', ['vec2']],
      ['vec_sq', 'IVF_SQ', ['vec']],
    ]);
    for (const index of indexes) {
      expect(index).toMatchObject({ num_indexed_rows: ROWS, num_unindexed_rows: 0, num_segments: 1 });
      expect(String(index.index_uuid)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      expect(Number(index.size_bytes)).toBeGreaterThan(0);
      expect(Number.isNaN(Date.parse(String(index.created_at)))).toBe(false);
    }
    // The vector ones' parameters, as the engine reads them.
    const details = Object.fromEntries(indexes.map((i) => [i.index_name, i.index_details === null ? null : JSON.parse(String(i.index_details))]));
    expect(details.vec2_hnsw).toMatchObject({ hnsw: { max_connections: 12, construction_ef: 80 } });

    for (const [name, type, distance] of [
      ['vec_sq', 'IVF_SQ', 'l2'],
      ['vec2_hnsw', 'IVF_HNSW_FLAT', 'l2'],
      ['text_idx', 'NGRAM', null],
      ['id_idx', 'ZONEMAP', null],
      ['tag_idx', 'BLOOMFILTER', null],
      ['point_idx', 'RTREE', null],
    ] as const) {
      const stats = await post('kinds', `index/${name}/stats`, {});
      expect(stats.status, stats.text).toBe(200);
      expect(stats.json).toEqual({ index_type: type, distance_type: distance, num_indexed_rows: ROWS, num_unindexed_rows: 0, num_indices: 1 });
    }
    expect((await fx.t.call('GET', path('kinds', 'stats'))).json.num_indices).toBe(builds.length);

    // Vector searches use their index (probing every partition and re-ranking by exact distance)
    // and answer the brute-force search's rows in its order.
    const q = vectorOf(123).map((x) => x + 0.01);
    const exact = range(0, ROWS)
      .sort((a, b) => l2(a, q) - l2(b, q))
      .slice(0, 10);
    for (const [column, index] of [
      ['vec', 'vec_sq'],
      ['vec2', 'vec2_hnsw'],
    ]) {
      const search = { vector: { single_vector: q }, vector_column: column, k: 10, nprobes: 2, refine_factor: 20, ef: 200, columns: { column_names: ['id'] } };
      expect(await plan('kinds', search)).toContain(`ANNSubIndex: name=${index},`);
      const indexed = await query('kinds', search);
      expect(indexed.status).toBe(200);
      expect(indexed.rows.map((r) => r.id)).toEqual(exact);
      const bypassed = await query('kinds', { ...search, bypass_vector_index: true });
      expect(bypassed.rows.map((r) => r.id)).toEqual(exact);
    }

    // Filters use the scalar ones and count as brute force does.
    const all = range(0, ROWS);
    for (const [filter, index, expected] of [
      ["contains(text, 'w12 ')", '@text_idx(NGram)', all.filter((i) => textOf(i).includes('w12 ')).length],
      ["contains(text, 'no such text')", '@text_idx(NGram)', 0],
      ['id >= 500 AND id < 520', '@id_idx(ZoneMap)', 20],
      ['id = 1100', '@id_idx(ZoneMap)', 1],
      ["tag = 't17'", '@tag_idx(BloomFilter)', all.filter((i) => tagOf(i) === 't17').length],
      ["tag IN ('t3', 't4')", '@tag_idx(BloomFilter)', all.filter((i) => ['t3', 't4'].includes(tagOf(i))).length],
      ["tag = 'absent'", '@tag_idx(BloomFilter)', 0],
    ] as const) {
      expect(await plan('kinds', { filter }), filter).toContain(index);
      expect(await count('kinds', filter), filter).toBe(expected);
      const rows = await query('kinds', { filter, k: ROWS, columns: { column_names: ['id'] } });
      expect(rows.rows.length, filter).toBe(expected);
    }

    // The Node engine cannot evaluate a spatial predicate (it is built without Lance's geo feature): a 406 that says so.
    const spatial = await query('kinds', { filter: "st_intersects(point, st_geomfromtext('POLYGON((0 0, 3 0, 3 2, 0 2, 0 0))'))", k: 10 });
    expect(spatial.status).toBe(406);
    expect(String(spatial.json.error)).toMatch(/geo/);
  });

  it('lists the indices a client built with pylance itself, with their true types, and reports their stats', async () => {
    const location = await createTable('client');
    // pylance writing straight to the dataset, as a client with the table's location does.
    const script = [
      'import json, sys, lance',
      'ds = lance.dataset(sys.argv[1], storage_options=json.loads(sys.argv[2]) or None)',
      "ds.create_scalar_index('text', 'NGRAM', name='text_ngram')",
      "ds.create_scalar_index('id', 'ZONEMAP', name='id_zonemap')",
      "ds.create_scalar_index('tag', 'BLOOMFILTER', name='tag_bloom')",
      "ds.create_scalar_index('point', 'RTREE', name='point_rtree')",
      "ds.create_index('vec', 'IVF_SQ', name='vec_sq', num_partitions=2)",
    ].join('\n');
    const built = await run(DEFAULT_INDEX_PYTHON, ['-c', script, location, JSON.stringify(engineOptions)], { timeoutMs: 120_000 });
    expect(built.code, describeRun('pylance', built)).toBe(0);
    const listed = await post('client', 'index/list', {});
    expect((listed.json.indexes as Array<Record<string, unknown>>).map((i) => [i.index_name, i.index_type, i.num_indexed_rows])).toEqual([
      ['id_zonemap', 'ZONEMAP', ROWS],
      ['point_rtree', 'RTREE', ROWS],
      ['tag_bloom', 'BLOOMFILTER', ROWS],
      ['text_ngram', 'NGRAM', ROWS],
      ['vec_sq', 'IVF_SQ', ROWS],
    ]);
    for (const [name, type] of [
      ['text_ngram', 'NGRAM'],
      ['point_rtree', 'RTREE'],
    ]) {
      expect((await post('client', `index/${name}/stats`, {})).json).toEqual({
        index_type: type,
        distance_type: null,
        num_indexed_rows: ROWS,
        num_unindexed_rows: 0,
        num_indices: 1,
      });
    }
    expect((await fx.t.call('GET', path('client', 'stats'))).json.num_indices).toBe(5);
  });

  it('refuses what does not fit and changes nothing: RTREE on a column that is not a geometry, a taken name, a missing column', async () => {
    const location = await createTable('bad');
    expect((await post('bad', 'create_scalar_index', { column: 'text', index_type: 'NGRAM', name: 'taken' })).status).toBe(200);
    const versionBefore = async () => {
      const table = await connectTable(location, engineOptions);
      try {
        return await table.version();
      } finally {
        table.close();
      }
    };
    const before = await versionBefore();
    const expectError = async (op: string, body: Record<string, unknown>, status: number, code: number, message: RegExp) => {
      const res = await post('bad', op, body);
      expect(res.status, `${JSON.stringify(body)}: ${res.text}`).toBe(status);
      expect(res.json.code).toBe(code);
      expect(String(res.json.error)).toMatch(message);
    };
    await expectError('create_scalar_index', { column: 'id', index_type: 'RTREE' }, 400, 13, /geometry/);
    await expectError('create_scalar_index', { column: 'text', index_type: 'RTREE' }, 400, 13, /geometry/);
    await expectError('create_scalar_index', { column: 'id', index_type: 'NGRAM' }, 400, 13, /string/);
    await expectError('create_index', { column: 'text', index_type: 'IVF_SQ' }, 400, 13, /FixedSizeList|vector/i);
    // Parameters pylance takes in narrower integers than the spec's, or refuses for the type.
    await expectError('create_index', { column: 'vec', index_type: 'IVF_SQ', num_bits: 4_294_967_295 }, 400, 13, /out of range/);
    await expectError('create_index', { column: 'vec2', index_type: 'IVF_HNSW_FLAT', m: 4096 }, 400, 13, /ef_construction/);
    await expectError('create_index', { column: 'vec', index_type: 'IVF_SQ', distance_type: 'hamming' }, 400, 13, /hamming/);
    await expectError('create_scalar_index', { column: 'tag', index_type: 'ZONEMAP', name: 'taken' }, 409, 7, /taken/);
    await expectError('create_scalar_index', { column: 'nope', index_type: 'BLOOMFILTER' }, 404, 12, /nope/);
    await expectError('create_scalar_index', { column: 'vec', index_type: 'IVF_SQ' }, 400, 13, /vector index/);
    expect(await versionBefore()).toBe(before);
  });

  it('commits the builds of a managed table through the service', async () => {
    expect((await fx.t.call('POST', '/v1/namespace/managed/create', { properties: { managed_versioning: 'true' } })).status).toBe(200);
    await createTable('m', 'managed');
    const before = await committedVersions(fx.t);
    for (const body of [
      { column: 'vec', index_type: 'IVF_SQ', num_partitions: 2 },
      { column: 'id', index_type: 'ZONEMAP' },
    ]) {
      const res = await fx.t.call('POST', '/v1/table/managed%24m/create_index', body);
      expect(res.status, res.text).toBe(200);
    }
    expect((await committedVersions(fx.t)) - before).toBe(2);
    const versions = await fx.t.call('POST', '/v1/table/managed%24m/version/list');
    expect((versions.json.versions as Array<{ version: number }>).map((v) => v.version).sort()).toEqual([1, 2, 3, 4, 5]);
    const listed = await fx.t.call('POST', '/v1/table/managed%24m/index/list', {});
    expect((listed.json.indexes as Array<Record<string, unknown>>).map((i) => [i.index_name, i.index_type])).toEqual([
      ['id_idx', 'ZONEMAP'],
      ['vec_idx', 'IVF_SQ'],
    ]);
  });

  // Invariant: an index build commits a Lance CreateIndex made from the version it read; appends
  // committed meanwhile are rebased under it, as rows the index does not cover. Each appended row
  // is there afterwards, found by a query through the index, and counted indexed or unindexed.
  for (const managed of [false, true]) {
    it(`a build racing appends loses none of their rows${managed ? ' (managed versioning)' : ''}`, { timeout: 120_000 }, async () => {
      const ns = managed ? 'racem' : 'race';
      expect((await fx.t.call('POST', `/v1/namespace/${ns}/create`, managed ? { properties: { managed_versioning: 'true' } } : {})).status).toBe(200);
      const location = await createTable('t', ns);
      const tablePath = (op: string) => `/v1/table/${ns}%24t/${op}`;
      let building = true;
      const build = fx.t.call('POST', tablePath('create_scalar_index'), { column: 'text', index_type: 'NGRAM' }).finally(() => {
        building = false;
      });
      let next = 10_000;
      let duringBuild = 0;
      // Appends one after another while the build runs, then two more.
      for (let after = 0; after < 2; ) {
        const appended = await fx.t.call('POST', tablePath('insert'), rowsStream(range(next, 10)), ARROW);
        expect(appended.status, appended.text).toBe(200);
        next += 10;
        if (building) duringBuild++;
        else after++;
      }
      let built = await build;
      // Appends back to back can win every one of the build's rebases (Lance gives up after its
      // retry timeout): then the build answers the spec's retryable conflict, having changed
      // nothing, and the same build once the appends pause succeeds. Either way no row is lost.
      const starved = built.status === 409;
      if (starved) {
        expect(built.json.code, built.text).toBe(14);
        built = await fx.t.call('POST', tablePath('create_scalar_index'), { column: 'text', index_type: 'NGRAM' });
      }
      expect(built.status, built.text).toBe(200);
      const appendedRows = next - 10_000;
      const total = ROWS + appendedRows;
      console.log(
        `${backend.name}${managed ? ', managed' : ''}: ${duringBuild} appends of 10 rows committed while an NGRAM index was built${starved ? ' (it lost every rebase: built again after them)' : ''}`,
      );

      const stats = await fx.t.call('POST', tablePath('index/text_idx/stats'), {});
      expect(stats.status).toBe(200);
      expect(Number(stats.json.num_indexed_rows) + Number(stats.json.num_unindexed_rows)).toBe(total);
      expect(Number(stats.json.num_indexed_rows)).toBeGreaterThanOrEqual(ROWS);
      // Every appended row: there, and found by a filter the index answers (with a scan of what it does not cover).
      const found = await fx.t.call('POST', tablePath('count_rows'), { predicate: "contains(text, 'doc 1') AND id >= 10000" });
      expect(Number(found.text)).toBe(range(10_000, appendedRows).filter((i) => textOf(i).includes('doc 1')).length);
      expect(Number((await fx.t.call('POST', tablePath('count_rows'), {})).text)).toBe(total);
      const table = await connectTable(location, engineOptions);
      try {
        const ids = (await table.query().select(['id']).toArray()).map((r: Row) => Number(r.id)).sort((a, b) => a - b);
        expect(ids).toEqual([...range(0, ROWS), ...range(10_000, appendedRows)]);
      } finally {
        table.close();
      }
    });
  }
});
