import { createHash } from 'node:crypto';
import { EngineError } from '../../engine/lance-engine.js';
import { PYTHON_UDF_BACKEND } from '../../model/columns.js';
import { ErrorCode, invalidInput, NamespaceError, unsupported } from '../../model/errors.js';
import type {
  CreateMaterializedViewRequest,
  CreateMaterializedViewResponse,
  MaterializedViewUdtfEntry,
  RefreshMaterializedViewRequest,
  RefreshMaterializedViewResponse,
} from '../../model/views.js';
import { displayId } from '../catalog/catalog.js';
import type { RequestContext } from '../context/request-context.js';
import type { DataTable, DataTables } from '../data/data-tables.js';
import { bindPythonUdf, type PythonUdfBinding, requirePythonUdfs, storeEnvelopes, strictBase64 } from '../data/python-udf-columns.js';
import { engineFailure } from '../errors/engine-errors.js';
import type { JobService } from '../jobs/job-service.js';
import type { RefreshViewJob } from '../jobs/refresh-job.js';
import {
  newViewMetadata,
  type ParsedView,
  parseChunkerView,
  parseUdtfView,
  parseViewQuery,
  type ViewChunker,
  type ViewDefinition,
  type ViewUdf,
  type ViewUdtf,
  viewOfTable,
} from './view-definition.js';

// Materialized views of kinds `query`, `chunker` and `udtf` (CreateMaterializedView,
// RefreshMaterializedView), as Geneva 0.17 uses them in remote mode. A view is an ordinary
// catalog table, created through the table service's create path with the schema the client
// sent and Geneva's view metadata (view-definition.ts); each UDF column's envelope is stored in the view's directory and its
// field bound to it, as Geneva's own writer does. A refresh is a job like a backfill (a
// transaction record with a marker, a lease and a row in Geneva's job table; see
// jobs/job-runner.ts) that recomputes the whole view from the source at one version, in
// one commit, through the UDF workers (or the engine itself, for a view without UDF columns in a
// service that runs no workers).
//
// A view with UDF columns, a chunker or a UDTF runs code the caller supplied: creating or
// refreshing one needs what any Python UDF needs (manage on the view's namespace, a service with
// udf_execution on). A chunker's or UDTF's spec is stored in the view's directory like a UDF's
// envelope, and the refresh job has the workers run it (one Overwrite commit, as for `query`).

const MV_CREATE = 'create_materialized_view';
const MV_REFRESH = 'refresh_materialized_view';

export class MaterializedViewService {
  constructor(
    private readonly tables: DataTables,
    private readonly jobs: JobService,
    /** Creates a table from an Arrow IPC stream through the table service (mode Create); its version. */
    private readonly createTable: (ctx: RequestContext, id: string[], arrowIpcStream: Buffer) => Promise<{ version: number }>,
  ) {}

  private get engine() {
    return this.tables.engine;
  }

  async create(ctx: RequestContext, id: string[], request: CreateMaterializedViewRequest): Promise<CreateMaterializedViewResponse> {
    if (id.length === 0) throw invalidInput('the view needs a name: the id names the root namespace');
    if (request.kind === 'query' && request.udtf_spec) throw invalidInput('udtf_spec: must be null for kind query');
    // A chunker or a UDTF is user code, like a UDF column.
    if (request.kind !== 'query') requirePythonUdfs(this.tables, ctx, id, MV_CREATE);
    if (request.auto_refresh) throw unsupported('auto_refresh is not supported yet: refresh the view with RefreshMaterializedView');
    const message = strictBase64(request.output_schema);
    if (!message) throw invalidInput('output_schema: the base64 of an Arrow IPC schema message is required');
    const { schema } = onEngineInput('output_schema', () => this.engine.schemaStream(message));
    const outputNamesOf = (b64: string) => this.schemaNames(b64, 'udtf_spec.udtf.output_schema_bytes');
    const parsed =
      request.kind === 'chunker'
        ? parseChunkerView(request.source_query, schema, envelopeOf(request.udtf_spec, 'chunker'), outputNamesOf)
        : request.kind === 'udtf'
          ? parseUdtfView(request.source_query, schema, envelopeOf(request.udtf_spec, 'udtf'), outputNamesOf)
          : parseViewQuery(request.source_query, schema);
    const { definition } = parsed;
    if (definition.udfs.length > 0) requirePythonUdfs(this.tables, ctx, id, MV_CREATE);
    const bindings = definition.udfs.map((u, i) => udfBinding(u, `source_query.column_udfs[${i}]`));
    const source = await this.openSource(ctx, definition.sourceId);
    const sourceVersion = await this.checkAgainstSource(source, parsed);
    const fields: Record<string, Record<string, string>> = Object.fromEntries(bindings.map((b) => [b.column, b.fieldMetadata]));
    const { stream } = onEngineInput('output_schema', () => this.engine.schemaStream(message, { schema: newViewMetadata(parsed, sourceVersion), fields }));
    const { version } = await this.createTable(ctx, id, stream);
    // After the create (which clears whatever a dead create left in the directory); a refresh
    // stores them again before it runs, so a crash in between costs nothing.
    const view = await this.tables.open(ctx, id);
    await storeEnvelopes(view, bindings);
    await storeSpec(view, definition.chunker ?? definition.udtf);
    // The first refresh, of the source version the view was just made against.
    if (request.with_no_data === false) return { version, job_id: await this.submitRefresh(ctx, id, definition, sourceVersion, {}) };
    return { version };
  }

