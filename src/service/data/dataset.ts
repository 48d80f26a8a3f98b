import type { DatasetLocation } from '../../engine/lance-engine.js';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { type CatalogDeps, displayId, resolveManagedVersioning } from '../catalog.js';
import { type TableRef, tableRefOf } from '../layout.js';
import type { StoreDir } from '../locations.js';
import type { RequestContext } from '../request-context.js';
import { dataDir, requireVisibleTable, type TableState, tableHasData } from '../table-state.js';
import type { TableVersionService } from '../versions.js';

/** A table resolved for a data operation: where its dataset is and how the engine opens it. */
export interface DataTable {
  id: string[];
  ref: TableRef;
  state: TableState;
  dir: StoreDir;
  /** For the engine; carries the commit coordinator when the table's versions are managed. */
  at: DatasetLocation;
  managedVersioning: boolean;
}

/** Resolves tables for the data services (rows, columns, indices, tags, queries). */
export class DataTables {
  constructor(
    private readonly deps: CatalogDeps,
    private readonly versions: TableVersionService,
  ) {}

  /**
   * The visible table `id`. Unless `allowDeclared`, a declared table without data is a 409 code
   * 19: there is no dataset to operate on yet.
   */
  async open(ctx: RequestContext, id: string[], options: { allowDeclared?: boolean } = {}): Promise<DataTable & { hasData: boolean }> {
    const ref = tableRefOf(id);
    const state = await requireVisibleTable(this.deps.store, ref);
    const dir = dataDir(this.deps.locations, state);
    const hasData = await tableHasData(this.deps.locations, state);
    if (!hasData && !options.allowDeclared) {
      throw new NamespaceError(ErrorCode.InvalidTableState, `table ${displayId(id)} is declared but has no data yet`);
    }
    const properties = state.record?.value.properties ?? {};
    const managedVersioning = state.record?.value.managed_versioning ?? (await resolveManagedVersioning(this.deps, ref.namespace, properties));
    const at: DatasetLocation = {
      location: dir.store.location(dir.key),
      storageOptions: dir.store.engineStorageOptions(),
      ...(managedVersioning ? { coordinator: this.versions.coordinatorFor(ctx, id) } : {}),
    };
    return { id, ref, state, dir, at, managedVersioning, hasData };
  }

  get engine() {
    return this.deps.engine;
  }

  /** The catalog the tables live in (store, locations, page tokens, settings). */
  get catalog(): CatalogDeps {
    return this.deps;
  }
}
