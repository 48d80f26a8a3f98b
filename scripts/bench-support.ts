// What the benchmark scripts share: clean-up on every exit path, interruption, percentiles, and
// starting the service under test.

import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { type App, createApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { lancedb, type Table } from '../src/engine/lancedb/table-access.js';
import { startRgw } from '../test/support/s3-server.js';

// ---------------------------------------------------------------------------------------------
// Cleanup: every resource registers an undo step; they run once, newest first, on any exit path.

/** Undo steps registered by a benchmark; they run once, newest first. */
export const cleanups: Array<() => Promise<void>> = [];
let cleaning: Promise<void> | undefined;

export function runCleanups(): Promise<void> {
  cleaning ??= (async () => {
    for (const undo of cleanups.splice(0).reverse()) {
      try {
        await undo();
      } catch (e) {
        process.stderr.write(`cleanup failed: ${e instanceof Error ? e.message : String(e)}\n`);
      }
    }
  })();
  return cleaning;
}

/**
 * Set on SIGINT/SIGTERM: the run stops at its next step and cleans up on its way out (so a radosgw
 * still starting is stopped too); if it has not left after 20 s, cleanup runs from here.
 */
let aborted = false;

export function checkAborted(): void {
  if (aborted) throw new Error('interrupted');
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (aborted) process.exit(130); // a second signal: leave at once
    aborted = true;
    process.exitCode = 130;
    process.stderr.write(`\n${signal}: stopping, then cleaning up (again to leave at once)\n`);
    setTimeout(() => void runCleanups().finally(() => process.exit(130)), 20_000).unref();
  });
}

export const now = (): number => performance.now();

export function percentile(sortedMs: number[], p: number): number {
  if (sortedMs.length === 0) return Number.NaN;
  const index = Math.min(sortedMs.length - 1, Math.max(0, Math.ceil((p / 100) * sortedMs.length) - 1));
  return sortedMs[index] ?? Number.NaN;
}

export interface Summary {
  p50: number;
  p95: number;
  mean: number;
}

export function summarize(samplesMs: number[]): Summary {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const mean = sorted.reduce((s, x) => s + x, 0) / Math.max(1, sorted.length);
  return { p50: percentile(sorted, 50), p95: percentile(sorted, 95), mean };
}

export const ms = (x: number): string => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));
export const secs = (x: number): string => `${(x / 1000).toFixed(1)} s`;

/** Runs `fn` `runs` times, one after another, and prints the median and the 95th percentile. */
export async function timeRuns(label: string, runs: number, fn: () => Promise<unknown>): Promise<void> {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = now();
    await fn();
    samples.push(now() - started);
  }
  const { p50, p95 } = summarize(samples);
  console.log(`${label.padEnd(58)} p50 ${ms(p50).padStart(8)} ms  p95 ${ms(p95).padStart(8)} ms  (${runs} runs)`);
}

/** Runs a benchmark's main, then its clean-up, whatever happens; the exit code says how it ended. */
export function runMain(main: () => Promise<void>): void {
  main()
    .then(() => runCleanups())
    .catch(async (e: unknown) => {
      if (aborted) process.stderr.write('bench interrupted\n');
      else process.stderr.write(`bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      await runCleanups();
      process.exitCode = aborted ? 130 : 1;
    });
}

/** The service under test, in this process, over a fresh root on a local temp dir or a radosgw it starts. */
export interface BenchService {
  app: App;
  baseUrl: string;
}

/** `options`: more command-line options of the service (limits a benchmark goes past). */
export async function startBenchService(
  backend: 'local' | 'rgw',
  log: (line: string) => void,
  tempPrefix: string,
  options: string[] = [],
): Promise<BenchService> {
  let args: string[];
  if (backend === 'local') {
    const dir = await mkdtemp(path.join(os.tmpdir(), tempPrefix));
    cleanups.push(() => rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 }));
    args = ['--root', dir];
  } else {
    log('starting radosgw (first run installs Debian packages)');
    const started = now();
    const rgw = await startRgw();
    cleanups.push(rgw.stop);
    checkAborted();
    log(`radosgw up at ${rgw.server.endpoint} in ${secs(now() - started)}`);
    args = [
      '--root',
      `s3://lance-bench/run-${randomBytes(4).toString('hex')}`,
      '--s3-endpoint',
      rgw.server.endpoint,
      '--s3-region',
      rgw.server.region,
      '--s3-access-key-id',
      rgw.server.accessKeyId,
      '--s3-secret-access-key',
      rgw.server.secretAccessKey,
      '--s3-create-bucket',
      'true',
    ];
  }
  // An empty environment: nothing from the caller's shell (AWS_*, LANCE_NS_*) leaks in.
  const config = loadConfig([...args, ...options, '--host', '127.0.0.1', '--port', '0', '--log-level', 'silent'], {});
  const app = await createApp(config, pino({ level: 'silent' }));
  cleanups.push(() => app.close());
  checkAborted();
  await app.server.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.server.address() as AddressInfo;
  return { app, baseUrl: `http://127.0.0.1:${port}` };
}

// ---------------------------------------------------------------------------------------------
// A dataset opened straight through the engine, without the service: the floor data operations are compared with.

export interface Direct {
  /** The warm handle, kept open for the whole run. */
  table: Table;
  /** Opens the same dataset again on the same connection (the caller closes it). */
  reopen: () => Promise<Table>;
}

/**
 * Opens the dataset straight through @lancedb/lancedb, with readConsistencyInterval 0: it looks for a
 * newer version before every call, as a service serving other writers must (see bench-data.ts).
 */
export async function openDirect(location: string, storageOptions: Record<string, string>): Promise<Direct> {
  const slash = location.lastIndexOf('/');
  const name = location.slice(slash + 1).replace(/\.lance$/, '');
  const db = await lancedb().connect(location.slice(0, slash), { storageOptions, readConsistencyInterval: 0 });
  cleanups.push(async () => db.close());
  const table = await db.openTable(name);
  cleanups.push(async () => table.close());
  return { table, reopen: () => db.openTable(name) };
}
