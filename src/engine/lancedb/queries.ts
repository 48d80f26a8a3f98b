import { arrow } from '../arrow.js';
import { type DatasetLocation, EngineError } from '../dataset-location.js';
import type { FtsQuerySpec, FullTextSpec, MatchQuerySpec, QueryOps, TableQuery } from '../ports/queries.js';
import { classify, lancedb, type Table, type TableAccess } from './table-access.js';

type Lancedb = typeof import('@lancedb/lancedb');
type BuiltQuery = import('@lancedb/lancedb').Query | import('@lancedb/lancedb').VectorQuery;
type FullTextQuery = import('@lancedb/lancedb').FullTextQuery;
type VectorDistance = Parameters<import('@lancedb/lancedb').VectorQuery['distanceType']>[0];

/**
 * The engine's message without the wrapping of the Node binding ("Failed to execute query stream:
 * GenericFailure, ...") and the Rust source locations, which say nothing to a client.
 */
export function engineMessage(e: unknown): string {
  const raw = e instanceof Error ? e.message : String(e);
  const [head = raw] = raw.split(/\s+Caused by:/);
  return head
    .replace(/^Failed to [^:]{1,60}: GenericFailure, /, '')
    .replace(/,? \/\S+\.rs:\d+:\d+/g, '')
    .trim();
}

/**
 * Classifies an error of a read or index operation by the engine's message. Checked before the
 * generic `classify`, whose "already exists" means a table.
 */
