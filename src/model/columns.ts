import { z } from 'zod';
import { BranchField, QueryLimit, RequestBase, ResponseBase } from './common.js';

// Column, field-metadata and statistics operations: AlterTableAlterColumns, AlterTableDropColumns,
// AlterTableAddColumns, UpdateFieldMetadata, UpdateTableSchemaMetadata, GetTableStats and
// DescribeTableIndexStats, plus the spec's field-path contract.

const Version = z.number().int().min(0).meta({ description: 'The table version the operation committed.' });

const FIELD_PATH_HELP =
  'Lance field path: dot-separated segments for nested fields; a segment holding a literal dot is backtick-quoted, and a backtick ' +
  'inside a quoted segment is doubled (s.`a.b`). A bare leaf name only identifies a top-level field.';

export const FieldPath = z.string().min(1).meta({ description: FIELD_PATH_HELP });

// ---------------------------------------------------------------------------------------------
// Field paths (spec field-path contract, #351)

export type FieldPathParse = { ok: true; segments: string[] } | { ok: false; error: string };

/**
 * Splits a field path into its segments: `a.b` is [a, b], `` a.`b.c` `` is [a, b.c], and a
 * doubled backtick inside a quoted segment is one backtick. Empty segments and unterminated or
 * stray quotes are errors (InvalidInput), so that a path never silently means something else.
 */
export function parseFieldPath(path: string): FieldPathParse {
  const segments: string[] = [];
  let i = 0;
  for (;;) {
    let segment = '';
    if (path[i] === '`') {
      i++;
      for (;;) {
        if (i >= path.length) return { ok: false, error: `unterminated backtick quote in field path ${JSON.stringify(path)}` };
        if (path[i] === '`') {
          if (path[i + 1] === '`') {
            segment += '`';
            i += 2;
            continue;
          }
          i++;
          break;
        }
        segment += path[i];
        i++;
      }
      if (i < path.length && path[i] !== '.') {
        return { ok: false, error: `a quoted segment must be followed by "." or the end, in field path ${JSON.stringify(path)}` };
      }
    } else {
      while (i < path.length && path[i] !== '.') {
        if (path[i] === '`') return { ok: false, error: `a backtick may only quote a whole segment, in field path ${JSON.stringify(path)}` };
        segment += path[i];
        i++;
      }
    }
    if (segment === '') return { ok: false, error: `empty segment in field path ${JSON.stringify(path)}` };
    segments.push(segment);
    if (i >= path.length) return { ok: true, segments };
    i++; // the dot
    if (i >= path.length) return { ok: false, error: `field path ${JSON.stringify(path)} ends with "."` };
  }
}

/** The canonical form of a path: segments joined by dots, quoting only segments that need it. */
export function formatFieldPath(segments: readonly string[]): string {
  return segments.map((s) => (/[.`]/.test(s) ? `\`${s.replace(/`/g, '``')}\`` : s)).join('.');
}

// ---------------------------------------------------------------------------------------------
// Data types (JsonArrowDataType; the spec leaves data_type a free object)

export const AlterDataType = z
  .looseObject({
    type: z.string().min(1).meta({ description: 'JSON Arrow type name, e.g. int64, float32, utf8, large_utf8, timestamp, fixed_size_list.' }),
    fields: z.array(z.record(z.string(), z.unknown())).optional().meta({ description: 'Child fields (JsonArrowField) of list, fixed_size_list and struct.' }),
    length: z.number().int().min(0).optional().meta({ description: 'Size of fixed_size_list / fixed_size_binary; precision*1000+scale of decimals.' }),
  })
  .meta({ description: 'New data type in the JSON Arrow form ({"type":"int64"}); only casts Lance supports (within ints, floats, strings, ...) succeed.' });

// ---------------------------------------------------------------------------------------------
// Virtual (UDF) columns: accepted by the schema so that the refusal names the real reason.

const StringMap = z.record(z.string(), z.string());

