import type { MaintenanceInspection } from '../../engine/ports/maintenance.js';
import type { MaintenanceStep } from './maintenance-job.js';
import type { MaintenancePolicy } from './policy.js';
import type { RunSummary } from './policy-markers.js';

// What a table's maintenance run does: which steps are due (the scheduler's decision, from one
// inspection) and which versions a cleanup must keep. Pure functions of what was read.

/**
 * Allowance for the clocks of the machines that commit versions (a version's commit time is its
 * writer's clock) against this replica's: a reader window is widened by it.
 */
export const CLOCK_ALLOWANCE_MS = 5_000;

/** The share of a table's stored rows that are deleted, 0..1. */
export const deletedShareOf = (i: MaintenanceInspection): number => (i.rows + i.deletedRows === 0 ? 0 : i.deletedRows / (i.rows + i.deletedRows));

/**
 * Versions a reader may still be reading: every version that was the latest at some instant within
 * the last `windowMs` (widened by CLOCK_ALLOWANCE_MS), i.e. the latest, and each version whose
 * successor was committed within that window. A reader is handed the latest version (a describe,
 * a query, vended credentials) and works on it for at most a lease.
 */
export function readerWindow(versions: MaintenanceInspection['versions'], now: number, windowMs: number): Set<number> {
  const since = now - windowMs - CLOCK_ALLOWANCE_MS;
  const sorted = [...versions].sort((a, b) => a.version - b.version);
  const keep = new Set<number>();
  sorted.forEach((v, i) => {
    const next = sorted[i + 1];
    if (!next || next.timestampMillis > since) keep.add(v.version);
  });
  return keep;
}

/** Versions a cleanup at `now` would remove if nothing else (tags, branches) kept them. */
export function cleanupCandidates(versions: MaintenanceInspection['versions'], olderThanMs: number, now: number, windowMs: number): number[] {
  const inWindow = readerWindow(versions, now, windowMs);
  return versions.filter((v) => v.timestampMillis < now - olderThanMs && !inWindow.has(v.version)).map((v) => v.version);
}

/**
 * The steps due on a table by its policy and inspection. A cleanup is due when some version could
 * go that the last cleanup did not find kept (by a tag or a branch): one that only tags keep is not
 * retried every tick.
 */
export function dueSteps(
  policy: MaintenancePolicy,
  inspection: MaintenanceInspection,
  lastRuns: readonly RunSummary[],
  now: number,
  windowMs: number,
): MaintenanceStep[] {
  const steps: MaintenanceStep[] = [];
  // Indices first: Lance's compaction never merges fragments an index covers with ones it does not.
  if (policy.optimizeIndices && inspection.indices.some((i) => i.unindexedRows > 0 && i.unindexedRows >= policy.maxUnindexedRows))
    steps.push('optimize_indices');
  if (
    policy.compact &&
    (inspection.smallFragments >= policy.minFragments || (inspection.deletedRows > 0 && deletedShareOf(inspection) >= policy.deletedShare))
  ) {
    steps.push('compact');
  }
  if (policy.cleanupOlderThanMs !== null) {
    const lastCleanup = lastRuns.find((r) => r.status === 'Succeeded' && r.steps.includes('cleanup'));
    const kept = new Set(lastCleanup?.kept ?? []);
    if (cleanupCandidates(inspection.versions, policy.cleanupOlderThanMs, now, windowMs).some((v) => !kept.has(v))) steps.push('cleanup');
  }
  return steps;
}
