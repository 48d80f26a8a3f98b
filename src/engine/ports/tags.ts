import type { DatasetLocation } from '../lance-engine.js';

/** Engine operations on a dataset's tags (see lance-engine.ts). */
export interface TagOps {
  /** Placeholder member until the group's operations are added; kept so the port type is not empty. */
  readonly group: 'tags';
  /** @internal unused; ties the port to DatasetLocation for future members. */
  readonly _location?: DatasetLocation;
}
