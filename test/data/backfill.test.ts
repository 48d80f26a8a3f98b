import { describe, expect, it } from 'vitest';
import { committedVersions, useNamespaceFixture } from '../support/app.js';
import { connectTable, readColumn } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';
import { numbersStream, waitForJob } from '../support/jobs.js';

// Backfill jobs (AlterTableBackfillColumns) in process: a column bound to SQL through
// alter_columns virtual_column (udf_backend "sql") is filled chunk by chunk, checked row by row
// with the engine; errors; cancel at a checkpoint. Crash and takeover are in
// test/process/backfill-faults.test.ts.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const BIG = 200_000;

describe.each(backends())('backfill_column on $name', (backend) => {
  const { fx, path, post, engineOptions } = useNamespaceFixture(backend);
  let seq = 0;

  /** A table of `n` rows with a plain nullable int64 column `v` bound to `sql`; returns its name and location. */
  async function boundTable(prefix: string, n: number, sql = 'id * 3 + x'): Promise<{ name: string; location: string }> {
    const name = `${prefix}${++seq}`;
    const created = await fx.t.call('POST', path(name, 'create'), numbersStream(n), ARROW);
    expect(created.status, created.text).toBe(200);
    const added = await post(name, 'add_columns', { new_columns: [{ name: 'v', expression: 'CAST(NULL AS BIGINT)' }] });
    expect(added.status, added.text).toBe(200);
    const bound = await post(name, 'alter_columns', {
      alterations: [{ path: 'v', virtual_column: { udf_backend: 'sql', udf: sql, input_columns: ['id', 'x'] } }],
    });
    expect(bound.status, bound.text).toBe(200);
    return { name, location: String(created.json.location) };
  }

  it(`fills ${BIG.toLocaleString('en')} rows in checkpointed chunks, correct row by row`, { timeout: 240_000 }, async () => {
    const { name, location } = await boundTable('big', BIG);
    const started = Date.now();
    const res = await post(name, 'backfill_column', { column: 'v', checkpoint_size: 20_000, commit_granularity: 2 });
    expect(res.status, res.text).toBe(202);
    const jobId = String(res.json.job_id);
    const done = await waitForJob(fx.t, jobId);
    const elapsed = Date.now() - started;
    expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
    expect(done.properties).toMatchObject({ rows_total: String(BIG), rows_done: String(BIG), chunks_total: '10', chunks_done: '10', column: 'v' });
    expect(Number(done.properties.last_committed_version)).toBeGreaterThan(0);
    const rows = await readColumn(location, engineOptions(), 'v');
    expect(rows.length).toBe(BIG);
    const wrong = rows.filter((r) => r.v !== r.id * 3 + r.x);
    expect(wrong.slice(0, 5)).toEqual([]);
    // 5 commits of 2 chunks each (no sweep needed).
    const table = await connectTable(location, engineOptions());
    try {
      expect(await table.version()).toBe(Number(done.properties.last_committed_version));
    } finally {
      table.close();
    }
    console.log(`backfill of ${BIG} rows on ${backend.name}: ${elapsed} ms`);
  });

  it('fills the column on a branch alone: bound and backfilled there, main keeps no such column', async () => {
    const name = `br${++seq}`;
    const created = await fx.t.call('POST', path(name, 'create'), numbersStream(300), ARROW);
    expect(created.status, created.text).toBe(200);
    const location = String(created.json.location);
    expect((await post(name, 'branches/create', { name: 'dev' })).status).toBe(200);
    const dev = { branch: 'dev' };
    expect((await post(name, 'add_columns', { ...dev, new_columns: [{ name: 'v', expression: 'CAST(NULL AS BIGINT)' }] })).status).toBe(200);
    const bound = await post(name, 'alter_columns', { ...dev, alterations: [{ path: 'v', virtual_column: { udf_backend: 'sql', udf: 'id * 3 + x' } }] });
    expect(bound.status, bound.text).toBe(200);
    const onMain = await post(name, 'backfill_column', { column: 'v' });
    expect([onMain.status, onMain.json.code]).toEqual([404, 12]);
    const res = await post(name, 'backfill_column', { ...dev, column: 'v', checkpoint_size: 100 });
    expect(res.status, res.text).toBe(202);
    const done = await waitForJob(fx.t, String(res.json.job_id));
    expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
    expect(done.properties).toMatchObject({ branch: 'dev', rows_done: '300', chunks_done: '3' });
    const table = await connectTable(location, engineOptions(), 'dev');
    try {
      const rows = (await table.query().select(['id', 'x', 'v']).toArray()) as Array<{ id: bigint; x: bigint; v: bigint | null }>;
      expect(rows).toHaveLength(300);
      for (const r of rows) expect(r.v).toBe(r.id * 3n + r.x);
    } finally {
      table.close();
    }
    const main = await connectTable(location, engineOptions());
    try {
      expect((await main.schema()).fields.map((f) => f.name)).toEqual(['id', 'x']);
    } finally {
      main.close();
    }
    const missing = await post(name, 'backfill_column', { branch: 'nope', column: 'v' });
    expect([missing.status, missing.json.code]).toEqual([404, 22]);
  });

  it('fills only the rows matching where; rebinding changes the expression of the next backfill', async () => {
    const { name, location } = await boundTable('where', 1000);
    const res = await post(name, 'backfill_column', { column: 'v', where: 'id % 2 = 0', checkpoint_size: 100 });
    expect(res.status, res.text).toBe(202);
    const done = await waitForJob(fx.t, String(res.json.job_id));
    expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
    expect(done.properties).toMatchObject({ rows_total: '500', rows_done: '500', where: 'id % 2 = 0' });
    let rows = await readColumn(location, engineOptions(), 'v');
    expect(rows.filter((r) => (r.id % 2 === 0 ? r.v !== r.id * 3 + r.x : r.v !== null))).toEqual([]);

    const rebound = await post(name, 'alter_columns', { alterations: [{ path: 'v', virtual_column: { udf_backend: 'SQL', udf: 'id - x' } }] });
    expect(rebound.status, rebound.text).toBe(200);
    const again = await post(name, 'backfill_column', { column: 'v' });
    expect(again.status, again.text).toBe(202);
    expect((await waitForJob(fx.t, String(again.json.job_id))).status).toBe('Succeeded');
    rows = await readColumn(location, engineOptions(), 'v');
    expect(rows.filter((r) => r.v !== r.id - r.x)).toEqual([]);
  });

  it('a cancelled backfill stops at a checkpoint and leaves the completed chunks in place', { timeout: 120_000 }, async () => {
    const n = 20_000;
    const { name, location } = await boundTable('cancel', n);
    const res = await post(name, 'backfill_column', { column: 'v', checkpoint_size: 100 });
    expect(res.status, res.text).toBe(202);
    const jobId = String(res.json.job_id);
    const running = await waitForJob(fx.t, jobId, (d) => Number(d.properties.chunks_done ?? 0) >= 2 || (d.status !== 'Running' && d.status !== 'Queued'));
    expect(running.status).toBe('Running');
    const cancel = await fx.t.call('POST', `/v1/transaction/${jobId}/alter`, { actions: [{ setStatusAction: { status: 'Canceled' } }] });
    expect(cancel.status, cancel.text).toBe(200);
    // The job notices at its next checkpoint, records its progress and removes its marker.
    const deadline = Date.now() + 30_000;
    while ((await fx.root.store.head(`_catalog/jobs/${jobId}.json`)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await fx.root.store.head(`_catalog/jobs/${jobId}.json`)).toBeNull();
    const final = await waitForJob(fx.t, jobId);
    expect(final.status).toBe('Canceled');
    const chunksDone = Number(final.properties.chunks_done);
    const rowsDone = Number(final.properties.rows_done);
    expect(chunksDone).toBeGreaterThanOrEqual(2);
    expect(chunksDone).toBeLessThan(n / 100);
    expect(rowsDone).toBe(chunksDone * 100);
    // Still canceled a moment later: nothing runs it any more.
    await new Promise((r) => setTimeout(r, 300));
    const later = await waitForJob(fx.t, jobId);
    expect(later.properties.chunks_done).toBe(final.properties.chunks_done);
    // Readable; exactly the rows of the completed chunks (the first rowsDone rows) are filled, correctly.
    const rows = await readColumn(location, engineOptions(), 'v');
    expect(rows.length).toBe(n);
    expect(rows.filter((r) => (r.id < rowsDone ? r.v !== r.id * 3 + r.x : r.v !== null)).slice(0, 5)).toEqual([]);
    // Canceled is terminal: the job cannot be resumed by setting it running again.
    const revive = await fx.t.call('POST', `/v1/transaction/${jobId}/alter`, { actions: [{ setStatusAction: { status: 'Running' } }] });
    expect(revive.status).toBe(409);
  });

  it('plans over read_version; the final sweep also fills rows appended since (404 code 11 for a missing version)', async () => {
    const { name, location } = await boundTable('readv', 1000);
    const version = Number((await post(name, 'describe', { load_detailed_metadata: true })).json.version);
    const inserted = await fx.t.call('POST', path(name, 'insert'), numbersStream(500, 1000), ARROW);
    expect(inserted.status, inserted.text).toBe(200);
    const missing = await post(name, 'backfill_column', { column: 'v', read_version: 999 });
    expect([missing.status, missing.json.code], missing.text).toEqual([404, 11]);
    const res = await post(name, 'backfill_column', { column: 'v', read_version: version, checkpoint_size: 300 });
    expect(res.status, res.text).toBe(202);
    const done = await waitForJob(fx.t, String(res.json.job_id));
    expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
    expect(done.properties).toMatchObject({ rows_total: '1000', rows_done: '1000', chunks_total: '4', plan_version: String(version), rows_swept: '500' });
    const rows = await readColumn(location, engineOptions(), 'v');
    expect(rows.length).toBe(1500);
    expect(rows.filter((r) => r.v !== r.id * 3 + r.x)).toEqual([]);
  });

  it('commits through the service on a table with managed versioning', async () => {
    expect((await fx.t.call('POST', '/v1/namespace/bfmanaged/create', { properties: { managed_versioning: 'true' } })).status).toBe(200);
    const created = await fx.t.call('POST', '/v1/table/bfmanaged%24m/create', numbersStream(5000), ARROW);
    expect(created.status, created.text).toBe(200);
    const mpath = (op: string) => `/v1/table/bfmanaged%24m/${op}`;
    expect((await fx.t.call('POST', mpath('add_columns'), { new_columns: [{ name: 'v', expression: 'CAST(NULL AS BIGINT)' }] })).status).toBe(200);
    const bound = await fx.t.call('POST', mpath('alter_columns'), { alterations: [{ path: 'v', virtual_column: { udf_backend: 'sql', udf: 'id * 3 + x' } }] });
    expect(bound.status, bound.text).toBe(200);
    const before = {
      committed: await committedVersions(fx.t),
      version: Number(((await fx.t.call('POST', mpath('version/describe'), {})).json.version as { version: number }).version),
    };
    const res = await fx.t.call('POST', mpath('backfill_column'), { column: 'v', checkpoint_size: 1000 });
    expect(res.status, res.text).toBe(202);
    const done = await waitForJob(fx.t, String(res.json.job_id));
    expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
    const last = Number(done.properties.last_committed_version);
    // The job's commits went through the service's version path: each was counted there.
    expect(last).toBeGreaterThan(before.version);
    expect((await committedVersions(fx.t)) - before.committed).toBe(last - before.version);
    const rows = await readColumn(String(created.json.location), engineOptions(), 'v');
    expect(rows.filter((r) => r.v !== r.id * 3 + r.x)).toEqual([]);
  });

  it('refuses columns that are not computed (400 code 13), unknown columns (404 code 12) and pickled UDFs (406)', async () => {
    const { name } = await boundTable('errors', 10);
    const plainCol = await post(name, 'backfill_column', { column: 'x' });
    expect(plainCol.status, plainCol.text).toBe(400);
    expect(plainCol.json.code).toBe(13);
    expect(String(plainCol.json.error)).toMatch(/neither computed nor virtual/);
    const unknown = await post(name, 'backfill_column', { column: 'nope' });
    expect(unknown.status, unknown.text).toBe(404);
    expect(unknown.json.code).toBe(12);
    const badWhere = await post(name, 'backfill_column', { column: 'v', where: 'nope > 1' });
    expect(badWhere.status, badWhere.text).toBe(404);
    const pickled = await post(name, 'alter_columns', {
      alterations: [{ path: 'x', virtual_column: { udf: 'gASVAAAA', udf_backend: 'DockerUDFSpecV1', image: 'img', udf_name: 'f', udf_version: '1' } }],
    });
    expect(pickled.status, pickled.text).toBe(406);
    // Without udf_execution the service says how to enable Python UDFs.
    expect(String(pickled.json.error)).toMatch(/Python UDFs \(udf_backend DockerUDFSpecV1\) are run only by a service started with udf_execution local or ray/);
    const mixed = await post(name, 'alter_columns', { alterations: [{ path: 'x', virtual_column: { udf_backend: 'sql', udf: 'id' }, rename: 'y' }] });
    expect(mixed.status, mixed.text).toBe(400);
    const badSql = await post(name, 'alter_columns', { alterations: [{ path: 'v', virtual_column: { udf_backend: 'sql', udf: 'id +* 2' } }] });
    expect(badSql.status, badSql.text).toBe(400);
    const badInput = await post(name, 'alter_columns', { alterations: [{ path: 'v', virtual_column: { udf_backend: 'sql', udf: 'nope * 2' } }] });
    expect(badInput.status, badInput.text).toBe(404);
    expect(badInput.json.code).toBe(12);
    const selfRef = await post(name, 'alter_columns', { alterations: [{ path: 'v', virtual_column: { udf_backend: 'sql', udf: 'V + 1' } }] });
    expect(selfRef.status, selfRef.text).toBe(400);
    expect(String(selfRef.json.error)).toMatch(/may not read the column it fills/);
    const noTable = await fx.t.call('POST', path('missing', 'backfill_column'), { column: 'v' });
    expect(noTable.status).toBe(404);
  });

  it("backfills a column declared computed through add_columns with the engine's refresh", async () => {
    const name = `comp${++seq}`;
    const created = await fx.t.call('POST', path(name, 'create'), numbersStream(3000), ARROW);
    expect(created.status, created.text).toBe(200);
    const added = await post(name, 'add_columns', { new_columns: [{ name: 'c', computed: 'id * 2 + x' }] });
    expect(added.status, added.text).toBe(200);
    const filtered = await post(name, 'backfill_column', { column: 'c', where: 'id > 5' });
    expect(filtered.status, filtered.text).toBe(406);
    const rebind = await post(name, 'alter_columns', { alterations: [{ path: 'c', virtual_column: { udf_backend: 'sql', udf: 'id' } }] });
    expect(rebind.status, rebind.text).toBe(400);
    const res = await post(name, 'backfill_column', { column: 'c' });
    expect(res.status, res.text).toBe(202);
    const done = await waitForJob(fx.t, String(res.json.job_id));
    expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
    expect(done.properties).toMatchObject({ rows_done: '3000', mode: 'refresh' });
    const rows = await readColumn(String(created.json.location), engineOptions(), 'c');
    expect(rows.filter((r) => r.v !== r.id * 2 + r.x)).toEqual([]);
  });
});
