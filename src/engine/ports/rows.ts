import { type DatasetLocation, EngineError } from '../dataset-location.js';

/** A merge-insert: match source rows to the dataset's rows on `on`, then apply the chosen clauses. */
export interface MergeInsertOptions {
  /** Field path of the column rows are matched on. */
  on: string;
  /** Update matched rows with the source row; `updateAllWhere` limits it to rows where the SQL holds (target./source. prefixes). */
  whenMatchedUpdateAll: boolean;
  updateAllWhere?: string | undefined;
  whenNotMatchedInsertAll: boolean;
  /** Delete dataset rows no source row matches; `deleteWhere` limits it to rows where the SQL holds. */
  whenNotMatchedBySourceDelete: boolean;
  deleteWhere?: string | undefined;
  /** Bound on the whole operation, retries included. */
  timeoutMs?: number | undefined;
  useIndex?: boolean | undefined;
}

export interface MergeInsertResult {
  version: number;
  insertedRows: number;
  updatedRows: number;
  deletedRows: number;
}

/**
 * A merge-insert's time bound ran out. Not a fault of the engine nor of the input: the service
 * answers it as unavailable (retry later, or with a longer timeout).
 */
export class MergeTimedOut extends EngineError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('internal', message, options);
    this.name = 'MergeTimedOut';
  }
}

/** Engine operations on a dataset's rows. Every write commits exactly one new version or nothing. */
export interface RowOps {
  /** Sets each column of `updates` ([field path, SQL expression]) on the rows where `predicate` holds (all rows without one). */
  update(at: DatasetLocation, updates: ReadonlyArray<readonly [string, string]>, predicate?: string): Promise<{ updatedRows: number; version: number }>;
  delete(at: DatasetLocation, predicate: string): Promise<{ deletedRows: number; version: number }>;
  /** Appends the rows of an Arrow IPC stream, or replaces every row (and the schema) with them. */
  insert(at: DatasetLocation, arrowIpcStream: Buffer, mode: 'append' | 'overwrite'): Promise<{ insertedRows: number; version: number }>;
  mergeInsert(at: DatasetLocation, arrowIpcStream: Buffer, options: MergeInsertOptions): Promise<MergeInsertResult>;
  /**
   * For a merge-insert into a table without a dataset yet: checks the merge against the stream's
   * own schema and returns the stream to create the dataset from (the rows when unmatched rows
   * are inserted, else none: with nothing to match, no other clause changes anything).
   */
  initialStreamForMerge(arrowIpcStream: Buffer, options: MergeInsertOptions): Promise<Buffer>;
  /** Rows of the latest version, or of `version`, where `predicate` holds (all rows without one). */
  countRows(at: DatasetLocation, options?: { predicate?: string | undefined; version?: number | undefined }): Promise<number>;
  /** Commits a new latest version with the content of `version`. */
  restore(at: DatasetLocation, version: number): Promise<{ version: number }>;
}
