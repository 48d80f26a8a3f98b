import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { DEFAULT_UDF_PYTHON } from '../../src/engine/python-udf/python-udfs.js';
import { type TestApp, useTestApp } from '../support/app.js';
import { connectTable } from '../support/arrow-data.js';
import { type Backend, backends, localBackend, s3Backends, type TestRoot } from '../support/backends.js';
import { numbersStream, waitForJob } from '../support/jobs.js';
import { genevaQuery, META, makeUdfEnvelopes, schemaMessage, udfEntry, viewRows } from '../support/views.js';

// Materialized views of kind query (CreateMaterializedView, RefreshMaterializedView) in process,
// as Geneva 0.17 sends them: validation and its 4xx / 406 answers without UDF workers; with them
// (.venv-udf), views recomputed from their source, checked row by row, UDF columns included.
// Geneva itself drives them in test/realclient/geneva.test.ts.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const udfsAvailable = existsSync(DEFAULT_UDF_PYTHON);

/** A made-up envelope (never run): enough for the checks made before a UDF runs. */
const FAKE_ENVELOPE = JSON.stringify({
  image: 'test-image',
  tag: 'latest',
  workspace_checksum: null,
  udf_pickle: Buffer.from('not a pickle').toString('base64'),
  udf_checksum: 'x',
});

/** A chunker (or, with kind udtf, a udtf) view's udtf_spec as Geneva sends it: base64 of the spec's JSON and the SHA-256 of that base64. */
function specEntry(spec: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const udtf = Buffer.from(spec, 'utf8').toString('base64');
  const {
    name = 'x',
    version = 'x',
    input_columns = null,
  } = spec.startsWith('{"') ? (JSON.parse(spec) as { name?: string; version?: string; input_columns?: string[] }) : {};
  return {
    kind: 'chunker',
    udtf,
    udtf_sha: createHash('sha256').update(udtf).digest('hex'),
    udtf_name: name,
    udtf_version: version,
    input_columns,
    batch: false,
    ...overrides,
  };
}

/** The output schema of the test chunker `pieces` (test/support/geneva_udfs.py): label string, k int64. */
const PIECES_OUTPUTS: Array<[string, import('apache-arrow').DataType]> = [
  ['label', new arrow.Utf8()],
  ['k', new arrow.Int64()],
];
const CHUNK_META: Array<[string, import('apache-arrow').DataType]> = [
  ['__source_row_id', new arrow.Int64()],
  ['__child_index', new arrow.Int32()],
];
/** A chunker view over the numbers (id, x) inheriting x, reading id. */
const CHUNK_SCHEMA = schemaMessage([...CHUNK_META, ['x', new arrow.Int64()], ...PIECES_OUTPUTS]);
/** The output schema of the test UDTFs `decades*` (test/support/geneva_udfs.py). */
const DECADES_SCHEMA = schemaMessage([
  ['decade', new arrow.Int64()],
  ['n', new arrow.Int64()],
  ['total', new arrow.Int64()],
]);

/** A made-up ChunkerSpec (never run) with the outputs of `pieces`. */
const FAKE_CHUNKER = JSON.stringify({
  name: 'pieces',
  version: 'v1',
  chunker_payload: Buffer.from('not a pickle').toString('base64'),
  output_schema_bytes: schemaMessage(PIECES_OUTPUTS),
  input_columns: ['id'],
  batch: false,
  manifest: null,
  manifest_checksum: null,
});

/** The test UDF, chunker and UDTF envelopes of test/support/geneva_udfs.py by name, made before the first test. */
function useEnvelopes(): Record<string, string> {
  const envelopes: Record<string, string> = {};
  beforeAll(async () => {
    for (const [name, { body }] of Object.entries(await makeUdfEnvelopes())) envelopes[name] = body;
  }, 90_000);
  return envelopes;
}

