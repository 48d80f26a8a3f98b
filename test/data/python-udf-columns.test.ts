import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DEFAULT_UDF_PYTHON } from '../../src/engine/python-udf/python-udfs.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { connectTable, readColumn } from '../support/arrow-data.js';
import { type Backend, localBackend, s3Backends, type TestRoot } from '../support/backends.js';
import { type GenevaJobRow, numbersStream, waitForGenevaJobRow, waitForJob } from '../support/jobs.js';
import { describeRun, run } from '../support/python.js';

// Geneva Python UDF columns through the HTTP API (src/service/data/python-udf-columns.ts) with the
// UDF workers on: what add_columns / alter_columns store (the envelope at _udfs/<sha256>, the field
// metadata Geneva writes), what they refuse (bad envelopes, several outputs, unknown inputs, mixed
// kinds, a caller without manage) changing nothing, a backfill that runs the UDF, and the job's row
// in Geneva's job table __system$geneva_jobs. geneva.test.ts drives the same through Geneva itself.

const available = existsSync(DEFAULT_UDF_PYTHON);
if (!available) console.warn(`skipping the Python UDF column tests: no ${DEFAULT_UDF_PYTHON}; run scripts/install-udf-worker.sh`);

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const as = (who: string) => ({ 'x-api-key': `${who}-key` });

