import { randomUUID } from 'node:crypto';
import { type CommitCoordinator, EngineError } from '../../engine/lance-engine.js';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import type { CreateTableResponse } from '../../model/tables.js';
import { PreconditionFailedError } from '../../store/object-store.js';
import { displayId, type ResolvedNamespace, resolveManagedVersioning } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { reservedMarkerKey, tableRecordKey, tableRefOf } from '../catalog/layout.js';
import { encodeRecord, readRecord, TableRecord } from '../catalog/records.js';
import { resolveNamespaceCreatingSystem } from '../catalog/system-namespace.js';
import type { RequestContext } from '../context/request-context.js';
import { faultPoint, pausePoint } from '../coordination/fault-points.js';
import { keepRenewed, leaseUntil } from '../coordination/leases.js';
import { engineFailure } from '../errors/engine-errors.js';
import { claimDatasetCreation } from './dataset-creation.js';
import { claimName, placed, tableAlreadyExists } from './name-claim.js';
import { type ResolvedTable, resolvedTable } from './resolved-table.js';
import { datasetAt, refuseOtherLocation } from './table-location.js';
import { dataDir, isVisible, readTableState, recordDir, requireVisibleTable, type TableState, tableHasData } from './table-state.js';

// CreateTable: a new table from an Arrow IPC stream, or the data of a declared one, or an overwrite.

export interface CreateTableInput {
  mode?: 'Create' | 'ExistOk' | 'Overwrite' | undefined;
  /** Where the client expects the table: refused unless it is where the table lives or will (as DeclareTable's). */
  location?: string | undefined;
  properties?: Record<string, string> | undefined;
  storageOptions?: Record<string, string> | undefined;
  arrowIpcStream: Buffer;
}

/** The commit path of a managed table, so that the engine's writes go through it (see TableVersionService.coordinatorFor). */
export type CoordinatorFor = (ctx: RequestContext, table: ResolvedTable, underWriteLease: boolean) => CommitCoordinator;

/**
 * Creates a table from an Arrow IPC stream. A new name is held by a claim (see createNew) while
 * the data is written. An existing table is overwritten (mode Overwrite) or, when only
 * declared, filled in place by the one request holding its creation claim (see
 * dataset-creation.ts: Lance would turn a losing concurrent create into an overwrite); both
 * under a write lease, so that a drop waits for them.
 */
export async function createTable(
  deps: CatalogDeps,
  coordinatorFor: CoordinatorFor,
  ctx: RequestContext,
  id: string[],
  input: CreateTableInput,
): Promise<CreateTableResponse> {
  const ref = tableRefOf(id);
  const namespace = await resolveNamespaceCreatingSystem(deps, ctx, ref.namespace);
  const state = await readTableState(deps.store, ref);
  if (isVisible(state)) {
    const dir = dataDir(deps.locations, state);
    refuseOtherLocation(deps.locations, input.location, dir, 'an existing table keeps its location');
    return createExisting(deps, coordinatorFor, ctx, resolvedTable(deps, id, state, { dir, namespace }), namespace, input);
  }
  // A retired name's new table gets a directory of its own (see placed), which no client can name ahead.
  refuseOtherLocation(deps.locations, input.location, state.retired ? null : deps.locations.own(state.dirKey), 'the catalog places new tables');
  // The listing index hears of the new table (see catalog/listing-index.ts).
  return deps.listingIndex.around('table', ref, () => createNew(deps, coordinatorFor, ctx, id, namespace, state, input), { visible: true, data: true });
}

