// The cost of the table maintenance scheduler (issue 33 point 6) on a catalog of N tables (default
// 10,000 declared tables in 100 namespaces) that set no policy: one scheduler tick, timed and
// counted in store requests, against one ListAllTables (what a scheduler that listed the catalog
// would pay every tick); then the same with one table among them under a namespace's policy.
// Not a test: prints figures.
//   npx tsx scripts/bench-maintenance-scheduler.ts [--store local|rgw] [--tables 10000] [--ticks 50]
import { parseArgs } from 'node:util';
import pLimit from 'p-limit';
import type { App } from '../src/app.js';
import { metricSamples } from '../test/support/app.js';
import { ms, now, runMain, startBenchService, summarize } from './bench-support.js';

const log = (line: string): void => console.log(`# ${line}`);

const { values } = parseArgs({
  options: { store: { type: 'string', default: 'local' }, tables: { type: 'string', default: '10000' }, ticks: { type: 'string', default: '50' } },
});
const TABLES = Number(values.tables);
const TICKS = Number(values.ticks);
const NAMESPACES = Math.max(1, Math.round(TABLES / 100));

async function storeRequests(app: App): Promise<number> {
  const scraped = await app.server.inject({ method: 'GET', url: '/metrics' });
  let n = 0;
  for (const [sample, value] of metricSamples(scraped.body)) if (sample.startsWith('lance_ns_store_requests_total{')) n += value;
  return n;
}

async function request(app: App, url: string, body?: unknown): Promise<void> {
  const res =
    body === undefined
      ? await app.server.inject({ method: 'GET', url })
      : await app.server.inject({ method: 'POST', url, payload: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode} ${res.body}`);
}

/** Runs `fn` `runs` times; prints its time and store requests per run. */
async function measure(app: App, label: string, runs: number, fn: () => Promise<unknown>): Promise<void> {
  const samples: number[] = [];
  const requestsBefore = await storeRequests(app);
  for (let i = 0; i < runs; i++) {
    const started = now();
    await fn();
    samples.push(now() - started);
  }
  const requests = ((await storeRequests(app)) - requestsBefore) / runs;
  const { p50, p95 } = summarize(samples);
  console.log(
    `${label.padEnd(62)} p50 ${ms(p50).padStart(8)} ms  p95 ${ms(p95).padStart(8)} ms  ${requests.toFixed(1).padStart(8)} store requests  (${runs} runs)`,
  );
}

runMain(async () => {
  const backend = values.store === 'rgw' ? 'rgw' : 'local';
  // Ticks are driven here (interval 0: the scheduler never ticks by itself).
  const { app } = await startBenchService(backend, log, 'bench-maintenance-', ['--maintenance-interval-ms', '0']);
  const started = now();
  const limit = pLimit(32);
  for (let n = 0; n < NAMESPACES; n++) await request(app, `/v1/namespace/n${n}/create`, {});
  await Promise.all(Array.from({ length: TABLES }, (_, i) => limit(() => request(app, `/v1/table/n${i % NAMESPACES}%24t${i}/declare`, {}))));
  log(`${TABLES} declared tables in ${NAMESPACES} namespaces on ${backend}, in ${ms((now() - started) / 1000)} s`);

  const ticks = TICKS;
  await measure(app, `scheduler tick, ${TABLES} tables, no policy`, ticks, () => app.maintenance.tick());
  await measure(app, `ListAllTables (a scheduler listing the catalog), ${TABLES} tables`, Math.max(3, Math.round(ticks / 10)), () => request(app, '/v1/table'));
  // One namespace of 100 declared tables under a policy: the tick reads what it covers, nothing more.
  await request(app, '/v1/namespace/p/create', { properties: { 'maintenance.compact': 'true' } });
  await Promise.all(Array.from({ length: 100 }, (_, i) => limit(() => request(app, `/v1/table/p%24t${i}/declare`, {}))));
  await measure(app, `scheduler tick, ${TABLES} + 100 tables, 100 under a policy (declared)`, ticks, () => app.maintenance.tick());
  console.log(`at the default interval (60 s), a tick of the no-policy catalog is its time / 60,000 of one core, and its store requests once a minute`);
});
