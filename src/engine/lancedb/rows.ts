import type { RowOps } from '../ports/rows.js';
import type { TableAccess } from './table-access.js';

/** The rows operations of the Lance engine over @lancedb/lancedb. */
export class LancedbRows implements RowOps {
  readonly group = 'rows';

  constructor(private readonly access: TableAccess) {}

  /** The table access every operation of this group goes through. */
  protected get tables(): TableAccess {
    return this.access;
  }
}
