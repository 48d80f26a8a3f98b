import type { ChildProcess } from 'node:child_process';
import { arrow } from '../../src/engine/arrow.js';
import type { TestApp } from './app.js';
import type { TestRoot } from './backends.js';
import { numbersStream } from './jobs.js';
import { rootArgs, type ServiceProcess, startServiceProcess } from './service-process.js';

// A small catalog of real Lance tables for the console's browser tests and its screenshots
// (scripts/console-screenshots.ts), made through the API: nested namespaces with properties, a
// table with nested types, versions, indices and tags, a declared table, a namespace with more
// tables than a page, a table with more versions than a page, and a backfill job held running.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
export const BULK_TABLES = 120;
export const MANY_VERSIONS = 56;
export const ORDER_ROWS = 300;

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
      ids.map((i) => ({ name: `customer ${i % 17}`, address: { city: ['Lyon', 'Porto', 'Graz'][i % 3] as string, country: ['FR', 'PT', 'AT'][i % 3] as string } })),
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
  await ok(call, 'POST', `${table('sales$orders')}/create?properties=${encodeURIComponent(JSON.stringify({ owner: 'sales-team', tier: 'gold' }))}`, ordersStream(0, ORDER_ROWS / 3), ARROW);
  await ok(call, 'POST', `${table('sales$orders')}/insert`, ordersStream(ORDER_ROWS / 3, ORDER_ROWS / 3), ARROW);
  await ok(call, 'POST', `${table('sales$orders')}/tags/create`, { tag: 'first-load', version: 2 });
  await ok(call, 'POST', `${table('sales$orders')}/insert`, ordersStream((2 * ORDER_ROWS) / 3, ORDER_ROWS / 3), ARROW);
  await ok(call, 'POST', `${table('sales$orders')}/delete`, { predicate: 'id % 50 = 49' });
  await ok(call, 'POST', `${table('sales$orders')}/update`, { updates: [['status', "'archived'"]], predicate: 'id < 10' });
  await ok(call, 'POST', `${table('sales$orders')}/create_scalar_index`, { column: 'id', index_type: 'BTREE' });
  await ok(call, 'POST', `${table('sales$orders')}/create_scalar_index`, { column: 'status', index_type: 'BITMAP', name: 'status_bitmap' });
  await ok(call, 'POST', `${table('sales$orders')}/create_index`, { column: 'embedding', index_type: 'IVF_FLAT', num_partitions: 2, distance_type: 'cosine' });
  await ok(call, 'POST', `${table('sales$orders')}/tags/create`, { tag: 'indexed', version: 8 });
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
  await ok(call, 'POST', `${table('ml$events')}/alter_columns`, { alterations: [{ path: 'score', virtual_column: { udf_backend: 'sql', udf: 'id * 3 + x', input_columns: ['id', 'x'] } }] });
  return { orders: ['sales', 'orders'], declared: ['sales', 'returns'], manyVersions: ['ops', 'metrics'], jobTable: ['ml', 'events'] };
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
 * checkpointed some rows (at least `holdAtFraction` of them), so the job stays Running, part
 * done, until `resume` (SIGCONT). The runner's lease outlives any test, so the in-process replica
 * (`call`) does not take the job over meanwhile; it is the one asked what the held job has done.
 */
export async function holdRunningJob(call: Call, runner: ServiceProcess, table: string[], holdAtFraction = 0): Promise<HeldJob> {
  const started = await runner.call('POST', `/v1/table/${table.join('$')}/backfill_column`, { column: 'score', checkpoint_size: JOB_CHUNK });
  if (started.status !== 202) throw new Error(`backfill_column: ${started.status} ${started.text}`);
  const jobId = String(started.json.job_id);
  const describe = async () => (await ok(call, 'POST', `/v1/transaction/${jobId}/describe`, {})) as { status: string; properties: Record<string, string> };
  for (;;) {
    const job = await describe();
    const done = Number(job.properties.rows_done ?? 0);
    const enough = holdAtFraction === 0 ? 0 : holdAtFraction * Number(job.properties.rows_total ?? Infinity);
    if (job.status === 'Running' && done > 0 && done >= enough) break;
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

/** The replica that runs the held job (start it early: its start-up overlaps the seeding). */
export function startJobReplica(root: TestRoot, live: Set<ChildProcess>): Promise<ServiceProcess> {
  return startServiceProcess({ args: rootArgs(root, 600_000), live });
}
