import { z } from 'zod';
import type { RowIdLayout } from '../../engine/ports/columns.js';

// The plan of a backfill job as its transaction record keeps it (`job`), how a table's rows are cut
// into chunks of Lance row ids, and the SQL the runner writes chunks with. See job-runner.ts
// for the protocol.

export const DEFAULT_CHUNK_ROWS = 10_000;

const Chunk = z.object({ lo: z.string(), hi: z.string(), rows: z.number().int().min(0) });
export type Chunk = z.infer<typeof Chunk>;

export const BackfillJob = z.object({
  kind: z.literal('backfill_column'),
  table_id: z.array(z.string()),
  /** The branch the job fills the column on; main when absent. */
  branch: z.string().optional(),
  column: z.string(),
  /**
   * `update`: a virtual SQL column written chunk by chunk; `refresh`: a Lance computed column
   * refreshed by Lance; `udf`: a Geneva Python UDF column, each chunk computed and written by the
   * engine's UDF workers.
   */
  mode: z.enum(['update', 'refresh', 'udf']),
  /** The SQL of `update` and `refresh` (empty for `udf`). */
  expression: z.string(),
  /** The UDF of `udf`: its envelope's path in the table directory and the columns it reads. */
  udf: z.object({ path: z.string(), inputs: z.array(z.string()).nullable() }).optional(),
  where: z.string().optional(),
  read_version: z.number().int().min(0).optional(),
  chunk_rows: z.number().int().min(1),
  commit_granularity: z.number().int().min(1),
  num_frags: z.number().int().min(1).optional(),
  plan: z
    .object({
      version: z.number().int().min(0),
      rows: z.number().int().min(0),
      chunks: z.array(Chunk),
      /** The lowest row id of a fragment created after the plan's version (`udf` sweeps from there). */
      fresh_from: z.string().optional(),
    })
    .optional(),
  chunks_done: z.number().int().min(0).default(0),
  rows_done: z.number().int().min(0).default(0),
  rows_written: z.number().int().min(0).default(0),
  swept: z.boolean().optional(),
  attempts: z.number().int().min(0).default(0),
  owner: z.string().optional(),
  lease_until: z.string().optional(),
});
export type BackfillJob = z.infer<typeof BackfillJob>;

/** A column name as a Lance SQL identifier. */
export const sqlIdentifier = (name: string): string => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : `\`${name.replace(/`/g, '``')}\``);

/** Rows whose value differs from the expression (nulls compare equal to nulls). */
export const mismatchFilter = (column: string, expression: string): string => {
  const c = sqlIdentifier(column);
  return `NOT ((${c} IS NULL AND (${expression}) IS NULL) OR coalesce(${c} = (${expression}), false))`;
};

/**
 * Splits the rows of a layout into row-id ranges of about `chunkRows` rows: small fragments
 * share a range, a large fragment is cut into equal offset windows. Only the first `numFrags`
 * fragments are planned when given.
 */
export function planChunks(layout: RowIdLayout, chunkRows: number, numFrags?: number): Chunk[] {
  const fragments = numFrags === undefined ? layout.fragments : layout.fragments.slice(0, numFrags);
  const chunks: Chunk[] = [];
  let open: { lo: bigint; hi: bigint; rows: number } | null = null;
  const flush = () => {
    if (open) chunks.push({ lo: open.lo.toString(), hi: open.hi.toString(), rows: open.rows });
    open = null;
  };
  for (const f of fragments) {
    if (f.rows === 0) continue;
    const base = BigInt(f.fragment) << 32n;
    const lo = base + BigInt(f.minOffset);
    const hi = base + BigInt(f.maxOffset) + 1n;
    if (f.rows > chunkRows) {
      flush();
      const k = Math.ceil(f.rows / chunkRows);
      const span = f.maxOffset + 1 - f.minOffset;
      for (let j = 0; j < k; j++) {
        const a = f.minOffset + Math.floor((span * j) / k);
        const b = f.minOffset + Math.floor((span * (j + 1)) / k);
        const rows = Math.round((f.rows * (j + 1)) / k) - Math.round((f.rows * j) / k);
        if (b > a) chunks.push({ lo: (base + BigInt(a)).toString(), hi: (base + BigInt(b)).toString(), rows });
      }
    } else if (open !== null && (open as { rows: number }).rows + f.rows <= chunkRows) {
      const o = open as { lo: bigint; hi: bigint; rows: number };
      o.hi = hi;
      o.rows += f.rows;
    } else {
      flush();
      open = { lo, hi, rows: f.rows };
    }
  }
  flush();
  return chunks;
}
