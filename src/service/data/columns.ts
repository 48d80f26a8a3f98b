import { nextManifestWithSchemaMetadata } from '../../engine/lance-format/manifest.js';
import type { ColumnAlteration, FieldMetadataChange, NewColumns } from '../../engine/ports/columns.js';
import {
  type AddColumnsEntry,
  type AlterTableAddColumnsRequest,
  type AlterTableAddColumnsResponse,
  type AlterTableAlterColumnsRequest,
  type AlterTableAlterColumnsResponse,
  type AlterTableDropColumnsRequest,
  type AlterTableDropColumnsResponse,
  type AlterVirtualColumnEntry,
  COMPUTED_COLUMN_METADATA,
  type DescribeTableIndexStatsResponse,
  formatFieldPath,
  type GetTableStatsResponse,
  PYTHON_UDF_BACKEND,
  parseFieldPath,
  SQL_UDF_BACKEND,
  type UpdateFieldMetadataRequest,
  type UpdateFieldMetadataResponse,
  VIRTUAL_COLUMN_METADATA,
} from '../../model/columns.js';
import { ErrorCode, invalidInput, NamespaceError, unsupported } from '../../model/errors.js';
import { type BranchName, normalizeBranch } from '../branches/branch-refs.js';
import type { RequestContext } from '../context/request-context.js';
import type { DataTable, DataTables } from './data-tables.js';
import { manifestIndex, manifestIndices } from './index-manifest.js';
import { isPythonUdf, outputTypeOf, type PythonUdfBinding, parsePythonUdf, requirePythonUdfs, storeEnvelopes } from './python-udf-columns.js';

/** Parses a field path of the request; a malformed one is a 400 naming the field. */
function segmentsOf(path: string, where: string): string[] {
  const parsed = parseFieldPath(path);
  if (!parsed.ok) throw invalidInput(`${where}: ${parsed.error}`);
  return parsed.segments;
}

interface VirtualColumnLike {
  udf?: string | null | undefined;
  udf_backend?: string | null | undefined;
}

/** Whether a virtual_column entry binds a SQL expression (udf_backend "sql"). */
function isSqlBinding(entry: VirtualColumnLike): boolean {
  return typeof entry.udf_backend === 'string' && entry.udf_backend.toLowerCase() === SQL_UDF_BACKEND;
}

/**
 * Virtual columns that are neither SQL bindings nor Geneva's Python UDFs are refused with the
 * reason: the UDF backends this service runs are those two.
 */
function refuseVirtualColumn(column: string, entry: VirtualColumnLike): never {
  const backend = entry.udf_backend ? `udf_backend ${JSON.stringify(entry.udf_backend)}` : 'a virtual_column without udf_backend';
  throw unsupported(
    `virtual column ${column}: ${backend} is not supported; this service runs SQL bindings (udf_backend "${SQL_UDF_BACKEND}", the expression in udf) ` +
      `and Geneva's Python UDFs (udf_backend "${PYTHON_UDF_BACKEND}", when started with udf_execution on)`,
  );
}

/**
 * Whether the SQL names `column` as an identifier (outside string literals; bare, "quoted" or
 * `quoted`). A backfill writes the column to the expression chunk by chunk and may write a chunk
 * twice (after a crash), which is harmless only if the expression does not read the column.
 */
export function readsColumn(sql: string, column: string): boolean {
  const withoutStrings = sql.replace(/'(?:[^']|'')*'/g, "''");
  const identifiers = withoutStrings.match(/`(?:[^`]|``)+`|"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_]*/g) ?? [];
  return identifiers.some((token) => {
    const unquoted = token.startsWith('`') ? token.slice(1, -1).replace(/``/g, '`') : token.startsWith('"') ? token.slice(1, -1).replace(/""/g, '"') : token;
    return token.startsWith('`') || token.startsWith('"') ? unquoted === column : unquoted.toLowerCase() === column.toLowerCase();
  });
}

/** A binding of an existing column to SQL, from an alter_columns `virtual_column` entry. */
interface SqlBinding {
  path: string[];
  sql: string;
  inputs: string[] | undefined;
  fieldMetadata: Record<string, string>;
}

/** The kind of a new column: exactly one of expression, computed or virtual_column. */
function kindOf(entry: AddColumnsEntry, where: string): 'expression' | 'computed' | 'virtual' {
  const given = (['expression', 'computed', 'virtual_column'] as const).filter((k) => entry[k] !== undefined && entry[k] !== null);
  if (given.length !== 1) {
    throw invalidInput(`${where}: give exactly one of expression, computed or virtual_column (got ${given.length === 0 ? 'none' : given.join(', ')})`);
  }
  return given[0] === 'virtual_column' ? 'virtual' : (given[0] as 'expression' | 'computed');
}