/** Views without UDF columns, refreshed by the engine (no workers) or by the workers: the same rows either way. */
function plainViewCases(fixture: () => { root: TestRoot; t: TestApp }, prefix: string): void {
  const call = (op: string, view: string, body: Record<string, unknown>) => fixture().t.call('POST', `/v1/materialized_view/${view}/${op}`, body);

  async function refreshed(view: string, body: Record<string, unknown> = {}): Promise<Record<string, string>> {
    const res = await call('refresh', view, body);
    expect(res.status, res.text).toBe(202);
    const done = await waitForJob(fixture().t, String(res.json.job_id));
    expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
    return done.properties;
  }

  it('recomputes a view without UDFs (filter, SQL columns, offset, limit) at the source version asked for', { timeout: 60_000 }, async () => {
    const { t } = fixture();
    const src = `${prefix}plainsrc`;
    expect((await t.call('POST', `/v1/table/${src}/create`, numbersStream(100), ARROW)).status).toBe(200);
    expect((await t.call('POST', `/v1/table/${src}/insert`, numbersStream(100, 100), ARROW)).status).toBe(200);
    const view = `${prefix}plain`;
    const created = await call('create', view, {
      kind: 'query',
      source_query: genevaQuery(src, {
        filter: 'id % 2 = 0',
        columns: [
          ['id', 'id'],
          ['x2', 'x * 2'],
        ],
        offset: 40,
        limit: 30,
      }),
      output_schema: schemaMessage([...META, ['id', new arrow.Int64()], ['x2', new arrow.Int64()]]),
      with_no_data: false,
    });
    expect(created.status, created.text).toBe(201);
    const first = await waitForJob(t, String(created.json.job_id));
    expect(first.status, JSON.stringify(first.properties)).toBe('Succeeded');
    expect(first.properties).toMatchObject({ rows_refreshed: '30', src_version: '2' });
    const location = String((await t.call('POST', `/v1/table/${view}/describe`, {})).json.location);
    const expected = (ids: number[]) => ids.map((id) => ({ __source_row_id: id < 100 ? id : 2 ** 32 + id - 100, __is_set: true, id, x2: (id % 97) * 2 }));
    expect(await viewRows(location, fixture().root.store.engineStorageOptions())).toEqual(expected(Array.from({ length: 30 }, (_, i) => 80 + 2 * i)));
    // The first version of the source had 100 rows: 50 even ones, 10 after the offset.
    expect(await refreshed(view, { src_version: 1 })).toMatchObject({ rows_refreshed: '10', src_version: '1' });
    expect(await viewRows(location, fixture().root.store.engineStorageOptions())).toEqual(expected(Array.from({ length: 10 }, (_, i) => 80 + 2 * i)));
    const described = (await t.call('POST', `/v1/table/${view}/describe`, { load_detailed_metadata: true })).json.schema as {
      fields: Array<{ metadata?: Record<string, string> }>;
      metadata: Record<string, string>;
    };
    expect(described.metadata['geneva::view::base_table_version']).toBe('1');
    expect(described.fields[0]?.metadata?.['geneva::mv::last_refreshed_version']).toBe('1');
    // Nothing matching: an empty view, its metadata kept.
    expect((await t.call('POST', `/v1/table/${src}/delete`, { predicate: 'id >= 0' })).status).toBe(200);
    expect(await refreshed(view)).toMatchObject({ rows_refreshed: '0', src_version: '3' });
    expect(await viewRows(location, fixture().root.store.engineStorageOptions())).toEqual([]);
    const emptied = (await t.call('POST', `/v1/table/${view}/describe`, { load_detailed_metadata: true })).json.schema as { metadata: Record<string, string> };
    expect(emptied.metadata['geneva::view::base_table_version']).toBe('3');
  });

  it('refreshes a view whose versions are managed through its commit path', { timeout: 60_000 }, async () => {
    const { t } = fixture();
    const src = `${prefix}msrc`;
    expect((await t.call('POST', `/v1/table/${src}/create`, numbersStream(50), ARROW)).status).toBe(200);
    expect((await t.call('POST', `/v1/namespace/${prefix}managed/create`, { properties: { managed_versioning: 'true' } })).status).toBe(200);
    const view = `${prefix}managed%24v`;
    const created = await call('create', view, {
      kind: 'query',
      source_query: genevaQuery(src, { filter: 'id < 5', columns: ['id'] }),
      output_schema: schemaMessage([...META, ['id', new arrow.Int64()]]),
      with_no_data: false,
    });
    expect(created.status, created.text).toBe(201);
    const done = await waitForJob(t, String(created.json.job_id));
    expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
    // The refresh's commit is a version the catalog knows (it went through the managed commit path).
    const versions = await t.call('POST', `/v1/table/${view}/version/list`, {});
    expect(versions.status, versions.text).toBe(200);
    expect((versions.json.versions as Array<{ version: number }>).map((v) => v.version)).toContain(Number(done.properties.last_committed_version));
    const location = String((await t.call('POST', `/v1/table/${view}/describe`, {})).json.location);
    expect((await viewRows(location, fixture().root.store.engineStorageOptions())).map((r) => r.id)).toEqual([0, 1, 2, 3, 4]);
  });
}