export const AlterVirtualColumnEntry = z
  .object({
    input_columns: z.array(z.string().min(1)).nullable().optional(),
    image: z.string().nullable().optional(),
    udf: z.string().nullable().optional(),
    udf_name: z.string().nullable().optional(),
    udf_version: z.string().nullable().optional(),
    udf_backend: z.string().nullable().optional(),
    auto_backfill: z.boolean().nullable().optional(),
    manifest: z.string().nullable().optional(),
    manifest_checksum: z.string().nullable().optional(),
    field_metadata: StringMap.nullable().optional(),
  })
  .meta({
    id: 'AlterVirtualColumnEntry',
    description:
      'Binds or rebinds an existing top-level column to a SQL expression over other columns when `udf_backend` is "sql" ' +
      '(case-insensitive): `udf` holds the SQL expression (plain text, not base64), `input_columns` optionally names its inputs ' +
      "(each must exist) and `field_metadata` is merged into the column's metadata; image, udf_name, udf_version, manifest and " +
      'manifest_checksum are ignored. The binding is kept in the field metadata: virtual_column="true", ' +
      'virtual_column.udf_backend="sql", virtual_column.expression=<sql>, virtual_column.inputs=<JSON array>, and the column is then ' +
      'filled by backfill_column. Such an alteration changes nothing else (no rename, nullable or data_type in the same entry, ' +
      'no other kind of alteration in the same request). With udf_backend DockerUDFSpecV1 (Geneva) `udf` is the base64 of the ' +
      "UDF's JSON envelope: the envelope is stored at `_udfs/<sha256>` and the column bound as Geneva binds it (manage privilege and " +
      'udf_execution needed, 406 otherwise); any other udf_backend answers 406. A column declared through ' +
      'add_columns `computed` keeps its binding in Lance, which never lets it change: rebinding one is a 400 (drop and declare it again).',
  });
export type AlterVirtualColumnEntry = z.infer<typeof AlterVirtualColumnEntry>;

export const AddVirtualColumnOutputEntry = z
  .object({
    column: z.string(),
    struct_field: z.string(),
    data_type: z.record(z.string(), z.unknown()),
    nullable: z.boolean(),
    metadata: StringMap.optional(),
  })
  .meta({ id: 'AddVirtualColumnOutputEntry' });

export const AddVirtualColumnEntry = z
  .object({
    input_columns: z.array(z.string().min(1)),
    outputs: z.array(AddVirtualColumnOutputEntry),
    image: z.string(),
    udf: z.string(),
    udf_name: z.string(),
    udf_version: z.string(),
    udf_backend: z.string().nullable().optional(),
    auto_backfill: z.boolean().nullable().optional(),
    manifest: z.string().nullable().optional(),
    manifest_checksum: z.string().nullable().optional(),
    field_metadata: StringMap.nullable().optional(),
  })
  .meta({
    id: 'AddVirtualColumnEntry',
    description:
      'A column computed by a Geneva Python UDF (udf_backend DockerUDFSpecV1, `udf` the base64 of its JSON envelope): added all-null with ' +
      'the type of its one output, the envelope stored at `_udfs/<sha256>` in the table directory and the binding in its field metadata ' +
      '(virtual_column.*, as Geneva writes it); backfill_column then fills it. Needs the manage privilege and a service started with ' +
      'udf_execution local or ray (406 otherwise). Several outputs (struct_field) are a 406.',
  });
export type AddVirtualColumnEntry = z.infer<typeof AddVirtualColumnEntry>;

// ---------------------------------------------------------------------------------------------
// AlterTableAlterColumns

export const AlterColumnsEntry = z
  .object({
    path: FieldPath,
    data_type: AlterDataType.nullable().optional(),
    rename: z.string().nullable().optional().meta({ description: 'New name of the field (its last segment).' }),
    nullable: z.boolean().nullable().optional().meta({ description: 'New nullability; a column holding nulls cannot be made non-nullable.' }),
    virtual_column: AlterVirtualColumnEntry.nullable().optional(),
  })
  .meta({ id: 'AlterColumnsEntry' });
export type AlterColumnsEntry = z.infer<typeof AlterColumnsEntry>;

export const AlterTableAlterColumnsRequest = z
  .object({ ...RequestBase, branch: BranchField, alterations: z.array(AlterColumnsEntry) })
  .meta({ id: 'AlterTableAlterColumnsRequest', description: 'All alterations are one commit: all apply or none.' });
export type AlterTableAlterColumnsRequest = z.infer<typeof AlterTableAlterColumnsRequest>;

export const AlterTableAlterColumnsResponse = z.object({ ...ResponseBase, version: Version }).meta({ id: 'AlterTableAlterColumnsResponse' });
export type AlterTableAlterColumnsResponse = z.infer<typeof AlterTableAlterColumnsResponse>;

