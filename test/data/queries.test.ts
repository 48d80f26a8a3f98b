import { beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { useTestApp } from '../support/app.js';
import { connectTable } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const DIM = 8;
const ROWS = 300;

const vectorOf = (i: number): number[] => Array.from({ length: DIM }, (_, j) => Math.sin(i * DIM + j));
const textOf = (i: number): string => `doc ${i} ${i % 2 ? 'alpha' : 'beta'} ${i % 3 ? 'gamma' : 'delta'}`;
const catOf = (i: number): string => `c${i % 4}`;

/** An Arrow IPC stream of rows id, text, cat, vec (FixedSizeList(8, float32)) and mv (a multivector of two). */
function vectorStream(ids: number[]): Buffer {
  const vecType = new arrow.FixedSizeList(DIM, new arrow.Field('item', new arrow.Float32(), true));
  const table = new arrow.Table({
    id: arrow.vectorFromArray(BigInt64Array.from(ids.map(BigInt))),
    text: arrow.vectorFromArray(ids.map(textOf), new arrow.Utf8()),
    cat: arrow.vectorFromArray(ids.map(catOf), new arrow.Utf8()),
    vec: arrow.vectorFromArray(ids.map(vectorOf), vecType),
    mv: arrow.vectorFromArray(
      ids.map((i) => [vectorOf(i), vectorOf(i + 1000)]),
      new arrow.List(new arrow.Field('item', vecType, true)),
    ),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

type Row = Record<string, unknown>;

/** Plain rows: int64 as number, vectors as arrays. */
function plain(rows: Row[]): Row[] {
  return rows.map((r) =>
    Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'bigint' ? Number(v) : v instanceof Float32Array ? Array.from(v) : v])),
  );
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

describe.each(backends())('queries on $name', (backend) => {
  const fx = useTestApp(backend);
  let engineOptions: Record<string, string>;
  let location: string;
  beforeAll(async () => {
    engineOptions = fx.root.store.engineStorageOptions();
    expect((await fx.t.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
    const created = await fx.t.call('POST', '/v1/table/ns%24t/create', vectorStream(range(ROWS)), ARROW);
    expect(created.status).toBe(200);
    location = String(created.json.location);
    for (const body of [
      { column: 'vec', index_type: 'IVF_PQ', num_partitions: 2, num_sub_vectors: 2 },
      { column: 'mv', index_type: 'IVF_PQ', num_partitions: 2, num_sub_vectors: 2, distance_type: 'cosine' },
      { column: 'text', index_type: 'FTS', with_position: true },
      { column: 'cat', index_type: 'FTS', with_position: true },
    ]) {
      const res = await fx.t.call('POST', '/v1/table/ns%24t/create_index', body);
      expect(res.status, res.text).toBe(200);
    }
    // Version 6 appends ten unindexed rows behind the service's back, as a client writing directly would.
    const table = await connectTable(location, engineOptions);
    try {
      await table.add(arrow.tableFromIPC(vectorStream(range(10).map((i) => ROWS + i))));
      expect(await table.version()).toBe(6);
    } finally {
      table.close();
    }
  });

  /** Runs a query through the service; returns the status, the content type, and the decoded rows. */
  async function query(body: Record<string, unknown>, op = 'query', table = 't') {
    const res = await fx.t.app.server.inject({
      method: 'POST',
      url: `/v1/table/ns%24${table}/${op}`,
      payload: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    });
    const failed = res.statusCode !== 200;
    const data = failed ? undefined : arrow.tableFromIPC(res.rawPayload);
    return {
      status: res.statusCode,
      contentType: String(res.headers['content-type']),
      json: (failed ? JSON.parse(res.body) : {}) as Record<string, unknown>,
      rows: data ? plain(data.toArray().map((r: { toJSON(): Row }) => r.toJSON())) : [],
      fields: data ? data.schema.fields.map((f) => f.name) : [],
      magic: res.rawPayload.subarray(0, 6).toString(),
    };
  }

  /** Runs `fn` on the dataset opened straight through the engine. */
  async function engine<T>(fn: (table: import('@lancedb/lancedb').Table) => Promise<T>): Promise<T> {
    const table = await connectTable(location, engineOptions);
    try {
      return await fn(table);
    } finally {
      table.close();
    }
  }

  const ids = (rows: Row[]) => rows.map((r) => r.id as number);
  const idSet = (rows: Row[]) => [...ids(rows)].sort((a, b) => a - b);

  it('runs a vector search and answers an Arrow IPC file the engine agrees with', async () => {
    const q = vectorOf(5);
    const res = await query({ vector: { single_vector: q }, k: 5, vector_column: 'vec', columns: { column_names: ['id', 'cat'] }, with_row_id: true });
    expect(res.status).toBe(200);
    expect(res.contentType).toBe('application/vnd.apache.arrow.file');
    expect(res.magic).toBe('ARROW1');
    expect(res.fields).toEqual(['id', 'cat', '_distance', '_rowid']);
    const expected = plain(await engine((t) => t.vectorSearch(q).column('vec').select(['id', 'cat']).withRowId().limit(5).toArray()));
    expect(res.rows).toEqual(expected);
    expect(res.rows[0]).toMatchObject({ id: 5, cat: 'c1' });
  });

  it('applies filter, prefilter, offset, distance type, search options and a distance range like the engine', async () => {
    const q = vectorOf(7);
    const cases: Array<[Record<string, unknown>, (v: import('@lancedb/lancedb').VectorQuery) => import('@lancedb/lancedb').VectorQuery]> = [
      [{ filter: "cat = 'c1'" }, (v) => v.where("cat = 'c1'")],
      [{ filter: 'id > 100', prefilter: false }, (v) => v.where('id > 100').postfilter()],
      [{ offset: 3 }, (v) => v.offset(3)],
      [{ distance_type: 'Cosine', nprobes: 1, refine_factor: 2 }, (v) => v.distanceType('cosine').nprobes(1).refineFactor(2)],
      [{ minimum_nprobes: 1, maximum_nprobes: 2 }, (v) => v.minimumNprobes(1).maximumNprobes(2)],
      [{ bypass_vector_index: true }, (v) => v.bypassVectorIndex()],
      [{ fast_search: true }, (v) => v.fastSearch()],
      [{ lower_bound: 0.5, upper_bound: 2 }, (v) => v.distanceRange(0.5, 2)],
      [{ ef: 30 }, (v) => v.ef(30)],
    ];
    for (const [fields, apply] of cases) {
      const res = await query({ vector: { single_vector: q }, k: 8, vector_column: 'vec', columns: { column_names: ['id'] }, ...fields });
      expect(res.status, JSON.stringify(fields)).toBe(200);
      const expected = plain(await engine((t) => apply(t.vectorSearch(q).column('vec').select(['id']).limit(8)).toArray()));
      expect(res.rows, JSON.stringify(fields)).toEqual(expected);
      expect(res.rows.length).toBeGreaterThan(0);
    }
    // The options act: the filter keeps c1 rows only, fast search skips the ten unindexed rows.
    const filtered = await query({ vector: { single_vector: q }, k: 20, vector_column: 'vec', filter: "cat = 'c1'", columns: { column_names: ['cat'] } });
    expect(new Set(filtered.rows.map((r) => r.cat))).toEqual(new Set(['c1']));
    const exact = await query({
      vector: { single_vector: vectorOf(ROWS + 3) },
      k: 1,
      vector_column: 'vec',
      bypass_vector_index: true,
      columns: { column_names: ['id'] },
    });
    expect(ids(exact.rows)).toEqual([ROWS + 3]);
    const fast = await query({
      vector: { single_vector: vectorOf(ROWS + 3) },
      k: 5,
      vector_column: 'vec',
      fast_search: true,
      columns: { column_names: ['id'] },
    });
    expect(ids(fast.rows).every((id) => id < ROWS)).toBe(true);
  });

  it('scans with a filter, projections and aliases when there is no vector', async () => {
    const res = await query({ vector: null, k: 4, filter: 'id >= 10 AND id < 20', columns: { column_aliases: { key: 'id', label: 'cat' } } });
    expect(res.status).toBe(200);
    expect(res.fields).toEqual(['key', 'label']);
    const expected = plain(await engine((t) => t.query().where('id >= 10 AND id < 20').select({ key: 'id', label: 'cat' }).limit(4).toArray()));
    expect(res.rows).toEqual(expected);
    expect(res.rows).toHaveLength(4);
    const all = await query({ k: 1000, columns: { column_names: ['id'] } });
    expect(idSet(all.rows)).toEqual(range(ROWS + 10));
  });

  it('searches a multivector column and batches query vectors on a plain vector column', async () => {
    const multi = [vectorOf(9), vectorOf(1009)];
    const mv = await query({ vector: { multi_vector: multi }, k: 3, vector_column: 'mv', columns: { column_names: ['id'] } });
    expect(mv.status).toBe(200);
    expect(mv.rows).toEqual(plain(await engine((t) => t.vectorSearch(multi).column('mv').select(['id']).limit(3).toArray())));
    expect(mv.rows[0]?.id).toBe(9);

    const batch = await query({ vector: { multi_vector: [vectorOf(1), vectorOf(2)] }, k: 2, vector_column: 'vec', columns: { column_names: ['id'] } });
    expect(batch.fields).toContain('query_index');
    expect(batch.rows.filter((r) => r.query_index === 0)[0]?.id).toBe(1);
    expect(batch.rows.filter((r) => r.query_index === 1)[0]?.id).toBe(2);
  });

  it('runs string and structured full-text queries like the engine', async () => {
    const lancedb = await import('@lancedb/lancedb');
    const all = ROWS + 10;
    const fts = async (full_text_query: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
      const res = await query({ vector: null, k: all, full_text_query, columns: { column_names: ['id'] }, ...extra });
      expect(res.status, JSON.stringify(full_text_query)).toBe(200);
      return idSet(res.rows);
    };
    const viaEngine = async (build: (q: import('@lancedb/lancedb').Query) => import('@lancedb/lancedb').Query) =>
      idSet(plain(await engine((t) => build(t.query()).select(['id']).limit(all).toArray())));
    const alpha = range(all).filter((i) => i % 2 === 1);

    expect(await fts({ string_query: { query: 'alpha', columns: ['text'] } })).toEqual(alpha);
    expect(await fts({ string_query: { query: 'alpha c2' } })).toEqual(await viaEngine((q) => q.fullTextSearch('alpha c2')));
    expect(await fts({ string_query: { query: 'alpha' } }, { filter: 'id < 50' })).toEqual(alpha.filter((i) => i < 50));

    const match = { match: { terms: 'alpha gamma', column: 'text', operator: 'and' } };
    expect(await fts({ structured_query: { query: match } })).toEqual(range(all).filter((i) => i % 2 === 1 && i % 3 !== 0));
    expect(await fts({ structured_query: { query: match } })).toEqual(
      await viaEngine((q) => q.fullTextSearch(new lancedb.MatchQuery('alpha gamma', 'text', { operator: lancedb.Operator.And }))),
    );
    // Without a column a match covers every FTS-indexed column (text and cat).
    expect(await fts({ structured_query: { query: { match: { terms: 'c2' } } } })).toEqual(range(all).filter((i) => i % 4 === 2));
    expect(await fts({ structured_query: { query: { phrase: { terms: 'beta delta', column: 'text' } } } })).toEqual(
      await viaEngine((q) => q.fullTextSearch(new lancedb.PhraseQuery('beta delta', 'text'))),
    );
    expect(await fts({ structured_query: { query: { phrase: { terms: 'beta delta' } } } })).toEqual(range(all).filter((i) => i % 6 === 0));
    const boolean = {
      boolean: { must: [{ match: { terms: 'alpha', column: 'text' } }], should: [], must_not: [{ match: { terms: 'c1', column: 'cat' } }] },
    };
    expect(await fts({ structured_query: { query: boolean } })).toEqual(range(all).filter((i) => i % 2 === 1 && i % 4 !== 1));
    const multi = {
      multi_match: {
        match_queries: [
          { terms: 'delta', column: 'text' },
          { terms: 'c1', column: 'cat' },
        ],
      },
    };
    expect(await fts({ structured_query: { query: multi } })).toEqual(range(all).filter((i) => i % 3 === 0 || i % 4 === 1));
    const boost = {
      boost: { positive: { match: { terms: 'alpha', column: 'text' } }, negative: { match: { terms: 'gamma', column: 'text' } }, negative_boost: 0.2 },
    };
    expect(await fts({ structured_query: { query: boost } })).toEqual(
      await viaEngine((q) =>
        q.fullTextSearch(new lancedb.BoostQuery(new lancedb.MatchQuery('alpha', 'text'), new lancedb.MatchQuery('gamma', 'text'), { negativeBoost: 0.2 })),
      ),
    );
  });

  it('reads an earlier version, and keeps the result schema when nothing matches', async () => {
    const v5 = await query({ k: 1000, version: 5, columns: { column_names: ['id'] } });
    expect(v5.status).toBe(200);
    expect(idSet(v5.rows)).toEqual(range(ROWS));
    const none = await query({
      vector: { single_vector: vectorOf(1) },
      k: 3,
      vector_column: 'vec',
      filter: 'id < 0',
      columns: { column_names: ['id', 'cat'] },
    });
    expect(none.status).toBe(200);
    expect(none.rows).toEqual([]);
    expect(none.fields).toEqual(['id', 'cat', '_distance']);
  });

  it('explains and analyzes plans as JSON strings', async () => {
    const q = { vector: { single_vector: vectorOf(3) }, k: 5, vector_column: 'vec', filter: "cat = 'c3'", nprobes: 2 };
    const explained = await fx.t.call('POST', '/v1/table/ns%24t/explain_plan', { query: q, verbose: true });
    expect(explained.status).toBe(200);
    expect(explained.headers['content-type']).toMatch(/application\/json/);
    const plan = JSON.parse(explained.text) as string;
    expect(typeof plan).toBe('string');
    const expected = await engine((t) => t.vectorSearch(vectorOf(3)).column('vec').where("cat = 'c3'").nprobes(2).limit(5).explainPlan(true));
    expect(plan).toBe(expected);
    expect(plan).toContain('ANNSubIndex');

    const analyzed = await fx.t.call('POST', '/v1/table/ns%24t/analyze_plan', q);
    expect(analyzed.status).toBe(200);
    const analysis = JSON.parse(analyzed.text) as string;
    expect(analysis).toContain('AnalyzeExec');
    expect(analysis).toMatch(/output_rows=/);

    const fts = await fx.t.call('POST', '/v1/table/ns%24t/explain_plan', {
      query: { vector: null, k: 3, full_text_query: { string_query: { query: 'alpha' } } },
    });
    expect(JSON.parse(fts.text)).toContain('MatchQuery');
  });

  it('refuses bad queries with the engine reason, and reading changes nothing', async () => {
    const before = await engine(async (t) => ({ version: await t.version(), rows: await t.countRows() }));
    const expectError = async (body: Record<string, unknown>, status: number, code: number, message?: RegExp, op = 'query') => {
      const res = await query(body, op);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(res.json.code, JSON.stringify(res.json)).toBe(code);
      if (message) expect(String(res.json.error)).toMatch(message);
    };
    const v = { single_vector: vectorOf(1) };
    await expectError({ vector: null, k: 3, filter: 'id >* 3' }, 400, 13, /Error parsing statement.*sql parser error/);
    await expectError({ vector: null, k: 3, filter: 'idd > 3' }, 404, 12, /idd/);
    await expectError({ vector: v, k: 3, vector_column: 'vec', filter: 'idd > 3' }, 404, 12, /idd/);
    await expectError({ vector: null, k: 3, columns: { column_names: ['nope'] } }, 404, 12, /nope/);
    await expectError({ vector: v, k: 3, vector_column: 'nope' }, 404, 12, /nope/);
    await expectError({ vector: v, k: 3 }, 400, 13, /vector column/);
    await expectError({ vector: { single_vector: [1, 2, 3] }, k: 3, vector_column: 'vec' }, 400, 13, /dim/);
    await expectError({ vector: v, k: 0, vector_column: 'vec' }, 400, 13, /k must be positive/);
    await expectError({ vector: null, k: 3, version: 99 }, 404, 11);
    await expectError({ vector: null }, 400, 13, /k/);
    await expectError({ vector: null, k: 2 ** 40 }, 400, 13, /k/);
    await expectError({ vector: null, k: 3, distance_type: 'manhattan' }, 400, 13, /distance_type/);
    await expectError({ vector: { single_vector: [1], multi_vector: [[1]] }, k: 3 }, 400, 13, /single_vector or multi_vector/);
    await expectError(
      { vector: null, k: 3, full_text_query: { string_query: { query: 'x' }, structured_query: { query: { match: { terms: 'x' } } } } },
      400,
      13,
    );
    await expectError({ vector: null, k: 3, full_text_query: { structured_query: { query: {} } } }, 400, 13, /exactly one/);
    await expectError({ vector: null, k: 3, full_text_query: { string_query: { query: 'alpha', columns: ['nope'] } } }, 404, 12, /nope/);
    await expectError({ vector: null, k: 3, full_text_query: { string_query: { query: 'alpha' } }, version: 1 }, 400, 13, /INVERTED index/);
    await expectError(
      { vector: null, k: 3, full_text_query: { structured_query: { query: { match: { terms: 'alpha' } } } }, version: 1 },
      400,
      13,
      /INVERTED index/,
    );
    await expectError({ vector: null, k: 3, branch: 'dev' }, 404, 22, /branch "dev"/);
    await expectError({ query: { vector: null, k: 3, filter: 'id >* 3' } }, 400, 13, /Error parsing statement/, 'explain_plan');
    await expectError({ query: { vector: null, k: 3, id: ['ns', 'other'] } }, 400, 13, /does not match/, 'explain_plan');
    await expectError({ vector: null, k: 3, filter: 'nope = 1' }, 404, 12, /nope/, 'analyze_plan');
    const missing = await query({ vector: null, k: 3 }, 'query', 'absent');
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe(4);
    expect(await engine(async (t) => ({ version: await t.version(), rows: await t.countRows() }))).toEqual(before);
  });
});
