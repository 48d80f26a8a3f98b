import type { JsonArrowDataTypeInput } from '../json-arrow-schema.js';
import type { DatasetLocation } from '../lance-engine.js';

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

/** New top-level columns from SQL: `expression` fills them now; `computed` declares them all-null with the SQL kept as their binding. */
export interface NewColumns {
  kind: 'expression' | 'computed';
  columns: Array<{ name: string; sql: string }>;
}

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

export interface ColumnOps {
  alterColumns(at: DatasetLocation, alterations: ColumnAlteration[]): Promise<{ version: number }>;
  dropColumns(at: DatasetLocation, paths: string[][]): Promise<{ version: number }>;
  /** Throws EngineError('invalid_input') when a name is taken. */
  addColumns(at: DatasetLocation, columns: NewColumns): Promise<{ version: number }>;
  /** Applies the changes in one commit and returns each changed field's resulting metadata, in order. */
  updateFieldMetadata(at: DatasetLocation, changes: FieldMetadataChange[]): Promise<{ version: number; fields: Array<Record<string, string>> }>;
  tableStats(at: DatasetLocation): Promise<TableStatistics>;
  /** Stats of the named index at the latest version or at `version`; EngineError('index_not_found') if it has none by that name. */
  indexStats(at: DatasetLocation, indexName: string, version?: number): Promise<IndexStatistics>;
}
