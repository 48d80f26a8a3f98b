// Benchmark of branches: a write and a read on a branch beside the same on main, and
// ListTableBranches of many branches.
//
//   npx tsx scripts/bench-branches.ts [--backend local|rgw] [--iterations N] [--branches N]
//   npm run bench:branches -- --backend rgw
//
// Starts the service in-process (startBenchService) on a fresh root, creates a table of 1,000 rows
// and forks the branch "dev" from it, then times, alternating main and the branch (and rotating
// which goes first) so both see the same machine load:
//   update 1 row   POST /v1/table/{id}/update (one row by id; a commit)
//   insert 10 rows POST /v1/table/{id}/insert (an Arrow stream; a data write and a commit)
//   count rows     POST /v1/table/{id}/count_rows
// and prints each median and 95th percentile with the branch / main ratio (issue 30 asks 1.2x at
// most for the writes). Then it forks --branches branches and times ListTableBranches of all of
// them in one page (one LIST of the refs and one GET per branch), and of a page of 100.

import { parseArgs } from 'node:util';
import { peopleStream } from '../test/support/arrow-data.js';
import { ms, now, runMain, type Summary, startBenchService, summarize } from './bench-support.js';

const TABLE = '/v1/table/bench%24t';

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { backend: { type: 'string', default: 'local' }, iterations: { type: 'string', default: '30' }, branches: { type: 'string', default: '1000' } },
  });
  const backend = values.backend === 'rgw' ? 'rgw' : 'local';
  const iterations = Number(values.iterations);
  const branchCount = Number(values.branches);
  const { baseUrl } = await startBenchService(backend, log, 'lance-bench-branches-');
  const call = async (method: string, path: string, body?: unknown, arrowBody = false): Promise<Response> => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { 'content-type': arrowBody ? 'application/vnd.apache.arrow.stream' : 'application/json' },
      body: body === undefined ? undefined : arrowBody ? new Uint8Array(body as Buffer) : JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    await res.arrayBuffer();
    return res;
  };
  await call('POST', '/v1/namespace/bench/create', {});
  await call('POST', `${TABLE}/create`, peopleStream(Array.from({ length: 1000 }, (_, i) => i)), true);
  await call('POST', `${TABLE}/branches/create`, { name: 'dev' });

  let nextId = 1_000_000;
  const ops: Array<[string, (branch: string | null) => Promise<unknown>]> = [
    ['update 1 row', (branch) => call('POST', `${TABLE}/update`, { ...(branch ? { branch } : {}), updates: [['name', "'u'"]], predicate: 'id = 7' })],
    [
      'insert 10 rows',
      (branch) => {
        nextId += 10;
        return call('POST', `${TABLE}/insert${branch ? `?branch=${branch}` : ''}`, peopleStream(Array.from({ length: 10 }, (_, i) => nextId + i)), true);
      },
    ],
    ['count rows', (branch) => call('POST', `${TABLE}/count_rows`, branch ? { branch } : {})],
  ];
  console.log(`branches on ${backend}: ${iterations} runs each, main and branch alternating`);
  for (const [label, op] of ops) {
    for (let i = 0; i < 3; i++) for (const branch of [null, 'dev']) await op(branch);
    const samples: Record<'main' | 'dev', number[]> = { main: [], dev: [] };
    for (let i = 0; i < iterations; i++) {
      const order: Array<string | null> = i % 2 === 0 ? [null, 'dev'] : ['dev', null];
      for (const branch of order) {
        const started = now();
        await op(branch);
        samples[branch ? 'dev' : 'main'].push(now() - started);
      }
    }
    const m: Summary = summarize(samples.main);
    const b: Summary = summarize(samples.dev);
    console.log(
      `${label.padEnd(16)} main p50 ${ms(m.p50).padStart(7)} ms p95 ${ms(m.p95).padStart(7)} ms | branch p50 ${ms(b.p50).padStart(7)} ms p95 ${ms(b.p95).padStart(7)} ms | branch/main ${(b.p50 / m.p50).toFixed(2)}x`,
    );
  }

  const started = now();
  for (let i = 0; i < branchCount; i += 8) {
    await Promise.all(
      Array.from({ length: Math.min(8, branchCount - i) }, (_, j) => call('POST', `${TABLE}/branches/create`, { name: `b${String(i + j).padStart(5, '0')}` })),
    );
  }
  log(`forked ${branchCount} branches in ${ms(now() - started)} ms`);
  for (const [label, query] of [
    [`ListTableBranches, ${branchCount + 1} branches in one page`, `?limit=${branchCount + 1}`],
    [`ListTableBranches, a page of 100 of ${branchCount + 1}`, '?limit=100'],
  ] as const) {
    const samples: number[] = [];
    for (let i = 0; i < Math.max(5, Math.floor(iterations / 3)); i++) {
      const t = now();
      await call('GET', `${TABLE}/branches/list${query}`);
      samples.push(now() - t);
    }
    const s = summarize(samples);
    console.log(`${label.padEnd(48)} p50 ${ms(s.p50).padStart(7)} ms p95 ${ms(s.p95).padStart(7)} ms`);
  }
}

runMain(main);
