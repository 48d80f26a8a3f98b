import type { DatasetLocation } from '../lance-engine.js';

/** Engine operations on a dataset's queries (see lance-engine.ts). */
export interface QueryOps {
  /** Placeholder member until the group's operations are added; kept so the port type is not empty. */
  readonly group: 'queries';
  /** @internal unused; ties the port to DatasetLocation for future members. */
  readonly _location?: DatasetLocation;
}