describe('materialized views under authorization', () => {
  const sha256 = (key: string) => createHash('sha256').update(key).digest('hex');
  const as = (who: string) => ({ 'x-api-key': `${who}-key` });
  const principals = ['admin', 'writer', 'rooted'];
  const fx = useTestApp(localBackend, {
    ...(udfsAvailable ? { udf: { execution: 'local' as const, workers: 1 } } : {}),
    auth: { apiKeys: principals.map((p) => ({ principal: p, sha256: sha256(`${p}-key`) })) },
    authorization: {
      roles: {
        everything: [{ namespace: [], privilege: 'manage' }],
        'ns-writer': [{ namespace: ['ns'], privilege: 'write' }],
        'root-reader': [{ namespace: [], privilege: 'read' }],
      },
      principals: { admin: ['everything'], writer: ['ns-writer'], rooted: ['ns-writer', 'root-reader'] },
    },
  });
  const create = (who: string, view: string, body: Record<string, unknown>) => fx.t.call('POST', `/v1/materialized_view/${view}/create`, body, as(who));
  const schema = schemaMessage([...META, ['id', new arrow.Int64()]]);

  beforeAll(async () => {
    expect((await fx.t.call('POST', '/v1/namespace/ns/create', {}, as('admin'))).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/asrc/create', numbersStream(10), { ...ARROW, ...as('admin') })).status).toBe(200);
  });

  it("needs write on the view's namespace and read on the source's (403 code 15 otherwise)", async () => {
    const body = { kind: 'query', source_query: genevaQuery('asrc', { columns: ['id'] }), output_schema: schema };
    const noRead = await create('writer', 'ns%24v1', body);
    expect(noRead.status, noRead.text).toBe(403);
    expect(noRead.json.code).toBe(15);
    expect(String(noRead.json.error)).toMatch(/may not read/);
    expect((await create('rooted', 'v2', body)).status).toBe(403);
    const made = await create('rooted', 'ns%24v3', body);
    expect(made.status, made.text).toBe(201);
    const refreshed = await fx.t.call('POST', '/v1/materialized_view/ns%24v3/refresh', {}, as('rooted'));
    expect(refreshed.status, refreshed.text).toBe(202);
  });

  it.skipIf(!udfsAvailable)("needs manage on the view's namespace for a view with UDF columns (403 code 15)", async () => {
    const body = {
      kind: 'query',
      source_query: genevaQuery('asrc', { columns: { id: 'id' } }, [udfEntry('double', FAKE_ENVELOPE, 'd', 1, ['x'])]),
      output_schema: schemaMessage([...META, ['id', new arrow.Int64()], ['d', new arrow.Int64()]]),
    };
    const refused = await create('rooted', 'ns%24u1', body);
    expect(refused.status, refused.text).toBe(403);
    expect(String(refused.json.error)).toMatch(/needs manage/);
    expect((await create('admin', 'ns%24u2', body)).status).toBe(201);
  });
});

describe.each(backends())('materialized views on $name', (backend) => {
  describe('without UDF workers', () => {
    const fx = useTestApp(backend);
    let seq = 0;
    const create = (view: string, body: Record<string, unknown>) => fx.t.call('POST', `/v1/materialized_view/${view}/create`, body);
    const refresh = (view: string, body: Record<string, unknown> = {}) => fx.t.call('POST', `/v1/materialized_view/${view}/refresh`, body);
    const plainSchema = schemaMessage([...META, ['id', new arrow.Int64()], ['x2', new arrow.Int64()]]);

    async function source(n = 100): Promise<string> {
      const name = `src${++seq}`;
      const res = await fx.t.call('POST', `/v1/table/${name}/create`, numbersStream(n), ARROW);
      expect(res.status, res.text).toBe(200);
      return name;
    }

    it('creates the view table with its schema and the metadata Geneva reads (201, its version)', async () => {
      const src = await source();
      const res = await create('plain1', {
        kind: 'query',
        source_query: genevaQuery(src, { filter: 'id < 10', columns: { id: 'id', x2: 'x * 2' } }),
        output_schema: plainSchema,
        with_no_data: true,
      });
      expect(res.status, res.text).toBe(201);
      expect(res.json).toEqual({ version: 1 });
      const described = await fx.t.call('POST', '/v1/table/plain1/describe', { load_detailed_metadata: true });
      expect(described.status, described.text).toBe(200);
      const schema = described.json.schema as { fields: Array<{ name: string }>; metadata: Record<string, string> };
      expect(schema.fields.map((f) => f.name)).toEqual(['__source_row_id', '__is_set', 'id', 'x2']);
      expect(schema.metadata).toMatchObject({
        'geneva::view::base_table': src,
        'geneva::view::base_table_db_uri': 'db://tests',
        'geneva::view::base_table_version': '1',
        'geneva::view::version': '1',
      });
      expect(JSON.parse(schema.metadata['geneva::view::query'] ?? '{}')).toMatchObject({ source_table: src, base: { filter: 'id < 10' } });
      // A second create of the same name is a 409 and changes nothing.
      const again = await create('plain1', {
        kind: 'query',
        source_query: genevaQuery(src, {}),
        output_schema: schemaMessage([...META, ['id', new arrow.Int64()]]),
      });
      expect(again.status, again.text).toBe(409);
      expect(again.json.code).toBe(5);
    });

    it('stores the columns it read when the query selects none, as Geneva does', async () => {
      const src = await source(10);
      const res = await create('all1', {
        kind: 'query',
        source_query: genevaQuery(src, {}),
        output_schema: schemaMessage([...META, ['id', new arrow.Int64()], ['x', new arrow.Int64()]]),
      });
      expect(res.status, res.text).toBe(201);
      const described = await fx.t.call('POST', '/v1/table/all1/describe', { load_detailed_metadata: true });
      const metadata = (described.json.schema as { metadata: Record<string, string> }).metadata;
      expect(JSON.parse(metadata['geneva::view::query'] ?? '{}').base.columns).toEqual(['id', 'x']);
    });

    it('refuses bad requests with 400 and creates nothing', async () => {
      const src = await source(10);
      const good = { kind: 'query', source_query: genevaQuery(src, { columns: ['id'] }), output_schema: schemaMessage([...META, ['id', new arrow.Int64()]]) };
      const cases: Array<[string, Record<string, unknown>, RegExp]> = [
        ['not base64', { ...good, output_schema: 'not*base64' }, /output_schema/],
        ['not a schema', { ...good, output_schema: Buffer.from('hello world, no arrow').toString('base64') }, /output_schema.*(schema|Arrow)/i],
        ['no meta columns', { ...good, output_schema: schemaMessage([['id', new arrow.Int64()]]) }, /__source_row_id/],
        ['not JSON', { ...good, source_query: '{not json' }, /source_query: not JSON/],
        ['no source', { ...good, source_query: genevaQuery('', { columns: ['id'] }) }, /source_table/],
        ['a selected column not in the schema', { ...good, source_query: genevaQuery(src, { columns: ['id', 'x'] }) }, /"x" is not a field of output_schema/],
        [
          'a field nothing fills',
          { ...good, output_schema: schemaMessage([...META, ['id', new arrow.Int64()], ['y', new arrow.Int64()]]) },
          /neither selected/,
        ],
        ['a bad filter', { ...good, source_query: genevaQuery(src, { columns: ['id'], filter: 'id <<< 3' }) }, /id <<< 3/],
        ['udtf_spec with kind query', { ...good, udtf_spec: { kind: 'udtf', udtf: 'e30=', udtf_sha: 'x', udtf_name: 'u', udtf_version: '1' } }, /udtf_spec/],
      ];
      for (const [what, body, message] of cases) {
        const res = await create(`bad${++seq}`, body);
        expect(res.status, `${what}: ${res.text}`).toBe(400);
        expect(res.json.code, what).toBe(13);
        expect(String(res.json.error), what).toMatch(message);
        expect((await fx.t.call('POST', `/v1/table/bad${seq}/exists`, {})).status, what).toBe(404);
      }
      // A filter over a column the source lacks names it.
      const missing = await create('badcol', { ...good, source_query: genevaQuery(src, { columns: ['id'], filter: 'nope > 1' }) });
      expect(missing.status, missing.text).toBe(404);
      expect(String(missing.json.error)).toMatch(/nope/);
    });

    it('answers 404 for an unknown source, 406 for kinds and options not supported yet', async () => {
      const schema = schemaMessage([...META, ['id', new arrow.Int64()]]);
      const unknown = await create('nosrc', { kind: 'query', source_query: genevaQuery('no_such_table', { columns: ['id'] }), output_schema: schema });
      expect(unknown.status, unknown.text).toBe(404);
      expect(unknown.json.code).toBe(4);
      const src = await source(10);
      for (const [what, body] of [
        ['auto_refresh', { kind: 'query', source_query: genevaQuery(src, { columns: ['id'] }), output_schema: schema, auto_refresh: true }],
        [
          'a vector search',
          { kind: 'query', source_query: genevaQuery(src, { columns: ['id'] }, [], { base: { vector: [1, 2], columns: ['id'] } }), output_schema: schema },
        ],
      ] as const) {
        const res = await create(`k${++seq}`, body);
        expect(res.status, `${what}: ${res.text}`).toBe(406);
        expect(res.json.code).toBe(0);
        expect(String(res.json.error), what).toMatch(/not supported yet/);
      }
    });

    it('answers 406 saying how to enable Python UDFs to a view with UDF columns', async () => {
      const src = await source(10);
      const res = await create('udfoff', {
        kind: 'query',
        source_query: genevaQuery(src, { columns: { id: 'id' } }, [udfEntry('double', FAKE_ENVELOPE, 'd', 1, ['x'])]),
        output_schema: schemaMessage([...META, ['id', new arrow.Int64()], ['d', new arrow.Int64()]]),
      });
      expect(res.status, res.text).toBe(406);
      expect(String(res.json.error)).toMatch(/udf_execution local or ray/);
      expect((await fx.t.call('POST', '/v1/table/udfoff/exists', {})).status).toBe(404);
      // A chunker is user code too.
      const chunker = await create('chunkoff', {
        kind: 'chunker',
        source_query: genevaQuery(src, {}),
        output_schema: CHUNK_SCHEMA,
        udtf_spec: specEntry(FAKE_CHUNKER),
      });
      expect(chunker.status, chunker.text).toBe(406);
      expect(String(chunker.json.error)).toMatch(/udf_execution local or ray/);
      expect((await fx.t.call('POST', '/v1/table/chunkoff/exists', {})).status).toBe(404);
      const udtf = await create('udtfoff', {
        kind: 'udtf',
        source_query: genevaQuery(src, {}),
        output_schema: DECADES_SCHEMA,
        udtf_spec: specEntry('{}', { kind: 'udtf' }),
      });
      expect(udtf.status, udtf.text).toBe(406);
      expect(String(udtf.json.error)).toMatch(/udf_execution local or ray/);
    });

    plainViewCases(() => fx, 'e');

    it('refuses a refresh of a table that is not a view (400), of an unknown view (404), and output_limit (400)', async () => {
      const src = await source(10);
      const notView = await refresh(src);
      expect(notView.status, notView.text).toBe(400);
      expect(String(notView.json.error)).toMatch(/not a materialized view/);
      expect((await refresh('no_such_view')).status).toBe(404);
      const view = await create(`lim${++seq}`, {
        kind: 'query',
        source_query: genevaQuery(src, { columns: ['id'] }),
        output_schema: schemaMessage([...META, ['id', new arrow.Int64()]]),
      });
      expect(view.status, view.text).toBe(201);
      const limited = await refresh(`lim${seq}`, { output_limit: 3 });
      expect(limited.status, limited.text).toBe(400);
      expect(String(limited.json.error)).toMatch(/chunker/);
    });
  });

  describe.skipIf(!udfsAvailable)('with UDF workers (needs .venv-udf: scripts/install-udf-worker.sh)', () => {
    const fx = useTestApp(backend, { udf: { execution: 'local', workers: 1 } });
    const envelopes = useEnvelopes();
    let seq = 0;

    const call = (op: string, view: string, body: Record<string, unknown>) => fx.t.call('POST', `/v1/materialized_view/${view}/${op}`, body);
    const options = () => fx.root.store.engineStorageOptions();

    /** A root table of `n` numbers; its name and location. */
    async function source(n: number): Promise<{ name: string; location: string }> {
      const name = `usrc${++seq}`;
      const res = await fx.t.call('POST', `/v1/table/${name}/create`, numbersStream(n), ARROW);
      expect(res.status, res.text).toBe(200);
      return { name, location: String(res.json.location) };
    }

    /** Source row ids by id at the source's latest version. */
    async function rowIds(location: string): Promise<Map<number, number>> {
      const table = await connectTable(location, options());
      try {
        const rows = (await table.query().select(['id']).withRowId().toArray()) as Array<{ id: bigint; _rowid: bigint }>;
        return new Map(rows.map((r) => [Number(r.id), Number(r._rowid)]));
      } finally {
        table.close();
      }
    }

    const udfSchema = schemaMessage([...META, ['id', new arrow.Int64()], ['d', new arrow.Int64()], ['x3', new arrow.Int64()]]);

    it("refuses a UDF column whose udf_payload is not Geneva's envelope of a UDF (400 naming it), and creates nothing", async () => {
      const src = await source(10);
      const schema = schemaMessage([...META, ['id', new arrow.Int64()], ['d', new arrow.Int64()]]);
      for (const [what, payload, message] of [
        ['not JSON', '{not json', /column_udfs\[0\]\.udf\.udf_payload: the envelope is not JSON/],
        ['no udf_pickle', JSON.stringify({ image: 'test-image' }), /column_udfs\[0\]\.udf\.udf_payload: the envelope has no udf_pickle/],
        ['a udf_pickle not base64', JSON.stringify({ image: 'test-image', udf_pickle: 'not*base64' }), /has no udf_pickle/],
      ] as const) {
        const view = `badudf${++seq}`;
        const res = await call('create', view, {
          kind: 'query',
          source_query: genevaQuery(src.name, { columns: { id: 'id' } }, [udfEntry('double', payload, 'd', 1, ['x'])]),
          output_schema: schema,
        });
        expect(res.status, `${what}: ${res.text}`).toBe(400);
        expect(String(res.json.error), what).toMatch(message);
        expect((await fx.t.call('POST', `/v1/table/${view}/exists`, {})).status, what).toBe(404);
      }
    });

    it('recomputes the view from its source (filter, SQL and UDF columns), then again after the source changed', { timeout: 120_000 }, async () => {
      const src = await source(1000);
      const query = genevaQuery(src.name, { filter: 'id % 3 = 0', columns: { id: 'id', x3: 'x * 3' } }, [
        udfEntry('double', envelopes.double ?? '', 'd', 1, ['x']),
      ]);
      const created = await call('create', 'mv1', { kind: 'query', source_query: query, output_schema: udfSchema, with_no_data: false });
      expect(created.status, created.text).toBe(201);
      expect(typeof created.json.job_id).toBe('string');
      const first = await waitForJob(fx.t, String(created.json.job_id));
      expect(first.status, JSON.stringify(first.properties)).toBe('Succeeded');
      expect(first.properties).toMatchObject({ rows_refreshed: '334', src_version: '1' });
      const location = String((await fx.t.call('POST', '/v1/table/mv1/describe', {})).json.location);
      const check = async (ids: number[]) => {
        const byId = await rowIds(src.location);
        const rows = (await viewRows(location, options())).sort((a, b) => Number(a.id) - Number(b.id));
        expect(rows.map((r) => r.id)).toEqual(ids);
        const wrong = rows.filter(
          (r) => r.__source_row_id !== byId.get(Number(r.id)) || r.__is_set !== true || r.d !== (Number(r.id) % 97) * 2 || r.x3 !== (Number(r.id) % 97) * 3,
        );
        expect(wrong.slice(0, 3)).toEqual([]);
      };
      await check(Array.from({ length: 334 }, (_, i) => i * 3));
      // The view's schema keeps its metadata, with the refresh's source version.
      const described = (await fx.t.call('POST', '/v1/table/mv1/describe', { load_detailed_metadata: true })).json.schema as {
        fields: Array<{ name: string; metadata?: Record<string, string> }>;
        metadata: Record<string, string>;
      };
      expect(described.metadata['geneva::view::base_table_version']).toBe('1');
      expect(described.fields[0]?.metadata?.['geneva::mv::last_refreshed_version']).toBe('1');
      expect(described.fields.find((f) => f.name === 'd')?.metadata).toMatchObject({ virtual_column: 'true', 'virtual_column.udf_backend': 'DockerUDFSpecV1' });

      expect((await fx.t.call('POST', `/v1/table/${src.name}/insert`, numbersStream(6, 1000), ARROW)).status).toBe(200);
      expect((await fx.t.call('POST', `/v1/table/${src.name}/delete`, { predicate: 'id < 30' })).status).toBe(200);
      const again = await call('refresh', 'mv1', {});
      expect(again.status, again.text).toBe(202);
      const second = await waitForJob(fx.t, String(again.json.job_id));
      expect(second.status, JSON.stringify(second.properties)).toBe('Succeeded');
      expect(second.properties.src_version).toBe('3');
      await check([...Array.from({ length: 334 }, (_, i) => i * 3).filter((i) => i >= 30), 1002, 1005]);
      const after = (await fx.t.call('POST', '/v1/table/mv1/describe', { load_detailed_metadata: true })).json.schema as { metadata: Record<string, string> };
      expect(after.metadata['geneva::view::base_table_version']).toBe('3');

      // An older source version gives the older rows back.
      const back = await call('refresh', 'mv1', { src_version: 1 });
      expect((await waitForJob(fx.t, String(back.json.job_id))).status).toBe('Succeeded');
      const rows = await viewRows(location, options());
      expect(rows.length).toBe(334);
      const missing = await call('refresh', 'mv1', { src_version: 99 });
      expect(missing.status, missing.text).toBe(404);
      expect(missing.json.code).toBe(11);
    });

    plainViewCases(() => fx, 'w');

    it('creates a chunker view with the metadata Geneva writes, refreshes it (1:N rows, inherited columns, output_limit), again after the source changed', {
      timeout: 120_000,
    }, async () => {
      const src = await source(100);
      const spec = envelopes.pieces ?? '';
      // The chunker reads `a`: here the query's projection of the source's id.
      const body = {
        kind: 'chunker',
        source_query: genevaQuery(src.name, { filter: 'id < 20', columns: { a: 'id', x: 'x' } }),
        output_schema: CHUNK_SCHEMA,
        udtf_spec: specEntry(spec),
      };
      const created = await call('create', 'chunks1', body);
      expect(created.status, created.text).toBe(201);
      const described = (await fx.t.call('POST', '/v1/table/chunks1/describe', { load_detailed_metadata: true })).json.schema as {
        fields: Array<{ name: string }>;
        metadata: Record<string, string>;
      };
      expect(described.fields.map((f) => f.name)).toEqual(['__source_row_id', '__child_index', 'x', 'label', 'k']);
      expect(described.metadata).toMatchObject({
        'geneva::view::version': 'chunker',
        'geneva::view::chunker': spec,
        'geneva::view::base_table': src.name,
        'geneva::view::base_table_version': '1',
      });
      const location = String((await fx.t.call('POST', '/v1/table/chunks1/describe', {})).json.location);
      const refreshed = async (request: Record<string, unknown> = {}) => {
        const res = await call('refresh', 'chunks1', request);
        expect(res.status, res.text).toBe(202);
        const done = await waitForJob(fx.t, String(res.json.job_id));
        expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
        return done.properties;
      };
      const expected = (ids: number[], byId: Map<number, number>) =>
        ids.flatMap((id) =>
          Array.from({ length: id % 3 }, (_, k) => ({ __source_row_id: byId.get(id), __child_index: k, x: id % 97, label: `${id}.${k}`, k })),
        );
      const rows = async () =>
        (await viewRows(location, options())).sort(
          (a, b) => Number(a.__source_row_id) - Number(b.__source_row_id) || Number(a.__child_index) - Number(b.__child_index),
        );
      const first = expected(
        Array.from({ length: 20 }, (_, i) => i),
        await rowIds(src.location),
      );
      expect(await refreshed()).toMatchObject({ rows_refreshed: String(first.length), src_version: '1' });
      expect(await rows()).toEqual(first);
      expect(await refreshed({ output_limit: 5 })).toMatchObject({ rows_refreshed: '5' });
      expect(await rows()).toEqual(first.slice(0, 5));
      // The source changes: its rows are deleted and appended; the refresh recomputes the whole view.
      expect((await fx.t.call('POST', `/v1/table/${src.name}/delete`, { predicate: 'id < 10' })).status).toBe(200);
      expect((await fx.t.call('POST', `/v1/table/${src.name}/insert`, numbersStream(5, 5), ARROW)).status).toBe(200);
      const ids = [...Array.from({ length: 10 }, (_, i) => i + 10), 5, 6, 7, 8, 9];
      const again = expected(ids, await rowIds(src.location)).sort(
        (a, b) => Number(a.__source_row_id) - Number(b.__source_row_id) || a.__child_index - b.__child_index,
      );
      expect(await refreshed()).toMatchObject({ rows_refreshed: String(again.length), src_version: '3' });
      expect(await rows()).toEqual(again);
      const after = (await fx.t.call('POST', '/v1/table/chunks1/describe', { load_detailed_metadata: true })).json.schema as {
        metadata: Record<string, string>;
      };
      expect(after.metadata).toMatchObject({ 'geneva::view::version': 'chunker', 'geneva::view::base_table_version': '3' });
    });

    it('creates a udtf view with the metadata Geneva writes and refreshes it (the UDTF over the source query, per partition value); bad ones are 400', {
      timeout: 120_000,
    }, async () => {
      const src = await source(100);
      const spec = envelopes.decades ?? '';
      // The UDTF reads `a`: here the query's projection of the source's id.
      const body = {
        kind: 'udtf',
        source_query: genevaQuery(src.name, { filter: 'id < 50', columns: { a: 'id' } }),
        output_schema: DECADES_SCHEMA,
        udtf_spec: specEntry(spec, { kind: 'udtf' }),
      };
      const created = await call('create', 'decades1', body);
      expect(created.status, created.text).toBe(201);
      const described = (await fx.t.call('POST', '/v1/table/decades1/describe', { load_detailed_metadata: true })).json.schema as {
        metadata: Record<string, string>;
      };
      expect(described.metadata).toMatchObject({ 'geneva::view::version': 'udtf', 'geneva::view::udtf': spec, 'geneva::view::base_table': src.name });
      const location = String((await fx.t.call('POST', '/v1/table/decades1/describe', {})).json.location);
      const rows = async () => (await viewRows(location, options())).map((r) => [r.decade, r.n, r.total]).sort((a, b) => Number(a[0]) - Number(b[0]));
      const res = await call('refresh', 'decades1', {});
      expect(res.status, res.text).toBe(202);
      const done = await waitForJob(fx.t, String(res.json.job_id));
      expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
      expect(done.properties).toMatchObject({ rows_refreshed: '5', src_version: '1' });
      expect(await rows()).toEqual([0, 1, 2, 3, 4].map((d) => [d, 10, 100 * d + 45]));
      // output_limit is for chunker views.
      const limited = await call('refresh', 'decades1', { output_limit: 2 });
      expect(limited.status, limited.text).toBe(400);
      // Partitioned by the source's x (id % 97): each run sees one id below 20, so one row per id.
      const byX = await call('create', 'decades2', {
        ...body,
        udtf_spec: specEntry(envelopes.decades_by_x ?? '', { kind: 'udtf' }),
        source_query: genevaQuery(src.name, { filter: 'id < 20', columns: { a: 'id' } }),
      });
      expect(byX.status, byX.text).toBe(201);
      const second = await call('refresh', 'decades2', {});
      const secondDone = await waitForJob(fx.t, String(second.json.job_id));
      expect(secondDone.status, JSON.stringify(secondDone.properties)).toBe('Succeeded');
      expect(secondDone.properties.rows_refreshed).toBe('20');
      const partitioned = (await viewRows(String((await fx.t.call('POST', '/v1/table/decades2/describe', {})).json.location), options())).map((r) => [
        r.decade,
        r.n,
        r.total,
      ]);
      expect(partitioned.sort((a, b) => Number(a[2]) - Number(b[2]))).toEqual(Array.from({ length: 20 }, (_, id) => [Math.floor(id / 10), 1, id]));
      for (const [what, bad, message] of [
        ['another schema', { ...body, output_schema: schemaMessage([['decade', new arrow.Int64()]]) }, /UDTF's output schema/],
        ['a chunker entry', { ...body, udtf_spec: specEntry(spec) }, /udtf_spec.kind/],
      ] as const) {
        const refused = await call('create', `badudtf${++seq}`, bad);
        expect(refused.status, `${what}: ${refused.text}`).toBe(400);
        expect(String(refused.json.error), what).toMatch(message);
      }
    });

    it('refuses bad chunker views with 400 and creates nothing; a raising chunker fails its job and leaves the view as it was', {
      timeout: 60_000,
    }, async () => {
      const src = await source(20);
      const spec = envelopes.pieces ?? '';
      const good = {
        kind: 'chunker',
        source_query: genevaQuery(src.name, { columns: { a: 'id', x: 'x' } }),
        output_schema: CHUNK_SCHEMA,
        udtf_spec: specEntry(spec),
      };
      const cases: Array<[string, Record<string, unknown>, RegExp]> = [
        ['no udtf_spec', { ...good, udtf_spec: null }, /udtf_spec/],
        ['a udtf entry', { ...good, udtf_spec: specEntry(spec, { kind: 'udtf' }) }, /udtf_spec.kind/],
        ['a wrong sha', { ...good, udtf_spec: specEntry(spec, { udtf_sha: '0'.repeat(64) }) }, /udtf_sha/],
        ['a spec that is not JSON', { ...good, udtf_spec: specEntry('{nope') }, /udtf_spec.udtf: not JSON/],
        [
          'the meta columns of a query view',
          { ...good, output_schema: schemaMessage([...META, ['x', new arrow.Int64()], ...PIECES_OUTPUTS]) },
          /__child_index/,
        ],
        [
          "outputs that are not the chunker's",
          { ...good, output_schema: schemaMessage([...CHUNK_META, ['x', new arrow.Int64()], ['label', new arrow.Utf8()]]) },
          /chunker's outputs/,
        ],
        ['an input the query does not project', { ...good, source_query: genevaQuery(src.name, { columns: { x: 'x' } }) }, /input_columns.*"a"/],
        [
          'an inherited column the query does not project',
          { ...good, source_query: genevaQuery(src.name, { columns: { a: 'id' } }) },
          /"x" is neither selected/,
        ],
      ];
      for (const [what, body, message] of cases) {
        const name = `badchunks${++seq}`;
        const res = await call('create', name, body);
        expect(res.status, `${what}: ${res.text}`).toBe(400);
        expect(String(res.json.error), what).toMatch(message);
        expect((await fx.t.call('POST', `/v1/table/${name}/exists`, {})).status, what).toBe(404);
      }
      const created = await call('create', 'chunksfail', { ...good, udtf_spec: specEntry(envelopes.pieces_raise ?? '') });
      expect(created.status, created.text).toBe(201);
      await failedRefresh('chunksfail', /cannot chunk row a=7/);
    });

    it("fails the job with the UDF's error, and leaves the view as it was", { timeout: 60_000 }, async () => {
      const src = await source(50);
      const created = await call('create', 'mvfail', {
        kind: 'query',
        source_query: genevaQuery(src.name, { columns: { id: 'id' } }, [udfEntry('raises', envelopes.raises ?? '', 'd', 1, ['x'])]),
        output_schema: schemaMessage([...META, ['id', new arrow.Int64()], ['d', new arrow.Int64()]]),
      });
      expect(created.status, created.text).toBe(201);
      await failedRefresh('mvfail', /cannot compute row a=7/);
    });

    /** A refresh of `view` that fails with `error`: its job Failed, the view at the version and rows it had (none). */
    async function failedRefresh(view: string, error: RegExp): Promise<void> {
      const versionOf = async () => ((await fx.t.call('POST', `/v1/table/${view}/version/describe`, {})).json.version as { version: number }).version;
      const before = await versionOf();
      const res = await call('refresh', view, {});
      expect(res.status, res.text).toBe(202);
      const done = await waitForJob(fx.t, String(res.json.job_id));
      expect(done.status).toBe('Failed');
      expect(done.properties.error).toMatch(error);
      expect(await versionOf()).toBe(before);
      const location = String((await fx.t.call('POST', `/v1/table/${view}/describe`, {})).json.location);
      expect(await viewRows(location, options())).toEqual([]);
    }
  });
});

// Chunkers and UDTFs are user code: on S3 with credential vending the workers read the source and
// write the view with credentials for those two tables only (a UDTF opens the source as a Geneva
// table through the engine's resolver, never by listing the root).
const rgw = s3Backends().find((b) => b.name === 'rgw');
describe.skipIf(!udfsAvailable || !rgw)('chunker and udtf views on radosgw with credential vending', () => {
  const fx = useTestApp(rgw as Backend, {
    udf: { execution: 'local', workers: 1 },
    credentialVending: { roleArn: 'arn:aws:iam:::role/vend', durationSeconds: 900, refreshBeforeSeconds: 300 },
  });
  const envelopes = useEnvelopes();

  it('refreshes both kinds with the vended credentials', { timeout: 120_000 }, async () => {
    expect((await fx.t.call('POST', '/v1/table/vsrc/create', numbersStream(50), ARROW)).status).toBe(200);
    const query = genevaQuery('vsrc', { filter: 'id < 20', columns: { a: 'id', x: 'x' } });
    for (const [view, body] of [
      ['vchunks', { kind: 'chunker', source_query: query, output_schema: CHUNK_SCHEMA, udtf_spec: specEntry(envelopes.pieces ?? '') }],
      ['vdecades', { kind: 'udtf', source_query: query, output_schema: DECADES_SCHEMA, udtf_spec: specEntry(envelopes.decades ?? '', { kind: 'udtf' }) }],
    ] as const) {
      const created = await fx.t.call('POST', `/v1/materialized_view/${view}/create`, { ...body, with_no_data: false });
      expect(created.status, created.text).toBe(201);
      const done = await waitForJob(fx.t, String(created.json.job_id));
      expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
      // pieces: id % 3 rows for each id below 20; decades: two decades.
      expect(done.properties.rows_refreshed, view).toBe(view === 'vchunks' ? '19' : '2');
    }
  });
});
