// The types every engine port module and the engine itself share: where a dataset is, how its
// versions are committed, and how engine failures are classified. A module of their own, so that
// lance-engine.ts (which composes the ports) and ports/* (which use these) do not import each other.

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

/**
 * The latest committed version of a dataset as the caller read it from the store for this
 * request, and which table it belongs to. With it the engine may serve the request from a dataset
 * it keeps open (see lancedb/handle-cache.ts); without it, it opens the dataset afresh.
 */
export interface LatestCommitted {
  version: number;
  /** ETag of that version's manifest: tells two tables that reached the same version apart. */
  manifestETag: string;
  /** Manifest size in bytes: what the kept handle is charged against the cache's memory bound. */
  manifestSize: number;
  /**
   * Which table lives at the location (the catalog record's incarnation): a table dropped and
   * re-created there is another one. Null when the catalog has no record (a dataset Lance wrote).
   */
  incarnation: string | null;
}

/** Where a dataset lives and the options needed to open it (endpoint, region, credentials). */
export interface DatasetLocation {
  location: string;
  storageOptions: Record<string, string>;
  /** Present for tables whose versions the service manages. */
  coordinator?: CommitCoordinator;
  /**
   * With `branch`: the commit paths of the table's other lines of history (main: null), for the
   * version calls Lance makes on them while it works on the branch (it opens main's latest first).
   */
  coordinatorOn?: (branch: string | null) => CommitCoordinator;
  /** Present when the caller read the latest version for this request: lets the engine reuse a kept handle. */
  latest?: LatestCommitted;
  /**
   * A branch other than main (Lance's `tree/<branch>/`): the dataset is opened on it, so reads see
   * its history and writes commit to it alone. `latest` is then the branch's (the engine keeps a
   * dataset open per branch too).
   */
  branch?: string;
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
  | 'branch_not_found'
  | 'branch_exists'
  | 'already_exists'
  | 'conflict'
  | 'unsupported'
  /** Something the engine needs is gone for now (a UDF worker died): worth a retry later; the message says what. */
  | 'unavailable'
  /**
   * The store cannot be reached or fails for now (connection refused or reset, timeouts, DNS, an
   * S3 server's 5xx; a file system's I/O error or read-only remount): worth a retry later. The
   * message is the engine's, with endpoints and paths in it: for the log only.
   */
  | 'store_unreachable'
  /** The store is full (no space, quota): worth a retry once it has room. */
  | 'store_full'
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
