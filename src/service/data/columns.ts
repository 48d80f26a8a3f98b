import type { DatasetLocation } from '../../engine/lance-engine.js';
import type { ColumnAlteration, FieldMetadataChange, NewColumns } from '../../engine/ports/columns.js';
import {
  type AddColumnsEntry,
  type AlterTableAddColumnsRequest,
  type AlterTableAddColumnsResponse,
  type AlterTableAlterColumnsRequest,
  type AlterTableAlterColumnsResponse,
  type AlterTableDropColumnsRequest,
  type AlterTableDropColumnsResponse,
  type DescribeTableIndexStatsResponse,
  formatFieldPath,
  type GetTableStatsResponse,
  parseFieldPath,
  type UpdateFieldMetadataRequest,
  type UpdateFieldMetadataResponse,
} from '../../model/columns.js';
import { invalidInput, unsupported } from '../../model/errors.js';
import { engineFailure } from '../engine-errors.js';
import type { RequestContext } from '../request-context.js';
import type { DataTables } from './dataset.js';

/** Branches other than main are a later milestone (the same rule as the version operations). */
function requireMainBranch(branch: string | null | undefined): void {
  if (branch !== undefined && branch !== null && branch !== '' && branch !== 'main') {
    throw unsupported(`branches are not supported yet: branch ${JSON.stringify(branch)}`);
  }
}

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

/**
 * Virtual columns are refused with the reason: a pickled Python UDF (a `udf` or a UDF backend
 * such as DockerUDFSpecV1) needs a Python runtime this service does not run, and the other
 * bindings of virtual columns are planned with the backfill work.
 */