/** Fills a declared table, or overwrites a table (see createTable). */
async function createExisting(
  deps: CatalogDeps,
  coordinatorFor: CoordinatorFor,
  ctx: RequestContext,
  table: ResolvedTable,
  namespace: ResolvedNamespace,
  input: CreateTableInput,
): Promise<CreateTableResponse> {
  const { id, state, dir } = table;
  const { ref } = state;
  const mode = input.mode ?? 'Create';
  const hasData = await tableHasData(deps.locations, state);
  const existingProperties = state.record?.value.properties ?? {};
  if (hasData && mode === 'Create') throw tableAlreadyExists(id);
  if (hasData && mode === 'ExistOk') {
    const version = await deps.engine.datasetVersion(datasetAt(dir)).catch((e: unknown) => {
      throw engineFailure(e, id);
    });
    return {
      location: dir.store.location(dir.key),
      version,
      properties: existingProperties,
      storage_options: await deps.credentials.storageOptions(ctx, { id, dir, managedVersioning: await table.managedVersioning() }, undefined),
    };
  }
  const overwrite = hasData;
  let properties = mode === 'Overwrite' ? (input.properties ?? {}) : { ...existingProperties, ...input.properties };
  const managed = state.record?.value.managed_versioning ?? (await resolveManagedVersioning(deps, namespace, properties));
  // The engine commits under the write lease below: a drop waits for it.
  const at = { ...datasetAt(dir, input.storageOptions), ...(managed ? { coordinator: coordinatorFor(ctx, table, true) } : {}) };
  const write = () =>
    deps.fences.whileWriting(state, ctx.requestId, async () => {
      // Filling a declared table: only the holder of the creation claim may create its dataset.
      const release = overwrite ? null : await claimDatasetCreation(deps.store, ref, ctx.requestId, deps.settings.leaseMs);
      if (!overwrite && !release) throw tableAlreadyExists(id, 'is being created by another request');
      try {
        if (release && (await tableHasData(deps.locations, await readTableState(deps.store, ref)))) throw tableAlreadyExists(id);
        return (await deps.engine.createDataset(at, input.arrowIpcStream, overwrite ? 'overwrite' : 'create')).version;
      } catch (e) {
        throw engineFailure(e, id);
      } finally {
        await release?.();
      }
    });
  // Filling a declared table gives it data: the listing index hears of it (see catalog/listing-index.ts).
  const version = overwrite ? await write() : await deps.listingIndex.around('table', ref, write, { visible: true, data: true });
  // Overwrite replaces the properties too, once the data is in (a failed create changes nothing).
  // The data is committed by now, so losing this race is reported with what the table keeps.
  if (mode === 'Overwrite' && state.record) {
    await deps.store.put(tableRecordKey(ref), encodeRecord({ ...state.record.value, properties }), { ifMatch: state.record.etag }).catch((e: unknown) => {
      if (!(e instanceof PreconditionFailedError)) throw e;
      properties = state.record?.value.properties ?? {};
    });
  }
  if (state.reserved) await deps.store.delete(reservedMarkerKey(ref)).catch(() => undefined);
  return {
    location: dir.store.location(dir.key),
    version,
    properties,
    storage_options: await deps.credentials.storageOptions(ctx, { id, dir, managedVersioning: managed }, undefined),
  };
}

/**
 * Creates a table under a new name.
 *
 * Invariant: a create that dies half-way leaves nothing that blocks the name. Until the data is
 * committed the name is held by a claim: the table's record marked `creating`, with a lease that
 * is renewed while the data is written, invisible to every reader. Once the data is in, the
 * claim becomes the record (replace-if-unchanged): the table exists from then on. A claim whose
 * lease ran out was left by a dead create; the next request to take the name replaces exactly
 * that claim and deletes what the dead create wrote (see claimName).
 */