export function classifyDataError(e: unknown): EngineError {
  if (e instanceof EngineError) return e;
  const message = engineMessage(e);
  const as = (kind: EngineError['kind']) => new EngineError(kind, message, { cause: e });
  if (/Index name '.*' already exists/i.test(message)) return as('index_exists');
  if (/index not found/i.test(message)) return as('index_not_found');
  if (
    /No field named|does not exist in (the )?(dataset )?schema|Field path `[^`]*` not found in schema|field path '[^']*' does not exist|column \S+ does not exist|Field \S+ does not exist/i.test(
      message,
    )
  ) {
    return as('column_not_found');
  }
  if (/Not supported:/i.test(message)) return as('unsupported');
  if (/requires the `geo` feature|Invalid function 'st_\w+'/i.test(message)) return new EngineError('unsupported', `${NO_GEO} (${message})`, { cause: e });
  if (
    /Invalid input|Error parsing statement|sql parser error|Schema Error|Invalid distance type|Unprocessable|cannot be created on the field|must be positive|does not support/i.test(
      message,
    )
  ) {
    return as('invalid_input');
  }
  return classify(new Error(message, { cause: e }));
}

const NO_GEO =
  "spatial functions (st_intersects, st_contains, ...) are not supported: the Lance engine that runs queries (@lancedb/lancedb 0.39) is built without Lance's geo feature, so RTREE indexes are built and listed but no query can use them";

/** The fusion of a hybrid search: LanceDB's default, reciprocal-rank fusion with k = 60 (also the engine's). */
const RRF = 'RRFReranker(K=60)';

/**
 * What the engine's hybrid search says when its vector search found nothing and its full-text
 * search found rows: lancedb 0.39 (query/hybrid.rs query_schemas) gives the empty side the
 * full-text side's schema with the wrong column renamed, and normalizing its `_distance` fails.
 */
const EMPTY_VECTOR_SIDE = /expected column _distance not found in rank/;

const HYBRID_BATCH =
  'a hybrid query (vector and full-text) takes one query vector, or one multivector on a multivector column; several query vectors on a plain vector column are a batch search, which the engine cannot fuse with a full-text search';

const POSTFILTER_PLAN =
  'the plan of a full-text or hybrid query with prefilter false is not available: its full-text search filters after searching, which the engine cannot plan (QueryTable runs such a query)';

const NO_FTS_INDEX = 'Invalid input, Cannot perform full text search unless an INVERTED index has been created on at least one column';

/** Builds a structured full-text query; a match or phrase without a column covers every FTS-indexed column. */
class FtsBuilder {
  private indexed: Promise<string[]> | undefined;

  constructor(
    private readonly lib: Lancedb,
    private readonly table: Table,
  ) {}

  private async ftsColumns(): Promise<string[]> {
    this.indexed ??= this.table.listIndices().then((all) => all.filter((i) => /^(fts|inverted)$/i.test(i.indexType)).flatMap((i) => i.columns));
    const columns = await this.indexed;
    if (columns.length === 0) throw new EngineError('invalid_input', NO_FTS_INDEX);
    return columns;
  }

  /** One query per column, OR-ed together when there are several. */
  private async perColumn(column: string | undefined, make: (column: string) => FullTextQuery): Promise<FullTextQuery> {
    const columns = column === undefined ? await this.ftsColumns() : [column];
    const [only] = columns;
    if (columns.length === 1 && only !== undefined) return make(only);
    return new this.lib.BooleanQuery(columns.map((c) => [this.lib.Occur.Should, make(c)]));
  }

  private match(q: MatchQuerySpec): Promise<FullTextQuery> {
    const options = {
      ...(q.boost !== undefined ? { boost: q.boost } : {}),
      ...(q.fuzziness !== undefined ? { fuzziness: q.fuzziness } : {}),
      ...(q.maxExpansions !== undefined ? { maxExpansions: q.maxExpansions } : {}),
      ...(q.operator !== undefined ? { operator: q.operator === 'and' ? this.lib.Operator.And : this.lib.Operator.Or } : {}),
      ...(q.prefixLength !== undefined ? { prefixLength: q.prefixLength } : {}),
    };
    return this.perColumn(q.column, (c) => new this.lib.MatchQuery(q.terms, c, options));
  }

  async build(q: FtsQuerySpec): Promise<FullTextQuery> {
    switch (q.kind) {
      case 'match':
        return this.match(q);
      case 'phrase':
        return this.perColumn(q.column, (c) => new this.lib.PhraseQuery(q.terms, c, q.slop !== undefined ? { slop: q.slop } : {}));
      case 'boost':
        return new this.lib.BoostQuery(
          await this.build(q.positive),
          await this.build(q.negative),
          q.negativeBoost !== undefined ? { negativeBoost: q.negativeBoost } : {},
        );
      case 'multi_match': {
        // The binding's MultiMatchQuery takes one text for all columns; the spec's takes a match
        // query per column, which is what a boolean OR of those match queries is.
        const parts = await Promise.all(q.queries.map((m) => this.match(m)));
        return new this.lib.BooleanQuery(parts.map((p) => [this.lib.Occur.Should, p]));
      }
      case 'boolean': {
        const clauses: Array<[import('@lancedb/lancedb').Occur, FullTextQuery]> = [];
        for (const [occur, queries] of [
          [this.lib.Occur.Must, q.must],
          [this.lib.Occur.Should, q.should],
          [this.lib.Occur.MustNot, q.mustNot],
        ] as const) {
          for (const sub of queries) clauses.push([occur, await this.build(sub)]);
        }
        return new this.lib.BooleanQuery(clauses);
      }
    }
  }
}

async function applyFullText(lib: Lancedb, table: Table, query: BuiltQuery, spec: FullTextSpec): Promise<void> {
  if ('text' in spec) {
    query.fullTextSearch(spec.text, spec.columns !== undefined ? { columns: spec.columns } : {});
    return;
  }
  query.fullTextSearch(await new FtsBuilder(lib, table).build(spec.structured));
}

/**
 * The projection with the search's score column added, as the engine adds it today anyway (it
 * warns on every such query that it will stop doing so): results keep their shape across engine
 * versions and the log stays quiet.
 */
function withScore(columns: string[] | Record<string, string>, score: '_distance' | '_score' | undefined): string[] | Record<string, string> {
  if (score === undefined) return columns;
  if (Array.isArray(columns)) return columns.includes(score) ? columns : [...columns, score];
  return score in columns ? columns : { ...columns, [score]: score };
}

const isHybrid = (q: TableQuery): boolean => q.vector !== undefined && q.fullText !== undefined;

/**
 * Translates a TableQuery into the binding's query builder. With both a vector and a full-text
 * query it is the engine's hybrid search: both searches, fused by reciprocal-rank fusion.
 */
async function buildQuery(table: Table, q: TableQuery): Promise<BuiltQuery> {
  const lib = lancedb();
  let query: BuiltQuery;
  if (q.vector !== undefined) {
    const vq = table.vectorSearch(q.vector);
    if (q.vectorColumn !== undefined) vq.column(q.vectorColumn);
    // The binding types list l2/cosine/dot, but its native side also takes hamming (for binary vectors).
    if (q.distanceType !== undefined) vq.distanceType(q.distanceType as VectorDistance);
    if (q.nprobes !== undefined) vq.nprobes(q.nprobes);
    if (q.minimumNprobes !== undefined) vq.minimumNprobes(q.minimumNprobes);
    if (q.maximumNprobes !== undefined) vq.maximumNprobes(q.maximumNprobes);
    if (q.refineFactor !== undefined) vq.refineFactor(q.refineFactor);
    if (q.ef !== undefined) vq.ef(q.ef);
    if (q.bypassVectorIndex) vq.bypassVectorIndex();
    if (q.prefilter === false) vq.postfilter();
    if (q.lowerBound !== undefined || q.upperBound !== undefined) vq.distanceRange(q.lowerBound, q.upperBound);
    query = vq;
  } else {
    query = table.query();
  }
  if (q.fullText !== undefined) await applyFullText(lib, table, query, q.fullText);
  if (q.fastSearch) query.fastSearch();
  if (q.filter !== undefined) query.where(q.filter);
  if (q.columns !== undefined) {
    // A hybrid search's projection goes to both searches: neither score column exists in the other.
    const score = isHybrid(q) ? undefined : q.vector !== undefined ? '_distance' : q.fullText !== undefined ? '_score' : undefined;
    query.select(withScore(q.columns, score));
  }
  if (q.withRowId) query.withRowId();
  query.limit(q.limit);
  if (q.offset !== undefined && q.offset > 0) query.offset(q.offset);
  return query;
}

type ArrowTable = import('apache-arrow').Table;

/** Whether a query is a full-text search (alone) filtered after searching, which the binding cannot ask for. */
const isPostFilteredFullText = (q: TableQuery): boolean =>
  q.vector === undefined && q.fullText !== undefined && q.filter !== undefined && q.prefilter === false;

/** The rows of a query that is not hybrid. */
async function searchRows(table: Table, q: TableQuery): Promise<ArrowTable> {
  if (isPostFilteredFullText(q)) return postFilteredFullText(table, q);
  const query = await buildQuery(table, q);
  const result = await query.toArrow();
  // A result without batches comes back without a schema either; the client still needs the
  // columns, so write the query's output schema.
  return result.batches.length > 0 ? result : new arrow.Table(await query.outputSchema());
}

/**
 * A full-text search filtered after searching, as Lance runs it (the filter applies to the
 * search's top offset + k rows): those of the unfiltered top rows that pass the filter. They are
 * a prefix of the filtered-first search's top rows, since whatever ranks above one of them there
 * passes the filter and scores higher, so it is among the unfiltered top rows too. The binding's
 * full-text query has no post-filter, so this takes the two searches and cuts the second where
 * the first row missing from the first is.
 */
async function postFilteredFullText(table: Table, q: TableQuery): Promise<ArrowTable> {
  const offset = q.offset ?? 0;
  const search = { ...q, limit: q.limit + offset, offset: undefined, withRowId: true };
  const [found, top] = await Promise.all([
    buildQuery(table, search).then((b) => b.toArrow()),
    buildQuery(table, { ...search, filter: undefined, columns: [] }).then((b) => b.toArrow()),
  ]);
  const topIds = new Set(rowIds(top));
  const ids = rowIds(found);
  let kept = 0;
  while (kept < ids.length && topIds.has(ids[kept] ?? -1n)) kept++;
  // Zero rows are written from the schema (a zero-row slice of nested columns would lack buffers).
  if (kept <= offset) return new arrow.Table(await (await buildQuery(table, q)).outputSchema());
  return found.select(found.schema.fields.map((f) => f.name).filter((n) => n !== '_rowid' || q.withRowId)).slice(offset, kept);
}

type RrfReranker = import('@lancedb/lancedb').rerankers.RRFReranker;

let rrfReranker: Promise<RrfReranker> | undefined;
/** The engine's RRF reranker (LanceDB's default k), made once. */
const reranker = (): Promise<RrfReranker> => {
  rrfReranker ??= lancedb().rerankers.RRFReranker.create();
  return rrfReranker;
};

/**
 * A hybrid search: a vector search and a full-text search, each with the query's filter (before
 * or after searching, as `prefilter` says), projection and `fast_search`, fused by reciprocal-rank
 * fusion into one ranking with `_relevance_score`, as LanceDB's hybrid search does. As LanceDB
 * Python does, each search finds k + offset rows and the offset is taken from the fused ranking
 * (the engine alone would skip `offset` rows of each search). The searches' `_distance` and
 * `_score` do not come out: the engine leaves a `_score` column behind that mixes normalized
 * full-text scores and vector distances.
 */
class HybridSearch {
  /** What each of the two searches is asked for. */
  private readonly searched: TableQuery;

  constructor(
    private readonly table: Table,
    private readonly q: TableQuery,
  ) {
    this.searched = { ...q, limit: q.limit + (q.offset ?? 0), offset: undefined };
  }

  /** The two searches as the engine runs them within the hybrid search (both keep `_rowid`, its join key). */
  private async searches(): Promise<{ vector: BuiltQuery; fullText: BuiltQuery }> {
    const both = { ...this.searched, withRowId: true };
    await this.refuseBatch();
    const [vector, fullText] = await Promise.all([
      buildQuery(this.table, { ...both, fullText: undefined }),
      buildQuery(this.table, { ...both, vector: undefined }),
    ]);
    return { vector, fullText };
  }

  /**
   * Refuses a batch search (several query vectors on a plain vector column, whose results get a
   * `query_index` column): the engine fails to fuse one with a full-text search.
   */
  private async refuseBatch(): Promise<void> {
    if (!Array.isArray(this.q.vector?.[0])) return;
    const vector = await buildQuery(this.table, { ...this.searched, fullText: undefined });
    if ((await vector.outputSchema()).fields.some((f) => f.name === 'query_index')) throw new EngineError('unsupported', HYBRID_BATCH);
  }

  async run(): Promise<ArrowTable> {
    await this.refuseBatch();
    let fused: ArrowTable;
    try {
      fused = await (await buildQuery(this.table, this.searched)).toArrow();
    } catch (e) {
      if (!EMPTY_VECTOR_SIDE.test(engineMessage(e))) throw e;
      fused = await this.fuseFullTextAlone();
    }
    const offset = this.q.offset ?? 0;
    // An empty result comes back without the projected columns (and a zero-row slice of nested
    // columns would be written without buffers): its schema is the vector search's, scored.
    if (fused.numRows <= offset) return new arrow.Table(await this.schema());
    const keep = fused.schema.fields.map((f) => f.name).filter((n) => n !== '_distance' && n !== '_score' && (n !== '_rowid' || this.q.withRowId));
    return fused.select(keep).slice(offset, offset + this.q.limit);
  }

  /** The fused result's schema: the vector search's without `_distance`, then `_relevance_score`. */
  private async schema(): Promise<import('apache-arrow').Schema> {
    const vector = await buildQuery(this.table, { ...this.q, fullText: undefined });
    const fields = (await vector.outputSchema()).fields.filter((f) => f.name !== '_distance');
    return new arrow.Schema([...fields, new arrow.Field('_relevance_score', new arrow.Float32(), false)]);
  }

  /**
   * The fused result when the vector search found nothing, which the engine's hybrid search
   * fails on (EMPTY_VECTOR_SIDE): the full-text search's rows, ranked by the engine's RRF
   * reranker against an empty vector result.
   */
  private async fuseFullTextAlone(): Promise<ArrowTable> {
    const found = await searchRows(this.table, { ...this.searched, vector: undefined, withRowId: true });
    if (found.numRows === 0) return found;
    const ids = BigUint64Array.from(rowIds(found));
    const rowIdData = (data: BigUint64Array) => arrow.makeData({ type: new arrow.Uint64(), length: data.length, nullCount: 0, data });
    const scoreData = (length: number) => arrow.makeData({ type: new arrow.Float32(), length, nullCount: 0, data: new Float32Array(length) });
    // RRF ranks by position in each list (joined on `_rowid`): the scores it is given do not count.
    const fused = await (await reranker()).rerankHybrid(
      '',
      new arrow.RecordBatch({ _rowid: rowIdData(new BigUint64Array(0)), _distance: scoreData(0) }),
      new arrow.RecordBatch({ _rowid: rowIdData(ids), _score: scoreData(ids.length) }),
    );
    const field = fused.schema.fields.find((f) => f.name === '_relevance_score');
    const scores = fused.getChild('_relevance_score');
    if (!field || !scores) throw new EngineError('internal', 'the RRF reranker returned no _relevance_score');
    const byRow = new Map(rowIds(fused).map((id, i) => [id, Number(scores.get(i))]));
    // One list fused keeps its order: the rows stay as found.
    return appendColumn(
      found,
      field,
      Float32Array.from(ids, (id) => byRow.get(id) ?? 0),
    );
  }

  async explainPlan(verbose: boolean): Promise<string> {
    const { vector, fullText } = await this.searches();
    return hybridPlan(await Promise.all([vector.explainPlan(verbose), fullText.explainPlan(verbose)]));
  }

  async analyzePlan(): Promise<string> {
    const { vector, fullText } = await this.searches();
    return hybridPlan(await Promise.all([vector.analyzePlan(), fullText.analyzePlan()]));
  }
}

/** The plans of a hybrid search's two searches under the fusion that combines them. */
function hybridPlan([vector, fullText]: string[]): string {
  const indent = (plan = '') => plan.replace(/^/gm, '    ');
  return `${RRF}\n  Vector Search Plan:\n${indent(vector)}\n  FTS Search Plan:\n${indent(fullText)}`;
}

/** The `_rowid` column of a result, as bigints. */
function rowIds(table: ArrowTable | import('apache-arrow').RecordBatch): bigint[] {
  const ids = table.getChild('_rowid');
  return ids ? Array.from(ids.toArray() as BigUint64Array) : [];
}

/** `table` with a non-null column of `values` (one per row) appended. */
function appendColumn(table: ArrowTable, field: import('apache-arrow').Field, values: Float32Array): ArrowTable {
  const schema = new arrow.Schema([...table.schema.fields, field]);
  let at = 0;
  const batches = table.batches.map((b) => {
    const data = values.subarray(at, at + b.numRows);
    at += b.numRows;
    const child = arrow.makeData({ type: new arrow.Float32(), length: data.length, nullCount: 0, data });
    return new arrow.RecordBatch(
      schema,
      arrow.makeData({ type: new arrow.Struct(schema.fields), length: b.numRows, nullCount: 0, children: [...b.data.children, child] }),
    );
  });
  return new arrow.Table(schema, batches);
}

const versionOption = (q: TableQuery) => (q.version !== undefined ? { version: q.version } : {});

/** The queries operations of the Lance engine over @lancedb/lancedb. */
export class LancedbQueries implements QueryOps {
  constructor(private readonly access: TableAccess) {}

  private run<T>(at: DatasetLocation, q: TableQuery, fn: (table: Table) => Promise<T>): Promise<T> {
    return this.access.read(
      at,
      async (table) => {
        try {
          return await fn(table);
        } catch (e) {
          throw classifyDataError(e);
        }
      },
      versionOption(q),
    );
  }

  query(at: DatasetLocation, q: TableQuery): Promise<Buffer> {
    return this.run(at, q, async (table) => {
      const result = isHybrid(q) ? await new HybridSearch(table, q).run() : await searchRows(table, q);
      return Buffer.from(arrow.tableToIPC(result, 'file'));
    });
  }

  explainPlan(at: DatasetLocation, q: TableQuery, verbose: boolean): Promise<string> {
    return this.run(at, q, async (table) => {
      refusePostFilteredPlan(q);
      return isHybrid(q) ? new HybridSearch(table, q).explainPlan(verbose) : (await buildQuery(table, q)).explainPlan(verbose);
    });
  }

  analyzePlan(at: DatasetLocation, q: TableQuery): Promise<string> {
    return this.run(at, q, async (table) => {
      refusePostFilteredPlan(q);
      return isHybrid(q) ? new HybridSearch(table, q).analyzePlan() : (await buildQuery(table, q)).analyzePlan();
    });
  }
}

/** The binding plans a full-text search filtered first only: a post-filtered one would be planned wrong. */
function refusePostFilteredPlan(q: TableQuery): void {
  if (q.fullText !== undefined && q.filter !== undefined && q.prefilter === false) throw new EngineError('unsupported', POSTFILTER_PLAN);
}
