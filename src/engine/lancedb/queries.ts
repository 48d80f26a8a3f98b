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
  if (/Cannot have both nearest and full text search|Not supported:/i.test(message)) return as('unsupported');
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

const HYBRID =
  'a query with both a vector and a full-text query (hybrid search) is not supported: the Lance engine (@lancedb/lancedb) has no single plan for both ("Cannot have both nearest and full text search"); send them as two queries and merge the results';

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

async function applyFullText(lib: Lancedb, table: Table, query: import('@lancedb/lancedb').Query, spec: FullTextSpec): Promise<void> {
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

/** Translates a TableQuery into the binding's query builder. */
async function buildQuery(table: Table, q: TableQuery): Promise<BuiltQuery> {
  if (q.vector !== undefined && q.fullText !== undefined) throw new EngineError('unsupported', HYBRID);
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
    const plain = table.query();
    if (q.fullText !== undefined) await applyFullText(lib, table, plain, q.fullText);
    query = plain;
  }
  if (q.fastSearch) query.fastSearch();
  if (q.filter !== undefined) query.where(q.filter);
  if (q.columns !== undefined) query.select(withScore(q.columns, q.vector !== undefined ? '_distance' : q.fullText !== undefined ? '_score' : undefined));
  if (q.withRowId) query.withRowId();
  query.limit(q.limit);
  if (q.offset !== undefined && q.offset > 0) query.offset(q.offset);
  return query;
}

const versionOption = (q: TableQuery) => (q.version !== undefined ? { version: q.version } : {});

/** The queries operations of the Lance engine over @lancedb/lancedb. */
export class LancedbQueries implements QueryOps {
  constructor(private readonly access: TableAccess) {}

  private run<T>(at: DatasetLocation, q: TableQuery, fn: (query: BuiltQuery) => Promise<T>): Promise<T> {
    return this.access.read(
      at,
      async (table) => {
        try {
          return await fn(await buildQuery(table, q));
        } catch (e) {
          throw classifyDataError(e);
        }
      },
      versionOption(q),
    );
  }

  query(at: DatasetLocation, q: TableQuery): Promise<Buffer> {
    return this.run(at, q, async (query) => {
      let result = await query.toArrow();
      // A result without batches comes back without a schema either; the client still needs the
      // columns, so write the query's output schema.
      if (result.batches.length === 0) result = new arrow.Table(await query.outputSchema());
      return Buffer.from(arrow.tableToIPC(result, 'file'));
    });
  }

  explainPlan(at: DatasetLocation, q: TableQuery, verbose: boolean): Promise<string> {
    return this.run(at, q, (query) => query.explainPlan(verbose));
  }

  analyzePlan(at: DatasetLocation, q: TableQuery): Promise<string> {
    return this.run(at, q, (query) => query.analyzePlan());
  }
}
