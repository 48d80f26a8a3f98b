import type { FtsQuerySpec, FullTextSpec, MatchQuerySpec, TableQuery } from '../../engine/ports/queries.js';
import { invalidInput } from '../../model/errors.js';
import type { AnalyzeTableQueryPlanRequest, ExplainTableQueryPlanRequest, FtsQuery, MatchQuery, QueryTableRequest } from '../../model/queries.js';
import { normalizeBranch } from '../branches/branch-refs.js';
import type { RequestContext } from '../context/request-context.js';
import type { DataTables } from './data-tables.js';

const opt = <T>(v: T | null | undefined): T | undefined => (v === null ? undefined : v);

function matchSpec(q: MatchQuery): MatchQuerySpec {
  return {
    kind: 'match',
    terms: q.terms,
    column: opt(q.column),
    boost: opt(q.boost),
    fuzziness: opt(q.fuzziness),
    maxExpansions: opt(q.max_expansions),
    operator: q.operator === 'And' ? 'and' : q.operator === 'Or' ? 'or' : undefined,
    prefixLength: opt(q.prefix_length),
  };
}

function ftsSpec(q: FtsQuery): FtsQuerySpec {
  if (q.match) return matchSpec(q.match);
  if (q.phrase) return { kind: 'phrase', terms: q.phrase.terms, column: opt(q.phrase.column), slop: opt(q.phrase.slop) };
  if (q.boost) return { kind: 'boost', positive: ftsSpec(q.boost.positive), negative: ftsSpec(q.boost.negative), negativeBoost: opt(q.boost.negative_boost) };
  if (q.multi_match) return { kind: 'multi_match', queries: q.multi_match.match_queries.map(matchSpec) };
  if (q.boolean) return { kind: 'boolean', must: q.boolean.must.map(ftsSpec), should: q.boolean.should.map(ftsSpec), mustNot: q.boolean.must_not.map(ftsSpec) };
  // The model admits exactly one of the fields above.
  throw invalidInput('full_text_query: a structured query needs one of match, phrase, boost, multi_match, boolean');
}

function fullTextOf(q: QueryTableRequest['full_text_query']): FullTextSpec | undefined {
  if (q?.string_query) return { text: q.string_query.query, columns: opt(q.string_query.columns) };
  if (q?.structured_query) return { structured: ftsSpec(q.structured_query.query) };
  return undefined;
}

/**
 * The query vector, if any. LanceDB clients send filter-only and full-text queries with
 * `single_vector: []`: an empty vector (or multivector of empty vectors) means no vector search.
 */
function vectorOf(v: QueryTableRequest['vector']): number[] | number[][] | undefined {
  if (v?.single_vector && v.single_vector.length > 0) return v.single_vector;
  if (v?.multi_vector?.some((row) => row.length > 0)) return v.multi_vector;
  return undefined;
}

/** The engine's query for the spec's QueryTableRequest fields. */
function tableQueryOf(q: QueryTableRequest): TableQuery {
  const columns = q.columns?.column_names ?? q.columns?.column_aliases ?? undefined;
  return {
    version: opt(q.version),
    vector: vectorOf(q.vector),
    fullText: fullTextOf(q.full_text_query),
    limit: q.k,
    offset: opt(q.offset),
    filter: opt(q.filter),
    prefilter: opt(q.prefilter),
    columns,
    withRowId: opt(q.with_row_id),
    vectorColumn: opt(q.vector_column),
    distanceType: opt(q.distance_type),
    nprobes: opt(q.nprobes),
    minimumNprobes: opt(q.minimum_nprobes),
    maximumNprobes: opt(q.maximum_nprobes),
    refineFactor: opt(q.refine_factor),
    ef: opt(q.ef),
    bypassVectorIndex: opt(q.bypass_vector_index),
    fastSearch: opt(q.fast_search),
    lowerBound: opt(q.lower_bound),
    upperBound: opt(q.upper_bound),
  };
}

/** The queries operations of the Lance namespace spec, over the Lance engine. */
export class QueryService {
  constructor(private readonly tables: DataTables) {}

  /** QueryTable: the result as an Arrow IPC file. */
  async query(ctx: RequestContext, id: string[], request: QueryTableRequest): Promise<Buffer> {
    const query = tableQueryOf(request);
    const branch = normalizeBranch(request.branch);
    return this.tables.readTable(ctx, id, (table) => this.tables.engine.queries.query(table.at, query), { branch });
  }

  /** ExplainTableQueryPlan: the physical plan of `request.query`, not run. */
  async explain(ctx: RequestContext, id: string[], request: ExplainTableQueryPlanRequest): Promise<string> {
    if (request.query.id && JSON.stringify(request.query.id) !== JSON.stringify(id)) {
      throw invalidInput(`query.id ${JSON.stringify(request.query.id)} does not match the id in the path ${JSON.stringify(id)}`);
    }
    const query = tableQueryOf(request.query);
    // The spec puts `branch` beside the query and in it: either names the branch, both the same one.
    const [outer, inner] = [normalizeBranch(request.branch), normalizeBranch(request.query.branch, 'query.branch')];
    if (outer !== null && inner !== null && outer !== inner)
      throw invalidInput(`branch ${JSON.stringify(outer)} and query.branch ${JSON.stringify(inner)} name different branches`);
    const branch = outer ?? inner;
    return this.tables.readTable(ctx, id, (table) => this.tables.engine.queries.explainPlan(table.at, query, request.verbose ?? false), { branch });
  }

  /** AnalyzeTableQueryPlan: runs the query and returns its plan with execution metrics. */
  async analyze(ctx: RequestContext, id: string[], request: AnalyzeTableQueryPlanRequest): Promise<string> {
    const query = tableQueryOf(request);
    const branch = normalizeBranch(request.branch);
    return this.tables.readTable(ctx, id, (table) => this.tables.engine.queries.analyzePlan(table.at, query), { branch });
  }
}
