import { z } from 'zod';
import { BranchField, PageLimit, PageToken, QueryLimit, RequestBase, ResponseBase } from './common.js';

// Index operations: CreateTableIndex / CreateTableScalarIndex, ListTableIndices, DropTableIndex.

/** The index types of Lance's namespace index parsing, in their canonical spelling. */
export const INDEX_TYPES = [
  'IVF_PQ',
  'IVF_FLAT',
  'IVF_SQ',
  'IVF_RQ',
  'IVF_HNSW_FLAT',
  'IVF_HNSW_SQ',
  'IVF_HNSW_PQ',
  'BTREE',
  'BITMAP',
  'LABEL_LIST',
  'FTS',
  'NGRAM',
  'ZONEMAP',
  'BLOOMFILTER',
  'RTREE',
] as const;
export type IndexType = (typeof INDEX_TYPES)[number];

/** Vector index types; CreateTableScalarIndex refuses them. */
export const VECTOR_INDEX_TYPES: ReadonlySet<IndexType> = new Set(['IVF_PQ', 'IVF_FLAT', 'IVF_SQ', 'IVF_RQ', 'IVF_HNSW_FLAT', 'IVF_HNSW_SQ', 'IVF_HNSW_PQ']);

/** Spelling-insensitive key: `IVF_PQ`, `ivf_pq`, `IvfPq` and `ivf-pq` are one type. */
const typeKey = (v: string): string => v.replace(/[_\- ]/g, '').toLowerCase();

// Lance accepts these aliases too (`VECTOR` is its default vector index, `SCALAR` its default
// scalar one, `INVERTED` the FTS index's internal name).
const INDEX_TYPE_BY_KEY = new Map<string, IndexType>([
  ...INDEX_TYPES.map((t) => [typeKey(t), t] as const),
  ['vector', 'IVF_PQ'],
  ['scalar', 'BTREE'],
  ['inverted', 'FTS'],
]);

export const IndexTypeName = z
  .string()
  .transform((v, ctx): IndexType => {
    const type = INDEX_TYPE_BY_KEY.get(typeKey(v));
    if (type === undefined) {
      ctx.addIssue({
        code: 'custom',
        message: `unknown index type ${JSON.stringify(v)}; one of ${INDEX_TYPES.join(', ')} (case-insensitive; FTS is also INVERTED)`,
      });
      return z.NEVER;
    }
    return type;
  })
  .meta({ description: `Index type, case-insensitive: ${INDEX_TYPES.join(', ')} (aliases: INVERTED = FTS, VECTOR = IVF_PQ, SCALAR = BTREE).` });

export const DISTANCE_TYPES = ['l2', 'cosine', 'dot', 'hamming'] as const;
export type DistanceType = (typeof DISTANCE_TYPES)[number];

/** A distance metric, case-insensitive; `euclidean` is Lance's alias of l2. */
export const DistanceTypeName = z
  .string()
  .transform((v, ctx): DistanceType => {
    const lower = v.toLowerCase();
    if (lower === 'euclidean') return 'l2';
    const found = DISTANCE_TYPES.find((d) => d === lower);
    if (found === undefined) {
      ctx.addIssue({ code: 'custom', message: `unknown distance type ${JSON.stringify(v)}; one of ${DISTANCE_TYPES.join(', ')} (case-insensitive)` });
      return z.NEVER;
    }
    return found;
  })
  .meta({ description: `Distance metric, case-insensitive: ${DISTANCE_TYPES.join(', ')} (euclidean = l2).` });

/**
 * The engine takes build parameters as u32 and would silently wrap larger values; an
 * ef_construction in the billions makes it abort the process on a failed allocation.
 */
const U32_MAX = 4_294_967_295;
const BuildParam = z.number().int().min(1).max(U32_MAX).nullable().optional();

