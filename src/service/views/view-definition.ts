import { z } from 'zod';
import type { JsonArrowSchema } from '../../engine/json-arrow-schema.js';
import { IS_SET, SOURCE_ROW_ID } from '../../engine/ports/views.js';
import { PYTHON_UDF_BACKEND } from '../../model/columns.js';
import { invalidInput, unsupported } from '../../model/errors.js';
import { checkUdfEnvelope, envelopePath } from '../data/python-udf-columns.js';
import { sqlIdentifier } from '../jobs/backfill-plan.js';

// What a materialized view is (kind `query`; `chunker` and `udtf` further down), read from what Geneva 0.17 sends and stores:
// `source_query` is its GenevaQuery JSON (geneva/query.py: a lancedb Query `base` with filter,
// columns, limit and offset, `column_udfs` with Python UDFs, `source_table`), `output_schema` the
// view's Arrow schema (`__source_row_id` int64 and `__is_set` bool first). The view table keeps
// the query in its schema metadata under the keys Geneva's own writer uses, so that Geneva's
// readers (native or remote) recognise it, and a refresh reads it back from there.

/** Schema metadata of a view table (geneva/query.py MATVIEW_META_*). */
export const VIEW_METADATA = {
  query: 'geneva::view::query',
  baseTable: 'geneva::view::base_table',
  baseTableDbUri: 'geneva::view::base_table_db_uri',
  baseTableVersion: 'geneva::view::base_table_version',
  version: 'geneva::view::version',
  chunker: 'geneva::view::chunker',
  udtf: 'geneva::view::udtf',
  manifest: 'geneva::view::manifest',
  manifestChecksum: 'geneva::view::manifest_checksum',
} as const;

/** Field metadata of `__source_row_id`: the source version of the last refresh (geneva/table.py). */
export const LAST_REFRESHED_VERSION = 'geneva::mv::last_refreshed_version';

export const CHILD_INDEX = '__child_index';

/**
 * `geneva::view::version` of a query view: "1" is a view whose `__source_row_id` values are row
 * addresses (the source has no stable row ids, which tables the service creates never have);
 * "2" would be stable row ids. `udtf`, `chunker` and `scalar_udtf` are the other kinds.
 */
const QUERY_VIEW_VERSIONS = new Set(['1', '2']);
const ADDRESS_ROW_IDS = '1';
export const CHUNKER_VIEW_VERSION = 'chunker';
export const UDTF_VIEW_VERSION = 'udtf';

const Sql = z.string();

/** The parts of Geneva's GenevaQuery (and its lancedb Query `base`) a view is made of; other keys are kept but not read. */
const GenevaQuery = z
  .object({
    base: z
      .object({
        filter: Sql.nullable().optional(),
        limit: z.number().int().min(0).nullable().optional(),
        offset: z.number().int().min(0).nullable().optional(),
        columns: z
          .union([z.array(z.string()), z.record(z.string(), Sql), z.array(z.tuple([z.string(), Sql]))])
          .nullable()
          .optional(),
        vector: z.unknown().optional(),
        full_text_query: z.unknown().optional(),
        order_by: z.unknown().optional(),
        with_row_id: z.boolean().nullable().optional(),
        with_row_address: z.boolean().nullable().optional(),
        fragment_ids: z.array(z.number().int().min(0)).nullable().optional(),
      })
      .loose(),
    shuffle: z.boolean().nullable().optional(),
    fragment_ids: z.array(z.number().int().min(0)).nullable().optional(),
    with_row_address: z.boolean().nullable().optional(),
    column_udfs: z
      .array(
        z
          .object({
            output_index: z.number().int().min(0),
            output_name: z.string().min(1),
            input_columns: z.array(z.string().min(1)).nullable().optional(),
            udf: z.object({ name: z.string(), backend: z.string(), udf_payload: z.string() }).loose(),
          })
          .loose(),
      )
      .nullable()
      .optional(),
    source_table: z.string().min(1).nullable().optional(),
    source_db_uri: z.string().nullable().optional(),
  })
  .loose();