// ---------------------------------------------------------------------------------------------
// AlterTableDropColumns

export const AlterTableDropColumnsRequest = z
  .object({ ...RequestBase, branch: BranchField, columns: z.array(FieldPath) })
  .meta({ id: 'AlterTableDropColumnsRequest' });
export type AlterTableDropColumnsRequest = z.infer<typeof AlterTableDropColumnsRequest>;

export const AlterTableDropColumnsResponse = z
  .object({ ...ResponseBase, transaction_id: z.string().optional(), version: Version })
  .meta({ id: 'AlterTableDropColumnsResponse' });
export type AlterTableDropColumnsResponse = z.infer<typeof AlterTableDropColumnsResponse>;

// ---------------------------------------------------------------------------------------------
// AlterTableAddColumns

/** Field-metadata keys of a column bound to SQL through alter_columns `virtual_column` (udf_backend "sql"). */
export const VIRTUAL_COLUMN_METADATA = {
  marker: 'virtual_column',
  backend: 'virtual_column.udf_backend',
  expression: 'virtual_column.expression',
  inputs: 'virtual_column.inputs',
} as const;

/** The udf_backend value that binds a virtual column to a SQL expression. */
export const SQL_UDF_BACKEND = 'sql';

/** The udf_backend of Geneva's Python UDFs: a cloudpickled geneva UDF in a JSON envelope (base64 in `udf`). */
export const PYTHON_UDF_BACKEND = 'DockerUDFSpecV1';

/**
 * Field-metadata keys of a column bound to a Geneva Python UDF, as Geneva's own writer sets them
 * (besides `virtual_column`="true" and `virtual_column.udf_backend`): the envelope is stored in
 * the table's directory at `udf` (`_udfs/<sha256 of the envelope>`), where Geneva reads it back.
 */
export const PYTHON_UDF_METADATA = {
  udf: 'virtual_column.udf',
  name: 'virtual_column.udf_name',
  version: 'virtual_column.udf_version',
  inputs: 'virtual_column.udf_inputs',
  autoBackfill: 'virtual_column.auto_backfill',
  manifest: 'virtual_column.manifest',
  manifestChecksum: 'virtual_column.manifest_checksum',
} as const;

/** Field-metadata keys the engine writes on a computed column (its persisted binding). */
export const COMPUTED_COLUMN_METADATA = {
  marker: 'computed_column',
  expression: 'computed_column.expression',
  inputs: 'computed_column.inputs',
  kind: 'computed_column.kind',
} as const;

export const AddColumnsEntry = z
  .object({
    name: z.string().min(1).meta({ description: 'Name of the new top-level column.' }),
    expression: z.string().nullable().optional().meta({ description: 'SQL evaluated once over the existing rows (rows appended later read null).' }),
    computed: z
      .string()
      .nullable()
      .optional()
      .meta({
        description:
          'SQL declaring a computed column: added all-null, type and inputs inferred from the expression. The binding is kept in the ' +
          `column's field metadata: ${COMPUTED_COLUMN_METADATA.marker}="true", ${COMPUTED_COLUMN_METADATA.expression}=<sql>, ` +
          `${COMPUTED_COLUMN_METADATA.inputs}=<JSON array of input columns>, ${COMPUTED_COLUMN_METADATA.kind}="sql".`,
      }),
    virtual_column: AddVirtualColumnEntry.nullable().optional(),
  })
  .meta({ id: 'AddColumnsEntry', description: 'Exactly one of expression, computed or virtual_column.' });
export type AddColumnsEntry = z.infer<typeof AddColumnsEntry>;

export const AlterTableAddColumnsRequest = z.object({ ...RequestBase, branch: BranchField, new_columns: z.array(AddColumnsEntry) }).meta({
  id: 'AlterTableAddColumnsRequest',
  description: 'One commit: the entries are either all expression columns or all computed columns.',
});
export type AlterTableAddColumnsRequest = z.infer<typeof AlterTableAddColumnsRequest>;

export const AlterTableAddColumnsResponse = z.object({ ...ResponseBase, version: Version }).meta({ id: 'AlterTableAddColumnsResponse' });
export type AlterTableAddColumnsResponse = z.infer<typeof AlterTableAddColumnsResponse>;

// ---------------------------------------------------------------------------------------------
// UpdateFieldMetadata

