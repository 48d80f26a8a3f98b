import { createHash } from 'node:crypto';
import type { JsonArrowDataTypeInput } from '../../engine/json-arrow-schema.js';
import { type DatasetLocation, EngineError } from '../../engine/lance-engine.js';
import { formatFieldPath, PYTHON_UDF_BACKEND, PYTHON_UDF_METADATA, SQL_UDF_BACKEND, VIRTUAL_COLUMN_METADATA } from '../../model/columns.js';
import { ErrorCode, invalidInput, NamespaceError, unsupported } from '../../model/errors.js';
import { displayId } from '../catalog/catalog.js';
import { udfEnvelopePath } from '../catalog/layout.js';
import type { RequestContext } from '../context/request-context.js';
import type { DataTable, DataTables } from './data-tables.js';

// Columns computed by Geneva's Python UDFs (udf_backend DockerUDFSpecV1). The request carries
// the UDF as the base64 of Geneva's JSON envelope ({image, tag, udf_pickle: <base64 cloudpickle>,
// udf_checksum, ...}); the service stores the envelope bytes in the table's directory at
// `_udfs/<sha256>` and binds the column to it in its field metadata, the way Geneva's own writer
// does, so that Geneva (native or remote) recognises the column and loads the UDF from there.
// The service never unpickles anything: the UDF worker does, when a backfill runs it
// (engine/ports/udfs.ts). A UDF is arbitrary code run by the service: binding one needs the
// manage privilege on the table's namespace and a service started with udf_execution on.

/** Where, inside a table's directory, an envelope (a UDF's, a chunker's or a UDTF's spec) is stored: named by its sha256, so storing it again changes nothing. */
export function envelopePath(envelope: Buffer | string): string {
  return udfEnvelopePath(createHash('sha256').update(envelope).digest('hex'));
}

/** What a virtual_column entry with udf_backend DockerUDFSpecV1 binds a column to. */
export interface PythonUdfBinding {
  column: string;
  /** The envelope bytes (the base64-decoded `udf`). */
  envelope: Buffer;
  /** Where the envelope is stored, relative to the table's directory. */
  udfPath: string;
  inputs: string[] | null;
  fieldMetadata: Record<string, string>;
}

/** The parts of a virtual_column entry (add or alter) a Python UDF binding reads. */
export interface PythonUdfEntry {
  udf?: string | null | undefined;
  udf_backend?: string | null | undefined;
  udf_name?: string | null | undefined;
  udf_version?: string | null | undefined;
  input_columns?: string[] | null | undefined;
  auto_backfill?: boolean | null | undefined;
  manifest?: string | null | undefined;
  manifest_checksum?: string | null | undefined;
  field_metadata?: Record<string, string> | null | undefined;
}

export const isPythonUdf = (entry: { udf_backend?: string | null | undefined }): boolean => entry.udf_backend === PYTHON_UDF_BACKEND;

/** Whether a column's field metadata binds it to a Python UDF; its envelope path and inputs if so. */
export function pythonUdfOf(metadata: Record<string, string>): { udfPath: string; inputs: string[] | null } | null {
  const udfPath = metadata[PYTHON_UDF_METADATA.udf];
  if (metadata[VIRTUAL_COLUMN_METADATA.marker] !== 'true' || metadata[VIRTUAL_COLUMN_METADATA.backend] !== PYTHON_UDF_BACKEND || !udfPath) return null;
  let inputs: string[] | null = null;
  try {
    const parsed: unknown = JSON.parse(metadata[PYTHON_UDF_METADATA.inputs] ?? 'null');
    if (Array.isArray(parsed) && parsed.every((c) => typeof c === 'string')) inputs = parsed;
  } catch {
    // Unreadable inputs: the UDF's own input columns are used.
  }
  return { udfPath, inputs };
}

/** Decodes a base64 value strictly (Node's decoder skips what it does not know). */
export function strictBase64(value: string): Buffer | null {
  const text = value.replace(/\s+/g, '');
  if (text === '' || !/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 === 1) return null;
  return Buffer.from(text, 'base64');
}

/** Reads a DockerUDFSpecV1 entry (without loading its pickle): a 400 naming `where` when it is not one. */
export function parsePythonUdf(where: string, column: string, entry: PythonUdfEntry): PythonUdfBinding {
  const envelope = strictBase64(entry.udf ?? '');
  if (!envelope) throw invalidInput(`${where}.udf: the base64 of the UDF's JSON envelope is required`);
  if (entry.input_columns?.includes(column)) throw invalidInput(`${where}.input_columns: the UDF may not read the column it fills (${column})`);
  return bindPythonUdf(where, column, envelope, entry);
}

/** Checks, without loading it, that `envelope` is Geneva's JSON envelope of a UDF: a udf_pickle in base64. `where` names it in the error. */
export function checkUdfEnvelope(where: string, envelope: Buffer): void {
  let parsed: unknown;
  try {
    parsed = JSON.parse(envelope.toString('utf8'));
  } catch {
    throw invalidInput(`${where}: the envelope is not JSON (udf_backend ${PYTHON_UDF_BACKEND} carries Geneva's JSON envelope)`);
  }
  const pickle = typeof parsed === 'object' && parsed !== null ? (parsed as { udf_pickle?: unknown }).udf_pickle : undefined;
  if (typeof pickle !== 'string' || !strictBase64(pickle)) throw invalidInput(`${where}: the envelope has no udf_pickle (base64 of the pickled UDF)`);
}