type GenevaQuery = z.infer<typeof GenevaQuery>;

/** A view column computed by a Python UDF. */
export interface ViewUdf {
  column: string;
  name: string;
  /** Geneva's DockerUDFSpecV1 JSON envelope (its `udf_payload`), stored at `udfPath` in the view's directory. */
  envelope: Buffer;
  udfPath: string;
  inputs: string[] | null;
}

/**
 * The chunker of a view of kind `chunker` (Geneva's `@chunker`: a generator run on each source
 * row, yielding zero or more view rows). Its ChunkerSpec JSON (with the cloudpickled Chunker) is
 * the view's `geneva::view::chunker` and is stored at `path` in the view's directory for the workers.
 */
export interface ViewChunker {
  spec: string;
  path: string;
  /** The projected columns the chunker reads (bound to its parameters by name). */
  inputs: string[];
  /** View columns copied from the source row onto each of its view rows. */
  inherited: string[];
  manifest: string | null;
  manifestChecksum: string | null;
}

/**
 * The UDTF of a view of kind `udtf` (Geneva's `@udtf`: a function of the whole source query that
 * yields the view's rows). Its UDTFSpec JSON is the view's `geneva::view::udtf`, stored at `path`
 * in the view's directory for the workers.
 */
export interface ViewUdtf {
  spec: string;
  path: string;
  /** Run once per distinct value of this source column, as Geneva's refresh does. */
  partitionBy: string | null;
  /** The GenevaQuery JSON the UDTF is handed (as a Geneva query builder over the source). */
  query: string;
  manifest: string | null;
  manifestChecksum: string | null;
}

/** A view of kind `query`, `chunker` or `udtf`, as a refresh computes it. */
export interface ViewDefinition {
  /** The source table (Geneva names one of the root namespace). */
  sourceId: string[];
  /** The filter, with fragment_ids folded in. */
  filter: string | null;
  columns: Array<{ name: string; sql: string }>;
  offset: number | null;
  limit: number | null;
  udfs: ViewUdf[];
  /** Kind `chunker`: the chunker; `columns` are then what is read of each source row (its inherited columns and the chunker's inputs). */
  chunker: ViewChunker | null;
  /** Kind `udtf`: the UDTF (`columns` are then the query's projection, checked against the source, and not read otherwise). */
  udtf: ViewUdtf | null;
}

function requireUniqueNames(names: string[]): void {
  if (new Set(names).size !== names.length) throw invalidInput('output_schema: field names must be unique');
}

/** A view's definition and the JSON Geneva's readers find in `geneva::view::query` (with the columns spelled out). */
export interface ParsedView {
  definition: ViewDefinition;
  queryJson: string;
  sourceDbUri: string;
}

/** Geneva's GenevaQuery JSON, checked for what no kind of view supports; a 400 / 406 naming what is wrong. */
function readGenevaQuery(sourceQuery: string, where: string): { json: Record<string, unknown>; query: GenevaQuery } {
  const { json, value: query } = parseJson(sourceQuery, GenevaQuery, where, 'GenevaQuery');
  const { base } = query;
  if (base.vector !== undefined && base.vector !== null) throw unsupported(`${where}: views over a vector search are not supported yet`);
  if (base.full_text_query !== undefined && base.full_text_query !== null) throw unsupported(`${where}: views over a full-text search are not supported yet`);
  if (base.order_by !== undefined && base.order_by !== null)
    throw unsupported(`${where}: base.order_by is not supported yet (a view's rows follow the source's order)`);
  if (!query.source_table) throw invalidInput(`${where}.source_table: the source table's name is required`);
  if (query.source_table.includes('$'))
    throw invalidInput(`${where}.source_table: a table of the root namespace is expected, got ${JSON.stringify(query.source_table)}`);
  if (query.with_row_address || base.with_row_id || base.with_row_address)
    throw unsupported(`${where}: with_row_id / with_row_address views are not supported yet`);
  return { json: json as Record<string, unknown>, query };
}