export const UpdateFieldMetadataEntry = z
  .object({
    path: FieldPath,
    metadata: z.record(z.string(), z.string().nullable()).meta({ description: 'Keys to set; a null value deletes the key.' }),
    replace: z.boolean().nullable().optional().meta({ description: 'Replace the whole metadata map instead of merging (default false).' }),
  })
  .meta({ id: 'UpdateFieldMetadataEntry' });
export type UpdateFieldMetadataEntry = z.infer<typeof UpdateFieldMetadataEntry>;

export const UpdateFieldMetadataRequest = z
  .object({ ...RequestBase, branch: BranchField, updates: z.array(UpdateFieldMetadataEntry) })
  .meta({ id: 'UpdateFieldMetadataRequest', description: 'Entries for the same field apply in order; all are one commit.' });
export type UpdateFieldMetadataRequest = z.infer<typeof UpdateFieldMetadataRequest>;

export const UpdateFieldMetadataResponse = z
  .object({
    ...ResponseBase,
    version: Version,
    fields: z.record(z.string(), StringMap).meta({ description: 'Resulting metadata of each updated field, by canonical field path.' }),
  })
  .meta({ id: 'UpdateFieldMetadataResponse' });
export type UpdateFieldMetadataResponse = z.infer<typeof UpdateFieldMetadataResponse>;

// ---------------------------------------------------------------------------------------------
// UpdateTableSchemaMetadata (REST: a bare map both ways)

export const UpdateTableSchemaMetadataBody = z
  .record(z.string(), z.string())
  .meta({ id: 'UpdateTableSchemaMetadataBody', description: 'Replaces the schema metadata (a bare map, REST form).' });

export const UpdateTableSchemaMetadataQuery = z.object({ branch: z.string().optional() });

// ---------------------------------------------------------------------------------------------
// GetTableStats

export const GetTableStatsRequest = z.object({ ...RequestBase, branch: BranchField }).meta({ id: 'GetTableStatsRequest' });
export type GetTableStatsRequest = z.infer<typeof GetTableStatsRequest>;

export const BranchQuery = z.object({ branch: z.string().optional() });

const Count = z.number().int().min(0);

export const FragmentSummary = z
  .object({ min: Count, max: Count, mean: Count, p25: Count, p50: Count, p75: Count, p99: Count })
  .meta({ id: 'FragmentSummary', description: 'Rows per fragment.' });

export const FragmentStats = z.object({ num_fragments: Count, num_small_fragments: Count, lengths: FragmentSummary }).meta({ id: 'FragmentStats' });

export const GetTableStatsResponse = z
  .object({
    ...ResponseBase,
    total_bytes: Count.meta({ description: 'Bytes of data, index and overlay files (not deletion files or manifests).' }),
    num_rows: Count.meta({ description: 'Rows, excluding deleted rows.' }),
    num_indices: Count,
    fragment_stats: FragmentStats,
  })
  .meta({ id: 'GetTableStatsResponse' });
export type GetTableStatsResponse = z.infer<typeof GetTableStatsResponse>;

// ---------------------------------------------------------------------------------------------
// DescribeTableIndexStats

export const DescribeTableIndexStatsRequest = z
  .object({
    ...RequestBase,
    version: z.number().int().min(0).nullable().optional().meta({ description: 'Stats as of this table version (default: latest).' }),
    branch: BranchField,
    index_name: z.string().optional().meta({ description: 'Must match the {index_name} path segment when given.' }),
  })
  .meta({ id: 'DescribeTableIndexStatsRequest' });
export type DescribeTableIndexStatsRequest = z.infer<typeof DescribeTableIndexStatsRequest>;

export const DescribeTableIndexStatsQuery = z.object({ version: QueryLimit.optional(), branch: z.string().optional() });

export const DescribeTableIndexStatsResponse = z
  .object({
    ...ResponseBase,
    distance_type: z.string().nullable().meta({ description: 'l2, cosine, dot or hamming for vector indices; null otherwise.' }),
    index_type: z.string().nullable().meta({ description: 'e.g. BTREE, BITMAP, FTS, IVF_PQ, IVF_FLAT, IVF_HNSW_SQ.' }),
    num_indexed_rows: Count.nullable(),
    num_unindexed_rows: Count.nullable(),
    num_indices: Count.nullable(),
  })
  .meta({ id: 'DescribeTableIndexStatsResponse' });
export type DescribeTableIndexStatsResponse = z.infer<typeof DescribeTableIndexStatsResponse>;
