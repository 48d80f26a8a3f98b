import { unsupported } from '../../model/errors.js';
import type { RenameTableRequest, RenameTableResponse } from '../../model/tables.js';
import { PreconditionFailedError } from '../../store/object-store.js';
import { createInNamespace, displayId, type ResolvedNamespace, resolveNamespace } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { deregisteredMarkerKey, type TableRef, tableDirKey, tableRefOf } from '../catalog/layout.js';
import { pausePoint } from '../coordination/fault-points.js';
import { PolicyMarkers } from '../maintenance/policy-markers.js';
import { holdMarker, nameBeingChanged, tableAlreadyExists } from './name-claim.js';
import { dataDir, readTableState, requireVisibleTable, type TableState } from './table-state.js';

// RenameTable: a directory renamed, where the store can do it atomically.

/**
 * Renames (or moves) a table by renaming its directory, which is atomic on a local file system
 * and refused when the destination exists. Object stores have no rename, so there it is a 406.
 *
 * Invariant: a directory a deregister retired never moves (see table-state.ts). The move holds
 * the name's marker, in place of exactly the marker read with the table (holdMarker): a
 * deregister or drop that came before fails the hold (404), one that comes after finds no table
 * or fails its own conditional put; the hold moves with the directory and goes after it.
 */
export async function renameTable(deps: CatalogDeps, id: string[], request: RenameTableRequest): Promise<RenameTableResponse> {
  const ref = tableRefOf(id);
  const targetNs = request.new_namespace_id ?? ref.namespace;
  const target = tableRefOf([...targetNs, request.new_table_name]);
  const renameDir = deps.store.renameDir?.bind(deps.store);
  if (!renameDir) {
    throw unsupported(
      `rename is not supported on ${deps.store.rootUri}: an object store cannot rename a directory atomically; deregister the table and register its location under the new name instead`,
    );
  }
  const state = await requireVisibleTable(deps.store, ref);
  const targetNamespace = await resolveNamespace(deps.store, targetNs);
  const targetState = await readTableState(deps.store, target);
  // A retired directory (see table-state.ts) must not move, nor can the table be renamed into one.
  for (const [s, which] of [
    [state, 'its name'],
    [targetState, 'the new name'],
  ] as const) {
    if (s.retired) {
      throw unsupported(
        `rename of table ${displayId(id)} is not supported: the directory of ${which} holds a deregistered table's data, which stays where it is; deregister the table and register its location under the new name instead`,
      );
    }
  }
  // A dropped table's directory holds no table: it is cleared to make room.
  if (targetState.dropped && !targetState.record) await deps.store.deletePrefix(targetState.dirKey);
  else if (targetState.occupied) throw tableAlreadyExists([...targetNs, request.new_table_name]);
  // The policy moves with the table: its marker is written for the new name first.
  await new PolicyMarkers(deps.store).note({ kind: 'table', id: [...targetNs, request.new_table_name] }, state.record?.value.properties);
  await pausePoint('rename:after-check');
  // Both names change: the index hears of both (see catalog/listing-index.ts).
  await deps.listingIndex.around(
    'table',
    ref,
    () => deps.listingIndex.around('table', target, () => moveTable(deps, state, target, targetNamespace, request.new_table_name, renameDir)),
    { visible: false, data: false },
  );
  return {};
}

async function moveTable(
  deps: CatalogDeps,
  state: TableState,
  target: TableRef,
  targetNamespace: ResolvedNamespace,
  newName: string,
  renameDir: (from: string, to: string) => Promise<void>,
): Promise<void> {
  const { ref } = state;
  await createInNamespace(
    deps.store,
    targetNamespace,
    async () => {
      const hold = await holdMarker(deps.store, state, deps.settings.leaseMs).catch(async (e: unknown) => {
        // Deregistered or dropped since it was read: no such table any more.
        await requireVisibleTable(deps.store, ref);
        throw e;
      });
      await pausePoint('rename:held');
      if (!(await hold.end())) throw nameBeingChanged([...ref.namespace, ref.name]);
      try {
        await renameDir(state.dirKey, tableDirKey(target));
      } catch (e) {
        await hold.restore();
        if (e instanceof PreconditionFailedError) throw tableAlreadyExists([...target.namespace, newName]);
        throw e;
      }
      await hold.release(deregisteredMarkerKey(target));
    },
    () => renameDir(tableDirKey(target), state.dirKey),
  );
  // Datasets kept open under the old directory name point at files that moved.
  const moved = dataDir(deps.locations, state);
  deps.engine.forget(moved.store.location(moved.key));
}
