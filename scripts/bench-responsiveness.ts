// How responsive the service stays while it takes the largest inputs it accepts (issue 8, point 10).
// Starts the service as its own process over a temporary local root, then, for each workload,
// probes GET /health/live every 10 ms (from a thread of its own) while the workload runs and
// prints the probes' latencies and the service's resident memory. A figure, not a test: on a loaded machine the numbers move.
//
//   npx tsx scripts/bench-responsiveness.ts [--arrow-mib 240]

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { arrow } from '../src/engine/arrow.js';
import { type ServiceProcess, startServiceProcess } from '../test/support/service-process.js';
import { cleanups, ms, percentile, runMain } from './bench-support.js';

const { values } = parseArgs({ options: { 'arrow-mib': { type: 'string' } } });
const ARROW_MIB = Number(values['arrow-mib'] ?? 240);
const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

/** An Arrow IPC stream of one int64 column, about `mib` MiB. */
function arrowBody(mib: number): Buffer {
  const rows = Math.floor((mib * 1024 * 1024) / 8);
  const ids = new BigInt64Array(rows);
  for (let i = 0; i < rows; i++) ids[i] = BigInt(i);
  return Buffer.from(arrow.tableToIPC(new arrow.Table({ id: arrow.vectorFromArray(ids) }), 'stream'));
}

/** The largest JSON body accepted with default limits: a full properties map plus padding up to 4 MiB. */
function largestJson(): Buffer {
  const properties = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`key-${i}`, 'v'.repeat(240)]));
  const skeleton = JSON.stringify({ properties, padding: '' });
  return Buffer.from(JSON.stringify({ properties, padding: 'x'.repeat(4 * 1024 * 1024 - skeleton.length - 16) }));
}

async function rssMib(pid: number | undefined): Promise<number> {
  if (pid === undefined) return Number.NaN;
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
  return kib / 1024;
}

// The prober runs on a thread of its own: the thread that uploads a 240 MiB body stalls for
// hundreds of ms itself, and probes sent from it would charge that stall to the service.
const PROBER = `
const { parentPort, workerData } = require('node:worker_threads');
const probes = [];
let done = false;
parentPort.once('message', () => (done = true));
(async () => {
  while (!done) {
    const started = performance.now();
    await fetch(workerData.url + '/health/live').then((r) => r.text());
    probes.push(performance.now() - started);
    await new Promise((r) => setTimeout(r, 10));
  }
  parentPort.postMessage(probes);
})();
`;

/** Runs `work` while probing the health check from another thread; the probes' latencies in ms. */
async function probed(service: ServiceProcess, work: () => Promise<string>): Promise<{ outcome: string; probes: number[] }> {
  const prober = new Worker(PROBER, { eval: true, workerData: { url: service.url } });
  const probes = new Promise<number[]>((resolve, reject) => {
    prober.once('message', (latencies: number[]) => resolve(latencies));
    prober.once('error', reject);
  });
  const outcome = await work().finally(() => prober.postMessage('stop'));
  const latencies = await probes;
  await prober.terminate();
  return { outcome, probes: latencies };
}

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lance-ns-bench-resp-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  // At the default info level: startServiceProcess waits for the 'Server listening' line.
  const service = await startServiceProcess({ args: ['--root', dir] });
  cleanups.push(async () => {
    service.child.kill('SIGTERM');
    await service.exited;
  });
  await service.call('POST', '/v1/namespace/ns/create', {});
  const json = largestJson();
  const million = Buffer.from(JSON.stringify({ properties: Object.fromEntries(Array.from({ length: 1_000_000 }, (_, i) => [`k${i}`, 'v'])) }));
  const big = arrowBody(ARROW_MIB);
  let n = 0;
  // A body refused from its Content-Length is answered before it is read, and the connection is
  // then closed under the upload: the client may see that as a reset rather than the 413.
  const post = async (pathAndQuery: string, body: Buffer, headers: Record<string, string> = {}): Promise<number | 'reset'> => {
    try {
      const res = await fetch(`${service.url}${pathAndQuery}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
      await res.arrayBuffer();
      return res.status;
    } catch {
      return 'reset';
    }
  };
  const workloads: Array<[string, () => Promise<string>]> = [
    [
      'idle (1 s)',
      async () => {
        await new Promise((r) => setTimeout(r, 1000));
        return '-';
      },
    ],
    [
      `largest accepted JSON (${(json.length / 2 ** 20).toFixed(1)} MiB) x5`,
      async () => {
        const statuses = [];
        for (let i = 0; i < 5; i++) statuses.push(await post(`/v1/table/ns%24json${n++}/declare`, json));
        return statuses.join(' ');
      },
    ],
    [
      `a million properties (${(million.length / 2 ** 20).toFixed(1)} MiB) x3`,
      async () => {
        const statuses = [];
        for (let i = 0; i < 3; i++) statuses.push(await post(`/v1/table/ns%24million${n++}/declare`, million));
        return statuses.join(' ');
      },
    ],
    [`largest Arrow body (${(big.length / 2 ** 20).toFixed(0)} MiB)`, async () => String(await post(`/v1/table/ns%24arrow${n++}/create`, big, ARROW))],
    [`three such Arrow bodies at once`, async () => (await Promise.all([0, 1, 2].map(() => post(`/v1/table/ns%24arrow${n++}/create`, big, ARROW)))).join(' ')],
  ];
  const rows: string[] = ['| workload | statuses | health probes | p50 / p99 / max ms | service RSS after, MiB |', '|---|---|---|---|---|'];
  for (const [name, work] of workloads) {
    const { outcome, probes } = await probed(service, work);
    const sorted = [...probes].sort((a, b) => a - b);
    const rss = await rssMib(service.child.pid);
    rows.push(
      `| ${name} | ${outcome} | ${probes.length} | ${ms(percentile(sorted, 50))} / ${ms(percentile(sorted, 99))} / ${ms(sorted[sorted.length - 1] ?? Number.NaN)} | ${rss.toFixed(0)} |`,
    );
    process.stdout.write(`${rows[rows.length - 1]}\n`);
  }
  process.stdout.write(`\n${rows.join('\n')}\n`);
}

runMain(main);
