import { z } from 'zod';
import { Ignored, RequestBase, ResponseBase } from './common.js';

// AlterTableBackfillColumns (POST /v1/table/{id}/backfill_column): an asynchronous job that fills
// a computed or virtual column, tracked as a transaction (DescribeTransaction / AlterTransaction).

const Count = (description: string) => z.number().int().min(1).nullable().optional().meta({ description });

export const AlterTableBackfillColumnsRequest = z
  .object({
    ...RequestBase,
    column: z.string().min(1).meta({
      description: 'The column to fill: a top-level column bound to SQL (add_columns `computed` or alter_columns `virtual_column` with udf_backend "sql").',
    }),
    branch: z
      .string()
      .nullable()
      .optional()
      .meta({ description: 'Branch whose column to fill (absent, null, "" or "main": main); a Python UDF column only on main (406 otherwise).' }),
    where: z.string().nullable().optional().meta({
      description:
        'SQL filter: only matching rows are filled (virtual SQL columns; a Lance computed column is always refreshed whole, so a filter on one is a 406).',
    }),
    read_version: z.number().int().min(0).nullable().optional().meta({
      description:
        "Version whose rows (matching `where`) the job plans its chunks over; default the latest when the job starts. Values are computed from each row's current inputs.",
    }),
    checkpoint_size: Count('Rows per chunk (checkpoint). Default: task_size, else 10,000; clamped to [min_checkpoint_size, max_checkpoint_size].'),
    min_checkpoint_size: Count('Lower bound of the chunk size.'),
    max_checkpoint_size: Count('Upper bound of the chunk size.'),
    task_size: Count('Rows per chunk when checkpoint_size is not given.'),
    commit_granularity: Count(
      'Chunks per commit (default 1): that many consecutive chunks are written in one Lance commit, and progress is checkpointed after each commit.',
    ),
    num_frags: Count('Only the first num_frags fragments (by fragment id) holding matching rows are filled.'),
    concurrency: Count("Accepted; chunks run one after another on the replica holding the job's lease."),
    intra_applier_concurrency: Count('Accepted; see concurrency.'),
    batch_checkpoint_flush_interval_seconds: z.number().min(0).nullable().optional().meta({ description: 'Accepted; progress is flushed at every commit.' }),
    cluster: Ignored('Cluster name (Geneva).'),
    manifest: Ignored('UDF manifest name (Geneva).'),
  })
  .meta({ id: 'AlterTableBackfillColumnsRequest' });
export type AlterTableBackfillColumnsRequest = z.infer<typeof AlterTableBackfillColumnsRequest>;

export const AlterTableBackfillColumnsResponse = z
  .object({
    ...ResponseBase,
    job_id: z.string().meta({
      description:
        'A transaction id: DescribeTransaction reports the job (Queued, Running, Succeeded, Failed or Canceled) and its progress in the ' +
        'properties rows_total, rows_done, chunks_total, chunks_done, last_committed_version and error; AlterTransaction setting ' +
        'status Canceled stops it at its next checkpoint.',
    }),
  })
  .meta({ id: 'AlterTableBackfillColumnsResponse' });
export type AlterTableBackfillColumnsResponse = z.infer<typeof AlterTableBackfillColumnsResponse>;
