import { beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { committedVersions, useNamespaceFixture } from '../support/app.js';
import { connectTable } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const DIM = 8;
const ROWS = 300;

const vectorOf = (i: number): number[] => Array.from({ length: DIM }, (_, j) => Math.sin(i * DIM + j));

/** An Arrow IPC stream of `rows` rows: id, text, cat, tags (list), vec (FixedSizeList(8, float32)), mv (multivector). */
function vectorStream(rows = ROWS): Buffer {
  const vecType = new arrow.FixedSizeList(DIM, new arrow.Field('item', new arrow.Float32(), true));
  const ids = Array.from({ length: rows }, (_, i) => i);
  const table = new arrow.Table({
    id: arrow.vectorFromArray(BigInt64Array.from(ids.map(BigInt))),
    text: arrow.vectorFromArray(
      ids.map((i) => `doc ${i} ${i % 2 ? 'alpha' : 'beta'} ${i % 3 ? 'gamma' : 'delta'}`),
      new arrow.Utf8(),
    ),
    cat: arrow.vectorFromArray(
      ids.map((i) => `c${i % 4}`),
      new arrow.Utf8(),
    ),
    tags: arrow.vectorFromArray(
      ids.map((i) => [`t${i % 5}`]),
      new arrow.List(new arrow.Field('item', new arrow.Utf8(), true)),
    ),
    vec: arrow.vectorFromArray(ids.map(vectorOf), vecType),
    mv: arrow.vectorFromArray(
      ids.map((i) => [vectorOf(i), vectorOf(i + 1000)]),
      new arrow.List(new arrow.Field('item', vecType, true)),
    ),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

interface EngineIndex {
  name: string;
  indexType: string;
  columns: string[];
  details: Record<string, unknown>;
}

describe.each(backends())('indices on $name', (backend) => {
  const { fx, path, post, engineOptions: options } = useNamespaceFixture(backend);
  let engineOptions: Record<string, string>;
  beforeAll(() => {
    engineOptions = options();
  });

  async function createTable(table: string, ns = 'ns'): Promise<string> {
    const res = await fx.t.call('POST', `/v1/table/${ns}%24${table}/create`, vectorStream(), ARROW);
    expect(res.status).toBe(200);
    return String(res.json.location);
  }

  /** What the engine itself reads from the dataset: indices, version, row count. */
  async function engineState(location: string): Promise<{ version: number; rows: number; indices: EngineIndex[] }> {
    const table = await connectTable(location, engineOptions);
    try {
      const indices = (await table.listIndices()).map((i) => ({
        name: i.name,
        indexType: i.indexType,
        columns: i.columns,
        details: (typeof i.indexDetails === 'object' && i.indexDetails !== null ? i.indexDetails : {}) as Record<string, unknown>,
      }));
      return { version: await table.version(), rows: await table.countRows(), indices: indices.sort((a, b) => a.name.localeCompare(b.name)) };
    } finally {
      table.close();
    }
  }

  it('builds every supported index type with its parameters, as the engine reads them back', async () => {
    const location = await createTable('kinds');
    const requests: Array<[string, Record<string, unknown>]> = [
      ['create_scalar_index', { column: 'id', index_type: 'btree' }],
      ['create_scalar_index', { column: 'cat', index_type: 'Bitmap', name: 'cat_bitmap' }],
      ['create_scalar_index', { column: 'tags', index_type: 'label_list' }],
      ['create_index', { column: 'text', index_type: 'inverted', with_position: true, language: 'french', lower_case: false, stem: false }],
      [
        'create_index',
        { column: 'vec', index_type: 'ivf_pq', num_partitions: 2, num_sub_vectors: 2, num_bits: 8, distance_type: 'L2', max_iterations: 10, sample_rate: 64 },
      ],
      ['create_index', { column: 'vec', index_type: 'IVF_HNSW_SQ', name: 'vec_hnsw', m: 8, ef_construction: 40, distance_type: 'cosine', num_partitions: 1 }],
      ['create_index', { column: 'vec', index_type: 'IVF_FLAT', name: 'vec_flat', distance_type: 'dot', num_partitions: 2 }],
      ['create_index', { column: 'mv', index_type: 'IVF_PQ', num_partitions: 2, num_sub_vectors: 2, distance_type: 'cosine' }],
    ];
    for (const [op, body] of requests) {
      const res = await post('kinds', op, body);
      expect(res.status, `${op} ${JSON.stringify(body)}: ${res.text}`).toBe(200);
      expect(res.json).toEqual({});
    }
    const state = await engineState(location);
    // One committed version per index; the rows are untouched.
    expect(state.version).toBe(1 + requests.length);
    expect(state.rows).toBe(ROWS);
    expect(state.indices.map((i) => [i.name, i.indexType, i.columns])).toEqual([
      ['cat_bitmap', 'Bitmap', ['cat']],
      ['id_idx', 'BTree', ['id']],
      ['mv_idx', 'IvfPq', ['mv']],
      ['tags_idx', 'LabelList', ['tags']],
      ['text_idx', 'FTS', ['text']],
      ['vec_flat', 'IvfFlat', ['vec']],
      ['vec_hnsw', 'IvfHnswSq', ['vec']],
      ['vec_idx', 'IvfPq', ['vec']],
    ]);
    const details = Object.fromEntries(state.indices.map((i) => [i.name, i.details]));
    expect(details.text_idx).toMatchObject({ with_position: true, language: 'French', lower_case: false, stem: false });
    expect(details.vec_idx).toMatchObject({ compression: { num_bits: 8, num_sub_vectors: 2, type: 'pq' }, metric_type: 'L2' });
    expect(details.vec_idx?.runtime_hints).toMatchObject({ 'lance.ivf.max_iters': '10', 'lance.ivf.sample_rate': '64' });
    expect(details.vec_hnsw).toMatchObject({ hnsw: { construction_ef: 40, max_connections: 8 } });
    expect(String(details.vec_hnsw?.metric_type).toLowerCase()).toBe('cosine');
    expect(String(details.vec_flat?.metric_type).toLowerCase()).toBe('dot');
    expect(String(details.mv_idx?.metric_type).toLowerCase()).toBe('cosine');

    // The listing shows the same indexes with the spec's friendly type names.
    const listed = await post('kinds', 'index/list', {});
    expect(listed.status).toBe(200);
    const indexes = listed.json.indexes as Array<Record<string, unknown>>;
    expect(indexes.map((i) => [i.index_name, i.index_type, i.columns])).toEqual([
      ['cat_bitmap', 'BITMAP', ['cat']],
      ['id_idx', 'BTREE', ['id']],
      ['mv_idx', 'IVF_PQ', ['mv']],
      ['tags_idx', 'LABEL_LIST', ['tags']],
      ['text_idx', 'FTS', ['text']],
      ['vec_flat', 'IVF_FLAT', ['vec']],
      ['vec_hnsw', 'IVF_HNSW_SQ', ['vec']],
      ['vec_idx', 'IVF_PQ', ['vec']],
    ]);
    for (const index of indexes) {
      // Lance's reference server's word for a built index (pylance 14.0.2's RestAdapter answers it too).
      expect(index).toMatchObject({ status: 'SUCCEEDED', num_indexed_rows: ROWS, num_unindexed_rows: 0 });
      expect(String(index.index_uuid)).toMatch(/^[0-9a-f-]{36}$/);
      expect(Number.isNaN(Date.parse(String(index.created_at)))).toBe(false);
      expect(JSON.parse(String(index.index_details))).toEqual(details[String(index.index_name)]);
    }
    expect(listed.json.page_token ?? null).toBeNull();
  });

  it('derives the partition count from target_partition_size', async () => {
    await createTable('target');
    expect((await post('target', 'create_index', { column: 'vec', index_type: 'IVF_FLAT', target_partition_size: 100 })).status).toBe(200);
    // 300 rows / 100 per partition = 3 partitions, which a search with more probes ranks.
    const analysis = await post('target', 'analyze_plan', { vector: { single_vector: vectorOf(1) }, k: 2, vector_column: 'vec', nprobes: 20 });
    expect(analysis.status).toBe(200);
    expect(String(analysis.json.value)).toContain('partitions_ranked=3');
  });

  it('lists indexes over GET and POST, in pages, and at an earlier version', async () => {
    const location = await createTable('paged');
    for (const column of ['id', 'cat', 'text']) {
      expect((await post('paged', 'create_scalar_index', { column, index_type: column === 'text' ? 'FTS' : 'BTREE' })).status).toBe(200);
    }
    const names = (await engineState(location)).indices.map((i) => i.name);
    expect(names).toEqual(['cat_idx', 'id_idx', 'text_idx']);

    const seen: string[] = [];
    let token: unknown = null;
    let pages = 0;
    do {
      const res = await post('paged', 'index/list', { limit: 2, ...(token ? { page_token: token } : {}) });
      expect(res.status).toBe(200);
      seen.push(...(res.json.indexes as Array<{ index_name: string }>).map((i) => i.index_name));
      token = res.json.page_token;
      pages++;
    } while (token);
    expect(seen).toEqual(names);
    expect(pages).toBe(2);

    const viaGet = await fx.t.call('GET', path('paged', 'index/list', '?limit=1'));
    expect(viaGet.status).toBe(200);
    expect((viaGet.json.indexes as Array<{ index_name: string }>).map((i) => i.index_name)).toEqual(['cat_idx']);
    const second = await fx.t.call('GET', path('paged', 'index/list', `?limit=5&page_token=${encodeURIComponent(String(viaGet.json.page_token))}`));
    expect((second.json.indexes as Array<{ index_name: string }>).map((i) => i.index_name)).toEqual(['id_idx', 'text_idx']);

    // Version 1 is the data alone; version 2 had the first index (id).
    expect((await post('paged', 'index/list', { version: 1 })).json.indexes).toEqual([]);
    expect((await fx.t.call('GET', path('paged', 'index/list', '?version=2'))).json.indexes).toMatchObject([{ index_name: 'id_idx' }]);
    const missing = await post('paged', 'index/list', { version: 40 });
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe(11);

    const forged = await post('paged', 'index/list', { page_token: 'bogus.token' });
    expect(forged.status).toBe(400);
    expect(forged.json.code).toBe(13);
    // A token of another table's listing is refused too.
    await createTable('other');
    await post('other', 'create_scalar_index', { column: 'id', index_type: 'BTREE' });
    await post('other', 'create_scalar_index', { column: 'cat', index_type: 'BTREE' });
    const otherToken = (await post('other', 'index/list', { limit: 1 })).json.page_token;
    const foreign = await post('paged', 'index/list', { page_token: otherToken });
    expect(foreign.status).toBe(400);
  });

  it('drops an index: the engine no longer has it and the others stay', async () => {
    const location = await createTable('dropping');
    await post('dropping', 'create_scalar_index', { column: 'id', index_type: 'BTREE' });
    await post('dropping', 'create_scalar_index', { column: 'cat', index_type: 'BITMAP' });
    const before = await engineState(location);
    const dropped = await fx.t.call('POST', path('dropping', 'index/id_idx/drop'));
    expect(dropped.status).toBe(200);
    expect(dropped.json).toEqual({});
    const after = await engineState(location);
    expect(after.indices.map((i) => i.name)).toEqual(['cat_idx']);
    expect(after.version).toBe(before.version + 1);
    expect(after.rows).toBe(ROWS);

    const missing = await fx.t.call('POST', path('dropping', 'index/id_idx/drop'));
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe(6);
    const mismatched = await post('dropping', 'index/cat_idx/drop', { index_name: 'other' });
    expect(mismatched.status).toBe(400);
    const branch = await post('dropping', 'index/cat_idx/drop', undefined, '?branch=dev');
    expect([branch.status, branch.json.code]).toEqual([404, 22]);
    expect(await engineState(location)).toEqual(after);
  });

  it('refuses bad index requests and changes nothing', async () => {
    const location = await createTable('bad');
    expect((await post('bad', 'create_scalar_index', { column: 'id', index_type: 'BTREE' })).status).toBe(200);
    const before = await engineState(location);
    const expectError = async (body: Record<string, unknown>, status: number, code: number, message?: RegExp, op = 'create_index') => {
      const res = await post('bad', op, body);
      expect(res.status, `${JSON.stringify(body)}: ${res.text}`).toBe(status);
      expect(res.json.code).toBe(code);
      if (message) expect(String(res.json.error)).toMatch(message);
    };
    await expectError({ column: 'id', index_type: 'BTREE' }, 409, 7, /id_idx/);
    await expectError({ column: 'cat', index_type: 'BITMAP', name: 'id_idx' }, 409, 7);
    await expectError({ column: 'nope', index_type: 'BTREE' }, 404, 12, /nope/);
    await expectError({ column: 'id', index_type: 'SUPER_FAST' }, 400, 13, /index_type/);
    await expectError({ column: 'id', index_type: 'BTREE', num_partitions: 0 }, 400, 13, /num_partitions/);
    await expectError({ column: 'vec', index_type: 'IVF_PQ', distance_type: 'manhattan' }, 400, 13, /distance_type/);
    await expectError({ index_type: 'BTREE' }, 400, 13, /column/);
    await expectError({ column: 'vec', index_type: 'BTREE', name: 'x1' }, 400, 13, /BTree index cannot be created/);
    await expectError({ column: 'vec', index_type: 'IVF_PQ', num_sub_vectors: 3, name: 'x2' }, 400, 13, /num_sub_vectors/);
    await expectError({ column: 'vec', index_type: 'IVF_PQ', num_partitions: 1000, name: 'x3' }, 400, 13);
    await expectError({ column: 'vec', index_type: 'IVF_PQ', distance_type: 'hamming', name: 'x4' }, 400, 13, /hamming/);
    await expectError({ column: 'vec', index_type: 'IVF_FLAT', distance_type: 'hamming', name: 'x5' }, 400, 13, /uint8/);
    // An unknown language, or an ef_construction in the billions, would abort the engine's
    // process; the service refuses them first.
    await expectError({ column: 'vec', index_type: 'IVF_HNSW_SQ', ef_construction: 4_000_000_000 }, 400, 13, /ef_construction/);
    await expectError({ column: 'text', index_type: 'FTS', language: 'Klingon', stem: true }, 400, 13, /Klingon/);
    await expectError({ column: 'text', index_type: 'FTS', base_tokenizer: 'bogus' }, 400, 13, /tokenizer/);
    await expectError({ column: 'vec', index_type: 'IVF_PQ' }, 400, 13, /vector index/, 'create_scalar_index');
    await expectError({ column: 'id', index_type: 'BTREE', name: 'b', branch: 'dev' }, 404, 22, /branch/);
    expect(await engineState(location)).toEqual(before);

    const noTable = await post('absent', 'create_index', { column: 'id', index_type: 'BTREE' });
    expect(noTable.status).toBe(404);
    expect(noTable.json.code).toBe(4);
    expect((await post('absent', 'index/list', {})).json.code).toBe(4);
    expect((await fx.t.call('POST', path('absent', 'index/x/drop'))).json.code).toBe(4);
    expect((await post('declared', 'declare', {})).status).toBe(200);
    const declared = await post('declared', 'create_index', { column: 'id', index_type: 'BTREE' });
    expect(declared.status).toBe(409);
    expect(declared.json.code).toBe(19);
    expect((await post('declared', 'index/list', {})).json).toEqual({ indexes: [], page_token: null });
  });

  it('commits an index build on a managed table through the service', async () => {
    expect((await fx.t.call('POST', '/v1/namespace/managed/create', { properties: { managed_versioning: 'true' } })).status).toBe(200);
    const location = await createTable('m', 'managed');
    const before = await committedVersions(fx.t);
    const res = await fx.t.call('POST', '/v1/table/managed%24m/create_index', { column: 'id', index_type: 'BTREE' });
    expect(res.status).toBe(200);
    const state = await engineState(location);
    expect(state.version).toBe(2);
    expect(state.indices.map((i) => i.name)).toEqual(['id_idx']);
    expect((await committedVersions(fx.t)) - before).toBe(1);
    const versions = await fx.t.call('POST', '/v1/table/managed%24m/version/list');
    expect((versions.json.versions as Array<{ version: number }>).map((v) => v.version).sort()).toEqual([1, 2]);
    const dropped = await fx.t.call('POST', '/v1/table/managed%24m/index/id_idx/drop');
    expect(dropped.status).toBe(200);
    expect((await committedVersions(fx.t)) - before).toBe(2);
  });
});