/** The columns, field-metadata and statistics operations of the Lance namespace spec, over the Lance engine. */
export class ColumnService {
  constructor(private readonly tables: DataTables) {}

  private get engine() {
    return this.tables.engine;
  }

  /** A request with nothing to do commits nothing and answers the current version. */
  private currentVersion(ctx: RequestContext, id: string[], branch: BranchName = null): Promise<{ version: number }> {
    return this.tables.readTable(ctx, id, async (table) => ({ version: await this.engine.datasetVersion(table.at) }), { branch });
  }

  /**
   * Binds or rebinds columns to SQL expressions (alter_columns `virtual_column` with udf_backend
   * "sql"): one commit of their field metadata. The expression is checked against the table
   * first (bad SQL 400 code 13, unknown columns 404 code 12).
   */
  private async bindColumns(ctx: RequestContext, id: string[], bindings: SqlBinding[], branch: BranchName): Promise<AlterTableAlterColumnsResponse> {
    return this.tables.writeTable(
      ctx,
      id,
      async ({ at }) => {
        const changes: FieldMetadataChange[] = [];
        for (const b of bindings) {
          const column = formatFieldPath(b.path);
          const field = await this.engine.columns.field(at, b.path);
          if (field.metadata[COMPUTED_COLUMN_METADATA.marker] === 'true') {
            throw invalidInput(
              `column ${column} was declared computed through add_columns; Lance keeps that binding immutable, so it cannot be rebound: drop the column and declare it again`,
            );
          }
          if (readsColumn(b.sql, b.path[0] as string)) {
            throw invalidInput(
              `virtual column ${column}: the expression may not read the column it fills (a backfill writes a chunk again after a crash, which must change nothing)`,
            );
          }
          await this.engine.columns.checkExpression(at, b.sql);
          for (const input of b.inputs ?? []) await this.engine.columns.field(at, segmentsOf(input, `virtual_column.input_columns of ${column}`));
          changes.push({
            path: b.path,
            replace: false,
            metadata: {
              ...b.fieldMetadata,
              [VIRTUAL_COLUMN_METADATA.marker]: 'true',
              [VIRTUAL_COLUMN_METADATA.backend]: SQL_UDF_BACKEND,
              [VIRTUAL_COLUMN_METADATA.expression]: b.sql,
              [VIRTUAL_COLUMN_METADATA.inputs]: b.inputs === undefined ? null : JSON.stringify(b.inputs),
            },
          });
        }
        return { version: (await this.engine.columns.updateFieldMetadata(at, changes)).version };
      },
      { branch },
    );
  }

