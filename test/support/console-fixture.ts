import type { ChildProcess } from 'node:child_process';
import { arrow } from '../../src/engine/arrow.js';
import type { TestApp } from './app.js';
import type { TestRoot } from './backends.js';
import { numbersStream, waitForJob } from './jobs.js';
import { rootArgs, type ServiceProcess, startServiceProcess } from './service-process.js';

// A small catalog of real Lance tables for the console's browser tests and its screenshots
// (scripts/console-screenshots.ts), made through the API: nested namespaces with properties, a
// table with nested types, versions, indices and tags, a declared table, a namespace with more
// tables than a page, a table with more versions than a page, backfill jobs run to their end and
// one held running (each with its row in Geneva's job table `__system$geneva_jobs`, which the
// console lists), and, for the jobs list's paging, older rows of that table as Geneva leaves them.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
export const BULK_TABLES = 120;
export const MANY_VERSIONS = 56;
export const ORDER_ROWS = 300;
/** Rows the delete on the branch exp/first-load of sales$orders takes (ids below it). */
export const BRANCH_DELETED = 20;

type Call = TestApp['call'];

async function ok(call: Call, method: 'GET' | 'POST', url: string, body?: unknown, headers?: Record<string, string>): Promise<Record<string, unknown>> {
  const res = await call(method, url, body, headers);
  if (res.status !== 200 && res.status !== 202) throw new Error(`${method} ${url}: ${res.status} ${res.text}`);
  return res.json;
}

const DIM = 8;
const vectorOf = (i: number): number[] => Array.from({ length: DIM }, (_, j) => Math.sin(i * DIM + j));

