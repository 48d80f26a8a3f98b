import type { DatasetLocation } from '../dataset-location.js';
import type { EngineDistanceType } from './indices.js';

export interface MatchQuerySpec {
  kind: 'match';
  terms: string;
  /** Absent: every FTS-indexed column. */
  column?: string | undefined;
  boost?: number | undefined;
  fuzziness?: number | undefined;
  maxExpansions?: number | undefined;
  operator?: 'and' | 'or' | undefined;
  prefixLength?: number | undefined;
}

export interface PhraseQuerySpec {
  kind: 'phrase';
  terms: string;
  column?: string | undefined;
  slop?: number | undefined;
}

/** A structured full-text query. */
export type FtsQuerySpec =
  | MatchQuerySpec
  | PhraseQuerySpec
  | { kind: 'boost'; positive: FtsQuerySpec; negative: FtsQuerySpec; negativeBoost?: number | undefined }
  | { kind: 'multi_match'; queries: MatchQuerySpec[] }
  | { kind: 'boolean'; must: FtsQuerySpec[]; should: FtsQuerySpec[]; mustNot: FtsQuerySpec[] };

export type FullTextSpec = { text: string; columns?: string[] | undefined } | { structured: FtsQuerySpec };

/** A read of a dataset: a plain scan, a vector search, or a full-text search, with a filter. */
export interface TableQuery {
  /** Dataset version; latest when absent. */
  version?: number | undefined;
  /** One vector, or several (a multivector query, or a batch search on a plain vector column). */
  vector?: number[] | number[][] | undefined;
  fullText?: FullTextSpec | undefined;
  /** The limit (k of a vector search). */
  limit: number;
  offset?: number | undefined;
  filter?: string | undefined;
  /** Vector search: filter before searching (the default) or after. */
  prefilter?: boolean | undefined;
  /** Field paths, or output alias -> field path. */
  columns?: string[] | Record<string, string> | undefined;
  withRowId?: boolean | undefined;
  vectorColumn?: string | undefined;
  distanceType?: EngineDistanceType | undefined;
  nprobes?: number | undefined;
  minimumNprobes?: number | undefined;
  maximumNprobes?: number | undefined;
  refineFactor?: number | undefined;
  ef?: number | undefined;
  bypassVectorIndex?: boolean | undefined;
  fastSearch?: boolean | undefined;
  /** Distance range: lower inclusive, upper exclusive. */
  lowerBound?: number | undefined;
  upperBound?: number | undefined;
}

/** Engine operations that read a dataset (see lance-engine.ts). */
export interface QueryOps {
  /** Runs the query; the result is an Arrow IPC file (with the result schema even when empty). */
  query(at: DatasetLocation, query: TableQuery): Promise<Buffer>;
  /** The physical plan, without running it. */
  explainPlan(at: DatasetLocation, query: TableQuery, verbose: boolean): Promise<string>;
  /** Runs the query and returns its plan with execution metrics. */
  analyzePlan(at: DatasetLocation, query: TableQuery): Promise<string>;
}