/**
 * Binds `column` to the UDF of Geneva's JSON `envelope` (checked, not loaded): the path it is
 * stored at and the column's field metadata, as Geneva's writer records them. `entry.udf` is not
 * read. A view's UDF may read a source column of its own name, so this does not refuse that.
 */
export function bindPythonUdf(where: string, column: string, envelope: Buffer, entry: PythonUdfEntry): PythonUdfBinding {
  checkUdfEnvelope(`${where}.udf`, envelope);
  const inputs = entry.input_columns ?? null;
  const udfPath = envelopePath(envelope);
  const fieldMetadata: Record<string, string> = {
    ...(entry.field_metadata ?? {}),
    [VIRTUAL_COLUMN_METADATA.marker]: 'true',
    [VIRTUAL_COLUMN_METADATA.backend]: PYTHON_UDF_BACKEND,
    [PYTHON_UDF_METADATA.udf]: udfPath,
    [PYTHON_UDF_METADATA.name]: entry.udf_name ?? column,
    [PYTHON_UDF_METADATA.inputs]: JSON.stringify(inputs),
    [PYTHON_UDF_METADATA.autoBackfill]: entry.auto_backfill ? 'true' : 'false',
    ...(entry.udf_version ? { [PYTHON_UDF_METADATA.version]: entry.udf_version } : {}),
    ...(entry.manifest ? { [PYTHON_UDF_METADATA.manifest]: entry.manifest } : {}),
    ...(entry.manifest_checksum ? { [PYTHON_UDF_METADATA.manifestChecksum]: entry.manifest_checksum } : {}),
  };
  return { column, envelope, udfPath, inputs, fieldMetadata };
}

/**
 * Refuses Python UDF work the service may not do: a 406 that says how to enable it when the
 * service runs no UDF workers, a 403 when the caller may not manage the table's namespace.
 */
export function requirePythonUdfs(tables: DataTables, ctx: RequestContext, id: string[], what: string): void {
  if (!tables.engine.udfs) {
    throw unsupported(
      `${what}: Python UDFs (udf_backend ${PYTHON_UDF_BACKEND}) are run only by a service started with udf_execution local or ray ` +
        '(--udf-execution local, and scripts/install-udf-worker.sh for its Python); a UDF is arbitrary code run by the service, so it is off by default. ' +
        `SQL bindings (udf_backend "${SQL_UDF_BACKEND}") need nothing of that`,
    );
  }
  const namespace = id.slice(0, -1);
  if (!(ctx.may?.('manage', namespace) ?? false)) {
    throw new NamespaceError(
      ErrorCode.PermissionDenied,
      `${what}: a Python UDF is code the service runs; binding or running one needs manage on namespace ${displayId(namespace)}`,
    );
  }
}

/**
 * Where a UDF worker works on `table`. A UDF is user code: when the service vends credentials, the
 * worker gets credentials scoped to the table's directory (`access`: read-write by default) (its protected keys
 * excepted, as for a client) instead of the service's own; a vend that fails is worth a retry, and
 * never falls back to the service's keys. Without vending (or on a local disk) it gets the store's
 * options, as the service's own writes do.
 */
export async function udfLocation(tables: DataTables, table: DataTable, jobId: string, access: 'read' | 'read-write' = 'read-write'): Promise<DatasetLocation> {
  const { credentials } = tables.catalog;
  if (!credentials.vends) return table.at;
  const ctx: RequestContext = { requestId: `job-${jobId}`, principal: null, context: {}, may: (privilege) => privilege !== 'write' || access === 'read-write' };
  let vended: Record<string, string>;
  try {
    vended = await credentials.storageOptions(ctx, { id: table.id, dir: table.dir, managedVersioning: await table.managedVersioning() }, true);
  } catch (e) {
    throw new EngineError('unavailable', `no credentials for the UDF worker: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  // Not in S3 (a local disk): nothing to scope, the store's options.
  if (vended.aws_session_token === undefined) return table.at;
  return { ...table.at, storageOptions: { ...table.at.storageOptions, ...vended } };
}

/** Stores the envelopes of `bindings` in the table's directory (content-addressed: writing one again changes nothing). */
export async function storeEnvelopes(table: DataTable, bindings: readonly PythonUdfBinding[]): Promise<void> {
  for (const b of bindings) await table.dir.store.put(`${table.dir.key}${b.udfPath}`, b.envelope);
}

/** The type of a Python UDF column: its one output's, refusing several outputs. */
export function outputTypeOf(
  where: string,
  column: string,
  outputs: ReadonlyArray<{ column: string; struct_field: string; data_type: Record<string, unknown> }>,
): JsonArrowDataTypeInput {
  const [output, ...more] = outputs;
  if (!output) throw invalidInput(`${where}.outputs: the UDF's output (column, data_type) is required`);
  if (more.length > 0 || output.struct_field !== '') {
    throw unsupported(`${where}: UDFs with several outputs (Columns[T], struct_field) are not supported yet; add a UDF with one output`);
  }
  if (output.column !== column)
    throw invalidInput(`${where}.outputs[0].column: ${JSON.stringify(output.column)} is not the column added (${formatFieldPath([column])})`);
  const type = output.data_type;
  if (typeof type.type !== 'string') throw invalidInput(`${where}.outputs[0].data_type: a JSON Arrow type with a "type" name is required`);
  return type as unknown as JsonArrowDataTypeInput;
}
