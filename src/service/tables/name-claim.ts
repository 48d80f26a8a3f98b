import { randomUUID } from 'node:crypto';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import { createInNamespace, displayId, type ResolvedNamespace } from '../catalog/catalog.js';
import { deregisteredMarkerKey, ownTableDirKey, tableRecordKey } from '../catalog/layout.js';
import { encodeRecord, type TableRecord } from '../catalog/records.js';
import { faultPoint, pausePoint } from '../coordination/fault-points.js';
import { incarnationOf, isTombstone, leftoverDir, livesInNameDir, type NameMarker, retiredMarker, type TableState } from './table-state.js';

// Taking a name for a new table (declare, create, register, and the next table of a deregistered
// or dropped name): the record's claim, the clean-up of what a predecessor left, and the name's
// marker after it (the invariant of deregistered data is in table-state.ts).

export const tableAlreadyExists = (id: string[], why = 'already exists') => new NamespaceError(ErrorCode.TableAlreadyExists, `table ${displayId(id)} ${why}`);

/** A replace-if-unchanged of a name's marker lost to another change of the name: 409, retry. */
const retryOnLostRace =
  (id: string[]) =>
  (e: unknown): never => {
    if (e instanceof PreconditionFailedError)
      throw new NamespaceError(ErrorCode.ConcurrentModification, `table ${displayId(id)} changed meanwhile; retry`, { cause: e });
    throw e;
  };

/**
 * Takes the name for a new table: the record's create-if-absent inside `namespace`, live (the
 * linearization point of every new table, see createInNamespace), or a replace-if-unchanged of
 * exactly the record that a dead create, a dead drop or a deregister left. Whatever such a
 * predecessor, or a drop, left is then deleted (see leftoverDir: never a deregistered table's
 * data), before the new table writes anything; with `keepData` (registering the directory's own
 * dataset) the name's directory stays as it is. Then the marker: gone when the new table lives
 * in the name's directory or that directory is not retired, else kept retired (see
 * table-state.ts). Returns the etag of the record written.
 */
export async function claimName(
  store: ObjectStore,
  namespace: ResolvedNamespace,
  state: TableState,
  record: TableRecord,
  options: { undo?: () => Promise<void>; keepData?: boolean } = {},
): Promise<string> {
  const { ref } = state;
  const id = [...ref.namespace, ref.name];
  if (state.creating?.live) throw tableAlreadyExists(id, 'is being created by another request');
  if (state.dropped && state.record && !state.creating && state.dropUnderWay) {
    throw new NamespaceError(ErrorCode.ConcurrentModification, `table ${displayId(id)} is being dropped; retry`);
  }
  const key = tableRecordKey(ref);
  const markerKey = deregisteredMarkerKey(ref);
  let { marker, markerEtag } = state;
  // A retired directory's marker of an earlier form says so explicitly before the record it hides is replaced.
  if (state.retired && marker && !isTombstone(marker) && marker.retired === undefined) {
    marker = { ...marker, incarnation: marker.incarnation ?? incarnationOf(state) ?? '', retired: true };
    markerEtag = (await store.put(markerKey, encodeRecord(marker), { ifMatch: markerEtag ?? '' }).catch(retryOnLostRace(id))).etag;
  }
  const taken = state.record;
  let etag: string;
  try {
    ({ etag } = await createInNamespace(
      store,
      namespace,
      () => store.put(key, encodeRecord(record), taken ? { ifMatch: taken.etag } : { ifNoneMatch: '*' }),
      async () => {
        await options.undo?.();
        await store.delete(key);
      },
    ));
  } catch (e) {
    if (e instanceof PreconditionFailedError) throw tableAlreadyExists(id);
    throw e;
  }
  faultPoint('claim:after-record');
  const leftovers = leftoverDir(state);
  if ((taken || state.dropped) && leftovers !== null && !(options.keepData && leftovers === state.dirKey)) {
    await store.deletePrefix(leftovers, { keep: [key, markerKey] });
  }
  await pausePoint('claim:before-settle');
  if (marker && markerEtag) await settleMarker(store, state, marker, markerEtag, record);
  return etag;
}

/**
 * The marker once `record` holds the name (see table-state.ts): deleted when the table lives in
 * the name's directory or that directory is not retired; a drop's tombstone in a retired
 * directory becomes its plain retired marker; a deregister's marker stays (it hides only the
 * table it names).
 */
export async function settleMarker(store: ObjectStore, state: TableState, marker: NameMarker, etag: string, record: TableRecord): Promise<void> {
  const key = deregisteredMarkerKey(state.ref);
  if (livesInNameDir(record) || !state.retired) await store.delete(key);
  else if (isTombstone(marker))
    await store.put(key, encodeRecord(retiredMarker()), { ifMatch: etag }).catch(retryOnLostRace([...state.ref.namespace, state.ref.name]));
}

/** A new table's record placed: in its own directory elsewhere when the name's directory is retired (see table-state.ts). */
export function placed(state: TableState, record: TableRecord): TableRecord {
  return state.retired ? { ...record, dir: ownTableDirKey(state.ref.namespace, record.incarnation ?? randomUUID()) } : record;
}
