import { z } from 'zod';
import { type DatasetLocation, EngineError } from '../dataset-location.js';
import type {
  CleanupRequest,
  CleanupResult,
  CompactionOptions,
  CompactionResult,
  IndexUpkeepResult,
  InspectOptions,
  MaintenanceInspection,
  MaintenanceOps,
} from '../ports/maintenance.js';
import type { PylanceWorkers } from './pylance-worker.js';

// Table maintenance by pylance's worker (worker/index_worker.py). @lancedb/lancedb 0.39 has only
// `optimize()`, which compacts (with Lance's default options alone), optimizes every index and
// removes versions older than a cutoff all at once, and whose cleanup refuses outright when a tag
// points at an older version; pylance runs each on its own, with its options, and removes exactly
// the versions it is given. Each commit goes through the resolver's handle, so a managed table's
// reaches its commit coordinator like every engine write.

const count = z.number().int().nonnegative();
const inspection = z.object({
  version: z.number().int().positive(),
  fragments: count,
  small_fragments: count,
  rows: count,
  deleted_rows: count,
  indices: z.array(z.object({ name: z.string(), unindexed_rows: count })),
  versions: z.array(z.object({ version: z.number().int().positive(), timestamp_millis: z.number().int() })),
});
const compaction = z.object({
  version: z.number().int().positive().nullable(),
  fragments_before: count,
  fragments_after: count,
  rows_rewritten: count,
  bytes_rewritten: count,
  ray_tasks: count,
});
const upkeep = z.object({ version: z.number().int().positive().nullable(), indices_updated: count, rows_indexed: count });
const cleanup = z.object({ versions_removed: count, bytes_removed: count, removed: z.array(z.number().int().positive()) });

/** Main only: a branch's location commits to the branch, which maintenance does not touch. */
function mainOnly(at: DatasetLocation): DatasetLocation {
  if (at.branch !== undefined) throw new EngineError('unsupported', `maintenance runs on main only, not on branch ${at.branch}`);
  return at;
}

/**
 * Compactions of at least this many rows (in the fragments planned for rewriting) run on the Ray
 * cluster when one is given: below, one process rewrites them faster than Ray schedules tasks.
 */
export const DEFAULT_DISTRIBUTE_ABOVE_ROWS = 1_048_576;

/** A Ray cluster for large compactions, and workers whose Python has ray (the UDF workers' venv). */
export interface MaintenanceRay {
  workers: PylanceWorkers;
  address: string;
  distributeAboveRows: number;
}

export class PylanceMaintenance implements MaintenanceOps {
  constructor(
    private readonly workers: PylanceWorkers,
    private readonly ray?: MaintenanceRay,
  ) {}

  async inspect(at: DatasetLocation, options: InspectOptions = {}): Promise<MaintenanceInspection> {
    const answer = inspection.parse(
      await this.workers.run(mainOnly(at), 'inspecting a table', {
        op: 'inspect',
        target_rows_per_fragment: options.targetRowsPerFragment ?? null,
        with_versions: options.withVersions ?? true,
      }),
    );
    return {
      version: answer.version,
      fragments: answer.fragments,
      smallFragments: answer.small_fragments,
      rows: answer.rows,
      deletedRows: answer.deleted_rows,
      indices: answer.indices.map((i) => ({ name: i.name, unindexedRows: i.unindexed_rows })),
      versions: answer.versions.map((v) => ({ version: v.version, timestampMillis: v.timestamp_millis })),
    };
  }

  async compact(at: DatasetLocation, options: CompactionOptions): Promise<CompactionResult> {
    // With a Ray cluster, the worker plans and decides by the plan's size (see _compact_on_ray).
    const ray = this.ray;
    const answer = compaction.parse(
      await (ray?.workers ?? this.workers).run(mainOnly(at), 'compacting a table', {
        op: 'compact',
        target_rows_per_fragment: options.targetRowsPerFragment ?? null,
        materialize_deletions_threshold: options.deletedShareThreshold ?? null,
        ray_address: ray?.address ?? null,
        distribute_above_rows: ray?.distributeAboveRows ?? null,
      }),
    );
    return {
      version: answer.version,
      fragmentsBefore: answer.fragments_before,
      fragmentsAfter: answer.fragments_after,
      rowsRewritten: answer.rows_rewritten,
      bytesRewritten: answer.bytes_rewritten,
      rayTasks: answer.ray_tasks,
    };
  }

  async optimizeIndices(at: DatasetLocation): Promise<IndexUpkeepResult> {
    const answer = upkeep.parse(await this.workers.run(mainOnly(at), 'optimizing indices', { op: 'optimize_indices' }));
    return { version: answer.version, indicesUpdated: answer.indices_updated, rowsIndexed: answer.rows_indexed };
  }

  async cleanupOldVersions(at: DatasetLocation, request: CleanupRequest): Promise<CleanupResult> {
    const answer = cleanup.parse(
      await this.workers.run(mainOnly(at), 'removing old versions', {
        op: 'cleanup',
        older_than_millis: Math.floor(request.olderThanMillis),
        keep: [...request.keep],
      }),
    );
    return { versionsRemoved: answer.versions_removed, bytesRemoved: answer.bytes_removed, removed: answer.removed };
  }
}
