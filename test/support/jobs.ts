import { arrow } from '../../src/engine/arrow.js';
import type { TestApp } from './app.js';

// Backfill jobs through the HTTP API: a table to fill, and waiting for a job to end.

/** Rows {id: int64, x: int64 = id % 97} for ids [from, from + n). */
export function numbersStream(n: number, from = 0): Buffer {
  const ids = new BigInt64Array(n);
  const xs = new BigInt64Array(n);
  for (let i = 0; i < n; i++) {
    ids[i] = BigInt(from + i);
    xs[i] = BigInt((from + i) % 97);
  }
  const table = new arrow.Table({ id: arrow.vectorFromArray(ids), x: arrow.vectorFromArray(xs) });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}


/** Polls DescribeTransaction until `done` holds (or the deadline passes); returns the last answer. */
export async function waitForJob(
  t: Pick<TestApp, 'call'>,
  jobId: string,
  done: (d: { status: string; properties: Record<string, string> }) => boolean = (d) => ['Succeeded', 'Failed', 'Canceled'].includes(d.status),
  timeoutMs = 120_000,
): Promise<{ status: string; properties: Record<string, string> }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await t.call('POST', `/v1/transaction/${jobId}/describe`, {});
    if (res.status !== 200) throw new Error(`describe ${jobId}: ${res.text}`);
    const d = res.json as { status: string; properties: Record<string, string> };
    if (done(d) || Date.now() > deadline) return d;
    await new Promise((r) => setTimeout(r, 50));
  }
}
