import { beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { useTestApp } from '../support/app.js';
import { backends } from '../support/backends.js';

// LanceDB clients send filter-only and full-text queries to QueryTable with an
// empty query vector. An empty vector means no vector search.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const DIM = 4;
const ROWS = 10;

/** Rows id, text, vec (FixedSizeList(4, float32)). */
function stream(): Buffer {
  const ids = Array.from({ length: ROWS }, (_, i) => i);
  const table = new arrow.Table({
    id: arrow.vectorFromArray(BigInt64Array.from(ids.map(BigInt))),
    text: arrow.vectorFromArray(
      ids.map((i) => `doc ${i} ${i % 2 ? 'alpha' : 'beta'}`),
      new arrow.Utf8(),
    ),
    vec: arrow.vectorFromArray(
      ids.map((i) => Array.from({ length: DIM }, (_, j) => i + j)),
      new arrow.FixedSizeList(DIM, new arrow.Field('item', new arrow.Float32(), true)),
    ),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

/** Exactly what LanceDB Python sends for `tbl.search().where("id > 3").limit(10)` over a REST namespace. */
const PYTHON_FILTER_ONLY = {
  vector: { single_vector: [] },
  k: 10,
  filter: 'id > 3',
  prefilter: true,
  columns: null,
  distance_type: null,
  nprobes: 20,
  ef: null,
  refine_factor: null,
  lower_bound: null,
  upper_bound: null,
  vector_column: null,
  offset: null,
  with_row_id: false,
  bypass_vector_index: false,
  fast_search: false,
  version: null,
  full_text_query: null,
};

describe.each(backends())('empty query vectors on $name', (backend) => {
  const fx = useTestApp(backend);
  beforeAll(async () => {
    expect((await fx.t.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/ns%24t/create', stream(), ARROW)).status).toBe(200);
    const index = await fx.t.call('POST', '/v1/table/ns%24t/create_index', { column: 'text', index_type: 'FTS', with_position: true });
    expect(index.status, index.text).toBe(200);
  });

  async function ids(body: Record<string, unknown>): Promise<number[]> {
    const res = await fx.t.app.server.inject({
      method: 'POST',
      url: '/v1/table/ns%24t/query',
      payload: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode, res.body).toBe(200);
    const table = arrow.tableFromIPC(res.rawPayload);
    expect(table.schema.fields.map((f) => f.name)).not.toContain('_distance');
    return Array.from(table.getChild('id') ?? [], Number).sort((a, b) => a - b);
  }

  it('runs the filter-only query LanceDB Python sends as a plain filtered scan', async () => {
    expect(await ids(PYTHON_FILTER_ONLY)).toEqual([4, 5, 6, 7, 8, 9]);
  });

  it('runs a full-text query with an empty vector as a full-text query, not a hybrid one', async () => {
    expect(await ids({ vector: { single_vector: [] }, k: 10, full_text_query: { string_query: { query: 'alpha' } } })).toEqual([1, 3, 5, 7, 9]);
  });

  it('takes an empty multivector as no vector too', async () => {
    expect(await ids({ vector: { multi_vector: [] }, k: 3, filter: 'id < 2' })).toEqual([0, 1]);
  });

  it('still runs a real vector search when the vector has values', async () => {
    const res = await fx.t.app.server.inject({
      method: 'POST',
      url: '/v1/table/ns%24t/query',
      payload: JSON.stringify({ vector: { single_vector: [5, 6, 7, 8] }, k: 1 }),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode, res.body).toBe(200);
    const table = arrow.tableFromIPC(res.rawPayload);
    expect(Number(table.getChild('id')?.get(0))).toBe(5);
    expect(table.schema.fields.map((f) => f.name)).toContain('_distance');
  });

  it('explains a filter-only query with an empty vector without a vector search in the plan', async () => {
    const res = await fx.t.call('POST', '/v1/table/ns%24t/explain_plan', { query: PYTHON_FILTER_ONLY });
    expect(res.status, res.text).toBe(200);
    expect(res.text).not.toMatch(/KNN|ANN/);
  });
});
