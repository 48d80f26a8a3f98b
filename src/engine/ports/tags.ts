import type { DatasetLocation } from '../dataset-location.js';

/** A tag: a named pointer to a version of the dataset's main branch. */
export interface TagInfo {
  version: number;
  /** Size in bytes of the manifest of the tagged version. */
  manifestSize: number;
}

/** Engine operations on a dataset's tags (Lance keeps them under `_refs/tags/`; no version is committed). */
export interface TagOps {
  /** Every tag of the dataset, by name. */
  list(at: DatasetLocation): Promise<Map<string, TagInfo>>;
  /** Throws EngineError('tag_not_found') for an unknown tag. */
  version(at: DatasetLocation, tag: string): Promise<number>;
  /** Throws 'tag_exists' when the tag exists, 'version_not_found' when the version does not. */
  create(at: DatasetLocation, tag: string, version: number): Promise<void>;
  /** Throws 'tag_not_found' for an unknown tag, 'version_not_found' when the version does not exist. */
  update(at: DatasetLocation, tag: string, version: number): Promise<void>;
  /** Throws 'tag_not_found' for an unknown tag. */
  delete(at: DatasetLocation, tag: string): Promise<void>;
}
