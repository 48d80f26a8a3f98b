import type { DatasetLocation } from '../dataset-location.js';
import type { Materialization, Materialized } from './views.js';

// Running Python UDFs (Geneva's `DockerUDFSpecV1`: a cloudpickled geneva UDF in a JSON envelope)
// over a dataset's rows. The service never loads a pickle itself: the adapter hands the work to
// Python worker processes (engine/python-udf/) that read the rows, call the UDF and write its
// outputs into the dataset, committing through the dataset location's commit path like every
// engine write.

/** One fill: the UDF's outputs written into `column` for the rows matching `filter`. */
export interface UdfFill {
  /** The top-level column the UDF's output is written to (it must exist, typed as the UDF's output). */
  column: string;
  /** Where the UDF envelope lives, relative to the dataset's directory (`_udfs/<sha256>`). */
  udfPath: string;
  /** The columns the UDF reads (the field metadata `virtual_column.udf_inputs`); null: the UDF's own. */
  inputColumns: string[] | null;
  /** Lance SQL over the dataset, `_rowid` included: the rows to compute and write. */
  filter: string;
}

/**
 * A view of kind `chunker` (Geneva's `@chunker`): each source row is handed to the chunker, which
 * yields zero or more view rows. With one, Materialization.columns are what is read of each
 * source row (by name, as the chunker's inputs and the inherited columns name them).
 */
export interface ChunkerExpansion {
  kind: 'chunker';
  /** Where the ChunkerSpec JSON lives, relative to the view's directory (`_udfs/<sha256>`). */
  udfPath: string;
  /** The read columns the chunker gets, with `__source_row_id`. */
  inputColumns: string[];
  /** The read columns copied onto each view row of their source row. */
  inherited: string[];
  /** At most this many view rows (the first ones in the source's order); null: all. */
  outputLimit: number | null;
}

/**
 * A view of kind `udtf` (Geneva's `@udtf`): the UDTF is handed a Geneva query builder over the
 * source at the materialization's version (the view's GenevaQuery, once per distinct value of
 * `partitionBy` with that value added to its filter) and yields the view's rows.
 * Materialization.columns, filter, offset and limit are not read.
 */
export interface UdtfRun {
  kind: 'udtf';
  /** Where the UDTFSpec JSON lives, relative to the view's directory (`_udfs/<sha256>`). */
  udfPath: string;
  sourceQuery: string;
  partitionBy: string | null;
}

/** The UDF raised (or returned something unusable): the message and Python traceback say why. Not worth a retry. */
export class UdfFailure extends Error {
  constructor(
    message: string,
    readonly traceback: string | undefined,
  ) {
    super(message);
    this.name = 'UdfFailure';
  }
}

export interface UdfOps {
  /**
   * Computes the UDF over the rows matching `fill.filter` at the dataset's latest version and
   * writes each output into `fill.column` of the same row (rows keep their ids and fragments;
   * other rows keep their values), in one commit, also when no row matches. Writing the same
   * rows again with a deterministic UDF changes nothing. Throws UdfFailure when the UDF fails,
   * EngineError('conflict') when the commit lost a race (retry), other EngineErrors as the
   * engine's writes do.
   */
  fill(at: DatasetLocation, fill: UdfFill): Promise<{ rows: number; version: number }>;
  /**
   * Recomputes a materialized view from its source at `m.sourceVersion`: one view row per source
   * row matching the filter (within offset and limit), `__source_row_id` = the source `_rowid`,
   * `__is_set` true, the SQL columns and the UDF columns computed over the source row, any other
   * column null; the rows replace the view's in one commit that also writes `m`'s metadata, and
   * keeps the view's schema. Doing it again from the same source version gives the same view.
   * With a chunker, the view rows are instead what the chunker yields for each source row (with
   * `__source_row_id`, `__child_index` and the inherited columns); with a UDTF, what the UDTF
   * yields; `m.udfs` must then be empty.
   * Throws as `fill` does.
   */
  materialize(source: DatasetLocation, view: DatasetLocation, m: Materialization, expansion?: ChunkerExpansion | UdtfRun): Promise<Materialized>;
  /** Stops the workers. */
  close(): Promise<void>;
}
