import type { JsonArrowSchema } from './json-arrow-schema.js';

// The Lance engine port: data operations on Lance datasets, addressed by location. The service
// never sees SDK types; the adapter (lancedb-engine.ts) is the only module that imports
// @lancedb/lancedb.

/** Where a dataset lives and the options needed to open it (endpoint, region, credentials). */
export interface DatasetLocation {
  location: string;
  storageOptions: Record<string, string>;
}

export type CreateDatasetMode = 'create' | 'overwrite';

export interface LanceEngine {
  /**
   * Writes an Arrow IPC stream as a dataset at the location and returns the committed version.
   * A stream with a schema and no rows makes an empty dataset. `overwrite` commits a new version
   * replacing the rows of an existing dataset; `create` fails if one exists.
   */
  createDataset(at: DatasetLocation, arrowIpcStream: Buffer, mode: CreateDatasetMode): Promise<{ version: number }>;
  /** Opens the dataset and returns its latest version; throws EngineError('not_a_dataset') if there is none. */
  datasetVersion(at: DatasetLocation): Promise<number>;
  /** Version and schema (in the spec's JSON Arrow form) of the latest version, or of `version`. */
  describeDataset(at: DatasetLocation, version?: number): Promise<{ version: number; schema: JsonArrowSchema }>;
  close(): Promise<void>;
}

export type EngineErrorKind = 'invalid_input' | 'not_a_dataset' | 'version_not_found' | 'already_exists' | 'conflict' | 'internal';

/** An engine failure, classified so the service can map it to a namespace error code. */
export class EngineError extends Error {
  constructor(
    readonly kind: EngineErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'EngineError';
  }
}
