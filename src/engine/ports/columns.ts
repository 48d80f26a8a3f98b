import type { DatasetLocation } from '../dataset-location.js';
import type { JsonArrowDataTypeInput } from '../json-arrow-schema.js';

// Engine operations on a dataset's columns, field metadata and statistics. Fields are addressed
// by their path segments (already parsed from the spec's field-path form); the adapter resolves
// them against the dataset's schema and throws EngineError('column_not_found') for a path that
// names no field. Every write is one commit: it applies entirely or not at all.

export interface ColumnAlteration {
  path: string[];
  rename?: string;
  nullable?: boolean;
  /** Cast target, in the spec's JSON Arrow form. */
  dataType?: JsonArrowDataTypeInput;
}

/**
 * New top-level columns. From SQL: `expression` fills them now; `computed` declares them all-null
 * with the SQL kept as their binding. `empty`: all-null nullable columns of the given types, with
 * their field metadata (a Geneva UDF column before its backfill).
 */
export type NewColumns =
  | { kind: 'expression' | 'computed'; columns: Array<{ name: string; sql: string }> }
  | { kind: 'empty'; columns: Array<{ name: string; dataType: JsonArrowDataTypeInput; metadata: Record<string, string> }> };

export interface FieldMetadataChange {
  path: string[];
  /** A null value deletes the key. */
  metadata: Record<string, string | null>;
  replace: boolean;
}

export interface TableStatistics {
  totalBytes: number;
  numRows: number;
  numIndices: number;
  fragments: {
    count: number;
    smallCount: number;
    lengths: { min: number; max: number; mean: number; p25: number; p50: number; p75: number; p99: number };
  };
}

export interface IndexStatistics {
  indexType: string | null;
  distanceType: string | null;
  numIndexedRows: number | null;
  numUnindexedRows: number | null;
  numIndices: number | null;
}

/** A top-level or nested field as the engine sees it: its Arrow type name and field metadata. */
export interface FieldInfo {
  path: string[];
  typeName: string;
  metadata: Record<string, string>;
}

/** Where the rows matching a filter sit, per fragment: row ids are `fragment << 32 | offset`. */
export interface RowIdLayout {
  /** The dataset version the layout was read at. */
  version: number;
  fragments: Array<{ fragment: number; rows: number; minOffset: number; maxOffset: number }>;
}

export interface ColumnOps {
  alterColumns(at: DatasetLocation, alterations: ColumnAlteration[]): Promise<{ version: number }>;
  dropColumns(at: DatasetLocation, paths: string[][]): Promise<{ version: number }>;
  /** Throws EngineError('invalid_input') when a name is taken. */
  addColumns(at: DatasetLocation, columns: NewColumns): Promise<{ version: number }>;
  /** Applies the changes in one commit and returns each changed field's resulting metadata, in order. */
  updateFieldMetadata(at: DatasetLocation, changes: FieldMetadataChange[]): Promise<{ version: number; fields: Array<Record<string, string>> }>;
  tableStats(at: DatasetLocation): Promise<TableStatistics>;
  /** The field at a path, or EngineError('column_not_found'). */
  field(at: DatasetLocation, path: string[]): Promise<FieldInfo>;
  /**
   * Checks that `sql` is an expression the engine can evaluate over the table's columns
   * (EngineError('invalid_input') for bad SQL, 'column_not_found' for unknown columns), at
   * `version` when given ('version_not_found' if there is none).
   */
  checkExpression(at: DatasetLocation, sql: string, version?: number): Promise<void>;
  /** Per-fragment row-id layout of the rows matching `filter` (all rows without), at `version` or the latest. */
  rowIdLayout(at: DatasetLocation, filter: string | undefined, version?: number): Promise<RowIdLayout>;
  /** Sets the top-level column to `sql` on the rows matching `filter`, in one commit (one even when no row matches). */
  fillColumn(at: DatasetLocation, column: string, sql: string, filter: string): Promise<{ rows: number; version: number }>;
  /** Rows matching the filter. */
  countRows(at: DatasetLocation, filter: string): Promise<number>;
  /** Fills a computed (engine-declared) column through the engine's own refresh, in one commit. */
  refreshComputedColumn(at: DatasetLocation, column: string): Promise<{ rows: number; version: number }>;
  /** Stats of the named index at the latest version or at `version`; EngineError('index_not_found') if it has none by that name. */
  indexStats(at: DatasetLocation, indexName: string, version?: number): Promise<IndexStatistics>;
}
