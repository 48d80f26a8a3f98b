import { z } from 'zod';
import { Ignored, RequestBase, ResponseBase } from './common.js';

// Materialized views (POST /v1/materialized_view/{id}/create and /refresh), as Geneva (LanceDB's
// feature-engineering client) sends them in remote mode. A view is a catalog table whose rows a
// refresh job recomputes from its source query; the job is a transaction (DescribeTransaction /
// AlterTransaction) with a row in Geneva's job table, like a backfill.

const Tuning = (description: string) =>
  z
    .number()
    .int()
    .min(0)
    .nullable()
    .optional()
    .meta({ description: `${description} Accepted; a refresh runs as one job on the replica holding its lease.` });

export const MaterializedViewKind = z.enum(['query', 'udtf', 'chunker']).meta({
  description:
    '`query`: a filter and projection of a source table, with optional Python UDF columns, one view row per source row. `chunker`: each source row of the query ' +
    'handed to a Geneva chunker (udtf_spec), which yields zero or more view rows (`__source_row_id`, `__child_index`, the inherited columns, its outputs). ' +
    "`udtf`: a Geneva UDTF (udtf_spec) handed the source query, its rows the view's. `chunker` and `udtf` need udf_execution, like UDF columns.",
});

export const MaterializedViewUdtfEntry = z
  .object({
    kind: z.enum(['udtf', 'chunker']),
    udtf: z.string().meta({ description: 'Base64 of the UDTFSpec / ChunkerSpec JSON envelope.' }),
    udtf_sha: z.string().meta({ description: 'SHA-256 of the envelope.' }),
    udtf_name: z.string(),
    udtf_version: z.string(),
    input_columns: z.array(z.string().min(1)).nullable().optional(),
    partition_by: z.string().min(1).nullable().optional(),
    partition_by_indexed_column: z.string().min(1).nullable().optional(),
    num_cpus: z.number().nullable().optional(),
    num_gpus: z.number().nullable().optional(),
    memory: z.number().int().nullable().optional(),
    error_handling: z.record(z.string(), z.unknown()).nullable().optional(),
    batch: z.boolean().nullable().optional(),
    manifest: z.string().nullable().optional(),
    manifest_checksum: z.string().nullable().optional(),
  })
  .meta({ id: 'MaterializedViewUdtfEntry', description: 'The UDTF of a `udtf` view or the chunker of a `chunker` view.' });
export type MaterializedViewUdtfEntry = z.infer<typeof MaterializedViewUdtfEntry>;

export const CreateMaterializedViewRequest = z
  .object({
    ...RequestBase,
    kind: MaterializedViewKind,
    source_query: z
      .string()
      .min(1)
      .meta({
        description:
          "Geneva's GenevaQuery JSON: `source_table` (a table of the root namespace), `base` (filter, columns as a list of names, a map of " +
          'name to SQL, or [name, SQL] pairs, limit, offset), fragment_ids, shuffle, and `column_udfs` (Python UDF columns: output_name, ' +
          'output_index, input_columns, udf {backend "DockerUDFSpecV1", udf_payload: the JSON envelope}). Vector and full-text searches are not supported.',
      }),
    output_schema: z
      .string()
      .min(1)
      .meta({
        description:
          "Base64 of the view's Arrow schema as one IPC schema message (pyarrow Schema.serialize()): `__source_row_id` int64 and `__is_set` bool first, then the query's columns; " +
          "for kind chunker `__source_row_id` int64 and `__child_index` int32, the inherited columns, then the chunker's outputs; for kind udtf the UDTF's output schema.",
      }),
    udtf_spec: MaterializedViewUdtfEntry.nullable()
      .optional()
      .meta({ description: 'Kinds chunker and udtf: the chunker / UDTF (required). Kind query: null.' }),
    with_no_data: z.boolean().optional().meta({ description: 'Default true. False starts a refresh at once; its job id is in the answer.' }),
    auto_refresh: z.boolean().nullable().optional().meta({ description: 'Only false (or absent) is supported: true is a 406.' }),
  })
  .meta({ id: 'CreateMaterializedViewRequest' });
export type CreateMaterializedViewRequest = z.infer<typeof CreateMaterializedViewRequest>;

export const CreateMaterializedViewResponse = z
  .object({
    ...ResponseBase,
    version: z.number().int().min(0).meta({ description: 'The version of the view table that the create committed.' }),
    job_id: z.string().nullable().optional().meta({ description: "The first refresh's job (a transaction id), when with_no_data was false." }),
  })
  .meta({ id: 'CreateMaterializedViewResponse' });
export type CreateMaterializedViewResponse = z.infer<typeof CreateMaterializedViewResponse>;

export const RefreshMaterializedViewRequest = z
  .object({
    ...RequestBase,
    src_version: z
      .number()
      .int()
      .min(0)
      .nullable()
      .optional()
      .meta({ description: 'The source version to recompute the view from; default the latest when the refresh is asked for.' }),
    max_rows_per_fragment: z.number().int().min(1).nullable().optional().meta({ description: "Rows per data file of the view (default Lance's)." }),
    concurrency: Tuning('Refresh concurrency.'),
    intra_applier_concurrency: Tuning('UDF concurrency inside a worker.'),
    source_task_size: Tuning('Source rows per work item.'),
    cluster: Ignored('Cluster name (Geneva).'),
    output_limit: z
      .number()
      .int()
      .min(0)
      .nullable()
      .optional()
      .meta({ description: "For chunker views only (a 400 on a `query` view): the view keeps at most this many rows, the first in the source's order." }),
    manifest: Ignored('UDF manifest (Geneva).'),
  })
  .meta({ id: 'RefreshMaterializedViewRequest' });
export type RefreshMaterializedViewRequest = z.infer<typeof RefreshMaterializedViewRequest>;

export const RefreshMaterializedViewResponse = z
  .object({
    ...ResponseBase,
    job_id: z.string().meta({
      description:
        'A transaction id: DescribeTransaction reports the refresh (Queued, Running, Succeeded, Failed or Canceled) with the properties ' +
        'src_version, rows_refreshed, last_committed_version and error; Geneva follows it through its row in __system$geneva_jobs.',
    }),
  })
  .meta({ id: 'RefreshMaterializedViewResponse' });
export type RefreshMaterializedViewResponse = z.infer<typeof RefreshMaterializedViewResponse>;
