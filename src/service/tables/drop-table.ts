import { ErrorCode, NamespaceError } from '../../model/errors.js';
import type { DropTableResponse } from '../../model/tables.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { type TableRef, tableDirKey, tableRecordKey, tableRefOf } from '../catalog/layout.js';
import { readRecord, TableRecord } from '../catalog/records.js';
import { faultPoint, pausePoint } from '../coordination/fault-points.js';
import { holdMarker } from './name-claim.js';
import {
  dataDir,
  deregisterMarker,
  dropDataDir,
  incarnationOf,
  incarnationOfRecord,
  isVisible,
  LinkedTableDir,
  requireVisibleTable,
  stateWithoutLinks,
  tableNotFound,
} from './table-state.js';

// DropTable and DeregisterTable: a name freed, its data deleted or kept.

/**
 * Drops the table and deletes its directory. The tombstone goes first, so the table disappears
 * at once and no write can start on it; the drop then waits for the writes under way and
 * deletes the rest (see table-fences.ts). The tombstone stays, so that nothing a late writer
 * leaves is taken for a table; the next create of the name clears the directory. Of concurrent
 * drops one wins, the others answer 404. Data at a registered location stays: it may be shared
 * with another registration or live outside the root, and is not the catalog's to delete; so
 * does a deregistered table's (the name is free, the data no longer the catalog's: see
 * table-state.ts). A table directory that is a symbolic link holds no table: its drop removes
 * the link, never what it leads to (see LinkedTableDir), and so does the drop of a table kept out
 * of by a link among the entries of its directory (or of its own directory), or by its own
 * directory being one: the links go, then the table is dropped as any other (stateWithoutLinks).
 * One whose namespace's directory is a link is a 404; one whose registered location a link keeps
 * the catalog out of is dropped without a look there.
 */
export async function dropTable(deps: CatalogDeps, id: string[]): Promise<DropTableResponse> {
  const ref = tableRefOf(id);
  const state = await stateWithoutLinks(deps.store, ref).catch((e: unknown) => {
    if (!(e instanceof LinkedTableDir)) throw e;
    // The name's directory is a link: it goes (dropLink). One above it (a namespace's) is no table's to remove.
    if (e.links[0] === tableDirKey(ref)) return null;
    throw tableNotFound(id);
  });
  if (state === null) return dropLink(deps, id, ref);
  if (!isVisible(state)) throw tableNotFound(id);
  const dir = dropDataDir(deps.locations, state);
  const location = state.record?.value.location ?? dir.store.location(dir.key);
  await deps.listingIndex.around(
    'table',
    ref,
    async () => {
      const begun = await deps.fences.beginDrop(state);
      if (!begun) throw tableNotFound(id);
      faultPoint('drop:after-tombstone');
      await deps.fences.finishDrop(state, dir, begun);
    },
    { visible: false, data: false },
  );
  deps.engine.forget(location);
  return { id, location, properties: state.record?.value.properties ?? {} };
}

/** Drops a name whose directory is a symbolic link: the link goes (LocalObjectStore.deletePrefix), what it leads to stays. */
async function dropLink(deps: CatalogDeps, id: string[], ref: TableRef): Promise<DropTableResponse> {
  const dirKey = tableDirKey(ref);
  const location = deps.store.location(dirKey);
  await deps.listingIndex.around('table', ref, () => deps.store.deletePrefix(dirKey), { visible: false, data: false });
  // A table swapped for the link may still be open in the engine.
  deps.engine.forget(location);
  return { id, location, properties: {} };
}

/**
 * Hides the table and keeps its data, and frees the name: its marker names the table it hides,
 * and retires the name's directory when the data lives there (see table-state.ts), so that the
 * next table of the name is placed elsewhere. Registering the location again brings it back.
 * Of concurrent deregisters and drops one wins, the others answer 404.
 *
 * Invariant: from the deregister's answer on, the deregistered data stays as it is. Writers see
 * the marker as they see a drop's tombstone (table-fences.ts): one that entered before it is
 * waited for, as long as it works, and lands before the answer; one that comes after fails with
 * 404 and writes nothing.
 */
export async function deregisterTable(deps: CatalogDeps, id: string[]): Promise<DropTableResponse> {
  const ref = tableRefOf(id);
  const state = await requireVisibleTable(deps.store, ref);
  await pausePoint('deregister:after-read');
  const dir = dataDir(deps.locations, state);
  await deps.listingIndex.around(
    'table',
    ref,
    async () => {
      // The marker read (none, mostly) is held first, and the table checked under the hold: "no
      // marker" may be another table's by now (this one dropped, or renamed away, and its name
      // taken anew), and its marker must not go over that one (see table-state.ts).
      const hold = await holdMarker(deps.store, state, deps.settings.leaseMs).catch((e: unknown) => {
        if (e instanceof NamespaceError && e.code === ErrorCode.ConcurrentModification) throw tableNotFound(id);
        throw e;
      });
      const same = await readRecord(deps.store, tableRecordKey(ref), TableRecord).then(
        (now) => incarnationOfRecord(now?.value) === incarnationOf(state),
        async (e: unknown) => {
          await hold.restore().catch(() => undefined);
          throw e;
        },
      );
      if (!same) {
        await hold.restore();
        throw tableNotFound(id);
      }
      await hold.replace(deregisterMarker(state));
    },
    { visible: false, data: false },
  );
  await deps.fences.writesEnded(state, dir);
  deps.engine.forget(dir.store.location(dir.key));
  return { id, location: dir.store.location(dir.key), properties: state.record?.value.properties ?? {} };
}
