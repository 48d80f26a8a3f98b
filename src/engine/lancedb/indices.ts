import type { IndexOps } from '../ports/indices.js';
import type { TableAccess } from './table-access.js';

/** The indices operations of the Lance engine over @lancedb/lancedb. */
export class LancedbIndices implements IndexOps {
  readonly group = 'indices';

  constructor(private readonly access: TableAccess) {}

  /** The table access every operation of this group goes through. */
  protected get tables(): TableAccess {
    return this.access;
  }
}