async function createNew(
  deps: CatalogDeps,
  coordinatorFor: CoordinatorFor,
  ctx: RequestContext,
  id: string[],
  namespace: ResolvedNamespace,
  state: TableState,
  input: CreateTableInput,
): Promise<CreateTableResponse> {
  const { ref } = state;
  const { leaseMs } = deps.settings;
  const properties = input.properties ?? {};
  const managed = await resolveManagedVersioning(deps, namespace, properties);
  const table = placed(state, { properties, created_at: new Date().toISOString(), managed_versioning: managed, incarnation: randomUUID() });
  // The claim names this create uniquely (request ids come from clients and may repeat); the
  // commit path of a managed table finds the table it creates by that name.
  const own: RequestContext = { ...ctx, requestId: `${ctx.requestId}/${randomUUID()}` };
  const claim = (): TableRecord => ({ ...table, creating: { request_id: own.requestId, lease_until: leaseUntil(leaseMs) } });
  const key = tableRecordKey(ref);
  const claimedAt = Date.now();
  let etag = await claimName(deps.store, namespace, state, claim(), { leaseMs });
  faultPoint('create:after-claim');
  const renewal = keepRenewed(
    leaseMs,
    async () => {
      ({ etag } = await deps.store.put(key, encodeRecord(claim()), { ifMatch: etag }));
    },
    claimedAt,
  );
  const dir = recordDir(deps.locations, state.dirKey, table);
  let version: number;
  try {
    // The table as claimed, resolved once for the engine's commits: not under a write lease, so
    // each commit looks again at it, and finds this create's claim (it names own.requestId).
    const claimed = managed
      ? resolvedTable(deps, id, await requireVisibleTable(deps.store, ref, { creatingRequest: own.requestId }), { dir, namespace })
      : null;
    const at = { ...datasetAt(dir, input.storageOptions), ...(claimed ? { coordinator: coordinatorFor(own, claimed, false) } : {}) };
    ({ version } = await deps.engine.createDataset(at, input.arrowIpcStream, 'create'));
    await pausePoint('create:after-data');
    await renewal.stop();
    await deps.store.put(key, encodeRecord(table), { ifMatch: etag });
  } catch (e) {
    await renewal.stop().catch(() => undefined);
    // Best effort: should this fail too (the store is down), the claim's lease runs out instead.
    await abandonClaim(deps, state, own.requestId, table.dir).catch(() => undefined);
    if (e instanceof PreconditionFailedError) {
      throw new NamespaceError(
        ErrorCode.ConcurrentModification,
        `table ${displayId(id)}: the create outlived its claim on the name and was taken over; retry`,
        { cause: e },
      );
    }
    // Data found at the location while this create held the name came from a writer its claim
    // does not stop (a create whose claim was taken over, still at work), not from a table of
    // this name: "already exists" would be untrue (the clean-up above may have cleared it). A
    // retry finds out whether the name is taken.
    if (e instanceof EngineError && e.kind === 'already_exists') {
      throw new NamespaceError(
        ErrorCode.ConcurrentModification,
        `table ${displayId(id)}: another writer wrote a dataset at the table's location during the create; retry`,
        { cause: e },
      );
    }
    throw engineFailure(e, id);
  }
  return {
    location: dir.store.location(dir.key),
    version,
    properties,
    storage_options: await deps.credentials.storageOptions(ctx, { id, dir, managedVersioning: managed }, undefined),
  };
}

/**
 * Deletes what a failed create wrote: if the name is still held by its claim, the name's
 * directory, or in a retired one (see table-state.ts) the claim's own directory and the claim.
 * A directory of its own (`ownDir`) is deleted too when the claim was taken from it (a drop
 * fenced it, or its lease ran out), unless the record names it (the create's last put landed
 * after all): no other table ever lives there, and the engine may have written there after
 * whoever took the claim cleared it.
 */
async function abandonClaim(deps: CatalogDeps, state: TableState, requestId: string, ownDir: string | undefined): Promise<void> {
  const key = tableRecordKey(state.ref);
  const current = await readRecord(deps.store, key, TableRecord);
  const held = current?.value.creating?.request_id === requestId;
  if (held || (ownDir !== undefined && current?.value.dir !== ownDir)) await deps.store.deletePrefix(ownDir ?? state.dirKey);
  if (held && ownDir !== undefined) await deps.store.delete(key);
}
