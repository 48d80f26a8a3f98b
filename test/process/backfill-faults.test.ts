import { afterAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { readColumn, readRows } from '../support/arrow-data.js';
import { type Backend, backends, localBackend, type TestRoot } from '../support/backends.js';
import { processesByRoot, rootArgs, type ServiceProcess, startServiceProcess, stopService } from '../support/service-process.js';
import { genevaQuery, META, schemaMessage } from '../support/views.js';

// Crash tests of backfill jobs (src/service/jobs/job-runner.ts): the real service process is
// SIGKILLed at a fault point of a 200,000-row backfill; another service process on the same root
// (a restart, or a second replica already running) takes the job over once the dead one's lease
// runs out, continues from the last checkpoint, and the column ends equal to its expression on
// every row. Two live replicas on one root: exactly one of them runs the job. A materialized
// view's refresh killed between its commit and its checkpoint is finished the same way.

const LEASE_MS = 1000;
const ROWS = 200_000;
const CHUNK = 20_000;

/** Rows {id: int64, x: int64 = id % 97} for ids [0, n). */
function numbersStream(n: number): Buffer {
  const ids = new BigInt64Array(n);
  const xs = new BigInt64Array(n);
  for (let i = 0; i < n; i++) {
    ids[i] = BigInt(i);
    xs[i] = BigInt(i % 97);
  }
  return Buffer.from(arrow.tableToIPC(new arrow.Table({ id: arrow.vectorFromArray(ids), x: arrow.vectorFromArray(xs) }), 'stream'));
}

/** Polls DescribeTransaction until the job reaches a terminal status (or the deadline passes). */
async function waitForJob(running: Pick<Running, 'call'>, jobId: string, timeoutMs = 120_000): Promise<{ status: string; properties: Record<string, string> }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await running.call('POST', `/v1/transaction/${jobId}/describe`, {});
    if (res.status !== 200) throw new Error(`describe ${jobId}: ${res.text}`);
    const d = res.json as { status: string; properties: Record<string, string> };
    if (['Succeeded', 'Failed', 'Canceled'].includes(d.status) || Date.now() > deadline) return d;
    await new Promise((r) => setTimeout(r, 100));
  }
}

type Running = ServiceProcess;

/** The processes each test started, by its root (every test has a root of its own; they run at once). */
const { liveOn, dispose: disposeWhenStopped, killAll } = processesByRoot();
afterAll(killAll);

/** Starts the service process over the test root with the short lease. */
const startService = (root: TestRoot, faultPoint?: string): Promise<Running> =>
  startServiceProcess({ args: rootArgs(root, LEASE_MS), live: liveOn(root), ...(faultPoint ? { faultPoint } : {}) });

interface StoredJob {
  status: string;
  properties: Record<string, string>;
  job: { chunks_done: number; attempts: number; owner?: string; lease_until?: string };
}

async function storedJob(root: TestRoot, jobId: string): Promise<StoredJob> {
  const got = await root.store.get(`_catalog/transactions/${jobId}.json`);
  if (!got) throw new Error(`no record for job ${jobId}`);
  return JSON.parse(got.body.toString('utf8')) as StoredJob;
}