  async refresh(ctx: RequestContext, id: string[], request: RefreshMaterializedViewRequest): Promise<RefreshMaterializedViewResponse> {
    const view = await this.tables.open(ctx, id);
    const { schema } = await this.engine.describeDataset(view.at).catch((e: unknown) => {
      throw engineFailure(e, id);
    });
    const parsed = viewOfTable(displayId(id), schema, (b64) => this.schemaNames(b64, `the view's output_schema_bytes`));
    const { definition } = parsed;
    const { chunker, udtf } = definition;
    if (request.output_limit !== undefined && request.output_limit !== null && !chunker)
      throw invalidInput(`output_limit: applies to chunker views only; this view is of kind ${udtf ? 'udtf' : 'query'}`);
    if (definition.udfs.length > 0 || chunker || udtf) requirePythonUdfs(this.tables, ctx, id, MV_REFRESH);
    const source = await this.openSource(ctx, definition.sourceId);
    const srcVersion = request.src_version ?? (await this.sourceVersion(source));
    if (request.src_version !== undefined && request.src_version !== null) {
      await this.engine.describeDataset(source.at, request.src_version).catch((e: unknown) => {
        throw engineFailure(e, definition.sourceId);
      });
    }
    // Content-addressed: storing an envelope again changes nothing (and mends a create that died before storing it).
    await storeEnvelopes(
      view,
      definition.udfs.map((u, i) => udfBinding(u, `udf ${i}`)),
    );
    await storeSpec(view, chunker ?? udtf);
    return { job_id: await this.submitRefresh(ctx, id, definition, srcVersion, request) };
  }

  /** Starts the job that recomputes view `id` of `definition` from its source at `srcVersion`; its id. */
  private async submitRefresh(
    ctx: RequestContext,
    id: string[],
    definition: ViewDefinition,
    srcVersion: number,
    request: RefreshMaterializedViewRequest,
  ): Promise<string> {
    const { chunker, udtf } = definition;
    const job: RefreshViewJob = {
      kind: 'refresh_materialized_view',
      table_id: id,
      source_id: definition.sourceId,
      src_version: srcVersion,
      filter: definition.filter,
      columns: definition.columns,
      offset: definition.offset,
      limit: definition.limit,
      udfs: definition.udfs.map((u) => ({ column: u.column, path: u.udfPath, inputs: u.inputs })),
      chunker: chunker ? { path: chunker.path, inputs: chunker.inputs, inherited: chunker.inherited } : null,
      udtf: udtf ? { path: udtf.path, query: udtf.query, partition_by: udtf.partitionBy } : null,
      output_limit: request.output_limit ?? null,
      max_rows_per_fragment: request.max_rows_per_fragment ?? null,
      rows_done: 0,
      attempts: 0,
    };
    return this.jobs.submit(ctx, MV_REFRESH, job, {
      table: JSON.stringify(id),
      source: JSON.stringify(definition.sourceId),
      src_version: String(srcVersion),
      rows_done: '0',
    });
  }