/** Orders: id, a customer struct (with a nested address struct), a list of line structs, an embedding, an amount. */
export function ordersStream(from: number, n: number): Buffer {
  const ids = Array.from({ length: n }, (_, i) => from + i);
  const utf8 = (name: string) => new arrow.Field(name, new arrow.Utf8(), true);
  const address = new arrow.Struct([utf8('city'), utf8('country')]);
  const customer = new arrow.Struct([utf8('name'), new arrow.Field('address', address, true)]);
  const line = new arrow.Struct([utf8('sku'), new arrow.Field('qty', new arrow.Int32(), true)]);
  const table = new arrow.Table({
    id: arrow.vectorFromArray(BigInt64Array.from(ids.map(BigInt))),
    customer: arrow.vectorFromArray(
      ids.map((i) => ({
        name: `customer ${i % 17}`,
        address: { city: ['Lyon', 'Porto', 'Graz'][i % 3] as string, country: ['FR', 'PT', 'AT'][i % 3] as string },
      })),
      customer,
    ),
    lines: arrow.vectorFromArray(
      ids.map((i) => [{ sku: `sku-${i % 11}`, qty: (i % 4) + 1 }]),
      new arrow.List(new arrow.Field('item', line, true)),
    ),
    status: arrow.vectorFromArray(
      ids.map((i) => ['open', 'paid', 'shipped'][i % 3] as string),
      new arrow.Utf8(),
    ),
    embedding: arrow.vectorFromArray(ids.map(vectorOf), new arrow.FixedSizeList(DIM, new arrow.Field('item', new arrow.Float32(), true))),
    amount: arrow.vectorFromArray(Float64Array.from(ids.map((i) => (i * 7.31) % 500))),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

export interface SeededCatalog {
  /** Table ids by role. */
  orders: string[];
  declared: string[];
  manyVersions: string[];
  jobTable: string[];
  /** Backfill jobs run to their end, oldest first. */
  finishedJobs: string[];
}

/** Makes the catalog through `call` (the in-process app's inject). */
export async function seedCatalog(call: Call): Promise<SeededCatalog> {
  const ns = (id: string, properties: Record<string, string> = {}) => ok(call, 'POST', `/v1/namespace/${id}/create`, { properties });
  await ns('sales', { owner: 'analytics', retention: '90d', managed_versioning: 'false' });
  await ns('sales$eu', { region: 'eu-west' });
  await ns('sales$us', { region: 'us-east' });
  await ns('ml', { owner: 'ml-platform' });
  await ns('ml$embeddings');
  await ns('ops');
  await ns('bulk', { purpose: 'a namespace with more tables than a page' });

  const table = (id: string) => `/v1/table/${id}`;
  await ok(
    call,
    'POST',
    `${table('sales$orders')}/create?properties=${encodeURIComponent(JSON.stringify({ owner: 'sales-team', tier: 'gold' }))}`,
    ordersStream(0, ORDER_ROWS / 3),
    ARROW,
  );
  await ok(call, 'POST', `${table('sales$orders')}/insert`, ordersStream(ORDER_ROWS / 3, ORDER_ROWS / 3), ARROW);
  await ok(call, 'POST', `${table('sales$orders')}/tags/create`, { tag: 'first-load', version: 2 });
  await ok(call, 'POST', `${table('sales$orders')}/insert`, ordersStream((2 * ORDER_ROWS) / 3, ORDER_ROWS / 3), ARROW);
  await ok(call, 'POST', `${table('sales$orders')}/delete`, { predicate: 'id % 50 = 49' });
  await ok(call, 'POST', `${table('sales$orders')}/update`, { updates: [['status', "'archived'"]], predicate: 'id < 10' });
  await ok(call, 'POST', `${table('sales$orders')}/create_scalar_index`, { column: 'id', index_type: 'BTREE' });
  await ok(call, 'POST', `${table('sales$orders')}/create_scalar_index`, { column: 'status', index_type: 'BITMAP', name: 'status_bitmap' });
  await ok(call, 'POST', `${table('sales$orders')}/create_index`, { column: 'embedding', index_type: 'IVF_FLAT', num_partitions: 2, distance_type: 'cosine' });
  await ok(call, 'POST', `${table('sales$orders')}/tags/create`, { tag: 'indexed', version: 8 });
  await ok(call, 'POST', `${table('sales$orders')}/branches/create`, { name: 'exp/first-load', from_version: 2 });
  // The branch's own history: its first version (2, main's 200 rows) and a delete on it alone.
  await ok(call, 'POST', `${table('sales$orders')}/delete`, { branch: 'exp/first-load', predicate: `id < ${BRANCH_DELETED}` });
  await ok(call, 'POST', `${table('sales$customers')}/create`, ordersStream(0, 20), ARROW);
  await ok(call, 'POST', `${table('sales$returns')}/declare`, { properties: { note: 'filled by the nightly job' } });
  await ok(call, 'POST', `${table('sales$eu$invoices')}/create`, ordersStream(0, 5), ARROW);

  // A table with more versions than the timeline shows at once.
  await ok(call, 'POST', `${table('ops$metrics')}/create`, numbersStream(10), ARROW);
  for (let v = 2; v <= MANY_VERSIONS; v++) await ok(call, 'POST', `${table('ops$metrics')}/insert`, numbersStream(v * 3, v * 10), ARROW);

  // More tables than a page of the namespace view (declaring one is a couple of small writes).
  for (let i = 0; i < BULK_TABLES; i++) await ok(call, 'POST', `${table(`bulk$t${String(i).padStart(4, '0')}`)}/declare`, {});

  // The backfill job's table: a plain column bound to SQL, to be filled in many chunks.
  await ok(call, 'POST', `${table('ml$events')}/create`, numbersStream(JOB_ROWS), ARROW);
  await ok(call, 'POST', `${table('ml$events')}/add_columns`, { new_columns: [{ name: 'score', expression: 'CAST(NULL AS BIGINT)' }] });
  await ok(call, 'POST', `${table('ml$events')}/alter_columns`, {
    alterations: [{ path: 'score', virtual_column: { udf_backend: 'sql', udf: 'id * 3 + x', input_columns: ['id', 'x'] } }],
  });

  // Jobs that ran to their end, on a small table: the whole column, then the rows of a filter.
  await ok(call, 'POST', `${table('ml$clicks')}/create`, numbersStream(2000), ARROW);
  await ok(call, 'POST', `${table('ml$clicks')}/add_columns`, { new_columns: [{ name: 'weight', expression: 'CAST(NULL AS BIGINT)' }] });
  await ok(call, 'POST', `${table('ml$clicks')}/alter_columns`, {
    alterations: [{ path: 'weight', virtual_column: { udf_backend: 'sql', udf: 'x * 2', input_columns: ['x'] } }],
  });
  const finishedJobs: string[] = [];
  for (const request of [{ column: 'weight' }, { column: 'weight', where: 'x < 10' }]) {
    const jobId = String((await ok(call, 'POST', `${table('ml$clicks')}/backfill_column`, request)).job_id);
    const done = await waitForJob({ call }, jobId);
    if (done.status !== 'Succeeded') throw new Error(`backfill_column ${JSON.stringify(request)}: ${JSON.stringify(done)}`);
    finishedJobs.push(jobId);
  }
  return { orders: ['sales', 'orders'], declared: ['sales', 'returns'], manyVersions: ['ops', 'metrics'], jobTable: ['ml', 'events'], finishedJobs };
}

/** Geneva's JobRecord as Arrow (the service's own schema of `__system$geneva_jobs`). */
function jobRecordSchema(): InstanceType<typeof arrow.Schema> {
  const utf8 = new arrow.Utf8();
  const time = new arrow.Timestamp(arrow.TimeUnit.MICROSECOND, 'UTC');
  const list = () => new arrow.List(new arrow.Field('item', new arrow.Utf8(), true));
  const fields: Array<[string, InstanceType<typeof arrow.DataType>, boolean]> = [
    ['table_name', utf8, false],
    ['column_name', utf8, false],
    ['job_id', utf8, false],
    ['job_type', utf8, false],
    ['object_ref', utf8, true],
    ['status', utf8, false],
    ['launched_at', time, false],
    ['completed_at', time, true],
    ['config', utf8, false],
    ['launched_by', utf8, true],
    ['manifest_id', utf8, true],
    ['manifest_checksum', utf8, true],
    ['metrics', list(), true],
    ['events', list(), true],
    ['updated_at', time, true],
    ['cluster_name', utf8, true],
    ['input_columns', list(), true],
    ['output_columns', list(), true],
  ];
  return new arrow.Schema(fields.map(([name, type, nullable]) => new arrow.Field(name, type, nullable)));
}

/** One row of the job table, launched at `launchedAt` (microseconds since the epoch). */
export interface JobHistoryRow {
  jobId: string;
  table: string;
  column: string;
  status: 'DONE' | 'FAILED' | 'CANCELLED';
  launchedAt: bigint;
  rows: number;
}

/**
 * Inserts `rows` into `__system$geneva_jobs` through the API, as Geneva's own client may write
 * that table: jobs that ended before this catalog's (they have no transaction here).
 */
export async function insertJobHistory(call: Call, rows: JobHistoryRow[]): Promise<void> {
  await ok(call, 'POST', '/v1/table/__system$geneva_jobs/insert', jobHistoryStream(rows), ARROW);
}

/** `rows` as an Arrow IPC stream of the job table's schema. */
export function jobHistoryStream(rows: JobHistoryRow[]): Buffer {
  const schema = jobRecordSchema();
  const strings = (f: (r: JobHistoryRow) => string | null) => rows.map(f);
  const micros = (f: (r: JobHistoryRow) => bigint) => BigInt64Array.from(rows.map(f));
  const metric = (r: JobHistoryRow, name: string, desc: string) => JSON.stringify({ name, n: r.rows, total: r.rows, done: true, desc });
  const columns: Record<string, unknown[] | BigInt64Array> = {
    table_name: strings((r) => r.table),
    column_name: strings((r) => r.column),
    job_id: strings((r) => r.jobId),
    job_type: strings(() => 'BACKFILL'),
    object_ref: strings(() => null),
    status: strings((r) => r.status),
    launched_at: micros((r) => r.launchedAt),
    completed_at: micros((r) => r.launchedAt + 90_000_000n),
    config: strings(() => '{"where":null,"read_version":null,"checkpoint_size":1000,"commit_granularity":1}'),
    launched_by: strings(() => 'geneva'),
    manifest_id: strings(() => null),
    manifest_checksum: strings(() => null),
    metrics: rows.map((r) => [metric(r, 'rows_checkpointed', 'Rows checkpointed'), metric(r, 'rows_ready_for_commit', 'Rows committed')]),
    events: rows.map((r) => [`Job completed with status ${r.status}`]),
    updated_at: micros((r) => r.launchedAt + 90_000_000n),
    cluster_name: strings(() => null),
    input_columns: rows.map(() => null),
    output_columns: rows.map((r) => [r.column]),
  };
  const children = schema.fields.map((field) => {
    const values = columns[field.name];
    if (values instanceof BigInt64Array)
      return arrow.makeData({ type: field.type as InstanceType<typeof arrow.Timestamp>, length: values.length, data: values });
    return arrow.vectorFromArray(values as unknown[], field.type).data[0] as InstanceType<typeof arrow.Data>;
  });
  const batch = new arrow.RecordBatch(schema, arrow.makeData({ type: new arrow.Struct(schema.fields), length: rows.length, children }));
  return Buffer.from(arrow.tableToIPC(new arrow.Table(batch), 'stream'));
}

export const JOB_ROWS = 100_000;
const JOB_CHUNK = 1000;

export interface HeldJob {
  jobId: string;
  /** rows_done when the job was held. */
  rowsDone: number;
  rowsTotal: number;
  /** Lets the job run on to its end. */
  resume(): void;
}

/**
 * A backfill job held running: another replica of the service (its own OS process on the same
 * root, `runner`) starts it on `table` and is stopped (SIGSTOP) as soon as the job has
 * checkpointed some rows (at least `holdAtFraction` of them; with `rowShowsProgress`, also once the
 * job's row in the job table shows some, which the runner writes at most every second), so the job
 * stays Running, part done, until `resume` (SIGCONT). The runner's lease outlives any test, so the
 * in-process replica (`call`) does not take the job over meanwhile; it is the one asked what the
 * held job has done.
 */
export async function holdRunningJob(call: Call, runner: ServiceProcess, table: string[], holdAtFraction = 0, rowShowsProgress = false): Promise<HeldJob> {
  const started = await runner.call('POST', `/v1/table/${table.join('$')}/backfill_column`, { column: 'score', checkpoint_size: JOB_CHUNK });
  if (started.status !== 202) throw new Error(`backfill_column: ${started.status} ${started.text}`);
  const jobId = String(started.json.job_id);
  const describe = async () => (await ok(call, 'POST', `/v1/transaction/${jobId}/describe`, {})) as { status: string; properties: Record<string, string> };
  for (;;) {
    const job = await describe();
    const done = Number(job.properties.rows_done ?? 0);
    const enough = holdAtFraction === 0 ? 0 : holdAtFraction * Number(job.properties.rows_total ?? Infinity);
    if (job.status === 'Running' && done > 0 && done >= enough && (!rowShowsProgress || (await rowsCheckpointed(runner.url, jobId)) > 0)) break;
    if (job.status !== 'Running' && job.status !== 'Queued') throw new Error(`the job ended before it could be held: ${JSON.stringify(job)}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  runner.child.kill('SIGSTOP');
  // What it had done when it stopped (a chunk or two more than just seen, at most).
  const held = await describe();
  if (held.status !== 'Running') throw new Error(`the job ended before it could be held: ${JSON.stringify(held)}`);
  return {
    jobId,
    rowsDone: Number(held.properties.rows_done),
    rowsTotal: Number(held.properties.rows_total),
    resume: () => runner.child.kill('SIGCONT'),
  };
}

/** The `rows_checkpointed` count of the job's row in `__system$geneva_jobs`, asked of the service at `url` (0 while it has none). */
async function rowsCheckpointed(url: string, jobId: string): Promise<number> {
  const res = await fetch(`${url}/v1/table/__system%24geneva_jobs/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ k: 1, filter: `job_id = '${jobId}'`, columns: { column_names: ['metrics'] } }),
  });
  if (!res.ok) return 0;
  const metrics: unknown = arrow
    .tableFromIPC(new Uint8Array(await res.arrayBuffer()))
    .getChild('metrics')
    ?.get(0);
  for (const entry of (metrics as { toArray(): string[] } | null)?.toArray() ?? []) {
    const metric = JSON.parse(entry) as { name: string; n: number };
    if (metric.name === 'rows_checkpointed') return metric.n;
  }
  return 0;
}

/** The replica that runs the held job (start it early: its start-up overlaps the seeding). */
export function startJobReplica(root: TestRoot, live: Set<ChildProcess>): Promise<ServiceProcess> {
  return startServiceProcess({ args: rootArgs(root, 600_000), live });
}