/** `text` as JSON of `schema`; a 400 naming `where` (and the part that is wrong) otherwise. */
function parseJson<T>(text: string, schema: z.ZodType<T>, where: string, what: string): { json: unknown; value: T } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw invalidInput(`${where}: not JSON (Geneva's ${what} JSON is expected): ${(e as Error).message}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw invalidInput(`${where}${issue?.path.length ? `.${issue.path.join('.')}` : ''}: ${issue?.message ?? `not a ${what}`}`);
  }
  return { json, value: parsed.data };
}

/** The projection in Geneva's three spellings (a list of names, a map of name to SQL, [name, SQL] pairs); null when none is given. */
function projectionOf(query: GenevaQuery, where: string): Array<{ name: string; sql: string }> | null {
  const given = query.base.columns;
  if (given === null || given === undefined) return null;
  const columns = Array.isArray(given)
    ? given.map((c) => (typeof c === 'string' ? { name: c, sql: sqlIdentifier(c) } : { name: c[0], sql: c[1] }))
    : Object.entries(given).map(([name, sql]) => ({ name, sql }));
  if (new Set(columns.map((c) => c.name)).size !== columns.length) throw invalidInput(`${where}.base.columns: a column is named twice`);
  for (const c of columns) if (c.sql.trim() === '') throw invalidInput(`${where}.base.columns: the expression of ${JSON.stringify(c.name)} is empty`);
  return columns;
}

/** The rows of the source a view holds: its filter, with fragment_ids folded in. */
function filterOf(query: GenevaQuery): string | null {
  const fragmentIds = query.fragment_ids ?? query.base.fragment_ids ?? null;
  const filters = [
    query.base.filter?.trim() ? `(${query.base.filter})` : null,
    fragmentIds ? `(_rowaddr >> 32) IN (${fragmentIds.length > 0 ? fragmentIds.join(', ') : 'NULL'})` : null,
  ].filter((f): f is string => f !== null);
  return filters.length > 0 ? filters.join(' AND ') : null;
}

/** Parses `source_query` against the view's schema; a 400 (or a 406 for what is not supported) naming what is wrong. */
export function parseViewQuery(sourceQuery: string, schema: JsonArrowSchema, where = 'source_query'): ParsedView {
  const { json, query } = readGenevaQuery(sourceQuery, where);
  const sourceTable = query.source_table as string;
  const { base } = query;

  const names = schema.fields.map((f) => f.name);
  if (names[0] !== SOURCE_ROW_ID || names[1] !== IS_SET) {
    throw invalidInput(
      `output_schema: the view's first fields must be ${SOURCE_ROW_ID} (int64) and ${IS_SET} (bool), got ${JSON.stringify(names.slice(0, 2))}`,
    );
  }
  const [rowId, isSet] = schema.fields;
  if (rowId?.type.type !== 'int64' || isSet?.type.type !== 'bool') throw invalidInput(`output_schema: ${SOURCE_ROW_ID} must be int64 and ${IS_SET} bool`);
  requireUniqueNames(names);
  for (const meta of ['_rowid', '_rowaddr']) {
    if (names.includes(meta))
      throw unsupported(`output_schema: a view that stores the source's ${meta} is not supported yet (__source_row_id holds the source row id)`);
  }

  const udfs = (query.column_udfs ?? []).map((entry, i): ViewUdf => {
    const at = `${where}.column_udfs[${i}]`;
    if (entry.udf.backend !== PYTHON_UDF_BACKEND)
      throw unsupported(`${at}.udf.backend: only ${PYTHON_UDF_BACKEND} UDFs are supported, got ${JSON.stringify(entry.udf.backend)}`);
    if (!names.includes(entry.output_name)) throw invalidInput(`${at}.output_name: ${JSON.stringify(entry.output_name)} is not a field of output_schema`);
    const envelope = Buffer.from(entry.udf.udf_payload, 'utf8');
    checkUdfEnvelope(`${at}.udf.udf_payload`, envelope);
    return { column: entry.output_name, name: entry.udf.name, envelope, udfPath: envelopePath(envelope), inputs: entry.input_columns ?? null };
  });
  const udfColumns = new Set(udfs.map((u) => u.column));
  if (udfColumns.size !== udfs.length) throw invalidInput(`${where}.column_udfs: two UDFs fill the same column`);

  // The projected columns: Geneva's three spellings, or (none given) every field that is not a UDF's, by its own name.
  const plain = names.slice(2).filter((n) => !udfColumns.has(n));
  const given = base.columns;
  const columns = projectionOf(query, where) ?? plain.map((name) => ({ name, sql: sqlIdentifier(name) }));
  const projected = new Set(columns.map((c) => c.name));
  for (const c of columns) {
    if (!plain.includes(c.name))
      throw invalidInput(
        `${where}.base.columns: ${JSON.stringify(c.name)} is ${udfColumns.has(c.name) ? "also a UDF's output" : 'not a field of output_schema'}`,
      );
  }
  const unfilled = plain.filter((n) => !projected.has(n));
  if (unfilled.length > 0) throw invalidInput(`output_schema: ${JSON.stringify(unfilled)} neither selected by the query nor filled by a UDF`);

  const definition: ViewDefinition = {
    sourceId: [sourceTable],
    filter: filterOf(query),
    columns,
    offset: base.offset ?? null,
    limit: base.limit ?? null,
    udfs,
    chunker: null,
    udtf: null,
  };
  // As Geneva's create does: a query without a select names the columns it read.
  const stored = given === null || given === undefined ? JSON.stringify(withColumns(json, plain)) : sourceQuery;
  return { definition, queryJson: stored, sourceDbUri: query.source_db_uri ?? '' };
}

