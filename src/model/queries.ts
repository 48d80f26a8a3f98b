import { z } from 'zod';
import { BranchField, caseInsensitiveEnum, RequestBase } from './common.js';
import { DistanceTypeName } from './indices.js';

// QueryTable, ExplainTableQueryPlan and AnalyzeTableQueryPlan. Optional fields also accept null:
// generated clients send null for unset fields.

export const FtsOperator = caseInsensitiveEnum(['And', 'Or'], 'How the terms of a match query combine (default Or).');

const FieldPath = z.string().min(1);
/** The engine takes these counts as u32 and would silently wrap larger values. */
const Count = z.number().int().min(0).max(4_294_967_295);
const nullish = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

export const MatchQuery = z
  .object({
    terms: z.string(),
    column: nullish(FieldPath).meta({ description: 'Omit to match every FTS-indexed column.' }),
    boost: nullish(z.number()),
    fuzziness: nullish(Count),
    max_expansions: nullish(Count),
    operator: nullish(FtsOperator),
    prefix_length: nullish(Count),
  })
  .meta({ id: 'MatchQuery' });
export type MatchQuery = z.infer<typeof MatchQuery>;

export const PhraseQuery = z
  .object({
    terms: z.string(),
    column: nullish(FieldPath).meta({ description: 'Omit to match every FTS-indexed column.' }),
    slop: nullish(Count),
  })
  .meta({ id: 'PhraseQuery' });
export type PhraseQuery = z.infer<typeof PhraseQuery>;

export const MultiMatchQuery = z.object({ match_queries: z.array(MatchQuery).min(1) }).meta({ id: 'MultiMatchQuery' });
export type MultiMatchQuery = z.infer<typeof MultiMatchQuery>;

/** A structured full-text query: exactly one of its fields. Boost and boolean queries nest. */
export interface FtsQuery {
  match?: MatchQuery | null | undefined;
  phrase?: PhraseQuery | null | undefined;
  boost?: BoostQuery | null | undefined;
  multi_match?: MultiMatchQuery | null | undefined;
  boolean?: BooleanQuery | null | undefined;
}
export interface BoostQuery {
  positive: FtsQuery;
  negative: FtsQuery;
  negative_boost?: number | null | undefined;
}
export interface BooleanQuery {
  must: FtsQuery[];
  should: FtsQuery[];
  must_not: FtsQuery[];
}

/** Input types differ from the output ones only in the operator's spelling. */
type Input<T> = T extends MatchQuery ? Omit<T, 'operator'> & { operator?: string | null | undefined } : T;
interface FtsQueryInput {
  match?: Input<MatchQuery> | null | undefined;
  phrase?: PhraseQuery | null | undefined;
  boost?: BoostQueryInput | null | undefined;
  multi_match?: { match_queries: Input<MatchQuery>[] } | null | undefined;
  boolean?: BooleanQueryInput | null | undefined;
}
interface BoostQueryInput {
  positive: FtsQueryInput;
  negative: FtsQueryInput;
  negative_boost?: number | null | undefined;
}
interface BooleanQueryInput {
  must: FtsQueryInput[];
  should: FtsQueryInput[];
  must_not: FtsQueryInput[];
}

export const FtsQuery: z.ZodType<FtsQuery, FtsQueryInput> = z
  .object({
    match: nullish(MatchQuery),
    phrase: nullish(PhraseQuery),
    get boost() {
      return nullish(BoostQuery);
    },
    multi_match: nullish(MultiMatchQuery),
    get boolean() {
      return nullish(BooleanQuery);
    },
  })
  .refine((q) => [q.match, q.phrase, q.boost, q.multi_match, q.boolean].filter((x) => x !== undefined && x !== null).length === 1, {
    message: 'exactly one of match, phrase, boost, multi_match, boolean must be set',
  })
  .meta({ id: 'FtsQuery' });

export const BoostQuery: z.ZodType<BoostQuery, BoostQueryInput> = z
  .object({
    get positive() {
      return FtsQuery;
    },
    get negative() {
      return FtsQuery;
    },
    negative_boost: nullish(z.number()),
  })
  .meta({ id: 'BoostQuery' });

export const BooleanQuery: z.ZodType<BooleanQuery, BooleanQueryInput> = z
  .object({
    get must() {
      return z.array(FtsQuery);
    },
    get should() {
      return z.array(FtsQuery);
    },
    get must_not() {
      return z.array(FtsQuery);
    },
  })
  .meta({ id: 'BooleanQuery' });

