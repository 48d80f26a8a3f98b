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
      await claimName(deps.store, namespace, state, record, { leaseMs, undo: () => deps.store.delete(reservedMarkerKey(ref)) });
      // Lance's directory catalog recognizes a declared table by this marker (in the name's directory, which it lists).
      await deps.store.put(reservedMarkerKey(ref), '', { ifNoneMatch: '*' }).catch((e: unknown) => {
        if (!(e instanceof PreconditionFailedError)) throw e;
      });
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
