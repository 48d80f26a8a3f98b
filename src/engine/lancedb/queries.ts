import type { QueryOps } from '../ports/queries.js';
import type { TableAccess } from './table-access.js';

/** The queries operations of the Lance engine over @lancedb/lancedb. */
export class LancedbQueries implements QueryOps {
  readonly group = 'queries';

  constructor(private readonly access: TableAccess) {}

  /** The table access every operation of this group goes through. */
  protected get tables(): TableAccess {
    return this.access;
  }
}
