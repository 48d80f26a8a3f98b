// Benchmark of the table-versions commit path and the latest-version lookup.
//
//   npx tsx scripts/bench-versions.ts [--backend local|rgw|both] [--quick] [--commits-only]
//   npm run bench:versions -- --backend local --quick
//
// Starts the service in-process (createApp, listening on 127.0.0.1:0, logs silent) on a fresh
// temporary local root and/or on a throwaway Ceph radosgw started here (test/support/s3-server.ts),
// then measures over real HTTP:
//   1. commits per second through POST /v1/table/{id}/version/create: sequential commits on one
//      table, and 16 sequential committers on 16 tables in parallel. Each commit first stages a
//      small Lance manifest at `<table>/_versions/<v>.manifest-<uuid>` through the service's
//      store, as a Lance writer does, then sends its path relative to the table. The same
//      sequential commits on a branch of a table (`branch: dev`, its own history under
//      `tree/dev/`), beside main's: a branch commit costs one GET more (the branch's ref).
//   2. latency of GET /v1/table/{id}/version/list?descending=true&limit=1 (what every Lance
//      writer calls before committing) at 100, 10,000 and 100,000 versions. The versions are
//      written straight into `_versions/` with V2 names, as Lance's own writers leave them;
//      --quick stops at 10,000.
// Temporary roots and the radosgw are removed at exit, also on errors and on Ctrl-C.

import { randomBytes, randomUUID } from 'node:crypto';
import os from 'node:os';
import { parseArgs } from 'node:util';
import pLimit from 'p-limit';
import { manifestFileName } from '../src/engine/lance-format/manifest-names.js';
import { tableDirKey, VERSIONS_DIR } from '../src/service/catalog/layout.js';
import { manifestBytes } from '../test/support/manifests.js';
import { type BenchService, checkAborted, cleanups, ms, now, runMain, secs, startBenchService, summarize } from './bench-support.js';

type BackendName = 'local' | 'rgw';

interface Sizes {
  /** Sequential commits on one table. */
  singleCommits: number;
  /** Parallel committers, one table each. */
  parallelTables: number;
  /** Sequential commits per parallel committer. */
  commitsPerTable: number;
  /** Version counts the lookup is measured at (ascending). */
  versionCounts: number[];
  /** Lookups per version count. */
  lookups: number;
  /** Concurrent PUTs while writing manifests directly. */
  writeConcurrency: number;
}

const NAMESPACE = 'bench';
const DELIMITER = '$';

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

/** A manifest-like blob for versions written straight into `_versions/` (the lookup never parses them). */
function manifestBlob(): Buffer {
  return Buffer.concat([randomBytes(500), Buffer.from('LANC')]);
}

// ---------------------------------------------------------------------------------------------
// The service under test and an HTTP client for it.

type Service = BenchService;
const startService = (backend: BackendName): Promise<Service> => startBenchService(backend, log, 'lance-ns-bench-');