export const CreateTableIndexRequest = z
  .object({
    ...RequestBase,
    branch: BranchField,
    column: z.string().min(1),
    index_type: IndexTypeName,
    name: z.string().min(1).nullable().optional().meta({ description: 'Index name; `<column>_idx` when absent.' }),
    distance_type: DistanceTypeName.nullable().optional(),
    num_partitions: BuildParam,
    num_sub_vectors: BuildParam,
    num_bits: BuildParam,
    sample_rate: BuildParam,
    max_iterations: BuildParam,
    target_partition_size: BuildParam.meta({ description: 'Used when num_partitions is absent: partitions = ceil(rows / target_partition_size).' }),
    m: z.number().int().min(1).max(4096).nullable().optional(),
    ef_construction: z.number().int().min(1).max(100_000).nullable().optional(),
    with_position: z.boolean().nullable().optional(),
    base_tokenizer: z.string().nullable().optional(),
    language: z.string().nullable().optional(),
    max_token_length: z.number().int().min(0).max(U32_MAX).nullable().optional(),
    lower_case: z.boolean().nullable().optional(),
    stem: z.boolean().nullable().optional(),
    remove_stop_words: z.boolean().nullable().optional(),
    ascii_folding: z.boolean().nullable().optional(),
  })
  .meta({ id: 'CreateTableIndexRequest' });
export type CreateTableIndexRequest = z.infer<typeof CreateTableIndexRequest>;

export const CreateTableIndexResponse = z
  .object({ ...ResponseBase, transaction_id: z.string().optional() })
  .meta({ id: 'CreateTableIndexResponse', description: 'The index is built by the time this is returned.' });
export type CreateTableIndexResponse = z.infer<typeof CreateTableIndexResponse>;

export const CreateTableScalarIndexResponse = z
  .object({ ...ResponseBase, transaction_id: z.string().optional() })
  .meta({ id: 'CreateTableScalarIndexResponse', description: 'The index is built by the time this is returned.' });

export const ListTableIndicesRequest = z
  .object({
    ...RequestBase,
    version: z.number().int().min(0).nullable().optional(),
    branch: BranchField,
    page_token: PageToken.optional(),
    limit: PageLimit.optional(),
  })
  .meta({ id: 'ListTableIndicesRequest' });
export type ListTableIndicesRequest = z.infer<typeof ListTableIndicesRequest>;

/** ListTableIndices over GET (and POST): the query string wins over the body. */
export const ListTableIndicesQuery = z.object({
  page_token: z.string().optional(),
  limit: QueryLimit.optional(),
  version: QueryLimit.optional(),
  branch: z.string().optional(),
});

export const IndexContent = z
  .object({
    index_name: z.string(),
    index_uuid: z.string(),
    columns: z.array(z.string()),
    status: z.string().meta({ description: 'Always `SUCCEEDED` (as Lance answers): indexes are built before CreateTableIndex returns.' }),
    index_type: z.string().optional(),
    type_url: z.string().optional(),
    num_indexed_rows: z.number().int().min(0).optional(),
    num_unindexed_rows: z.number().int().min(0).optional(),
    size_bytes: z.number().int().min(0).nullable().optional(),
    num_segments: z.number().int().min(0).optional(),
    created_at: z.string().nullable().optional(),
    index_version: z.number().int().min(0).optional(),
    index_details: z.string().nullable().optional(),
  })
  .meta({ id: 'IndexContent' });
export type IndexContent = z.infer<typeof IndexContent>;

export const ListTableIndicesResponse = z
  .object({ ...ResponseBase, indexes: z.array(IndexContent), page_token: PageToken.optional() })
  .meta({ id: 'ListTableIndicesResponse' });
export type ListTableIndicesResponse = z.infer<typeof ListTableIndicesResponse>;

/** DropTableIndex has no body in REST; one that is sent must agree with the path. */
export const DropTableIndexRequest = z
  .object({ ...RequestBase, branch: BranchField, index_name: z.string().nullable().optional() })
  .meta({ id: 'DropTableIndexRequest' });

export const DropTableIndexQuery = z.object({ branch: z.string().optional() });

export const DropTableIndexResponse = z.object({ ...ResponseBase, transaction_id: z.string().optional() }).meta({ id: 'DropTableIndexResponse' });
export type DropTableIndexResponse = z.infer<typeof DropTableIndexResponse>;
