import { z } from 'zod';
import { caseInsensitiveEnum, PageLimit, PageToken, Properties, QueryBoolean, QueryLimit, RequestBase, ResponseBase } from './common.js';
import { TableMaintenance } from './maintenance.js';

export const StorageOptions = z.record(z.string(), z.string()).meta({ id: 'StorageOptions' });

export const ListTablesQuery = z.object({
  page_token: z.string().optional(),
  limit: QueryLimit.optional(),
  include_declared: QueryBoolean.optional(),
});
export type ListTablesQuery = z.infer<typeof ListTablesQuery>;

export const ListTablesRequest = z
  .object({ ...RequestBase, page_token: PageToken.optional(), limit: PageLimit.optional(), include_declared: z.boolean().optional() })
  .meta({ id: 'ListTablesRequest' });
export type ListTablesRequest = z.infer<typeof ListTablesRequest>;

export const ListTablesResponse = z
  .object({ ...ResponseBase, tables: z.array(z.string()), page_token: PageToken.optional() })
  .meta({ id: 'ListTablesResponse' });
export type ListTablesResponse = z.infer<typeof ListTablesResponse>;

export const DeclareTableRequest = z
  .object({
    ...RequestBase,
    location: z.string().nullable().optional(),
    vend_credentials: z.boolean().nullable().optional(),
    properties: Properties.nullable().optional(),
  })
  .meta({ id: 'DeclareTableRequest' });
export type DeclareTableRequest = z.infer<typeof DeclareTableRequest>;

export const DeclareTableResponse = z
  .object({
    ...ResponseBase,
    transaction_id: z.string().optional(),
    location: z.string(),
    storage_options: StorageOptions.optional(),
    properties: Properties.nullable(),
    managed_versioning: z.boolean(),
  })
  .meta({ id: 'DeclareTableResponse' });
export type DeclareTableResponse = z.infer<typeof DeclareTableResponse>;

export const CreateTableMode = caseInsensitiveEnum(['Create', 'ExistOk', 'Overwrite'], 'Behaviour when the table exists.');

const StringMap = z.record(z.string(), z.string());

/** A JSON object of strings carried as one query-string value; empty means none. */
const JsonStringMap = z.string().transform((value, ctx): Record<string, string> | undefined => {
  if (value === '') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    parsed = undefined;
  }
  const map = StringMap.safeParse(parsed);
  if (map.success) return map.data;
  ctx.addIssue({ code: 'custom', message: 'must be a JSON object of strings' });
  return z.NEVER;
});

/** CreateTable carries its fields in the query string; the body is an Arrow IPC stream. */
export const CreateTableQuery = z.object({
  mode: CreateTableMode.optional(),
  location: z.string().optional().meta({
    description: "Optional: the table's location as the client expects it; anything else than where the service puts the table is a 400, as on DeclareTable.",
  }),
  properties: JsonStringMap.optional().meta({ description: 'JSON object of string properties.' }),
  storage_options: JsonStringMap.optional().meta({ description: 'JSON object of write-time storage options.' }),
});

export const CreateTableResponse = z
  .object({
    ...ResponseBase,
    transaction_id: z.string().optional(),
    location: z.string(),
    version: z.number().int().min(0),
    storage_options: StorageOptions.optional(),
    properties: Properties.nullable(),
  })
  .meta({ id: 'CreateTableResponse' });
export type CreateTableResponse = z.infer<typeof CreateTableResponse>;

export const RegisterTableMode = caseInsensitiveEnum(['Create', 'Overwrite'], 'Behaviour when a table of the same name exists.');

export const RegisterTableRequest = z
  .object({ ...RequestBase, location: z.string(), mode: RegisterTableMode.optional(), properties: Properties.nullable().optional() })
  .meta({ id: 'RegisterTableRequest' });
export type RegisterTableRequest = z.infer<typeof RegisterTableRequest>;

export const RegisterTableResponse = z
  .object({ ...ResponseBase, transaction_id: z.string().optional(), location: z.string(), properties: Properties.nullable() })
  .meta({ id: 'RegisterTableResponse' });
