import { type CatalogDeps, type ResolvedNamespace, resolveManagedVersioning } from '../catalog/catalog.js';
import { tableRefOf } from '../catalog/layout.js';
import type { StoreDir } from '../catalog/locations.js';
import { dataDir, requireVisibleTable, type TableState } from './table-state.js';

/**
 * A table as one request resolved it. Every later step of the request, including the engine's
 * version callbacks for a managed table, receives this instead of the id to look up again.
 */
export interface ResolvedTable {
  id: string[];
  /** What the store said about the name when it was resolved (record, markers). */
  state: TableState;
  /** Where its Lance dataset lives. */
  dir: StoreDir;
  /** Whether the service manages its versions: the record's flag, else inherited (read at most once, when first asked). */
  managedVersioning(): Promise<boolean>;
}

/** The handle of a table whose state the request has read. */
export function resolvedTable(deps: CatalogDeps, id: string[], state: TableState, options: { dir?: StoreDir; namespace?: ResolvedNamespace } = {}): ResolvedTable {
  let managed: Promise<boolean> | undefined;
  return {
    id,
    state,
    dir: options.dir ?? dataDir(deps.locations, state),
    managedVersioning: () => {
      const recorded = state.record?.value.managed_versioning;
      if (recorded !== undefined) return Promise.resolve(recorded);
      managed ??= resolveManagedVersioning(deps, options.namespace ?? state.ref.namespace, state.record?.value.properties ?? {});
      return managed;
    },
  };
}

/** Resolves the visible table `id` (404 otherwise; `creatingRequest` also finds the table that request is creating). */
export async function resolveTable(deps: CatalogDeps, id: string[], creatingRequest?: string): Promise<ResolvedTable> {
  return resolvedTable(deps, id, await requireVisibleTable(deps.store, tableRefOf(id), creatingRequest));
}