  async alterColumns(ctx: RequestContext, id: string[], request: AlterTableAlterColumnsRequest): Promise<AlterTableAlterColumnsResponse> {
    const branch = normalizeBranch(request.branch);
    const bound = request.alterations.filter((a) => a.virtual_column !== undefined && a.virtual_column !== null);
    if (bound.length > 0) {
      // A binding is a field-metadata commit, the other alterations a schema commit: one request is one commit.
      const python = bound.filter((a) => a.virtual_column && isPythonUdf(a.virtual_column));
      if (python.length > 0 && python.length !== request.alterations.length) {
        throw invalidInput('alterations: Python UDF bindings and other alterations cannot be made in the same request; send them separately');
      }
      const seen = new Set<string>();
      if (python.length > 0) {
        requirePythonUdfs(this.tables, ctx, id, 'alter_columns');
        const bindings = request.alterations.map((a, i) => {
          const where = `alterations[${i}]`;
          const path = segmentsOf(a.path, `${where}.path`);
          if (path.length !== 1) throw invalidInput(`${where}.path: only top-level columns can be bound to a UDF`);
          if ((a.rename ?? null) !== null || (a.nullable ?? null) !== null || (a.data_type ?? null) !== null) {
            throw invalidInput(`${where}: a virtual_column binding changes nothing else; send rename, nullable or data_type separately`);
          }
          const column = path[0] as string;
          if (seen.has(column)) throw invalidInput(`${where}.path: ${formatFieldPath(path)} is bound twice`);
          seen.add(column);
          return parsePythonUdf(`${where}.virtual_column`, column, a.virtual_column as AlterVirtualColumnEntry);
        });
        return this.bindPythonUdfs(ctx, id, bindings, branch);
      }
      const bindings = request.alterations.map((a, i): SqlBinding => {
        const where = `alterations[${i}]`;
        const path = segmentsOf(a.path, `${where}.path`);
        const column = formatFieldPath(path);
        const entry: AlterVirtualColumnEntry | null | undefined = a.virtual_column;
        if (!entry) throw invalidInput(`${where}: virtual_column bindings and other alterations cannot be made in the same request; send them separately`);
        if (!isSqlBinding(entry)) refuseVirtualColumn(column, entry);
        if ((a.rename ?? null) !== null || (a.nullable ?? null) !== null || (a.data_type ?? null) !== null) {
          throw invalidInput(`${where}: a virtual_column binding changes nothing else; send rename, nullable or data_type separately`);
        }
        if (path.length !== 1) throw invalidInput(`${where}.path: only top-level columns can be bound to an expression`);
        if (seen.has(column)) throw invalidInput(`${where}.path: ${column} is bound twice`);
        seen.add(column);
        const sql = entry.udf ?? '';
        if (sql.trim() === '') throw invalidInput(`${where}.virtual_column.udf: the SQL expression must not be empty`);
        return { path, sql, inputs: entry.input_columns ?? undefined, fieldMetadata: entry.field_metadata ?? {} };
      });
      return this.bindColumns(ctx, id, bindings, branch);
    }
    const alterations: ColumnAlteration[] = request.alterations.map((a, i) => {
      const where = `alterations[${i}]`;
      const path = segmentsOf(a.path, `${where}.path`);
      if (a.virtual_column !== undefined && a.virtual_column !== null) refuseVirtualColumn(formatFieldPath(path), a.virtual_column);
      if (a.rename === '') throw invalidInput(`${where}.rename: must not be empty`);
      const alteration: ColumnAlteration = {
        path,
        ...(a.rename !== undefined && a.rename !== null ? { rename: a.rename } : {}),
        ...(a.nullable !== undefined && a.nullable !== null ? { nullable: a.nullable } : {}),
        ...(a.data_type !== undefined && a.data_type !== null ? { dataType: a.data_type } : {}),
      };
      if (alteration.rename === undefined && alteration.nullable === undefined && alteration.dataType === undefined) {
        throw invalidInput(`${where}: changes nothing; give rename, nullable or data_type`);
      }
      return alteration;
    });
    if (alterations.length === 0) return this.currentVersion(ctx, id, branch);
    return this.tables.writeTable(ctx, id, (table) => this.engine.columns.alterColumns(table.at, alterations), { branch });
  }

  async dropColumns(ctx: RequestContext, id: string[], request: AlterTableDropColumnsRequest): Promise<AlterTableDropColumnsResponse> {
    const branch = normalizeBranch(request.branch);
    const seen = new Set<string>();
    const paths = request.columns.map((c, i) => {
      const path = segmentsOf(c, `columns[${i}]`);
      const canonical = formatFieldPath(path);
      if (seen.has(canonical)) throw invalidInput(`columns[${i}]: ${canonical} is listed twice`);
      seen.add(canonical);
      return path;
    });
    if (paths.length === 0) return this.currentVersion(ctx, id, branch);
    return this.tables.writeTable(ctx, id, (table) => this.engine.columns.dropColumns(table.at, paths), { branch });
  }

  async addColumns(ctx: RequestContext, id: string[], request: AlterTableAddColumnsRequest): Promise<AlterTableAddColumnsResponse> {
    const branch = normalizeBranch(request.branch);
    const kinds = request.new_columns.map((entry, i) => {
      const kind = kindOf(entry, `new_columns[${i}]`);
      if (kind === 'virtual' && entry.virtual_column && !isPythonUdf(entry.virtual_column))
        refuseVirtualColumn(formatFieldPath([entry.name]), entry.virtual_column);
      return kind;
    });
    if (kinds.includes('virtual')) {
      if (kinds.some((k) => k !== 'virtual'))
        throw invalidInput('new_columns: UDF columns and SQL columns cannot be added in the same request; send them separately');
      return this.addPythonUdfColumns(ctx, id, request.new_columns, branch);
    }
    const names = new Set<string>();
    const columns = request.new_columns.map((entry, i) => {
      if (names.has(entry.name)) throw invalidInput(`new_columns[${i}].name: ${JSON.stringify(entry.name)} is given twice`);
      names.add(entry.name);
      const sql = entry.expression ?? entry.computed ?? '';
      if (sql.trim() === '') throw invalidInput(`new_columns[${i}]: the SQL expression must not be empty`);
      return { name: entry.name, sql };
    });
    if (columns.length === 0) return this.currentVersion(ctx, id, branch);
    const kind = kinds[0] as 'expression' | 'computed';
    // The engine adds expression columns and computed columns in separate commits; one request
    // is one commit (all or nothing), so it holds one kind.
    if (kinds.some((k) => k !== kind)) {
      throw invalidInput('new_columns: expression columns and computed columns cannot be added in the same request; send them separately');
    }
    const newColumns: NewColumns = { kind, columns };
    return this.tables.writeTable(ctx, id, (table) => this.engine.columns.addColumns(table.at, newColumns), { branch });
  }