async function call(service: Service, method: 'GET' | 'POST', route: string, body?: unknown): Promise<unknown> {
  const init: RequestInit = { method };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { 'content-type': 'application/json' };
  }
  const res = await fetch(`${service.baseUrl}${route}`, init);
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${route} -> ${res.status}: ${text.slice(0, 300)}`);
  return text === '' ? {} : (JSON.parse(text) as unknown);
}

const tablePath = (name: string): string => encodeURIComponent([NAMESPACE, name].join(DELIMITER));
const tableKey = (name: string): string => tableDirKey({ namespace: [NAMESPACE], name });

async function declareTable(service: Service, name: string): Promise<void> {
  await call(service, 'POST', `/v1/table/${tablePath(name)}/declare`, {});
}

/** Stages a manifest through the store and commits it as `version` (of `branch`, else main) over HTTP; returns the request's ms. */
async function commit(service: Service, table: string, version: number, branch?: string): Promise<number> {
  checkAborted();
  const line = branch === undefined ? '' : `tree/${branch}/`;
  const staged = `${tableKey(table)}${line}${VERSIONS_DIR}/${version}.manifest-${randomUUID()}`;
  // The service parses what it commits: a real (minimal) Lance manifest of this version.
  await service.app.store.put(staged, manifestBytes(version));
  // Main's path relative to the table; a branch's as Lance's clients send it (object_store's form).
  const manifest_path = branch === undefined ? staged.slice(tableKey(table).length) : service.app.store.objectPath(staged);
  const started = now();
  const response = await call(service, 'POST', `/v1/table/${tablePath(table)}/version/create`, { version, manifest_path, ...(branch ? { branch } : {}) });
  const elapsed = now() - started;
  const committed = (response as { version?: { version?: unknown } }).version?.version;
  if (committed !== version) throw new Error(`table ${table}: committed ${String(committed)}, expected ${version}`);
  return elapsed;
}

/** Latest version as GET version/list?descending=true&limit=1 reports it. */
async function latestVersion(service: Service, table: string): Promise<number | undefined> {
  checkAborted();
  const response = await call(service, 'GET', `/v1/table/${tablePath(table)}/version/list?descending=true&limit=1`);
  const versions = (response as { versions?: Array<{ version?: unknown }> }).versions ?? [];
  const v = versions[0]?.version;
  return typeof v === 'number' ? v : undefined;
}

// ---------------------------------------------------------------------------------------------
// The measurements.

interface Row {
  metric: string;
  value: string;
}

async function benchCommits(service: Service, sizes: Sizes, rows: Row[]): Promise<{ single: number; parallel: number }> {
  await declareTable(service, 'single');
  const requestMs: number[] = [];
  const started = now();
  for (let v = 1; v <= sizes.singleCommits; v++) requestMs.push(await commit(service, 'single', v));
  const elapsed = now() - started;
  const single = sizes.singleCommits / (elapsed / 1000);
  const s = summarize(requestMs);
  rows.push({ metric: `commits/s, 1 table (${sizes.singleCommits} sequential, stage + create)`, value: single.toFixed(1) });
  rows.push({ metric: '  version/create request p50 / p95', value: `${ms(s.p50)} / ${ms(s.p95)} ms` });
  log(`1 table: ${single.toFixed(1)} commits/s`);

  // The same on a branch forked at version 1 (its ref as Lance writes it; its history starts there).
  await declareTable(service, 'branched');
  await commit(service, 'branched', 1);
  await service.app.store.put(
    `${tableKey('branched')}_refs/branches/dev.json`,
    JSON.stringify({ parentVersion: 1, createAt: 0, manifestSize: 0, metadata: {} }),
  );
  const branchMs: number[] = [];
  const branchStarted = now();
  for (let v = 1; v <= sizes.singleCommits; v++) branchMs.push(await commit(service, 'branched', v, 'dev'));
  const onBranch = sizes.singleCommits / ((now() - branchStarted) / 1000);
  const b = summarize(branchMs);
  rows.push({ metric: `commits/s, 1 table's branch (${sizes.singleCommits} sequential, stage + create)`, value: onBranch.toFixed(1) });
  rows.push({ metric: '  version/create request p50 / p95', value: `${ms(b.p50)} / ${ms(b.p95)} ms` });
  rows.push({ metric: '  branch p50 / main p50', value: (b.p50 / s.p50).toFixed(2) });
  log(`1 table's branch: ${onBranch.toFixed(1)} commits/s`);

  const tables = Array.from({ length: sizes.parallelTables }, (_, i) => `par${i}`);
  for (const t of tables) await declareTable(service, t);
  const parallelMs: number[] = [];
  const parallelStarted = now();
  await Promise.all(
    tables.map(async (t) => {
      for (let v = 1; v <= sizes.commitsPerTable; v++) parallelMs.push(await commit(service, t, v));
    }),
  );
  const parallelElapsed = now() - parallelStarted;
  const total = sizes.parallelTables * sizes.commitsPerTable;
  const parallel = total / (parallelElapsed / 1000);
  const p = summarize(parallelMs);
  rows.push({ metric: `commits/s, ${sizes.parallelTables} tables in parallel (${sizes.commitsPerTable} each)`, value: parallel.toFixed(1) });
  rows.push({ metric: '  version/create request p50 / p95', value: `${ms(p.p50)} / ${ms(p.p95)} ms` });
  log(`${sizes.parallelTables} tables: ${parallel.toFixed(1)} commits/s`);
  return { single, parallel };
}