  /** The field names of an Arrow schema sent as base64 of one IPC schema message; a 400 naming `where` otherwise. */
  private schemaNames(schemaBase64: string, where: string): string[] {
    const message = strictBase64(schemaBase64);
    if (!message) throw invalidInput(`${where}: the base64 of an Arrow IPC schema message is required`);
    return onEngineInput(where, () => this.engine.schemaStream(message)).schema.fields.map((f) => f.name);
  }

  /** The source table, which the caller must be allowed to read. */
  private async openSource(ctx: RequestContext, sourceId: string[]): Promise<DataTable> {
    const namespace = sourceId.slice(0, -1);
    if (!(ctx.may?.('read', namespace) ?? false)) {
      throw new NamespaceError(
        ErrorCode.PermissionDenied,
        `the view's source ${displayId(sourceId)} is in ${namespace.length === 0 ? 'the catalog root' : `namespace ${displayId(namespace)}`}, which the caller may not read`,
      );
    }
    return this.tables.open(ctx, sourceId);
  }

  private sourceVersion(source: DataTable): Promise<number> {
    return source.at.latest ? Promise.resolve(source.at.latest.version) : this.engine.datasetVersion(source.at);
  }

  /** Checks the query's SQL and UDF inputs against the source (400 / 404 naming what is wrong); the source's version. */
  private async checkAgainstSource(source: DataTable, parsed: ParsedView): Promise<number> {
    const { definition } = parsed;
    const columns = this.engine.columns;
    try {
      const version = await this.sourceVersion(source);
      if (definition.filter !== null) await columns.checkExpression(source.at, `(${definition.filter})`, version);
      for (const c of definition.columns) await columns.checkExpression(source.at, c.sql, version);
      for (const u of definition.udfs) for (const input of u.inputs ?? []) await columns.field(source.at, input.split('.'));
      return version;
    } catch (e) {
      throw engineFailure(e, definition.sourceId);
    }
  }
}

/** A UDF column of a view as a Python UDF binding of the view's field (its envelope, path and field metadata, as Geneva writes them). */
function udfBinding(u: ViewUdf, where: string): PythonUdfBinding {
  // The inputs are the source's columns, which may share the output's name.
  return bindPythonUdf(where, u.column, u.envelope, { udf_backend: PYTHON_UDF_BACKEND, udf_name: u.name, input_columns: u.inputs });
}

/**
 * The ChunkerSpec / UDTFSpec JSON of a chunker / udtf view's create, checked as Geneva sends it
 * (geneva/db.py _build_udtf_entry): base64 of the JSON, with the SHA-256 of that base64 text.
 */
function envelopeOf(entry: MaterializedViewUdtfEntry | null | undefined, kind: 'chunker' | 'udtf'): string {
  if (!entry) throw invalidInput(`udtf_spec: a ${kind} view needs its ${kind} (udtf_spec with kind ${kind})`);
  if (entry.kind !== kind) throw invalidInput(`udtf_spec.kind: must be ${kind} for a view of kind ${kind}, got ${entry.kind}`);
  const bytes = strictBase64(entry.udtf);
  if (!bytes) throw invalidInput(`udtf_spec.udtf: the base64 of Geneva's ${kind === 'udtf' ? 'UDTFSpec' : 'ChunkerSpec'} JSON is required`);
  const sha = createHash('sha256').update(entry.udtf.replace(/\s+/g, ''), 'ascii').digest('hex');
  if (sha !== entry.udtf_sha.toLowerCase()) throw invalidInput(`udtf_spec.udtf_sha: ${entry.udtf_sha} is not the SHA-256 of udtf_spec.udtf (${sha})`);
  return bytes.toString('utf8');
}

/** Stores a chunker or udtf view's spec in its directory, where the workers read it (content-addressed: storing it again changes nothing). */
async function storeSpec(view: DataTable, envelope: ViewChunker | ViewUdtf | null): Promise<void> {
  if (envelope) await view.dir.store.put(`${view.dir.key}${envelope.path}`, Buffer.from(envelope.spec, 'utf8'));
}

/** Runs engine work on request input: its invalid-input failures are a 400 naming `where`. */
function onEngineInput<T>(where: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof EngineError && e.kind === 'invalid_input') throw invalidInput(`${where}: ${e.message}`, e);
    throw e;
  }
}
