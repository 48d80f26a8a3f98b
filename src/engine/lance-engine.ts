import type { JsonArrowSchema } from './json-arrow-schema.js';
import type { ColumnOps } from './ports/columns.js';
import type { IndexOps } from './ports/indices.js';
import type { QueryOps } from './ports/queries.js';
import type { RowOps } from './ports/rows.js';
import type { TagOps } from './ports/tags.js';

// The Lance engine port: data operations on Lance datasets, addressed by location. The service
// never sees SDK types; the adapter (engine/lancedb/) is the only code that imports
// @lancedb/lancedb. Operations are grouped by resource, one port module each (engine/ports/).

/** A version as the commit coordinator reports it to the engine. */
export interface CoordinatedVersion {
  version: number;
  /** In object_store form (see ObjectStore.objectPath), as Lance reads it. */
  manifestPath: string;
  manifestSize?: number | undefined;
  eTag?: string | undefined;
  timestampMillis?: number | undefined;
}

/**
 * The service's commit path for a table with managed versioning. When a dataset location carries
 * one, the engine commits every version it writes through it (the same create-if-absent of the
 * next manifest that clients' commits go through) instead of writing manifests itself.
 */
export interface CommitCoordinator {
  latest(): Promise<CoordinatedVersion | null>;
  describe(version: number): Promise<CoordinatedVersion | null>;
  list(): Promise<CoordinatedVersion[]>;
  /** Throws EngineError('conflict') when the version is taken or not next. */
  create(request: { version: number; manifestPath: string; manifestSize?: number; eTag?: string; namingScheme?: 'V1' | 'V2' }): Promise<CoordinatedVersion>;
}

/** Where a dataset lives and the options needed to open it (endpoint, region, credentials). */
export interface DatasetLocation {
  location: string;
  storageOptions: Record<string, string>;
  /** Present for tables whose versions the service manages. */
  coordinator?: CommitCoordinator;
}

export type CreateDatasetMode = 'create' | 'overwrite';

export interface LanceEngine {
  /**
   * Writes an Arrow IPC stream as a dataset at the location and returns the committed version and
   * the number of rows written.
   * A stream with a schema and no rows makes an empty dataset. `overwrite` commits a new version
   * replacing the rows of an existing dataset; `create` fails if one exists.
   */
  createDataset(at: DatasetLocation, arrowIpcStream: Buffer, mode: CreateDatasetMode): Promise<{ version: number; rows: number }>;
  /** Opens the dataset and returns its latest version; throws EngineError('not_a_dataset') if there is none. */
  datasetVersion(at: DatasetLocation): Promise<number>;
  /** Version and schema (in the spec's JSON Arrow form) of the latest version, or of `version`. */
  describeDataset(at: DatasetLocation, version?: number): Promise<{ version: number; schema: JsonArrowSchema }>;
  readonly rows: RowOps;
  readonly columns: ColumnOps;
  readonly indices: IndexOps;
  readonly tags: TagOps;
  readonly queries: QueryOps;
  close(): Promise<void>;
}

export type EngineErrorKind =
  | 'invalid_input'
  | 'not_a_dataset'
  | 'version_not_found'
  | 'column_not_found'
  | 'index_not_found'
  | 'index_exists'
  | 'tag_not_found'
  | 'tag_exists'
  | 'already_exists'
  | 'conflict'
  | 'unsupported'
  /** The storage is full or cannot be reached for now: worth a retry later. */
  | 'unavailable'
  | 'internal';

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
