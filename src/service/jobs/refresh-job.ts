import { z } from 'zod';

// The plan of a materialized view's refresh as its transaction record keeps it (`job`): what the
// view is recomputed from, snapshotted when the refresh was asked for. See job-runner.ts for
// how jobs run.

export const RefreshViewJob = z.object({
  kind: z.literal('refresh_materialized_view'),
  /** The view (the table the job writes, under a write lease). */
  table_id: z.array(z.string()),
  source_id: z.array(z.string()),
  /** The source version the view is recomputed from. */
  src_version: z.number().int().min(0),
  filter: z.string().nullable(),
  /** View columns as Lance SQL over the source row. */
  columns: z.array(z.object({ name: z.string(), sql: z.string() })),
  offset: z.number().int().min(0).nullable(),
  limit: z.number().int().min(0).nullable(),
  /** View columns computed by Python UDFs: their envelopes' paths in the view's directory and the source columns they read. */
  udfs: z.array(z.object({ column: z.string(), path: z.string(), inputs: z.array(z.string()).nullable() })),
  /**
   * Kind `chunker`: the ChunkerSpec's path in the view's directory, the columns it reads and the
   * view columns copied from the source row (`columns` are then what is read of each source row);
   * `output_limit` caps the view's rows. Absent for kind `query`.
   */
  chunker: z
    .object({ path: z.string(), inputs: z.array(z.string()), inherited: z.array(z.string()) })
    .nullable()
    .optional(),
  output_limit: z.number().int().min(0).nullable().optional(),
  /** Kind `udtf`: the UDTFSpec's path in the view's directory, the GenevaQuery JSON it is handed, the column it is run once per value of. */
  udtf: z.object({ path: z.string(), query: z.string(), partition_by: z.string().nullable() }).nullable().optional(),
  max_rows_per_fragment: z.number().int().min(1).nullable(),
  rows_done: z.number().int().min(0).default(0),
  attempts: z.number().int().min(0).default(0),
  owner: z.string().optional(),
  lease_until: z.string().optional(),
});
export type RefreshViewJob = z.infer<typeof RefreshViewJob>;
