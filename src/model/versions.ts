import { z } from 'zod';
import { Context, caseInsensitiveEnum, Identity, PageLimit, PageToken, QueryBoolean, QueryLimit, RequestBase, ResponseBase } from './common.js';

export const ManifestNamingScheme = caseInsensitiveEnum(['V1', 'V2'], 'Naming scheme of manifest files under _versions/.');

const Version = z.number().int().min(0);
const Branch = z.string().nullable().optional().meta({
  description: 'The branch whose own history the request is about; absent, null, "" or "main": main. A branch the table does not have is 404 code 22.',
});

export const TableVersion = z
  .object({
    version: Version,
    manifest_path: z.string(),
    manifest_size: z.number().int().min(0).optional(),
    e_tag: z.string().optional(),
    timestamp_millis: z.number().int().optional(),
    metadata: z.record(z.string(), z.string()).optional(),
  })
  .meta({ id: 'TableVersion' });
export type TableVersion = z.infer<typeof TableVersion>;

const VersionFields = {
  version: Version,
  manifest_path: z.string().min(1),
  manifest_size: z.number().int().min(0).nullable().optional(),
  e_tag: z.string().nullable().optional(),
  metadata: z.record(z.string(), z.string()).nullable().optional(),
  naming_scheme: ManifestNamingScheme.nullable().optional(),
  branch: Branch,
};

export const CreateTableVersionRequest = z.object({ ...RequestBase, ...VersionFields }).meta({ id: 'CreateTableVersionRequest' });
export type CreateTableVersionRequest = z.infer<typeof CreateTableVersionRequest>;

export const CreateTableVersionResponse = z
  .object({ ...ResponseBase, transaction_id: z.string().optional(), version: TableVersion })
  .meta({ id: 'CreateTableVersionResponse' });
export type CreateTableVersionResponse = z.infer<typeof CreateTableVersionResponse>;

export const DescribeTableVersionRequest = z
  .object({ ...RequestBase, version: Version.nullable().optional(), branch: Branch })
  .meta({ id: 'DescribeTableVersionRequest' });

export const DescribeTableVersionResponse = z.object({ ...ResponseBase, version: TableVersion }).meta({ id: 'DescribeTableVersionResponse' });
export type DescribeTableVersionResponse = z.infer<typeof DescribeTableVersionResponse>;

export const ListTableVersionsQuery = z.object({
  page_token: z.string().optional(),
  limit: QueryLimit.optional(),
  descending: QueryBoolean.optional(),
  branch: z.string().optional(),
});

export const ListTableVersionsRequest = z
  .object({ ...RequestBase, page_token: PageToken.optional(), limit: PageLimit.optional(), descending: z.boolean().nullable().optional(), branch: Branch })
  .meta({ id: 'ListTableVersionsRequest' });

export const ListTableVersionsResponse = z
  .object({ ...ResponseBase, versions: z.array(TableVersion), page_token: PageToken.optional() })
  .meta({ id: 'ListTableVersionsResponse' });
export type ListTableVersionsResponse = z.infer<typeof ListTableVersionsResponse>;

export const VersionRange = z
  .object({
    start_version: Version.meta({ description: 'First version deleted (inclusive); 0 starts from the first.' }),
    end_version: z.number().int().min(-1).meta({ description: 'End (exclusive); -1 means through the latest.' }),
  })
  .meta({ id: 'VersionRange' });

export const BatchDeleteTableVersionsRequest = z
  .object({ ...RequestBase, ranges: z.array(VersionRange).min(1), branch: Branch })
  .meta({ id: 'BatchDeleteTableVersionsRequest' });
export type BatchDeleteTableVersionsRequest = z.infer<typeof BatchDeleteTableVersionsRequest>;

export const BatchDeleteTableVersionsResponse = z
  .object({ ...ResponseBase, deleted_count: z.number().int().min(0), transaction_id: z.string().optional() })
  .meta({ id: 'BatchDeleteTableVersionsResponse' });
export type BatchDeleteTableVersionsResponse = z.infer<typeof BatchDeleteTableVersionsResponse>;

export const CreateTableVersionEntry = z.object({ id: z.array(z.string()).min(1), ...VersionFields }).meta({ id: 'CreateTableVersionEntry' });
export type CreateTableVersionEntry = z.infer<typeof CreateTableVersionEntry>;

export const BatchCreateTableVersionsRequest = z
  .object({ identity: Identity.optional(), context: Context.optional(), entries: z.array(CreateTableVersionEntry).min(1) })
  .meta({ id: 'BatchCreateTableVersionsRequest' });
export type BatchCreateTableVersionsRequest = z.infer<typeof BatchCreateTableVersionsRequest>;

export const BatchCreateTableVersionsResponse = z
  .object({ ...ResponseBase, versions: z.array(TableVersion), transaction_id: z.string().optional() })
  .meta({ id: 'BatchCreateTableVersionsResponse' });
export type BatchCreateTableVersionsResponse = z.infer<typeof BatchCreateTableVersionsResponse>;

/** BatchCommitTables: operations that take effect together or not at all. Each names its table in `id`. */
const TableId = z.array(z.string()).min(1);

export const CommitTableOperation = z
  .object({
    declare_table: z
      .object({
        ...RequestBase,
        id: TableId,
        location: z.string().nullable().optional(),
        properties: z.record(z.string(), z.string()).nullable().optional(),
        vend_credentials: z.boolean().nullable().optional(),
      })
      .optional(),
    create_table_version: z.object({ ...RequestBase, id: TableId, ...VersionFields }).optional(),
    delete_table_versions: z.object({ ...RequestBase, id: TableId, ranges: z.array(VersionRange).min(1), branch: Branch }).optional(),
    deregister_table: z.object({ ...RequestBase, id: TableId }).optional(),
  })
  .refine((op) => [op.declare_table, op.create_table_version, op.delete_table_versions, op.deregister_table].filter((x) => x !== undefined).length === 1, {
    message: 'each operation must set exactly one of declare_table, create_table_version, delete_table_versions, deregister_table',
  })
  .meta({ id: 'CommitTableOperation' });
export type CommitTableOperation = z.infer<typeof CommitTableOperation>;

export const BatchCommitTablesRequest = z
  .object({ identity: Identity.optional(), context: Context.optional(), operations: z.array(CommitTableOperation).min(1) })
  .meta({ id: 'BatchCommitTablesRequest' });
export type BatchCommitTablesRequest = z.infer<typeof BatchCommitTablesRequest>;

export const CommitTableResult = z
  .object({
    declare_table: z
      .object({
        location: z.string(),
        properties: z.record(z.string(), z.string()).nullable(),
        managed_versioning: z.boolean(),
        storage_options: z.record(z.string(), z.string()).optional(),
      })
      .optional(),
    create_table_version: z.object({ version: TableVersion }).optional(),
    delete_table_versions: z.object({ deleted_count: z.number().int().min(0) }).optional(),
    deregister_table: z.object({ id: z.array(z.string()), location: z.string(), properties: z.record(z.string(), z.string()).nullable() }).optional(),
  })
  .meta({ id: 'CommitTableResult' });
export type CommitTableResult = z.infer<typeof CommitTableResult>;

export const BatchCommitTablesResponse = z
  .object({ ...ResponseBase, results: z.array(CommitTableResult), transaction_id: z.string().optional() })
  .meta({ id: 'BatchCommitTablesResponse' });
export type BatchCommitTablesResponse = z.infer<typeof BatchCommitTablesResponse>;
