// Benchmark of the largest batches: how long one BatchCommitTables or BatchCreateTableVersions
// takes, by its number of items, on a local root and on S3 (docs/benchmarks/batches-2026-11-27.md
// records a run; the default of --max-batch-operations and --max-batch-entries is sized from it).
//
//   npx tsx scripts/bench-batches.ts [--backend local|rgw|both] [--sizes 100,500,1000] [--runs 1]
//   npm run bench:batches -- --backend local
//
// Starts the service in-process (createApp, listening on 127.0.0.1:0, logs silent) on a fresh
// temporary local root and/or on a throwaway Ceph radosgw started here (test/support/s3-server.ts),
// with the batch limits raised to the largest size, then times over real HTTP, for each size N:
//   1. BatchCommitTables of N declare_table operations (new tables in one namespace): what the 50,000-declare batch was made of;
//   2. BatchCreateTableVersions of N entries: version 1 of each of those N tables, each from a
//      small Lance manifest staged first through the service's store, as a Lance writer does;
//   3. BatchCommitTables of N operations, N/2 declares and the first version of each of them;
//   4. BatchCommitTables of one delete_table_versions deleting N versions of one table (committed
//      first by one BatchCreateTableVersions of versions 1..N of it).
// Each batch is one request, answered once the batch is finished (committed, cleaned up).
// Temporary roots and the radosgw are removed at exit, also on errors and on Ctrl-C.

import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import pLimit from 'p-limit';
import { tableDirKey, VERSIONS_DIR } from '../src/service/catalog/layout.js';
import { manifestBytes } from '../test/support/manifests.js';
import { type BenchService, checkAborted, runMain, secs, startBenchService } from './bench-support.js';

type BackendName = 'local' | 'rgw';

const NAMESPACE = 'bench';
/** Concurrent PUTs while staging manifests (setup, not timed). */
const STAGE_CONCURRENCY = 16;

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

async function call(service: BenchService, route: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${service.baseUrl}${route}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${route} -> ${res.status}: ${text.slice(0, 300)}`);
  return text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
}

/** Stages a manifest of each version of each table, as a Lance writer does; returns each one's path relative to its table. */
async function stageManifests(service: BenchService, versions: Array<{ table: string; version: number }>): Promise<string[]> {
  const limit = pLimit(STAGE_CONCURRENCY);
  return Promise.all(
    versions.map(({ table, version }) =>
      limit(async () => {
        const relative = `${VERSIONS_DIR}/${version}.manifest-${randomUUID()}`;
        await service.app.store.put(`${tableDirKey({ namespace: [NAMESPACE], name: table })}${relative}`, manifestBytes(version));
        return relative;
      }),
    ),
  );
}

const firstVersions = (tables: string[]) => tables.map((table) => ({ table, version: 1 }));

/** Times one batch request (ms). */
async function timed(service: BenchService, route: string, body: unknown): Promise<number> {
  checkAborted();
  const started = performance.now();
  await call(service, route, body);
  return performance.now() - started;
}

interface Row {
  backend: BackendName;
  size: number;
  what: string;
  ms: number;
}

async function benchBackend(backend: BackendName, sizes: number[], runs: number, rows: Row[]): Promise<void> {
  const largest = Math.max(...sizes);
  const service = await startBenchService(backend, log, 'lance-ns-bench-batches-', [
    '--max-batch-operations',
    String(largest),
    '--max-batch-entries',
    String(largest),
    '--max-batch-deleted-versions',
    String(largest),
  ]);
  await call(service, `/v1/namespace/${NAMESPACE}/create`, {});
  let serial = 0;
  const names = (n: number, prefix: string) => Array.from({ length: n }, () => `${prefix}${serial++}`);
  for (const size of sizes) {
    for (let run = 0; run < runs; run++) {
      const declared = names(size, 'd');
      const declareMs = await timed(service, '/v1/table/batch-commit', { operations: declared.map((name) => ({ declare_table: { id: [NAMESPACE, name] } })) });
      rows.push({ backend, size, what: `BatchCommitTables, ${size} declare_table`, ms: declareMs });
      log(`${backend}: ${size} declares in ${secs(declareMs)}`);

      const staged = await stageManifests(service, firstVersions(declared));
      const entries = declared.map((name, i) => ({ id: [NAMESPACE, name], version: 1, manifest_path: staged[i] }));
      const versionsMs = await timed(service, '/v1/table/version/batch-create', { entries });
      rows.push({ backend, size, what: `BatchCreateTableVersions, ${size} entries (v1 of ${size} tables)`, ms: versionsMs });
      log(`${backend}: ${size} versions in ${secs(versionsMs)}`);

      const mixed = names(Math.floor(size / 2), 'm');
      const mixedStaged = await stageManifests(service, firstVersions(mixed));
      const operations = [
        ...mixed.map((name) => ({ declare_table: { id: [NAMESPACE, name] } })),
        ...mixed.map((name, i) => ({ create_table_version: { id: [NAMESPACE, name], version: 1, manifest_path: mixedStaged[i] } })),
      ];
      const mixedMs = await timed(service, '/v1/table/batch-commit', { operations });
      rows.push({ backend, size, what: `BatchCommitTables, ${mixed.length} declares + their v1`, ms: mixedMs });
      log(`${backend}: ${mixed.length} declares + versions in ${secs(mixedMs)}`);

      const [long = ''] = names(1, 'v');
      await call(service, `/v1/table/${NAMESPACE}$${long}/declare`, {});
      const history = await stageManifests(
        service,
        Array.from({ length: size }, (_, i) => ({ table: long, version: i + 1 })),
      );
      await call(service, '/v1/table/version/batch-create', {
        entries: history.map((path, i) => ({ id: [NAMESPACE, long], version: i + 1, manifest_path: path })),
      });
      const deleteMs = await timed(service, '/v1/table/batch-commit', {
        operations: [{ delete_table_versions: { id: [NAMESPACE, long], ranges: [{ start_version: 1, end_version: -1 }] } }],
      });
      rows.push({ backend, size, what: `BatchCommitTables, delete_table_versions of ${size} versions`, ms: deleteMs });
      log(`${backend}: ${size} versions deleted in ${secs(deleteMs)}`);
    }
  }
}

runMain(async () => {
  const { values } = parseArgs({
    options: {
      backend: { type: 'string', default: 'both' },
      sizes: { type: 'string', default: '100,500,1000' },
      runs: { type: 'string', default: '1' },
    },
  });
  const backend = values.backend;
  if (backend !== 'local' && backend !== 'rgw' && backend !== 'both') throw new Error('--backend: local, rgw or both');
  const chosen: BackendName[] = backend === 'both' ? ['local', 'rgw'] : [backend];
  const sizes = values.sizes.split(',').map((s) => Number(s));
  if (sizes.some((s) => !Number.isSafeInteger(s) || s < 2)) throw new Error('--sizes: comma-separated integers of at least 2');
  const runs = Number(values.runs);
  const rows: Row[] = [];
  for (const b of chosen) await benchBackend(b, sizes, runs, rows);
  console.log('\nbackend  items  batch                                                    answered in');
  for (const row of rows) console.log(`${row.backend.padEnd(8)} ${String(row.size).padStart(5)}  ${row.what.padEnd(56)} ${secs(row.ms).padStart(9)}`);
});