/** What Geneva's ChunkerSpec and UDTFSpec JSON (geneva/packager) both hold. */
const GenevaSpec = z
  .object({
    name: z.string().min(1),
    version: z.string(),
    output_schema_bytes: z.string().min(1),
    input_columns: z.array(z.string().min(1)).nullable().optional(),
    manifest: z.string().nullable().optional(),
    manifest_checksum: z.string().nullable().optional(),
  })
  .loose();

/** Geneva's ChunkerSpec JSON (ChunkerSpec.to_json), the envelope of a chunker view. */
const ChunkerSpec = GenevaSpec.extend({ chunker_payload: z.string().min(1), batch: z.boolean().nullable().optional() });

/**
 * Parses a view of kind `chunker`: its GenevaQuery, its ChunkerSpec JSON (`spec`) and its schema
 * (`__source_row_id` int64, `__child_index` int32, the inherited source columns, then the chunker's
 * outputs, as geneva/db.py _create_udtf_view builds it). `outputNamesOf` reads the field names of
 * the spec's `output_schema_bytes` (base64 of an IPC schema message). A 400 / 406 naming what is wrong.
 */
export function parseChunkerView(
  sourceQuery: string,
  schema: JsonArrowSchema,
  spec: string,
  outputNamesOf: (schemaBase64: string) => string[],
  where = 'source_query',
  specWhere = 'udtf_spec.udtf',
): ParsedView {
  const { query } = readGenevaQuery(sourceQuery, where);
  if ((query.column_udfs ?? []).length > 0) throw unsupported(`${where}.column_udfs: UDF columns in a chunker view's query are not supported yet`);
  const chunkerSpec = parseJson(spec, ChunkerSpec, specWhere, 'ChunkerSpec').value;

  const names = schema.fields.map((f) => f.name);
  const [rowId, childIndex] = schema.fields;
  if (rowId?.name !== SOURCE_ROW_ID || childIndex?.name !== CHILD_INDEX || rowId.type.type !== 'int64' || childIndex.type.type !== 'int32') {
    throw invalidInput(
      `output_schema: a chunker view's first fields must be ${SOURCE_ROW_ID} (int64) and ${CHILD_INDEX} (int32), got ${JSON.stringify(names.slice(0, 2))}`,
    );
  }
  requireUniqueNames(names);
  const outputs = outputNamesOf(chunkerSpec.output_schema_bytes);
  if (outputs.length === 0 || outputs.length > names.length - 2 || outputs.some((n, i) => names[names.length - outputs.length + i] !== n)) {
    throw invalidInput(`output_schema: the view's last fields must be the chunker's outputs ${JSON.stringify(outputs)}, got ${JSON.stringify(names.slice(2))}`);
  }
  const inherited = names.slice(2, names.length - outputs.length);
  const inputs = chunkerSpec.input_columns ?? [];
  const projection = projectionOf(query, where);
  let columns: Array<{ name: string; sql: string }>;
  if (projection === null) {
    columns = [...new Set([...inherited, ...inputs])].map((name) => ({ name, sql: sqlIdentifier(name) }));
  } else {
    const projected = new Set(projection.map((c) => c.name));
    for (const name of inherited)
      if (!projected.has(name)) throw invalidInput(`output_schema: ${JSON.stringify(name)} is neither selected by the query nor an output of the chunker`);
    const missing = inputs.filter((name) => !projected.has(name));
    if (missing.length > 0)
      throw invalidInput(`${specWhere}.input_columns: ${JSON.stringify(missing)} not found in the query's projection ${JSON.stringify([...projected])}`);
    columns = projection.filter((c) => inherited.includes(c.name) || inputs.includes(c.name));
  }
  const chunker: ViewChunker = {
    spec,
    path: envelopePath(spec),
    inputs,
    inherited,
    manifest: chunkerSpec.manifest ?? null,
    manifestChecksum: chunkerSpec.manifest_checksum ?? null,
  };
  const base = query.base;
  const definition: ViewDefinition = {
    sourceId: [query.source_table as string],
    filter: filterOf(query),
    columns,
    offset: base.offset ?? null,
    limit: base.limit ?? null,
    udfs: [],
    chunker,
    udtf: null,
  };
  return { definition, queryJson: sourceQuery, sourceDbUri: query.source_db_uri ?? '' };
}