async function benchLatest(service: Service, sizes: Sizes, rows: Row[]): Promise<Map<number, number>> {
  const table = 'history';
  await declareTable(service, table);
  const versionsKey = `${tableKey(table)}${VERSIONS_DIR}/`;
  const limit = pLimit(sizes.writeConcurrency);
  const p50s = new Map<number, number>();
  let written = 0;
  for (const count of sizes.versionCounts) {
    const setupStarted = now();
    const from = written + 1;
    const tasks: Array<Promise<unknown>> = [];
    for (let v = from; v <= count; v++) {
      tasks.push(
        limit(() => {
          checkAborted();
          return service.app.store.put(`${versionsKey}${manifestFileName(v, 'V2')}`, manifestBlob());
        }),
      );
    }
    await Promise.all(tasks);
    written = count;
    const setupMs = now() - setupStarted;
    log(`${count} versions written (${count - from + 1} PUTs in ${secs(setupMs)})`);

    checkAborted();
    const seen = await latestVersion(service, table); // also a warm-up
    if (seen !== count) throw new Error(`version/list reported latest ${String(seen)} at ${count} versions`);
    for (let i = 0; i < 5; i++) await latestVersion(service, table);
    const samples: number[] = [];
    for (let i = 0; i < sizes.lookups; i++) {
      const started = now();
      await latestVersion(service, table);
      samples.push(now() - started);
    }
    const s = summarize(samples);
    p50s.set(count, s.p50);
    rows.push({
      metric: `latest lookup at ${count.toLocaleString('en-US')} versions, p50 / p95 (${sizes.lookups} calls)`,
      value: `${ms(s.p50)} / ${ms(s.p95)} ms`,
    });
    rows.push({ metric: `  setup: ${(count - from + 1).toLocaleString('en-US')} manifest PUTs (concurrency ${sizes.writeConcurrency})`, value: secs(setupMs) });
    log(`latest at ${count}: p50 ${ms(s.p50)} ms, p95 ${ms(s.p95)} ms`);
  }
  return p50s;
}

interface BackendResult {
  backend: BackendName;
  rows: Row[];
  single: number;
  parallel: number;
  latest: Map<number, number>;
}

async function runBackend(backend: BackendName, sizes: Sizes, commitsOnly: boolean): Promise<BackendResult> {
  const undoDepth = cleanups.length;
  const service = await startService(backend);
  try {
    await call(service, 'POST', `/v1/namespace/${NAMESPACE}/create`, {});
    const rows: Row[] = [];
    const { single, parallel } = await benchCommits(service, sizes, rows);
    const latest = commitsOnly ? new Map<number, number>() : await benchLatest(service, sizes, rows);
    return { backend, rows, single, parallel, latest };
  } finally {
    // Release this backend's service, root and radosgw before the next backend starts.
    for (const undo of cleanups.splice(undoDepth).reverse()) await undo().catch((e: unknown) => log(`cleanup failed: ${String(e)}`));
  }
}

function printTable(result: BackendResult): void {
  const width = Math.max(...result.rows.map((r) => r.metric.length));
  process.stdout.write(`\n${'backend'.padEnd(8)} ${'metric'.padEnd(width)}  value\n`);
  for (const r of result.rows) process.stdout.write(`${result.backend.padEnd(8)} ${r.metric.padEnd(width)}  ${r.value}\n`);
}

function summaryLine(results: BackendResult[]): string {
  return results
    .map((r) => {
      const latest = [...r.latest.entries()].map(([n, p50]) => `${n >= 1000 ? `${n / 1000}k` : n}: ${ms(p50)} ms`).join(', ');
      return `${r.backend}: ${r.single.toFixed(0)} commits/s on 1 table, ${r.parallel.toFixed(0)} commits/s on 16 tables; latest lookup p50 ${latest}`;
    })
    .join(' | ');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    strict: true,
    options: { backend: { type: 'string', default: 'both' }, quick: { type: 'boolean', default: false }, 'commits-only': { type: 'boolean', default: false } },
  });
  const which = values.backend;
  if (which !== 'local' && which !== 'rgw' && which !== 'both') throw new Error(`--backend must be local, rgw or both, not ${JSON.stringify(which)}`);
  const backends: BackendName[] = which === 'both' ? ['local', 'rgw'] : [which];
  const quick = values.quick === true;
  const sizes: Sizes = {
    singleCommits: quick ? 100 : 500,
    parallelTables: 16,
    commitsPerTable: quick ? 20 : 100,
    versionCounts: quick ? [100, 10_000] : [100, 10_000, 100_000],
    lookups: 200,
    writeConcurrency: 64,
  };
  log(`${os.cpus().length} cores, node ${process.version}, backends ${backends.join(', ')}${quick ? ', quick' : ''}`);
  const results: BackendResult[] = [];
  for (const backend of backends) {
    const started = now();
    results.push(await runBackend(backend, sizes, values['commits-only'] === true));
    log(`${backend} done in ${secs(now() - started)}`);
  }
  for (const r of results) printTable(r);
  process.stdout.write(`\nsummary: ${summaryLine(results)}\n`);
}

runMain(main);
