import { randomUUID } from 'node:crypto';
import { EngineError } from '../../engine/lance-engine.js';
import { ErrorCode, invalidInput, NamespaceError } from '../../model/errors.js';
import type { RegisterTableRequest, RegisterTableResponse } from '../../model/tables.js';
import { PreconditionFailedError } from '../../store/object-store.js';
import { displayId, type ResolvedNamespace, resolveManagedVersioning, resolveNamespace } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { namespaceDirKey, namespaceHolding, reservedMarkerKey, tableDirKey, tableRecordKey, tableRefOf } from '../catalog/layout.js';
import { encodeRecord, type TableRecord } from '../catalog/records.js';
import type { RequestContext } from '../context/request-context.js';
import { engineFailure } from '../errors/engine-errors.js';
import { claimName, tableAlreadyExists, withMarkerSettled } from './name-claim.js';
import { datasetAt } from './table-location.js';
import { isVisible, readTableState, type TableState } from './table-state.js';

// RegisterTable: an existing Lance dataset, inside the root or at an allowed location, under a name.

export async function registerTable(deps: CatalogDeps, ctx: RequestContext, id: string[], request: RegisterTableRequest): Promise<RegisterTableResponse> {
  const ref = tableRefOf(id);
  const mode = request.mode ?? 'Create';
  // A relative location is one in the directory that holds the namespace's tables.
  const dir = deps.locations.resolve(request.location, namespaceDirKey(ref.namespace));
  // A place inside the root belongs to the namespace whose subtree holds it: registering it
  // exposes (and drops) that namespace's data, so the caller must manage that namespace too.
  const holder = dir.owned ? namespaceHolding(dir.key) : null;
  if (holder && !(ctx.may?.('manage', holder) ?? false)) {
    throw new NamespaceError(
      ErrorCode.PermissionDenied,
      `location ${JSON.stringify(request.location)} lies in namespace ${displayId(holder)}, which the caller may not manage`,
    );
  }
  const namespace = await resolveNamespace(deps.store, ref.namespace);
  try {
    await deps.engine.datasetVersion(datasetAt(dir));
  } catch (e) {
    if (e instanceof EngineError && e.kind !== 'internal') {
      throw invalidInput(`location ${JSON.stringify(request.location)} is not a readable Lance dataset: ${e.message}`, e);
    }
    throw engineFailure(e, id);
  }
  const ownDir = tableDirKey(ref);
  const isOwnDir = dir.store === deps.store && dir.key === ownDir;
  const properties = request.properties ?? {};
  const record: TableRecord = {
    properties,
    created_at: new Date().toISOString(),
    incarnation: randomUUID(),
    // Recorded as resolved (a relative location means nothing once its namespace is renamed).
    ...(isOwnDir ? {} : { location: dir.store.location(dir.key) }),
    managed_versioning: await resolveManagedVersioning(deps, namespace, properties),
  };
  const state = await readTableState(deps.store, ref);
  if (isVisible(state) && mode === 'Create') throw tableAlreadyExists(id);
  await deps.listingIndex.around('table', ref, () => registerAt(deps, namespace, state, record, isOwnDir), { visible: true, data: true });
  // The location as the caller sent it (Lance's reference server answers so, and its tests expect
  // it); DescribeTable answers the resolved one.
  return { location: request.location, properties };
}

async function registerAt(deps: CatalogDeps, namespace: ResolvedNamespace, state: TableState, record: TableRecord, isOwnDir: boolean): Promise<void> {
  const { ref } = state;
  const id = [...ref.namespace, ref.name];
  const { leaseMs } = deps.settings;
  const replaced = state.record;
  if (replaced && isVisible(state)) {
    // Overwrite: replace exactly the record that was read.
    await withMarkerSettled(deps.store, state, record, leaseMs, async () => {
      try {
        await deps.store.put(tableRecordKey(ref), encodeRecord(record), { ifMatch: replaced.etag });
      } catch (e) {
        if (e instanceof PreconditionFailedError)
          throw new NamespaceError(ErrorCode.ConcurrentModification, `table ${displayId(id)} changed during the register; retry`);
        throw e;
      }
    });
  } else {
    // A free name, a deregistered table's among them (registering its directory again brings it back).
    await claimName(deps.store, namespace, state, record, { leaseMs, keepData: isOwnDir });
  }
  if (state.reserved) await deps.store.delete(reservedMarkerKey(ref));
}