/** Geneva's UDTFSpec JSON (UDTFSpec.to_json), the envelope of a udtf view. */
const UdtfSpec = GenevaSpec.extend({ udtf_payload: z.string().min(1), partition_by: z.string().min(1).nullable().optional() });

/**
 * Parses a view of kind `udtf`: its GenevaQuery, its UDTFSpec JSON (`spec`) and its schema, which
 * is the UDTF's output schema (no metacolumns; geneva/db.py create_udtf_view). `outputNamesOf` as
 * parseChunkerView's. A 400 / 406 naming what is wrong.
 */
export function parseUdtfView(
  sourceQuery: string,
  schema: JsonArrowSchema,
  spec: string,
  outputNamesOf: (schemaBase64: string) => string[],
  where = 'source_query',
  specWhere = 'udtf_spec.udtf',
): ParsedView {
  const { query } = readGenevaQuery(sourceQuery, where);
  if ((query.column_udfs ?? []).length > 0) throw unsupported(`${where}.column_udfs: UDF columns in a udtf view's query are not supported yet`);
  if (query.shuffle) throw unsupported(`${where}.shuffle: a shuffled udtf view is not supported (Geneva's query builder refuses it too)`);
  const udtfSpec = parseJson(spec, UdtfSpec, specWhere, 'UDTFSpec').value;
  const names = schema.fields.map((f) => f.name);
  const outputs = outputNamesOf(udtfSpec.output_schema_bytes);
  if (outputs.length !== names.length || outputs.some((n, i) => names[i] !== n)) {
    throw invalidInput(`output_schema: a udtf view's schema is the UDTF's output schema ${JSON.stringify(outputs)}, got ${JSON.stringify(names)}`);
  }
  requireUniqueNames(names);
  const udtf: ViewUdtf = {
    spec,
    path: envelopePath(spec),
    partitionBy: udtfSpec.partition_by ?? null,
    query: sourceQuery,
    manifest: udtfSpec.manifest ?? null,
    manifestChecksum: udtfSpec.manifest_checksum ?? null,
  };
  const columns = [...(projectionOf(query, where) ?? []), ...(udtf.partitionBy ? [{ name: udtf.partitionBy, sql: sqlIdentifier(udtf.partitionBy) }] : [])];
  const base = query.base;
  const definition: ViewDefinition = {
    sourceId: [query.source_table as string],
    filter: filterOf(query),
    columns,
    offset: base.offset ?? null,
    limit: base.limit ?? null,
    udfs: [],
    chunker: null,
    udtf,
  };
  return { definition, queryJson: sourceQuery, sourceDbUri: query.source_db_uri ?? '' };
}