export const StringFtsQuery = z
  .object({ query: z.string(), columns: nullish(z.array(FieldPath)).meta({ description: 'Omit to search every FTS-indexed column.' }) })
  .meta({ id: 'StringFtsQuery' });

export const StructuredFtsQuery = z.object({ query: FtsQuery }).meta({ id: 'StructuredFtsQuery' });

const exactlyOneOrNone = (values: unknown[]): boolean => values.filter((x) => x !== undefined && x !== null).length <= 1;

/** The fields of a query; AnalyzeTableQueryPlan takes them flat, ExplainTableQueryPlan under `query`. */
const QueryFields = {
  ...RequestBase,
  branch: BranchField,
  vector: z
    .object({ single_vector: nullish(z.array(z.number())), multi_vector: nullish(z.array(z.array(z.number()))) })
    .refine((v) => exactlyOneOrNone([v.single_vector, v.multi_vector]), { message: 'give either single_vector or multi_vector, not both' })
    .nullable()
    .optional()
    .meta({
      description:
        'Query vector; null, or an empty single_vector or multi_vector (what LanceDB clients send), for a filter or full-text query. multi_vector on a multivector (List<FixedSizeList>) column is one multivector query; on a plain vector column it is a batch search with a `query_index` column. With a full_text_query too, the query is a hybrid search: both searches fused by reciprocal-rank fusion, with `_relevance_score`.',
    }),
  k: Count.meta({ description: 'Number of results (the limit of a plain scan too).' }),
  filter: nullish(z.string()),
  prefilter: nullish(z.boolean()).meta({
    description: 'Vector, full-text and hybrid search: filtering happens before searching unless false (in a hybrid search, for both of its searches).',
  }),
  columns: z
    .object({ column_names: nullish(z.array(FieldPath)), column_aliases: nullish(z.record(z.string(), FieldPath)) })
    .refine((c) => exactlyOneOrNone([c.column_names, c.column_aliases]), { message: 'give either column_names or column_aliases, not both' })
    .nullable()
    .optional(),
  vector_column: nullish(FieldPath),
  distance_type: nullish(DistanceTypeName),
  nprobes: nullish(Count).meta({ description: 'Partitions of an IVF index to search (sets both minimum_nprobes and maximum_nprobes).' }),
  minimum_nprobes: nullish(Count).meta({ description: 'Partitions of an IVF index always searched.' }),
  maximum_nprobes: nullish(Count).meta({ description: 'Partitions searched at most, when the minimum found too few results (0: no limit).' }),
  refine_factor: nullish(Count),
  ef: nullish(Count),
  bypass_vector_index: nullish(z.boolean()),
  fast_search: nullish(z.boolean()),
  lower_bound: nullish(z.number()).meta({ description: 'Smallest distance returned (inclusive).' }),
  upper_bound: nullish(z.number()).meta({ description: 'Distances returned are below this (exclusive).' }),
  offset: nullish(Count),
  with_row_id: nullish(z.boolean()),
  version: nullish(z.number().int().min(0)),
  full_text_query: z
    .object({ string_query: nullish(StringFtsQuery), structured_query: nullish(StructuredFtsQuery) })
    .refine((f) => exactlyOneOrNone([f.string_query, f.structured_query]), { message: 'give either string_query or structured_query, not both' })
    .nullable()
    .optional(),
};

export const QueryTableRequest = z.object(QueryFields).meta({ id: 'QueryTableRequest' });
export type QueryTableRequest = z.infer<typeof QueryTableRequest>;

export const ExplainTableQueryPlanRequest = z
  .object({
    ...RequestBase,
    branch: z.string().nullable().optional(),
    query: QueryTableRequest,
    verbose: nullish(z.boolean()),
  })
  .meta({ id: 'ExplainTableQueryPlanRequest' });
export type ExplainTableQueryPlanRequest = z.infer<typeof ExplainTableQueryPlanRequest>;

export const AnalyzeTableQueryPlanRequest = z.object(QueryFields).meta({ id: 'AnalyzeTableQueryPlanRequest' });
export type AnalyzeTableQueryPlanRequest = z.infer<typeof AnalyzeTableQueryPlanRequest>;

/** REST returns the plan as a bare JSON string, not the spec's `{plan}` / `{analysis}` object. */
export const QueryPlanText = z.string().meta({ id: 'QueryPlanText', description: 'The plan as a JSON string.' });
