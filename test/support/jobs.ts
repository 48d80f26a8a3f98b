import { arrow } from '../../src/engine/arrow.js';
import type { TestApp } from './app.js';
import { connectTable } from './arrow-data.js';

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

/** A job's row in Geneva's job table. */
export interface GenevaJobRow {
  status: string;
  column_name: string;
  metrics: string[];
}

/**
 * The job's one row in Geneva's job table (`__system$geneva_jobs` at `location`) once its status is
 * `status` (the row follows the job's record a moment later); fails naming the rows found when it
 * does not come to that within about 20 s.
 */
export async function waitForGenevaJobRow(location: string, storageOptions: Record<string, string>, jobId: string, status: string): Promise<GenevaJobRow> {
  const jobTable = await connectTable(location, storageOptions);
  try {
    for (let i = 0; ; i++) {
      const rows = (await jobTable.query().where(`job_id = '${jobId}'`).toArray()) as Array<{
        status: string;
        column_name: string;
        metrics: { toArray(): string[] };
      }>;
      const row = rows[0];
      if (rows.length === 1 && row?.status === status) return { status: row.status, column_name: row.column_name, metrics: row.metrics.toArray() };
      if (i > 400) throw new Error(`job ${jobId}: its rows in __system$geneva_jobs are ${JSON.stringify(rows.map((r) => r.status))}, not one ${status}`);
      await new Promise((r) => setTimeout(r, 50));
      await jobTable.checkoutLatest();
    }
  } finally {
    jobTable.close();
  }
}