function withColumns(query: Record<string, unknown>, columns: string[]): GenevaQuery {
  return { ...query, base: { ...(query.base as Record<string, unknown>), columns } } as GenevaQuery;
}

/** The schema metadata of a new view (geneva/query.py create_materialized_view). */
export function newViewMetadata(parsed: ParsedView, sourceVersion: number): Record<string, string> {
  const { chunker, udtf } = parsed.definition;
  const envelope = chunker ?? udtf;
  return {
    [VIEW_METADATA.query]: parsed.queryJson,
    [VIEW_METADATA.baseTable]: parsed.definition.sourceId[parsed.definition.sourceId.length - 1] ?? '',
    [VIEW_METADATA.baseTableDbUri]: parsed.sourceDbUri,
    [VIEW_METADATA.baseTableVersion]: String(sourceVersion),
    [VIEW_METADATA.version]: chunker ? CHUNKER_VIEW_VERSION : udtf ? UDTF_VIEW_VERSION : ADDRESS_ROW_IDS,
    // Geneva's client refuses refresh(output_limit=...) unless the version says chunker; its native refresh reads the spec from here.
    ...(chunker ? { [VIEW_METADATA.chunker]: chunker.spec } : {}),
    ...(udtf ? { [VIEW_METADATA.udtf]: udtf.spec } : {}),
    ...(envelope?.manifest ? { [VIEW_METADATA.manifest]: envelope.manifest } : {}),
    ...(envelope?.manifestChecksum ? { [VIEW_METADATA.manifestChecksum]: envelope.manifestChecksum } : {}),
  };
}

/**
 * A view table's definition, from its schema and schema metadata; a 400 when the table is not a
 * view, a 406 for kinds not supported. `outputNamesOf` is parseChunkerView's.
 */
export function viewOfTable(tableName: string, schema: JsonArrowSchema, outputNamesOf: (schemaBase64: string) => string[]): ParsedView {
  const metadata = schema.metadata ?? {};
  const query = metadata[VIEW_METADATA.query];
  if (query === undefined) throw invalidInput(`table ${tableName} is not a materialized view (its schema metadata has no ${VIEW_METADATA.query})`);
  const kind = metadata[VIEW_METADATA.version] ?? ADDRESS_ROW_IDS;
  if (kind === CHUNKER_VIEW_VERSION) {
    const spec = metadata[VIEW_METADATA.chunker];
    if (spec === undefined) throw invalidInput(`materialized view ${tableName} is of kind chunker but its schema metadata has no ${VIEW_METADATA.chunker}`);
    return parseChunkerView(query, schema, spec, outputNamesOf, `the view's ${VIEW_METADATA.query}`, `the view's ${VIEW_METADATA.chunker}`);
  }
  if (kind === UDTF_VIEW_VERSION) {
    const spec = metadata[VIEW_METADATA.udtf];
    if (spec === undefined) throw invalidInput(`materialized view ${tableName} is of kind udtf but its schema metadata has no ${VIEW_METADATA.udtf}`);
    return parseUdtfView(query, schema, spec, outputNamesOf, `the view's ${VIEW_METADATA.query}`, `the view's ${VIEW_METADATA.udtf}`);
  }
  if (!QUERY_VIEW_VERSIONS.has(kind))
    throw unsupported(`materialized view ${tableName} is of kind ${kind}: only views of kind query, chunker and udtf can be refreshed yet`);
  return parseViewQuery(query, schema, `the view's ${VIEW_METADATA.query}`);
}
