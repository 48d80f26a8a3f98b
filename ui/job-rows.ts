import { type Data, type Table, type Timestamp, TimeUnit, tableFromIPC, type Vector } from 'apache-arrow';

// Rows of Geneva's job table (`__system$geneva_jobs`) out of QueryTable's Arrow IPC file. This
// module, and apache-arrow with it, is loaded only when the jobs list is shown (a chunk of its own,
// see scripts/build-ui.ts), so the console's other pages do not carry the Arrow reader.
// Times are kept in microseconds (bigint), as the table stores them: a page boundary named in a
// filter must fall exactly between two rows.

/** One job as its row says (columns the query did not ask for are null). */
export interface JobRow {
  jobId: string;
  tableName: string | null;
  columnName: string | null;
  jobType: string | null;
  status: string | null;
  launchedAt: bigint | null;
  updatedAt: bigint | null;
  /** The `rows_checkpointed` metric, when the row has one. */
  progress: JobProgress | null;
}

export interface JobProgress {
  n: number;
  total: number;
  done: boolean;
}

const MICROS_PER: Record<TimeUnit, bigint> = {
  [TimeUnit.SECOND]: 1_000_000n,
  [TimeUnit.MILLISECOND]: 1000n,
  [TimeUnit.MICROSECOND]: 1n,
  [TimeUnit.NANOSECOND]: 1n, // divided below
};

/** A timestamp column's values in microseconds (null where null), or nulls when the table has no such column. */
function micros(table: Table, name: string): Array<bigint | null> {
  const column = table.getChild(name) as Vector<Timestamp> | null;
  if (!column) return new Array<bigint | null>(table.numRows).fill(null);
  const unit = column.type.unit;
  const out: Array<bigint | null> = [];
  for (const data of column.data as Array<Data<Timestamp>>) {
    // Like apache-arrow's own getter: a chunk's values start at its first row.
    const values = data.values as unknown as BigInt64Array;
    for (let i = 0; i < data.length; i++) {
      const raw = values[i];
      if (!data.getValid(i) || raw === undefined) out.push(null);
      else out.push(unit === TimeUnit.NANOSECOND ? raw / 1000n : raw * MICROS_PER[unit]);
    }
  }
  return out;
}

function strings(table: Table, name: string): Array<string | null> {
  const column = table.getChild(name);
  const out: Array<string | null> = [];
  for (let i = 0; i < table.numRows; i++) {
    const value: unknown = column?.get(i);
    out.push(typeof value === 'string' ? value : null);
  }
  return out;
}

/** The `rows_checkpointed` entry of a row's metrics (JSON strings `{name, n, total, done, desc}`). */
function progressOf(metrics: unknown): JobProgress | null {
  const list = metrics as { toArray?: () => unknown[] } | null;
  for (const entry of list?.toArray?.() ?? []) {
    if (typeof entry !== 'string') continue;
    try {
      const m = JSON.parse(entry) as { name?: unknown; n?: unknown; total?: unknown; done?: unknown };
      if (m.name === 'rows_checkpointed' && typeof m.n === 'number' && typeof m.total === 'number') return { n: m.n, total: m.total, done: m.done === true };
    } catch {
      // A metric that is not JSON is not shown.
    }
  }
  return null;
}

/** The job rows of a QueryTable answer. */
export function readJobRows(ipc: ArrayBuffer): JobRow[] {
  const table = tableFromIPC(new Uint8Array(ipc));
  const ids = strings(table, 'job_id');
  const tables = strings(table, 'table_name');
  const columns = strings(table, 'column_name');
  const types = strings(table, 'job_type');
  const statuses = strings(table, 'status');
  const launched = micros(table, 'launched_at');
  const updated = micros(table, 'updated_at');
  const metrics = table.getChild('metrics');
  const rows: JobRow[] = [];
  for (let i = 0; i < table.numRows; i++) {
    rows.push({
      jobId: ids[i] ?? '',
      tableName: tables[i] ?? null,
      columnName: columns[i] ?? null,
      jobType: types[i] ?? null,
      status: statuses[i] ?? null,
      launchedAt: launched[i] ?? null,
      updatedAt: updated[i] ?? null,
      progress: metrics ? progressOf(metrics.get(i)) : null,
    });
  }
  return rows;
}

/** The launch times (microseconds) of a QueryTable answer that has only `launched_at`; null times are left out. */
export function readLaunchTimes(ipc: ArrayBuffer): bigint[] {
  return micros(tableFromIPC(new Uint8Array(ipc)), 'launched_at').filter((t): t is bigint => t !== null);
}