  /**
   * Adds columns bound to Geneva Python UDFs: their envelopes are stored first (content-addressed,
   * so a failed add leaves only a file nothing points to), then the all-null columns with their
   * bindings in one commit. On a branch, the envelopes are still the table's (`_udfs/` of its
   * directory, which every branch's dataset reads) and the commit is the branch's.
   */
  private async addPythonUdfColumns(ctx: RequestContext, id: string[], entries: AddColumnsEntry[], branch: BranchName): Promise<AlterTableAddColumnsResponse> {
    requirePythonUdfs(this.tables, ctx, id, 'add_columns');
    const names = new Set<string>();
    const columns = entries.map((entry, i) => {
      const where = `new_columns[${i}].virtual_column`;
      const vc = entry.virtual_column as NonNullable<AddColumnsEntry['virtual_column']>;
      if (names.has(entry.name)) throw invalidInput(`new_columns[${i}].name: ${JSON.stringify(entry.name)} is given twice`);
      names.add(entry.name);
      const dataType = outputTypeOf(where, entry.name, vc.outputs);
      return { binding: parsePythonUdf(where, entry.name, vc), dataType, outputMetadata: vc.outputs[0]?.metadata ?? {} };
    });
    return this.tables.writeTable(
      ctx,
      id,
      async (table) => {
        for (const c of columns) await this.checkInputs(table.at, c.binding);
        await storeEnvelopes(
          table,
          columns.map((c) => c.binding),
        );
        const newColumns: NewColumns = {
          kind: 'empty',
          columns: columns.map((c) => ({ name: c.binding.column, dataType: c.dataType, metadata: { ...c.outputMetadata, ...c.binding.fieldMetadata } })),
        };
        return this.engine.columns.addColumns(table.at, newColumns);
      },
      { branch },
    );
  }

  /** Each input column of a UDF binding must exist (404 code 12 otherwise). */
  private async checkInputs(at: DataTable['at'], binding: PythonUdfBinding): Promise<void> {
    for (const input of binding.inputs ?? []) await this.engine.columns.field(at, segmentsOf(input, `input_columns of ${binding.column}`));
  }

  /**
   * Binds existing top-level columns to Geneva Python UDFs (alter_columns virtual_column with
   * udf_backend DockerUDFSpecV1): envelopes stored, then one commit of their field metadata
   * (a SQL binding the column had is removed), on `branch` as addPythonUdfColumns.
   */
  private async bindPythonUdfs(ctx: RequestContext, id: string[], bindings: PythonUdfBinding[], branch: BranchName): Promise<AlterTableAlterColumnsResponse> {
    return this.tables.writeTable(
      ctx,
      id,
      async (table) => {
        for (const b of bindings) {
          const field = await this.engine.columns.field(table.at, [b.column]);
          if (field.metadata[COMPUTED_COLUMN_METADATA.marker] === 'true') {
            throw invalidInput(
              `column ${formatFieldPath([b.column])} was declared computed through add_columns; Lance keeps that binding immutable: drop the column and add it again`,
            );
          }
          await this.checkInputs(table.at, b);
        }
        await storeEnvelopes(table, bindings);
        const changes: FieldMetadataChange[] = bindings.map((b) => ({
          path: [b.column],
          replace: false,
          metadata: { ...b.fieldMetadata, [VIRTUAL_COLUMN_METADATA.expression]: null, [VIRTUAL_COLUMN_METADATA.inputs]: null },
        }));
        return { version: (await this.engine.columns.updateFieldMetadata(table.at, changes)).version };
      },
      { branch },
    );
  }

