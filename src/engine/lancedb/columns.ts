import type { ColumnOps } from '../ports/columns.js';
import type { TableAccess } from './table-access.js';

/** The columns operations of the Lance engine over @lancedb/lancedb. */
export class LancedbColumns implements ColumnOps {
  readonly group = 'columns';

  constructor(private readonly access: TableAccess) {}

  /** The table access every operation of this group goes through. */
  protected get tables(): TableAccess {
    return this.access;
  }
}
