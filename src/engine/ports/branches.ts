import type { DatasetLocation } from '../dataset-location.js';

/**
 * Engine operations on a dataset's branches (Lance keeps them under `_refs/branches/` and
 * `tree/<name>/`). The service reads the refs itself (service/branches/branch-refs.ts); the engine
 * makes and removes them, since a branch's first manifest is a Lance clone of its source.
 */
export interface BranchOps {
  /**
   * Forks branch `name` from `fromBranch` (null: main) at `fromVersion` (its latest when undefined).
   * Throws 'branch_exists' when the name is taken, 'branch_not_found' when the source branch is
   * missing, 'version_not_found' when the source has no such version.
   */
  create(at: DatasetLocation, name: string, fromBranch: string | null, fromVersion: number | undefined): Promise<void>;
  /** Throws 'branch_not_found' for an unknown branch, 'branch_in_use' when branches were forked from it (Lance's rule). */
  delete(at: DatasetLocation, name: string): Promise<void>;
}