/** A Geneva envelope (DockerUDFSpecV1) of the scalar UDF `name(a)` returning `body`, pickled by the pinned Geneva. */
async function envelopeOf(name: string, body: string): Promise<Buffer> {
  const script = [
    'import os, sys, time, pyarrow as pa',
    'from geneva import udf',
    'from geneva.packager import DockerUDFPackager',
    '@udf(data_type=pa.int64())',
    `def ${name}(a: int) -> int:`,
    `    return ${body}`,
    `sys.stdout.buffer.write(DockerUDFPackager().marshal(${name}).udf_payload)`,
  ].join('\n');
  const made = await run(DEFAULT_UDF_PYTHON, ['-c', script], { timeoutMs: 60_000, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
  if (made.code !== 0) throw new Error(describeRun('envelope', made));
  return Buffer.from(made.stdout, 'latin1');
}

describe.skipIf(!available)('Python UDF columns (udf_execution local)', () => {
  let root: TestRoot;
  let app: TestApp;
  let envelope: string;
  let envelopeBytes: Buffer;
  let slowEnvelope: string;
  const principals = ['admin', 'writer'];

  beforeAll(async () => {
    root = await localBackend.newRoot();
    app = await startTestApp(root, {
      udf: { execution: 'local', workers: 1 },
      auth: { apiKeys: principals.map((p) => ({ principal: p, sha256: sha256(`${p}-key`) })) },
      authorization: {
        roles: { everything: [{ namespace: [], privilege: 'manage' }], 'ns-writer': [{ namespace: ['ns'], privilege: 'write' }] },
        principals: { admin: ['everything'], writer: ['ns-writer'] },
      },
    });
    envelopeBytes = await envelopeOf('triple', 'a * 3');
    slowEnvelope = (await envelopeOf('slow', '(time.sleep(0.002), a)[1]')).toString('base64');
    envelope = envelopeBytes.toString('base64');
    expect((await app.call('POST', '/v1/namespace/ns/create', {}, as('admin'))).status).toBe(200);
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await root?.dispose();
  });

  /** The app as the admin calls it (for waitForJob). */
  const admin = { call: (method: 'GET' | 'POST', url: string, body?: unknown) => app.call(method, url, body, as('admin')) };
  const post = (table: string, op: string, body: unknown, who = 'admin') => app.call('POST', `/v1/table/ns%24${table}/${op}`, body, as(who));
  const udfColumn = (name: string, overrides: Record<string, unknown> = {}) => ({
    name,
    virtual_column: {
      input_columns: ['id'],
      outputs: [{ column: name, struct_field: '', data_type: { type: 'int64' }, nullable: true }],
      image: 'test-image:latest',
      udf: envelope,
      udf_name: 'triple',
      udf_version: 'v1',
      udf_backend: 'DockerUDFSpecV1',
      auto_backfill: false,
      ...overrides,
    },
  });
  async function table(name: string, rows = 1000): Promise<string> {
    const created = await app.call('POST', `/v1/table/ns%24${name}/create`, numbersStream(rows), { ...ARROW, ...as('admin') });
    expect(created.status, created.text).toBe(200);
    return String(created.json.location);
  }
  /** The job's row in __system$geneva_jobs once its status is `status` (the row follows the job's record a moment later). */
  async function jobRow(jobId: string, status: string): Promise<GenevaJobRow> {
    const jobs = await app.call('POST', '/v1/table/__system%24geneva_jobs/describe', {}, as('admin'));
    expect(jobs.status, jobs.text).toBe(200);
    return waitForGenevaJobRow(String(jobs.json.location), root.store.engineStorageOptions(), jobId, status);
  }
  const version = async (name: string) =>
    Number((await app.call('POST', `/v1/table/ns%24${name}/describe?load_detailed_metadata=true`, {}, as('admin'))).json.version);

  it('adds the column all-null with the binding Geneva writes, and stores the envelope at _udfs/<sha256>', async () => {
    const location = await table('added');
    const added = await post('added', 'add_columns', { new_columns: [udfColumn('t3', { field_metadata: { owner: 'fe' } })] });
    expect(added.status, added.text).toBe(200);
    const described = await app.call('POST', '/v1/table/ns%24added/describe?load_detailed_metadata=true', {}, as('admin'));
    const fields = (described.json.schema as { fields: Array<{ name: string; nullable: boolean; type: { type: string }; metadata?: Record<string, string> }> })
      .fields;
    const field = fields.find((f) => f.name === 't3');
    const sha = createHash('sha256').update(envelopeBytes).digest('hex');
    expect(field).toMatchObject({ nullable: true, type: { type: 'int64' } });
    expect(field?.metadata).toEqual({
      owner: 'fe',
      virtual_column: 'true',
      'virtual_column.udf_backend': 'DockerUDFSpecV1',
      'virtual_column.udf': `_udfs/${sha}`,
      'virtual_column.udf_name': 'triple',
      'virtual_column.udf_version': 'v1',
      'virtual_column.udf_inputs': '["id"]',
      'virtual_column.auto_backfill': 'false',
    });
    const stored = await root.store.get(`${location.replace(`${root.store.location('')}`, '').replace(/^\/+/, '')}/_udfs/${sha}`);
    expect(stored?.body.equals(envelopeBytes)).toBe(true);
  });

  it('refuses bad envelopes, several outputs, unknown inputs, a self-reading UDF and mixed kinds, changing nothing', async () => {
    await table('refused');
    const before = await version('refused');
    const cases: Array<[unknown, number, number, RegExp]> = [
      [[udfColumn('z', { udf: 'not base64!' })], 400, 13, /base64/],
      [[udfColumn('z', { udf: Buffer.from('{"image": "i"}').toString('base64') })], 400, 13, /udf_pickle/],
      [[udfColumn('z', { udf: Buffer.from('pickle bytes').toString('base64') })], 400, 13, /not JSON/],
      [[udfColumn('z', { outputs: [] })], 400, 13, /outputs/],
      [[udfColumn('z', { outputs: [{ column: 'z', struct_field: 'a', data_type: { type: 'int64' }, nullable: true }] })], 406, 0, /several outputs/],
      [[udfColumn('z', { input_columns: ['nope'] })], 404, 12, /nope/],
      [[udfColumn('z', { input_columns: ['z'] })], 400, 13, /may not read the column it fills/],
      [[udfColumn('z'), { name: 'y', expression: 'id + 1' }], 400, 13, /cannot be added in the same request/],
      [[udfColumn('z', { outputs: [{ column: 'z', struct_field: '', data_type: { type: 'no_such_type' }, nullable: true }] })], 400, 13, /no_such_type/],
    ];
    for (const [newColumns, status, code, message] of cases) {
      const res = await post('refused', 'add_columns', { new_columns: newColumns });
      expect(res.status, res.text).toBe(status);
      expect(res.json.code, res.text).toBe(code);
      expect(String(res.json.error)).toMatch(message);
    }
    expect(await version('refused')).toBe(before);
    // Only a refusal found by the engine (the type) comes after the envelope is stored: that file,
    // named by its content, is all that stays, and no column points to it.
    expect((await root.store.list('ns/refused.lance/_udfs/')).objects.length).toBeLessThanOrEqual(1);
  });

  it('needs manage on the namespace: a writer may add SQL columns but not bind or run a UDF', async () => {
    await table('guarded');
    const denied = await post('guarded', 'add_columns', { new_columns: [udfColumn('z')] }, 'writer');
    expect(denied.status, denied.text).toBe(403);
    expect(denied.json.code).toBe(15);
    const w = await post('guarded', 'add_columns', { new_columns: [{ name: 'y', expression: 'id + 1' }] }, 'writer');
    expect(w.status, w.text).toBe(200);
    expect((await post('guarded', 'add_columns', { new_columns: [udfColumn('z')] })).status).toBe(200);
    const run = await post('guarded', 'backfill_column', { column: 'z' }, 'writer');
    expect(run.status, run.text).toBe(403);
  });

  it('retries a chunk whose UDF worker died: the job takes it again on a new worker and succeeds', { timeout: 60_000 }, async () => {
    await table('crashing', 3000);
    // The UDF kills its worker the first time it runs (a crash, as an out-of-memory kill would be), then computes.
    const once = path.join(await mkdtemp(path.join(os.tmpdir(), 'udf-crash-')), 'crashed');
    const crashing = (
      await envelopeOf('crash_once', `a * 3 if os.path.exists(${JSON.stringify(once)}) else (open(${JSON.stringify(once)}, 'w').close(), os._exit(9))[1]`)
    ).toString('base64');
    expect((await post('crashing', 'add_columns', { new_columns: [udfColumn('z', { udf: crashing, udf_name: 'crash_once' })] })).status).toBe(200);
    const started = await post('crashing', 'backfill_column', { column: 'z', checkpoint_size: 1000 });
    expect(started.status, started.text).toBe(202);
    const done = await waitForJob(admin, String(started.json.job_id), undefined, 50_000);
    expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
    expect(existsSync(once)).toBe(true);
    const location = String((await post('crashing', 'describe', {})).json.location);
    const rows = await readColumn(location, root.store.engineStorageOptions(), 'z');
    expect(rows.filter((r) => r.v !== r.id * 3)).toEqual([]);
  });

  it("stops a canceled UDF backfill at its next checkpoint; Geneva's row says CANCELLED", async () => {
    const location = await table('canceled', 4000);
    expect((await post('canceled', 'add_columns', { new_columns: [udfColumn('z', { udf: slowEnvelope, udf_name: 'slow' })] })).status).toBe(200);
    const started = await post('canceled', 'backfill_column', { column: 'z', checkpoint_size: 100 });
    expect(started.status, started.text).toBe(202);
    const jobId = String(started.json.job_id);
    await waitForJob(admin, jobId, (d) => Number(d.properties.chunks_done ?? 0) >= 1);
    const cancel = await app.call('POST', `/v1/transaction/${jobId}/alter`, { actions: [{ setStatusAction: { status: 'Canceled' } }] }, as('admin'));
    expect(cancel.status, cancel.text).toBe(200);
    // The runner sees the cancel at its next checkpoint and writes the row then.
    await jobRow(jobId, 'CANCELLED');
    expect((await waitForJob(admin, jobId)).status).toBe('Canceled');
    // Stopped, not run to its end: rows past the cancel's checkpoint stay unfilled.
    const filled = (await readColumn(location, root.store.engineStorageOptions(), 'z')).filter((r) => r.v !== null);
    expect(filled.length).toBeLessThan(4000);
  });

  it('binds an existing column with alter_columns and backfills it with the UDF, recording the job in __system$geneva_jobs', async () => {
    const location = await table('bound', 5000);
    expect((await post('bound', 'add_columns', { new_columns: [{ name: 'v', expression: 'CAST(NULL AS BIGINT)' }] })).status).toBe(200);
    const { outputs: _outputs, ...vc } = udfColumn('v').virtual_column;
    const bound = await post('bound', 'alter_columns', { alterations: [{ path: 'v', virtual_column: vc }] });
    expect(bound.status, bound.text).toBe(200);
    const started = await post('bound', 'backfill_column', { column: 'v', where: 'id % 2 = 0', checkpoint_size: 1000 });
    expect(started.status, started.text).toBe(202);
    const jobId = String(started.json.job_id);
    const done = await waitForJob({ call: (method: 'GET' | 'POST', url: string, body?: unknown) => app.call(method, url, body, as('admin')) }, jobId);
    expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
    const rows = await readColumn(location, root.store.engineStorageOptions(), 'v');
    expect(rows.length).toBe(5000);
    expect(rows.filter((r) => r.v !== (r.id % 2 === 0 ? r.id * 3 : null))).toEqual([]);
    // Geneva follows the job through its row: DONE, with the rows it checkpointed.
    const row = await jobRow(jobId, 'DONE');
    expect(row.column_name).toBe('v');
    expect(row.metrics.map((m) => JSON.parse(m) as { name: string; n: number })).toContainEqual(
      expect.objectContaining({ name: 'rows_checkpointed', n: 2500 }),
    );
  });

  /** Every [id, value of `column`] on `branch` (main when absent), straight from the store; null when the column is not there. */
  async function columnOn(location: string, column: string, branch?: string): Promise<Array<[number, number | null]> | null> {
    const opened = await connectTable(location, root.store.engineStorageOptions(), branch);
    try {
      if (!(await opened.schema()).fields.some((f) => f.name === column)) return null;
      const rows = (await opened.query().select(['id', column]).toArray()) as Array<Record<string, bigint | null>>;
      return rows.map((r): [number, number | null] => [Number(r.id), r[column] === null ? null : Number(r[column])]).sort((a, b) => a[0] - b[0]);
    } finally {
      opened.close();
    }
  }

  it('adds, binds and backfills UDF columns on a branch: the branch alone changes, main and the other branches stay', { timeout: 60_000 }, async () => {
    const location = await table('onbranch', 2000);
    for (const name of ['dev', 'other']) expect((await post('onbranch', 'branches/create', { name })).status).toBe(200);
    const mainVersion = await version('onbranch');
    // The old code answered 406 to all three: the UDF workers opened the table on main only.
    const added = await post('onbranch', 'add_columns', { branch: 'dev', new_columns: [udfColumn('t3')] });
    expect(added.status, added.text).toBe(200);
    const started = await post('onbranch', 'backfill_column', { branch: 'dev', column: 't3', where: 'id < 1500', checkpoint_size: 500 });
    expect(started.status, started.text).toBe(202);
    const done = await waitForJob(admin, String(started.json.job_id));
    expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
    const filled = await columnOn(location, 't3', 'dev');
    expect(filled?.length).toBe(2000);
    expect(filled?.filter(([id, v]) => v !== (id < 1500 ? id * 3 : null))).toEqual([]);
    // A plain column of the branch bound to the UDF, then filled where the first left it empty.
    expect((await post('onbranch', 'add_columns', { branch: 'dev', new_columns: [{ name: 'v', expression: 'CAST(NULL AS BIGINT)' }] })).status).toBe(200);
    const { outputs: _outputs, ...vc } = udfColumn('v').virtual_column;
    const bound = await post('onbranch', 'alter_columns', { branch: 'dev', alterations: [{ path: 'v', virtual_column: vc }] });
    expect(bound.status, bound.text).toBe(200);
    const again = await post('onbranch', 'backfill_column', { branch: 'dev', column: 'v', where: 'id >= 1500' });
    expect(again.status, again.text).toBe(202);
    expect((await waitForJob(admin, String(again.json.job_id))).status).toBe('Succeeded');
    expect((await columnOn(location, 'v', 'dev'))?.filter(([id, v]) => v !== (id >= 1500 ? id * 3 : null))).toEqual([]);
    expect(await version('onbranch')).toBe(mainVersion);
    expect(await columnOn(location, 't3')).toBeNull();
    expect(await columnOn(location, 't3', 'other')).toBeNull();
    // A missing branch is 404 code 22 for each, and changes nothing.
    for (const [op, body] of [
      ['add_columns', { branch: 'nope', new_columns: [udfColumn('z')] }],
      ['alter_columns', { branch: 'nope', alterations: [{ path: 'x', virtual_column: vc }] }],
      ['backfill_column', { branch: 'nope', column: 't3' }],
    ] as const) {
      const res = await post('onbranch', op, body);
      expect([res.status, res.json.code], `${op}: ${res.text}`).toEqual([404, 22]);
    }
    expect(await version('onbranch')).toBe(mainVersion);
  });

  it("backfills a UDF column on a managed table's branch: the worker's commit goes through the service onto the branch's history", {
    timeout: 60_000,
  }, async () => {
    expect((await app.call('POST', '/v1/namespace/managed/create', { properties: { managed_versioning: 'true' } }, as('admin'))).status).toBe(200);
    const mpost = (op: string, body: unknown) => app.call('POST', `/v1/table/managed%24u/${op}`, body, as('admin'));
    const created = await app.call('POST', '/v1/table/managed%24u/create', numbersStream(1000), { ...ARROW, ...as('admin') });
    expect(created.status, created.text).toBe(200);
    const location = String(created.json.location);
    expect((await mpost('branches/create', { name: 'dev' })).status).toBe(200);
    const versions = async (branch?: string) =>
      ((await mpost('version/list', branch === undefined ? {} : { branch })).json.versions as Array<{ version: number }>).map((v) => v.version);
    const mainBefore = await versions();
    expect((await mpost('add_columns', { branch: 'dev', new_columns: [udfColumn('t3')] })).status).toBe(200);
    const devBefore = await versions('dev');
    const started = await mpost('backfill_column', { branch: 'dev', column: 't3' });
    expect(started.status, started.text).toBe(202);
    const done = await waitForJob(admin, String(started.json.job_id));
    expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
    expect((await columnOn(location, 't3', 'dev'))?.filter(([id, v]) => v !== id * 3)).toEqual([]);
    const devAfter = await versions('dev');
    expect(devAfter.slice(0, devBefore.length)).toEqual(devBefore);
    expect(devAfter.length).toBeGreaterThan(devBefore.length);
    expect(await versions()).toEqual(mainBefore);
    expect(await columnOn(location, 't3')).toBeNull();
  });
});

// A UDF is user code: on S3 with credential vending, the worker works with credentials scoped to
// the table's directory, never with the service's own keys.
const rgw = s3Backends().find((b) => b.name === 'rgw');
describe.skipIf(!available || !rgw)('Python UDF backfills on radosgw with credential vending', () => {
  let root: TestRoot;
  let app: TestApp;

  beforeAll(async () => {
    root = await (rgw as Backend).newRoot();
    app = await startTestApp(root, {
      udf: { execution: 'local', workers: 1 },
      credentialVending: { roleArn: 'arn:aws:iam:::role/vend', durationSeconds: 900, refreshBeforeSeconds: 300 },
    });
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await root?.dispose();
  });

  it('hands the worker vended credentials for the table, not the service keys, and the backfill succeeds with them', async () => {
    const udfs = app.app.engine.udfs;
    if (!udfs) throw new Error('no UDF workers');
    const fills = vi.spyOn(udfs, 'fill');
    expect((await app.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
    const created = await app.call('POST', '/v1/table/ns%24scoped/create', numbersStream(2000), ARROW);
    expect(created.status, created.text).toBe(200);
    const envelope = (await envelopeOf('triple', 'a * 3')).toString('base64');
    const column = {
      name: 'z',
      virtual_column: {
        input_columns: ['id'],
        outputs: [{ column: 'z', struct_field: '', data_type: { type: 'int64' }, nullable: true }],
        image: 'i',
        udf: envelope,
        udf_name: 'triple',
        udf_version: 'v1',
        udf_backend: 'DockerUDFSpecV1',
      },
    };
    expect((await app.call('POST', '/v1/table/ns%24scoped/add_columns', { new_columns: [column] })).status).toBe(200);
    const started = await app.call('POST', '/v1/table/ns%24scoped/backfill_column', { column: 'z', checkpoint_size: 1000 });
    expect(started.status, started.text).toBe(202);
    const done = await waitForJob(app, String(started.json.job_id));
    expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
    expect(fills).toHaveBeenCalled();
    for (const [at] of fills.mock.calls) {
      expect(at.storageOptions.aws_session_token).toBeTruthy();
      expect(at.storageOptions.aws_access_key_id).not.toBe(root.s3.accessKeyId);
    }
    const rows = await readColumn(String(created.json.location), root.store.engineStorageOptions(), 'z');
    expect(rows.filter((r) => r.v !== r.id * 3)).toEqual([]);
  });
});