function refuseVirtualColumn(column: string, entry: VirtualColumnLike): never {
  if ((entry.udf !== undefined && entry.udf !== null && entry.udf !== '') || (entry.udf_backend !== undefined && entry.udf_backend !== null)) {
    const backend = entry.udf_backend ? ` (udf_backend ${entry.udf_backend})` : '';
    throw unsupported(`virtual column ${column}: pickled Python UDFs${backend} are not run by this service`);
  }
  throw unsupported(
    `virtual column ${column}: virtual_column bindings are not supported yet (planned with the computed-column backfill work); ` +
      'add_columns with `computed` declares a column bound to a SQL expression',
  );
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

  /** Runs an engine call on the table, mapping engine failures to namespace errors. */
  private async onTable<T>(ctx: RequestContext, id: string[], fn: (at: DatasetLocation) => Promise<T>): Promise<T> {
    const table = await this.tables.open(ctx, id);
    try {
      return await fn(table.at);
    } catch (e) {
      throw engineFailure(e, id);
    }
  }

  /** A request with nothing to do commits nothing and answers the current version. */
  private currentVersion(ctx: RequestContext, id: string[]): Promise<{ version: number }> {
    return this.onTable(ctx, id, async (at) => ({ version: await this.engine.datasetVersion(at) }));
  }

  async alterColumns(ctx: RequestContext, id: string[], request: AlterTableAlterColumnsRequest): Promise<AlterTableAlterColumnsResponse> {
    requireMainBranch(request.branch);
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
    if (alterations.length === 0) return this.currentVersion(ctx, id);
    return this.onTable(ctx, id, (at) => this.engine.columns.alterColumns(at, alterations));
  }

  async dropColumns(ctx: RequestContext, id: string[], request: AlterTableDropColumnsRequest): Promise<AlterTableDropColumnsResponse> {
    requireMainBranch(request.branch);
    const seen = new Set<string>();
    const paths = request.columns.map((c, i) => {
      const path = segmentsOf(c, `columns[${i}]`);
      const canonical = formatFieldPath(path);
      if (seen.has(canonical)) throw invalidInput(`columns[${i}]: ${canonical} is listed twice`);
      seen.add(canonical);
      return path;
    });
    if (paths.length === 0) return this.currentVersion(ctx, id);
    return this.onTable(ctx, id, (at) => this.engine.columns.dropColumns(at, paths));
  }

  async addColumns(ctx: RequestContext, id: string[], request: AlterTableAddColumnsRequest): Promise<AlterTableAddColumnsResponse> {
    requireMainBranch(request.branch);
    const kinds = request.new_columns.map((entry, i) => {
      const kind = kindOf(entry, `new_columns[${i}]`);
      if (kind === 'virtual' && entry.virtual_column) refuseVirtualColumn(formatFieldPath([entry.name]), entry.virtual_column);
      return kind;
    });
    const names = new Set<string>();
    const columns = request.new_columns.map((entry, i) => {
      if (names.has(entry.name)) throw invalidInput(`new_columns[${i}].name: ${JSON.stringify(entry.name)} is given twice`);
      names.add(entry.name);
      const sql = entry.expression ?? entry.computed ?? '';
      if (sql.trim() === '') throw invalidInput(`new_columns[${i}]: the SQL expression must not be empty`);
      return { name: entry.name, sql };
    });
    if (columns.length === 0) return this.currentVersion(ctx, id);
    const kind = kinds[0] as 'expression' | 'computed';
    // The engine adds expression columns and computed columns in separate commits; one request
    // is one commit (all or nothing), so it holds one kind.
    if (kinds.some((k) => k !== kind)) {
      throw invalidInput('new_columns: expression columns and computed columns cannot be added in the same request; send them separately');
    }
    const newColumns: NewColumns = { kind, columns };
    return this.onTable(ctx, id, (at) => this.engine.columns.addColumns(at, newColumns));
  }

  async updateFieldMetadata(ctx: RequestContext, id: string[], request: UpdateFieldMetadataRequest): Promise<UpdateFieldMetadataResponse> {
    requireMainBranch(request.branch);
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
        earlier && !replace ? { path, replace: earlier.replace, metadata: { ...earlier.metadata, ...u.metadata } } : { path, replace, metadata: { ...u.metadata } },
      );
    });
    // Under replace a null value means the key is simply absent from the new map.
    const changes = [...byPath.values()].map((c) =>
      c.replace ? { ...c, metadata: Object.fromEntries(Object.entries(c.metadata).filter(([, v]) => v !== null)) } : c,
    );
    if (changes.length === 0) return { ...(await this.currentVersion(ctx, id)), fields: {} };
    const result = await this.onTable(ctx, id, (at) => this.engine.columns.updateFieldMetadata(at, changes));
    const fields: Record<string, Record<string, string>> = {};
    changes.forEach((c, i) => {
      fields[formatFieldPath(c.path)] = result.fields[i] ?? {};
    });
    return { version: result.version, fields };
  }

  /**
   * Replacing a table's schema metadata needs a commit the engine cannot make: @lancedb/lancedb
   * 0.39 sets schema metadata only when a table is created (no operation of its Table, native
   * or not, changes it later), and rewriting the table to change it would drop its indices and
   * rewrite every row. So an existing table answers 406 with that reason.
   */
  async updateSchemaMetadata(ctx: RequestContext, id: string[], branch: string | undefined): Promise<never> {
    requireMainBranch(branch);
    await this.tables.open(ctx, id);
    throw unsupported(
      'UpdateTableSchemaMetadata is not supported: the Lance engine binding this service uses (@lancedb/lancedb 0.39) sets schema ' +
        'metadata only when a table is created and has no operation that replaces it on an existing table',
    );
  }

  async tableStats(ctx: RequestContext, id: string[], branch: string | null | undefined): Promise<GetTableStatsResponse> {
    requireMainBranch(branch);
    const s = await this.onTable(ctx, id, (at) => this.engine.columns.tableStats(at));
    return {
      total_bytes: s.totalBytes,
      num_rows: s.numRows,
      num_indices: s.numIndices,
      fragment_stats: { num_fragments: s.fragments.count, num_small_fragments: s.fragments.smallCount, lengths: s.fragments.lengths },
    };
  }

  async indexStats(
    ctx: RequestContext,
    id: string[],
    request: { indexName: string; bodyIndexName?: string | undefined; version?: number | null | undefined; branch?: string | null | undefined },
  ): Promise<DescribeTableIndexStatsResponse> {
    requireMainBranch(request.branch);
    if (request.bodyIndexName !== undefined && request.bodyIndexName !== request.indexName) {
      throw invalidInput(`index_name ${JSON.stringify(request.bodyIndexName)} in the body does not match ${JSON.stringify(request.indexName)} in the path`);
    }
    const version = request.version ?? undefined;
    const s = await this.onTable(ctx, id, (at) => this.engine.columns.indexStats(at, request.indexName, version));
    return {
      distance_type: s.distanceType,
      index_type: s.indexType,
      num_indexed_rows: s.numIndexedRows,
      num_unindexed_rows: s.numUnindexedRows,
      num_indices: s.numIndices,
    };
  }
}
