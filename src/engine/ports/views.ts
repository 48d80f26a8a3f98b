import type { DatasetLocation } from '../dataset-location.js';

// Materialized views (kind query): a view's rows recomputed from its source table. The engine's
// UDF workers do it (UdfOps.materialize), since a view's columns may be Python UDFs; a view
// without UDF columns can also be recomputed by the engine itself (ViewOps).

/** The first two fields of every materialized view (Geneva's): the source row a view row came from, and whether it is computed. */
export const SOURCE_ROW_ID = '__source_row_id';
export const IS_SET = '__is_set';

/** A view column computed by a Python UDF over source columns. */
export interface ViewUdfColumn {
  /** The view's top-level column the UDF's output goes to. */
  column: string;
  /** Where the UDF envelope lives, relative to the view's directory (`_udfs/<sha256>`). */
  udfPath: string;
  /** The source columns the UDF reads; null: the UDF's own. */
  inputColumns: string[] | null;
}

/** What a view is recomputed from, and the metadata its commit writes. */
export interface Materialization {
  /** The source version read. */
  sourceVersion: number;
  /** Lance SQL over the source: the rows the view holds (all without). */
  filter: string | null;
  /** View columns computed as Lance SQL over the source row. */
  columns: Array<{ name: string; sql: string }>;
  /** After the filter: rows skipped, then at most `limit` rows kept, in the source's scan order. */
  offset: number | null;
  limit: number | null;
  udfs: ViewUdfColumn[];
  /** The view's schema metadata after the commit (replacing it). */
  schemaMetadata: Record<string, string>;
  /** Merged into the named top-level fields' metadata. */
  fieldMetadata: Record<string, Record<string, string>>;
  /** Rows per data file of the view; default the engine's. */
  maxRowsPerFile: number | null;
}

/** The view after a materialization. */
export interface Materialized {
  rows: number;
  version: number;
  fragments: number;
}

export interface ViewOps {
  /**
   * As UdfOps.materialize, for a view without UDF columns (EngineError('unsupported') with any),
   * in the service's process: the view's rows are gathered in memory before their one commit,
   * each SQL column's type must be its view column's (EngineError('invalid_input') if not), and
   * `maxRowsPerFile` is left to the engine.
   */
  materialize(source: DatasetLocation, view: DatasetLocation, m: Materialization): Promise<Materialized>;
}