/** A 200,000-row table ns$t whose column v is bound to `id * 3 + x`; returns its location. */
async function boundTable(running: Running): Promise<string> {
  expect((await running.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
  const created = await running.call('POST', '/v1/table/ns%24t/create', numbersStream(ROWS), { 'content-type': 'application/vnd.apache.arrow.stream' });
  expect(created.status, created.text).toBe(200);
  const added = await running.call('POST', '/v1/table/ns%24t/add_columns', { new_columns: [{ name: 'v', expression: 'CAST(NULL AS BIGINT)' }] });
  expect(added.status, added.text).toBe(200);
  const bound = await running.call('POST', '/v1/table/ns%24t/alter_columns', {
    alterations: [{ path: 'v', virtual_column: { udf_backend: 'sql', udf: 'id * 3 + x' } }],
  });
  expect(bound.status, bound.text).toBe(200);
  return String(created.json.location);
}

async function expectAllCorrect(root: TestRoot, location: string): Promise<void> {
  const rows = await readColumn(location, root.store.engineStorageOptions(), 'v');
  expect(rows.length).toBe(ROWS);
  expect(rows.filter((r) => r.v !== r.id * 3 + r.x).slice(0, 5)).toEqual([]);
}

interface Point {
  name: string;
  /** Checkpointed chunks when the process dies, and rows already committed. */
  chunksDone: number;
  rowsFilled: number;
}

const POINTS: Point[] = [
  { name: 'backfill:after-plan', chunksDone: 0, rowsFilled: 0 },
  // The commit of chunk 3 landed, its checkpoint did not: the restart writes it again.
  { name: 'backfill:after-commit-3', chunksDone: 3, rowsFilled: 4 * CHUNK },
  { name: 'backfill:after-checkpoint-5', chunksDone: 6, rowsFilled: 6 * CHUNK },
];

// The 200,000-row crash tests run on the local root; on radosgw one point (the hardest: a
// commit without its checkpoint) keeps the run short.
const cases: Array<{ backend: Backend; point: Point }> = [
  ...POINTS.map((point) => ({ backend: localBackend, point })),
  ...backends()
    .filter((b) => b.name !== 'local')
    .map((backend) => ({ backend, point: POINTS[1] as Point })),
];

describe.concurrent('backfill jobs across crashes and replicas', () => {
  it.each(cases)('killed at $point.name on $backend.name, finished by another process', { timeout: 240_000 }, async ({ backend, point }) => {
    const root = await backend.newRoot();
    try {
      const crashing = await startService(root, point.name);
      const location = await boundTable(crashing);
      const res = await crashing.call('POST', '/v1/table/ns%24t/backfill_column', { column: 'v', checkpoint_size: CHUNK });
      expect(res.status, res.text).toBe(202);
      const jobId = String(res.json.job_id);
      expect(await crashing.exited).toEqual({ code: null, signal: 'SIGKILL' });
      expect(crashing.stderr()).toContain(`fault point ${point.name}`);

      // At the crash: the job is Running, held by the dead process, checkpointed where expected.
      const atCrash = await storedJob(root, jobId);
      expect(atCrash.status).toBe('Running');
      expect(atCrash.job.chunks_done).toBe(point.chunksDone);
      expect(atCrash.job.owner).toBeDefined();
      const filled = (await readColumn(location, root.store.engineStorageOptions(), 'v')).filter((r) => r.v !== null);
      expect(filled.length).toBe(point.rowsFilled);
      expect(filled.filter((r) => r.v !== r.id * 3 + r.x)).toEqual([]);

      // Another process takes over once the lease has run out, and finishes the job.
      const recovering = await startService(root);
      const done = await waitForJob(recovering, jobId);
      expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
      expect(done.properties).toMatchObject({ rows_total: String(ROWS), rows_done: String(ROWS), chunks_done: '10' });
      const after = await storedJob(root, jobId);
      expect(after.job.attempts).toBe(2);
      expect(after.job.owner).toBeUndefined();
      const taken = recovering.lines.filter((l) => l.msg === 'backfill job taken');
      expect(taken.length).toBe(1);
      // Not before the dead owner's lease ran out.
      const at = taken[0]?.time;
      const takenAt = typeof at === 'number' ? at : Date.parse(String(at));
      expect(takenAt).toBeGreaterThanOrEqual(Date.parse(atCrash.job.lease_until ?? '') - 50);
      await expectAllCorrect(root, location);
      expect(await root.store.head(`_catalog/jobs/${jobId}.json`)).toBeNull();
      await stopService(recovering);
    } finally {
      await disposeWhenStopped(root);
    }
  });

  it('SIGTERM stops a job at its next checkpoint and hands the lease back; the next process resumes it at once', { timeout: 240_000 }, async () => {
    const root = await localBackend.newRoot();
    try {
      const first = await startService(root);
      const location = await boundTable(first);
      const res = await first.call('POST', '/v1/table/ns%24t/backfill_column', { column: 'v', checkpoint_size: 4000 });
      expect(res.status, res.text).toBe(202);
      const jobId = String(res.json.job_id);
      const deadline = Date.now() + 60_000;
      while ((await storedJob(root, jobId)).job.chunks_done < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      await stopService(first);
      const stopped = await storedJob(root, jobId);
      expect(stopped.status).toBe('Running');
      expect(stopped.job.owner).toBeUndefined();
      expect(stopped.job.chunks_done).toBeGreaterThanOrEqual(3);
      expect(stopped.job.chunks_done).toBeLessThan(ROWS / 4000);
      const filled = (await readColumn(location, root.store.engineStorageOptions(), 'v')).filter((r) => r.v !== null);
      expect(filled.length).toBe(stopped.job.chunks_done * 4000);
      const second = await startService(root);
      const done = await waitForJob(second, jobId);
      expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
      expect((await storedJob(root, jobId)).job.attempts).toBe(2);
      await expectAllCorrect(root, location);
      await stopService(second);
    } finally {
      await disposeWhenStopped(root);
    }
  });

  it('two replicas on one root: exactly one runs the job', { timeout: 240_000 }, async () => {
    const root = await localBackend.newRoot();
    try {
      const [a, b] = await Promise.all([startService(root), startService(root)]);
      const location = await boundTable(a);
      // Small chunks, so that the job spans many polls of the other replica.
      const res = await b.call('POST', '/v1/table/ns%24t/backfill_column', { column: 'v', checkpoint_size: 2000 });
      expect(res.status, res.text).toBe(202);
      const jobId = String(res.json.job_id);
      const done = await waitForJob(a, jobId);
      expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
      expect(done.properties.chunks_done).toBe('100');
      expect((await storedJob(root, jobId)).job.attempts).toBe(1);
      const taken = [a, b].map((r) => r.lines.filter((l) => l.msg === 'backfill job taken').length);
      expect(taken.sort()).toEqual([0, 1]);
      await expectAllCorrect(root, location);
      await Promise.all([stopService(a), stopService(b)]);
    } finally {
      await disposeWhenStopped(root);
    }
  });
});

// A materialized view's refresh is one step (job-runner.ts refreshView): killed after its
// commit and before its checkpoint, the next process takes it over and commits the same rows again.
describe.concurrent('view refreshes across crashes', () => {
  it.each(backends())('killed after the commit on $name, finished by another process with the same rows', { timeout: 240_000 }, async (backend) => {
    const root = await backend.newRoot();
    try {
      const crashing = await startService(root, 'refresh:after-commit');
      expect((await crashing.call('POST', '/v1/table/src/create', numbersStream(ROWS), { 'content-type': 'application/vnd.apache.arrow.stream' })).status).toBe(
        200,
      );
      const created = await crashing.call('POST', '/v1/materialized_view/v/create', {
        kind: 'query',
        source_query: genevaQuery('src', { filter: 'x = 5', columns: { id: 'id', y: 'x + id' } }),
        output_schema: schemaMessage([...META, ['id', new arrow.Int64()], ['y', new arrow.Int64()]]),
      });
      expect(created.status, created.text).toBe(201);
      const location = String((await crashing.call('POST', '/v1/table/v/describe', {})).json.location);
      const refresh = await crashing.call('POST', '/v1/materialized_view/v/refresh', {});
      expect(refresh.status, refresh.text).toBe(202);
      const jobId = String(refresh.json.job_id);
      expect(await crashing.exited).toEqual({ code: null, signal: 'SIGKILL' });
      const expected = Array.from({ length: ROWS }, (_, id) => id).filter((id) => id % 97 === 5);
      const viewIds = async () =>
        ((await readRows(location, root.store.engineStorageOptions())) as Array<{ id: number; y: bigint; __source_row_id: bigint }>).map((r) => [
          r.id,
          Number(r.y),
          Number(r.__source_row_id),
        ]);
      const committed = await viewIds();
      expect(committed).toEqual(expected.map((id) => [id, id + 5, id]));
      expect((await storedJob(root, jobId)).status).toBe('Running');

      const recovering = await startService(root);
      const done = await waitForJob(recovering, jobId);
      expect(done.status, JSON.stringify(done.properties)).toBe('Succeeded');
      expect(done.properties.rows_refreshed).toBe(String(expected.length));
      expect((await storedJob(root, jobId)).job.attempts).toBe(2);
      expect(await viewIds()).toEqual(committed);
      // The marker goes once the finished job's run ends, which stopping the process waits for.
      await stopService(recovering);
      expect(await root.store.head(`_catalog/jobs/${jobId}.json`)).toBeNull();
    } finally {
      await disposeWhenStopped(root);
    }
  });
});
