import type { DatasetLocation } from '../dataset-location.js';

/**
 * Engine operations on a dataset's tags (Lance keeps them under `_refs/tags/`; no version is
 * committed). Tags are read from their refs by the service (branches/branch-refs.ts), a page at a time.
 */
export interface TagOps {
  /** Throws 'tag_exists' when the tag exists, 'version_not_found' when the version does not. */
  create(at: DatasetLocation, tag: string, version: number): Promise<void>;
  /** Throws 'tag_not_found' for an unknown tag, 'version_not_found' when the version does not exist. */
  update(at: DatasetLocation, tag: string, version: number): Promise<void>;
  /** Throws 'tag_not_found' for an unknown tag. */
  delete(at: DatasetLocation, tag: string): Promise<void>;
}
