import type { DatasetLocation } from '../dataset-location.js';

/**
 * Engine operations on a dataset's branches (Lance keeps them under `_refs/branches/` and
 * `tree/<name>/`). The service reads the refs itself (service/branches/branch-refs.ts), and
 * removes them (branch-service.ts: a delete must wait for the writes on the branch between the
 * ref and the tree, which Lance's delete removes at once); the engine makes them, since a
 * branch's first manifest is a Lance clone of its source.
 */
export interface BranchOps {
  /**
   * Forks branch `name` from `fromBranch` (null: main) at `fromVersion` (its latest when undefined).
   * Throws 'branch_exists' when the name is taken, 'branch_not_found' when the source branch is
   * missing, 'version_not_found' when the source has no such version. `at` is the table's main
   * dataset as the request resolved it (with its coordinator, if any: the fork commits nothing to
   * main's history, and the engine forks without it).
   */
  create(at: DatasetLocation, name: string, fromBranch: string | null, fromVersion: number | undefined): Promise<void>;
}
