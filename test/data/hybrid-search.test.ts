import { beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { useTestApp } from '../support/app.js';
import { connectTable } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';
import { lancedb } from '../support/lancedb-client.js';

// Hybrid search (a vector and a full-text query in one QueryTable, ExplainTableQueryPlan or
// AnalyzeTableQueryPlan) through the service, against the same hybrid search run straight on the
// dataset with @lancedb/lancedb: query().nearestTo(v).fullTextSearch(q).rerank(RRFReranker).

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const DIM = 8;
const ROWS = 240;
const TEXT = 'alpha';

type Table = import('@lancedb/lancedb').Table;
type VectorQuery = import('@lancedb/lancedb').VectorQuery;
type Row = Record<string, unknown>;

const vectorOf = (i: number): number[] => Array.from({ length: DIM }, (_, j) => Math.sin(i * DIM + j));
/**
 * Every third row says "alpha", each with its own term count and length, so that no two full-text
 * scores tie (a tie would let the engine rank them either way); the others say "beta".
 */
function textOf(i: number): string {
  if (i % 3 !== 0) return `beta w${i}`;
  const m = i / 3;
  return [...Array<string>(1 + (m % 4)).fill('alpha'), ...Array<string>(Math.floor(m / 4)).fill('pad'), `w${i}`].join(' ');
}
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

function stream(ids: number[]): Buffer {
  const vecType = new arrow.FixedSizeList(DIM, new arrow.Field('item', new arrow.Float32(), true));
  const table = new arrow.Table({
    id: arrow.vectorFromArray(BigInt64Array.from(ids.map(BigInt))),
    text: arrow.vectorFromArray(ids.map(textOf), new arrow.Utf8()),
    vec: arrow.vectorFromArray(ids.map(vectorOf), vecType),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

/** Plain rows: int64 as numbers, vectors as arrays. */
function plain(rows: Row[]): Row[] {
  const value = (v: unknown): unknown =>
    typeof v === 'bigint' ? Number(v) : v instanceof arrow.Vector ? Array.from(v.toArray() as Float32Array) : v instanceof Float32Array ? Array.from(v) : v;
  return rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, value(v)])));
}

const ids = (rows: Row[]) => rows.map((r) => r.id as number);

