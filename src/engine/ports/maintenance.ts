import type { DatasetLocation } from '../dataset-location.js';

// The engine's side of table maintenance (issue 33): what a dataset needs, and the three Lance
// operations that keep it fast (compaction, index upkeep, removing old versions). The service
// decides when (policy, scheduler, job lease); the engine only inspects and acts. Every action
// commits through the location's commit path (DatasetLocation.coordinator on a managed table), as
// Lance's rebase-able operations, so a racing client append, update or delete either lands or
// gets Lance's retryable conflict; an action that loses throws EngineError('conflict').

/** What a dataset's latest version holds, for deciding whether maintenance is due. */
export interface MaintenanceInspection {
  version: number;
  fragments: number;
  /** Fragments with fewer live rows than the `targetRowsPerFragment` asked for. */
  smallFragments: number;
  rows: number;
  /** Rows deleted (by deletion files) but still stored in data files. */
  deletedRows: number;
  /** Per index: rows of the table not covered by it. */
  indices: Array<{ name: string; unindexedRows: number }>;
  /**
   * Versions on storage (main's `_versions/`), oldest first, with their commit times (ms since epoch);
   * empty when not asked for (Lance reads every version's manifest for them).
   */
  versions: Array<{ version: number; timestampMillis: number }>;
}

export interface InspectOptions {
  targetRowsPerFragment?: number | undefined;
  /** List the versions (default true): a read of every version's manifest, which only a cleanup needs. */
  withVersions?: boolean | undefined;
}

export interface CompactionOptions {
  /** Lance's target_rows_per_fragment; default 1,048,576. */
  targetRowsPerFragment?: number | undefined;
  /** Rewrite fragments whose deleted share is at least this (0..1); Lance's materialize_deletions_threshold. */
  deletedShareThreshold?: number | undefined;
}

export interface CompactionResult {
  /** The version the compaction committed; null when there was nothing to compact. */
  version: number | null;
  fragmentsBefore: number;
  fragmentsAfter: number;
  rowsRewritten: number;
  bytesRewritten: number;
  /** Rewrite tasks run on the Ray cluster (0: in-process); see LancedbEngineOptions.maintenanceRay. */
  rayTasks: number;
}

export interface IndexUpkeepResult {
  /** The version committed; null when every index was up to date. */
  version: number | null;
  indicesUpdated: number;
  rowsIndexed: number;
}

export interface CleanupRequest {
  /** Versions committed before this instant (ms since epoch) may go. */
  olderThanMillis: number;
  /**
   * Versions that must stay whatever their age: tagged versions, branches' bases, versions a reader
   * was handed within the last lease. The latest version always stays.
   */
  keep: ReadonlySet<number>;
}

export interface CleanupResult {
  versionsRemoved: number;
  bytesRemoved: number;
  /** Which versions went: the service's own files about them (version sidecars) can go too. */
  removed: number[];
}

/** Engine operations that maintain a dataset (main only; branches are not maintained). */
export interface MaintenanceOps {
  inspect(at: DatasetLocation, options?: InspectOptions): Promise<MaintenanceInspection>;
  /**
   * Compacts small fragments and materializes deletions. Lance commits it as two versions: the
   * fragment ids it reserves, then the Rewrite (the version returned).
   */
  compact(at: DatasetLocation, options: CompactionOptions): Promise<CompactionResult>;
  /** Brings every index up to date with the rows outside it (Lance's optimize_indices); commits once. */
  optimizeIndices(at: DatasetLocation): Promise<IndexUpkeepResult>;
  /** Removes versions older than the cutoff except those kept, and the files only they reference. */
  cleanupOldVersions(at: DatasetLocation, request: CleanupRequest): Promise<CleanupResult>;
}