  async updateFieldMetadata(ctx: RequestContext, id: string[], request: UpdateFieldMetadataRequest): Promise<UpdateFieldMetadataResponse> {
    const branch = normalizeBranch(request.branch);
    // Updates of the same field are folded into one, in order: the engine would otherwise apply
    // each to the original metadata and keep only the last.
    const byPath = new Map<string, FieldMetadataChange>();
    request.updates.forEach((u, i) => {
      const path = segmentsOf(u.path, `updates[${i}].path`);
      const canonical = formatFieldPath(path);
      const earlier = byPath.get(canonical);
      const replace = u.replace === true;
      byPath.set(
        canonical,
        earlier && !replace
          ? { path, replace: earlier.replace, metadata: { ...earlier.metadata, ...u.metadata } }
          : { path, replace, metadata: { ...u.metadata } },
      );
    });
    // Under replace a null value means the key is simply absent from the new map.
    const changes = [...byPath.values()].map((c) =>
      c.replace ? { ...c, metadata: Object.fromEntries(Object.entries(c.metadata).filter(([, v]) => v !== null)) } : c,
    );
    if (changes.length === 0) return { ...(await this.currentVersion(ctx, id, branch)), fields: {} };
    const result = await this.tables.writeTable(ctx, id, (table) => this.engine.columns.updateFieldMetadata(table.at, changes), { branch });
    const fields: Record<string, Record<string, string>> = {};
    changes.forEach((c, i) => {
      fields[formatFieldPath(c.path)] = result.fields[i] ?? {};
    });
    return { version: result.version, fields };
  }

  /**
   * Replaces a table's schema metadata. @lancedb/lancedb 0.39 sets schema metadata only when a
   * table is created, so the service makes this commit itself: the next version's manifest is the
   * latest one with only its version, schema metadata and time changed, committed through the
   * version path like any commit (a concurrent commit wins the race; this one is then retried on
   * top of it, a bounded number of times). On a branch, the commit is the branch's next version
   * (the branch's latest manifest, changed the same way); main and the other branches stay.
   */
  async updateSchemaMetadata(
    ctx: RequestContext,
    id: string[],
    metadata: Record<string, string>,
    branchField?: string | null,
  ): Promise<Record<string, string>> {
    const branch = normalizeBranch(branchField);
    for (let attempt = 0; ; attempt++) {
      try {
        await this.tables.write(
          ctx,
          id,
          (table) =>
            this.tables.commitManifest(ctx, table, (latest) =>
              nextManifestWithSchemaMetadata(latest.bytes, { version: latest.version + 1, schemaMetadata: metadata, timestampMillis: Date.now() }),
            ),
          { branch },
        );
        return metadata;
      } catch (e) {
        if (!(e instanceof NamespaceError && e.code === ErrorCode.ConcurrentModification) || attempt >= 4) throw e;
      }
    }
  }

  async tableStats(ctx: RequestContext, id: string[], branchField?: string | null): Promise<GetTableStatsResponse> {
    const branch = normalizeBranch(branchField);
    // The engine counts only the indices it can name; the manifest has them all.
    const [s, indices] = await this.tables.readTable(ctx, id, (table) => Promise.all([this.engine.columns.tableStats(table.at), manifestIndices(table)]), {
      branch,
    });
    return {
      total_bytes: s.totalBytes,
      num_rows: s.numRows,
      num_indices: indices.length,
      fragment_stats: { num_fragments: s.fragments.count, num_small_fragments: s.fragments.smallCount, lengths: s.fragments.lengths },
    };
  }

  /** From the manifest, which names every index's type; the engine names a vector index's type and metric when its details predate saying them. */
  async indexStats(
    ctx: RequestContext,
    id: string[],
    request: { indexName: string; bodyIndexName?: string | undefined; version?: number | null | undefined; branch?: string | null | undefined },
  ): Promise<DescribeTableIndexStatsResponse> {
    if (request.bodyIndexName !== undefined && request.bodyIndexName !== request.indexName) {
      throw invalidInput(`index_name ${JSON.stringify(request.bodyIndexName)} in the body does not match ${JSON.stringify(request.indexName)} in the path`);
    }
    const version = request.version ?? undefined;
    const branch = normalizeBranch(request.branch);
    return this.tables.readTable(
      ctx,
      id,
      async (table) => {
        const index = await manifestIndex(table, request.indexName, version);
        const engine = index.type === undefined ? await this.engine.columns.indexStats(table.at, request.indexName, version) : undefined;
        return {
          distance_type: index.distanceType ?? engine?.distanceType ?? null,
          index_type: index.type ?? engine?.indexType ?? null,
          num_indexed_rows: index.numIndexedRows,
          num_unindexed_rows: index.numUnindexedRows,
          num_indices: index.numSegments,
        };
      },
      { version, branch },
    );
  }
}
