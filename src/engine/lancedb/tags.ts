import type { TagOps } from '../ports/tags.js';
import type { TableAccess } from './table-access.js';

/** The tags operations of the Lance engine over @lancedb/lancedb. */
export class LancedbTags implements TagOps {
  readonly group = 'tags';

  constructor(private readonly access: TableAccess) {}

  /** The table access every operation of this group goes through. */
  protected get tables(): TableAccess {
    return this.access;
  }
}
