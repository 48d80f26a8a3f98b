import { randomUUID } from 'node:crypto';
import type { DeclareTableRequest, DeclareTableResponse } from '../../model/tables.js';
import { PreconditionFailedError } from '../../store/object-store.js';
import { resolveManagedVersioning } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { reservedMarkerKey, tableRefOf } from '../catalog/layout.js';
import { resolveNamespaceCreatingSystem } from '../catalog/system-namespace.js';
import type { RequestContext } from '../context/request-context.js';
import { claimName, placed, tableAlreadyExists } from './name-claim.js';
import { refuseOtherLocation } from './table-location.js';
import { isVisible, livesInNameDir, readTableState, recordDir } from './table-state.js';

// DeclareTable: a table's name and location, without data yet.
//
// What a declare of a new name in a namespace costs on a local disk (in turn; "at once" shares a
// turn), 16 store calls in 12 turns and 4 fsyncs (3 in turn), all needed before the answer:
//   1. GET the namespace's record (it exists: 404 otherwise)
//   2. at once: the name's record and a LIST of its directory (what the name holds), and a GET of
//      each enclosing namespace's record up to one that sets managed_versioning (the root's: 1)
//   3. PUT the listing's pending entry (empty, no fsync), 4. DELETE the listing stamp
//   5. PUT the record, create-if-absent (2 fsyncs: the file, its directory): the name is taken;
//      meanwhile `.lance-reserved`'s file is written and fsynced, to be placed after step 6
//   6. GET the namespace's record again (createInNamespace: a drop deciding meanwhile is seen)
//   7. `.lance-reserved` placed, create-if-absent (its directory's fsync): Lance's catalog sees the table
//   8. at once: PUT the index's `v`, DELETE its `t` (empty, no fsync)
//   9. at once: the record and the directory's LIST again (the settle's read after its write)
//   10. PUT the log key, 11. DELETE the stamp, 12. DELETE the pending entry
// and after the answer, a LIST of up to 64 log keys (a compaction when it is that long). A
// namespace's create is 11 calls and 2 fsyncs the same way (its parent's record before and after,
// its own record, the index's entries, and its own index's ready marker). Each fsync is what makes
// the record or the marker durable before the answer; the index's empty keys rely on the journal's
// order instead (listing-entries.ts). The reference server fsyncs nothing.

export async function declareTable(deps: CatalogDeps, ctx: RequestContext, id: string[], request: DeclareTableRequest): Promise<DeclareTableResponse> {
  const ref = tableRefOf(id);
  // The namespace is read once here; the claim reads it once more, after its put (the protocol).
  const namespace = await resolveNamespaceCreatingSystem(deps, ctx, ref.namespace);
  const properties = request.properties ?? {};
  // At once: the name's files, and the enclosing namespaces' records where managed versioning is inherited.
  const [state, managed] = await Promise.all([readTableState(deps.store, ref), resolveManagedVersioning(deps, namespace, properties)]);
  if (isVisible(state)) throw tableAlreadyExists(id);
  const record = placed(state, { properties, created_at: new Date().toISOString(), managed_versioning: managed, incarnation: randomUUID() });
  const own = recordDir(deps.locations, state.dirKey, record);
  const location = own.store.location(own.key);
  refuseOtherLocation(deps.locations, request.location, own, 'the catalog places declared tables');
  await deps.listingIndex.around(
    'table',
    ref,
    async () => {
      const { leaseMs } = deps.settings;
      if (!livesInNameDir(record)) return void (await claimName(deps.store, namespace, state, record, { leaseMs }));
      const claimed = claimName(deps.store, namespace, state, record, { leaseMs, undo: () => deps.store.delete(reservedMarkerKey(ref)) });
      // Lance's directory catalog recognizes a declared table by this marker (in the name's
      // directory, which it lists). Written and fsynced while the name is claimed, placed only
      // once the claim holds (PutOptions.placeAfter: a claim that fails places nothing).
      const marker = deps.store.put(reservedMarkerKey(ref), '', { ifNoneMatch: '*' }, { placeAfter: claimed }).catch((e: unknown) => {
        if (!(e instanceof PreconditionFailedError)) throw e;
      });
      await Promise.all([claimed, marker]);
    },
    { visible: true, data: false },
  );
  return {
    location,
    storage_options: await deps.credentials.storageOptions(ctx, { id, dir: own, managedVersioning: managed }, request.vend_credentials),
    properties,
    managed_versioning: managed,
  };
}