describe.each(backends())('hybrid search on $name', (backend) => {
  const fx = useTestApp(backend);
  let location: string;
  let rrf: import('@lancedb/lancedb').rerankers.RRFReranker;

  beforeAll(async () => {
    rrf = await lancedb.rerankers.RRFReranker.create();
    expect((await fx.t.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
    const created = await fx.t.call('POST', '/v1/table/ns%24t/create', stream(range(ROWS)), ARROW);
    expect(created.status, created.text).toBe(200);
    location = String(created.json.location);
    const index = await fx.t.call('POST', '/v1/table/ns%24t/create_index', { column: 'text', index_type: 'FTS' });
    expect(index.status, index.text).toBe(200);
  });

  async function call(body: Record<string, unknown>, op = 'query') {
    const res = await fx.t.app.server.inject({
      method: 'POST',
      url: `/v1/table/ns%24t/${op}`,
      payload: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    });
    const ok = res.statusCode === 200;
    const data = ok && op === 'query' ? arrow.tableFromIPC(res.rawPayload) : undefined;
    return {
      status: res.statusCode,
      json: (ok ? (op === 'query' ? {} : { plan: JSON.parse(res.body) }) : JSON.parse(res.body)) as Record<string, unknown>,
      rows: data ? plain(data.toArray().map((r: { toJSON(): Row }) => r.toJSON())) : [],
      fields: data ? data.schema.fields.map((f) => f.name) : [],
    };
  }

  async function engine<T>(fn: (table: Table) => Promise<T>): Promise<T> {
    const table = await connectTable(location, fx.root.store.engineStorageOptions());
    try {
      return await fn(table);
    } finally {
      table.close();
    }
  }

  /** The same hybrid search on the dataset, fused by the engine's RRF reranker, without the `_score` it leaves behind. */
  async function direct(v: number[], build: (q: VectorQuery) => VectorQuery): Promise<Row[]> {
    const rows = plain(await engine(async (t) => (await build(t.query().nearestTo(v).column('vec').fullTextSearch(TEXT).rerank(rrf)).toArray()) as Row[]));
    return rows.map(({ _score, ...rest }) => rest);
  }

  const hybrid = (v: number[], fields: Record<string, unknown> = {}) => ({
    vector: { single_vector: v },
    vector_column: 'vec',
    full_text_query: { string_query: { query: TEXT } },
    ...fields,
  });

  it('answers the fused result with _relevance_score: the vector matches and the text matches, as the engine ranks them', async () => {
    const v = vectorOf(1);
    const res = await call(hybrid(v, { k: 12, columns: { column_names: ['id', 'text'] }, with_row_id: true }));
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.fields).toEqual(['id', 'text', '_rowid', '_relevance_score']);
    expect(res.rows).toEqual(await direct(v, (q) => q.select(['id', 'text']).withRowId().limit(12)));
    expect(res.rows).toHaveLength(12);
    // Both kinds of match: row 1 (the query's own vector) has no "alpha"; the best text match is near no vector.
    const vectorOnly = res.rows.filter((r) => !String(r.text).includes(TEXT));
    const textTop = ids(plain((await engine((t) => t.query().fullTextSearch(TEXT).select(['id']).limit(1).toArray())) as Row[]))[0];
    expect(ids(vectorOnly)).toContain(1);
    expect(ids(res.rows)).toContain(textTop);
    const vectorTop = ids(plain((await engine((t) => t.query().nearestTo(v).column('vec').select(['id']).limit(12).toArray())) as Row[]));
    expect(vectorTop).not.toContain(textTop);
    // Ranked by relevance, highest first.
    const scores = res.rows.map((r) => r._relevance_score as number);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
  });

  it('honours k, filter, prefilter, columns, aliases, with_row_id and offset', async () => {
    const v = vectorOf(40);
    const cases: Array<[Record<string, unknown>, (q: VectorQuery) => VectorQuery]> = [
      [{ k: 3 }, (q) => q.select(['id']).limit(3)],
      [{ k: 30 }, (q) => q.select(['id']).limit(30)],
      [{ k: 8, filter: 'id >= 100' }, (q) => q.select(['id']).where('id >= 100').limit(8)],
      [{ k: 8, filter: 'id % 2 = 0', prefilter: false }, (q) => q.select(['id']).where('id % 2 = 0').postfilter().limit(8)],
      [{ k: 8, filter: 'id % 2 = 0', prefilter: true }, (q) => q.select(['id']).where('id % 2 = 0').limit(8)],
      [{ k: 8, with_row_id: true }, (q) => q.select(['id']).withRowId().limit(8)],
    ];
    for (const [fields, build] of cases) {
      const res = await call(hybrid(v, { columns: { column_names: ['id'] }, ...fields }));
      expect(res.status, JSON.stringify(fields)).toBe(200);
      expect(res.rows, JSON.stringify(fields)).toEqual(await direct(v, build));
      expect(res.rows.length, JSON.stringify(fields)).toBeGreaterThan(0);
    }
    const filtered = await call(hybrid(v, { k: 20, filter: 'id >= 100', columns: { column_names: ['id'] } }));
    expect(filtered.rows.every((r) => (r.id as number) >= 100)).toBe(true);
    expect(filtered.fields).toEqual(['id', '_relevance_score']);

    const aliased = await call(hybrid(v, { k: 5, columns: { column_aliases: { key: 'id', words: 'text' } } }));
    expect(aliased.fields).toEqual(['key', 'words', '_relevance_score']);
    expect(aliased.rows).toEqual(await direct(v, (q) => q.select({ key: 'id', words: 'text' }).limit(5)));

    const everything = await call(hybrid(v, { k: 2 }));
    expect(everything.fields).toEqual(['id', 'text', 'vec', '_relevance_score']);
    expect(everything.rows).toEqual(await direct(v, (q) => q.limit(2)));

    // The offset is taken from the fused ranking (as LanceDB Python does), not from each search.
    const first = await call(hybrid(v, { k: 12, columns: { column_names: ['id'] } }));
    const paged = await call(hybrid(v, { k: 5, offset: 4, columns: { column_names: ['id'] } }));
    expect(paged.rows).toEqual(first.rows.slice(4, 9));
  });

  it('takes a structured full-text query', async () => {
    const v = vectorOf(9);
    const res = await call({
      vector: { single_vector: v },
      vector_column: 'vec',
      k: 10,
      full_text_query: { structured_query: { query: { match: { terms: TEXT, column: 'text' } } } },
      columns: { column_names: ['id'] },
    });
    expect(res.status).toBe(200);
    const expected = plain(
      await engine(
        async (t) =>
          (await t
            .query()
            .nearestTo(v)
            .column('vec')
            .fullTextSearch(new lancedb.MatchQuery(TEXT, 'text'))
            .rerank(rrf)
            .select(['id'])
            .limit(10)
            .toArray()) as Row[],
      ),
    ).map(({ _score, ...rest }) => rest);
    expect(res.rows).toEqual(expected);
  });

  it('keeps the result schema when nothing matches', async () => {
    const none = await call(hybrid(vectorOf(2), { k: 5, filter: 'id < 0', columns: { column_names: ['id', 'text'] }, with_row_id: true }));
    expect(none.status).toBe(200);
    expect(none.rows).toEqual([]);
    expect(none.fields).toEqual(['id', 'text', '_rowid', '_relevance_score']);
    const past = await call(hybrid(vectorOf(2), { k: 5, offset: 10_000, columns: { column_names: ['id'] } }));
    expect(past.rows).toEqual([]);
    expect(past.fields).toEqual(['id', '_relevance_score']);
  });

  it('ranks the text matches alone when the vector search finds nothing (which the engine fails on)', async () => {
    const v = vectorOf(5);
    const textRanking = async (filter?: (id: number) => boolean) => {
      const found = ids(plain((await engine((t) => t.query().fullTextSearch(TEXT).select(['id']).limit(6).toArray())) as Row[]));
      // RRF of one list: 1 / (60 + rank), in the engine's float32.
      return (filter ? found.filter(filter) : found).map((id, rank) => ({ id, _relevance_score: Math.fround(1 / (60 + rank)) }));
    };
    // The engine itself answers this with an error.
    await expect(direct(v, (q) => q.distanceRange(1000, 1001).select(['id']).limit(6))).rejects.toThrow(/_distance not found/);

    // No vector within the distance range; no vector index to search fast.
    for (const fields of [{ lower_bound: 1000, upper_bound: 1001 }, { fast_search: true }]) {
      const res = await call(hybrid(v, { k: 6, columns: { column_names: ['id'] }, ...fields }));
      expect(res.status, JSON.stringify(res.json)).toBe(200);
      expect(res.rows).toEqual(await textRanking());
      expect(res.fields).toEqual(['id', '_relevance_score']);
    }
    // Filtered after searching: the text search keeps those of its own top 6 that pass the filter
    // (two of them here; a third text match, further down, passes too but is not kept), and the
    // 6 nearest vectors pass none.
    const nearest = ids(plain((await engine((t) => t.query().nearestTo(v).column('vec').select(['id']).limit(6).toArray())) as Row[]));
    const top = ids((await textRanking()).map((r) => ({ id: r.id })));
    const [a, b] = [top[1], top[3]];
    const further = 237;
    expect(textOf(further)).toContain(TEXT);
    expect([a, b, further].some((id) => nearest.includes(id as number) || id === undefined)).toBe(false);
    expect(top).not.toContain(further);
    const filter = `id IN (${a}, ${b}, ${further})`;
    const post = await call(hybrid(v, { k: 6, filter, prefilter: false, columns: { column_names: ['id'] }, with_row_id: true }));
    expect(post.status, JSON.stringify(post.json)).toBe(200);
    expect(post.rows.map(({ _rowid, ...r }) => r)).toEqual(await textRanking((id) => id === a || id === b));
    expect(post.fields).toEqual(['id', '_rowid', '_relevance_score']);
    // Filtered first, the vector search finds them all, and so does the text search.
    const pre = await call(hybrid(v, { k: 6, filter, columns: { column_names: ['id'] } }));
    expect(new Set(ids(pre.rows))).toEqual(new Set([a, b, further]));
    expect(pre.rows).toEqual(await direct(v, (q) => q.where(filter).select(['id']).limit(6)));
    // Filtered after searching, neither search keeps a row.
    const neither = await call(hybrid(v, { k: 6, filter: `id = ${further}`, prefilter: false, columns: { column_names: ['id', 'text'] } }));
    expect(neither.status, JSON.stringify(neither.json)).toBe(200);
    expect(neither.rows).toEqual([]);
    expect(neither.fields).toEqual(['id', 'text', '_relevance_score']);
  });

  it('filters a full-text search after searching with prefilter false, as Lance does (what a pushed-down hybrid search sends)', async () => {
    const top = ids(plain((await engine((t) => t.query().fullTextSearch(TEXT).select(['id']).limit(12).toArray())) as Row[]));
    const odd = (id: number) => id % 2 === 1;
    const search = (fields: Record<string, unknown>) =>
      call({
        vector: null,
        full_text_query: { string_query: { query: TEXT } },
        filter: 'id % 2 = 1',
        prefilter: false,
        columns: { column_names: ['id'] },
        ...fields,
      });
    for (const [k, offset] of [
      [6, 0],
      [6, 2],
      [12, 0],
    ] as const) {
      const res = await search({ k, offset });
      expect(res.status, JSON.stringify(res.json)).toBe(200);
      // The filter applies to the search's top offset + k rows.
      expect(ids(res.rows), `k ${k} offset ${offset}`).toEqual(
        top
          .slice(0, k + offset)
          .filter(odd)
          .slice(offset),
      );
      expect(res.fields).toEqual(['id', '_score']);
    }
    // Filtered first, the search finds k rows that pass.
    const pre = await search({ k: 6, prefilter: true });
    expect(pre.rows).toHaveLength(6);
    expect(pre.rows.every((r) => odd(r.id as number))).toBe(true);
    expect((await search({ k: 6, with_row_id: true })).fields).toEqual(['id', '_score', '_rowid']);
    const none = await search({ k: 6, filter: 'id < 0' });
    expect(none.status, JSON.stringify(none.json)).toBe(200);
    expect(none.rows).toEqual([]);
    expect(none.fields).toEqual(['id', '_score']);
  });

  it('explains and analyzes both searches under the fusion', async () => {
    const v = vectorOf(3);
    const q = hybrid(v, { k: 5, filter: 'id > 10', columns: { column_names: ['id'] } });
    const explained = await call({ query: q, verbose: true }, 'explain_plan');
    expect(explained.status, JSON.stringify(explained.json)).toBe(200);
    const [vectorPlan, textPlan] = await engine((t) =>
      Promise.all([
        t.query().nearestTo(v).column('vec').where('id > 10').select(['id']).withRowId().limit(5).explainPlan(true),
        t.query().fullTextSearch(TEXT).where('id > 10').select(['id']).withRowId().limit(5).explainPlan(true),
      ]),
    );
    const indent = (plan: string) => plan.replace(/^/gm, '    ');
    expect(explained.json.plan).toBe(`RRFReranker(K=60)\n  Vector Search Plan:\n${indent(vectorPlan)}\n  FTS Search Plan:\n${indent(textPlan)}`);
    expect(vectorPlan).toContain('KNNVectorDistance');
    expect(textPlan).toContain('MatchQuery');

    // k + offset rows from each search.
    const paged = await call({ query: hybrid(v, { k: 5, offset: 3 }) }, 'explain_plan');
    expect(String(paged.json.plan).match(/fetch=8/g)?.length).toBeGreaterThanOrEqual(2);

    const analyzed = await call(q, 'analyze_plan');
    expect(analyzed.status).toBe(200);
    const analysis = String(analyzed.json.plan);
    expect(analysis.split('\n')[0]).toBe('RRFReranker(K=60)');
    expect(analysis.match(/AnalyzeExec/g)).toHaveLength(2);
    expect(analysis).toMatch(/Vector Search Plan:[\s\S]*KNNVectorDistance[\s\S]*FTS Search Plan:[\s\S]*MatchQuery/);
    expect(analysis).toMatch(/output_rows=/);
  });

  it('refuses what it cannot do with a 406, and bad hybrid input with the engine reason', async () => {
    const v = vectorOf(3);
    const expectError = async (body: Record<string, unknown>, status: number, code: number, message: RegExp, op = 'query') => {
      const res = await call(body, op);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(res.json.code, JSON.stringify(res.json)).toBe(code);
      expect(String(res.json.error)).toMatch(message);
    };
    // Several query vectors on a plain vector column are a batch search.
    const batch = { vector: { multi_vector: [vectorOf(1), vectorOf(2)] }, vector_column: 'vec', k: 3, full_text_query: { string_query: { query: TEXT } } };
    await expectError(batch, 406, 0, /batch search/);
    await expectError({ query: batch }, 406, 0, /batch search/, 'explain_plan');
    // The engine cannot plan a full-text search that filters afterwards.
    const post = hybrid(v, { k: 3, filter: 'id > 1', prefilter: false });
    await expectError({ query: post }, 406, 0, /prefilter false/, 'explain_plan');
    await expectError(post, 406, 0, /prefilter false/, 'analyze_plan');
    await expectError({ query: { ...post, vector: null } }, 406, 0, /prefilter false/, 'explain_plan');
    await expectError(hybrid(v, { k: 3, filter: 'nope > 1' }), 404, 12, /nope/);
    await expectError(hybrid(v, { k: 3, columns: { column_names: ['nope'] } }), 404, 12, /nope/);
    await expectError(hybrid(v, { k: 0 }), 400, 13, /k must be positive/);
    await expectError(hybrid([1, 2, 3], { k: 3 }), 400, 13, /dim/);
    await expectError(hybrid(v, { k: 3, full_text_query: { string_query: { query: TEXT, columns: ['nope'] } } }), 404, 12, /nope/);
  });
});