export type RegisterTableResponse = z.infer<typeof RegisterTableResponse>;

export const DescribeTableQuery = z.object({
  with_table_uri: QueryBoolean.optional(),
  with_maintenance: QueryBoolean.optional(),
  load_detailed_metadata: QueryBoolean.optional(),
  check_declared: QueryBoolean.optional(),
});

export const DescribeTableRequest = z
  .object({
    ...RequestBase,
    version: z.number().int().min(0).nullable().optional(),
    tag: z.string().nullable().optional(),
    branch: z.string().nullable().optional(),
    with_table_uri: z.boolean().nullable().optional(),
    load_detailed_metadata: z.boolean().nullable().optional(),
    check_declared: z.boolean().nullable().optional(),
    vend_credentials: z.boolean().nullable().optional(),
    with_maintenance: z.boolean().nullable().optional().meta({
      description:
        "Service extension: also answer `maintenance`, the table's maintenance policy as resolved (its own and its namespaces' properties) and its last runs.",
    }),
  })
  .meta({ id: 'DescribeTableRequest' });
export type DescribeTableRequest = z.infer<typeof DescribeTableRequest>;

// The JSON Arrow form of a schema, as the spec's JsonArrowSchema / JsonArrowField / JsonArrowDataType
// (a type's child fields make it recursive), so that /openapi.json promises what clients parse.
export const JsonArrowDataType = z
  .object({
    type: z.string(),
    get fields(): z.ZodOptional<z.ZodArray<typeof JsonArrowField>> {
      return z.array(JsonArrowField).optional();
    },
    length: z.number().int().min(0).optional(),
  })
  .meta({ id: 'JsonArrowDataType' });

export const JsonArrowField = z
  .object({ name: z.string(), nullable: z.boolean(), type: JsonArrowDataType, metadata: z.record(z.string(), z.string()).optional() })
  .meta({ id: 'JsonArrowField' });

export const JsonArrowSchema = z
  .object({ fields: z.array(JsonArrowField), metadata: z.record(z.string(), z.string()).optional() })
  .meta({ id: 'JsonArrowSchema' });

export const DescribeTableResponse = z
  .object({
    ...ResponseBase,
    table: z.string().optional(),
    namespace: z.array(z.string()).optional(),
    version: z.number().int().min(0).optional(),
    location: z.string(),
    table_uri: z.string().optional(),
    schema: JsonArrowSchema.optional(),
    storage_options: StorageOptions.optional(),
    stats: z.object({ num_deleted_rows: z.number().int(), num_fragments: z.number().int() }).optional(),
    metadata: z.record(z.string(), z.string()).optional(),
    properties: Properties.nullable(),
    managed_versioning: z.boolean(),
    is_only_declared: z.boolean().nullable().optional(),
    maintenance: TableMaintenance.optional().meta({ description: 'Service extension, with `with_maintenance`: see docs/maintenance.md.' }),
  })
  .meta({ id: 'DescribeTableResponse' });
export type DescribeTableResponse = z.infer<typeof DescribeTableResponse>;

export const TableExistsRequest = z.object({ ...RequestBase, version: z.number().int().min(0).nullable().optional() }).meta({ id: 'TableExistsRequest' });

export const TableIdRequest = z.object({ ...RequestBase }).meta({ id: 'TableIdRequest' });

export const DropTableResponse = z
  .object({ ...ResponseBase, transaction_id: z.string().optional(), id: z.array(z.string()), location: z.string(), properties: Properties.nullable() })
  .meta({ id: 'DropTableResponse' });
export type DropTableResponse = z.infer<typeof DropTableResponse>;

export const RenameTableRequest = z
  .object({
    ...RequestBase,
    new_table_name: z.string(),
    new_namespace_id: z.array(z.string()).nullable().optional(),
  })
  .meta({ id: 'RenameTableRequest' });
export type RenameTableRequest = z.infer<typeof RenameTableRequest>;

export const RenameTableResponse = z.object({ ...ResponseBase, transaction_id: z.string().optional() }).meta({ id: 'RenameTableResponse' });
export type RenameTableResponse = z.infer<typeof RenameTableResponse>;
