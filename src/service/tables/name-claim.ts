import { randomUUID } from 'node:crypto';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import { createInNamespace, displayId, type ResolvedNamespace } from '../catalog/catalog.js';
import { deregisteredMarkerKey, ownTableDirKey, tableRecordKey } from '../catalog/layout.js';
import { encodeRecord, type TableRecord } from '../catalog/records.js';
import { faultPoint, pausePoint } from '../coordination/fault-points.js';
import { keepRenewed, leaseUntil } from '../coordination/leases.js';
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
 * 409 (retry) while another request is at work on the name: a drop still deleting (it would delete
 * what a new table of the name puts there), or a request holding its marker (see holdMarker).
 * Every claim of a name asks.
 */
export function refuseWhileBusy(state: TableState): void {
  const id = [...state.ref.namespace, state.ref.name];
  if (state.held) throw nameBeingChanged(id);
  if (state.dropped && state.record && !state.creating && state.dropUnderWay) {
    throw new NamespaceError(ErrorCode.ConcurrentModification, `table ${displayId(id)} is being dropped; retry`);
  }
}

/** A name being changed by another request (see the invariant in table-state.ts): 409, retry. */
export const nameBeingChanged = (id: string[]) => new NamespaceError(ErrorCode.ConcurrentModification, `table ${displayId(id)} is being changed; retry`);

/** A name's marker held by the request changing the name (see the invariant in table-state.ts). */
export interface MarkerHold {
  /** Stops renewing the hold; true when it was kept throughout, so that the marker is still this request's to delete or put back. */
  end(): Promise<boolean>;
  /** Ends the hold by deleting the marker, the change done (at `at` when the marker moved with its directory), if the hold was kept. */
  release(at?: string): Promise<void>;
  /** Ends the hold by putting back the marker it replaced (deleting it, when it replaced none), the change undone, if the hold was kept. */
  restore(): Promise<void>;
  /** Ends the hold by putting `marker` in its place, the change done; a 409 when the hold was not kept. */
  replace(marker: NameMarker): Promise<void>;
}

/**
 * Holds the name's marker: its held form in place of exactly the marker `state` read (none, or
 * the file with `markerEtag`), renewed until the hold ends. A 409 when the marker changed since;
 * never a directory made again (on a local disk) for the marker of a table renamed away meanwhile.
 */
export async function holdMarker(store: ObjectStore, state: Pick<TableState, 'ref' | 'marker' | 'markerEtag'>, leaseMs: number): Promise<MarkerHold> {
  const { ref, marker: replaced } = state;
  const key = deregisteredMarkerKey(ref);
  const body = () => encodeRecord({ ...(replaced ?? { was_absent: true }), held_until: leaseUntil(leaseMs) } satisfies NameMarker);
  const stampedAt = Date.now();
  const condition = state.markerEtag ? { ifMatch: state.markerEtag } : { ifNoneMatch: '*' as const };
  let { etag } = await store.put(key, body(), condition, { besideExisting: true }).catch(retryOnLostRace([...ref.namespace, ref.name]));
  const renewal = keepRenewed(
    leaseMs,
    async () => {
      ({ etag } = await store.put(key, body(), { ifMatch: etag }));
    },
    stampedAt,
  );
  let kept: Promise<boolean> | undefined;
  const end = () =>
    (kept ??= renewal.stop().then(
      () => true,
      () => false,
    ));
  return {
    end,
    async release(at = key) {
      if (await end()) await store.delete(at);
    },
    async restore() {
      if (!(await end())) return;
      if (!replaced) return store.delete(key);
      await store.put(key, encodeRecord(replaced), { ifMatch: etag }).catch((e: unknown) => {
        if (!(e instanceof PreconditionFailedError)) throw e;
      });
    },
    async replace(marker) {
      if (!(await end())) throw nameBeingChanged([...ref.namespace, ref.name]);
      await store.put(key, encodeRecord(marker), { ifMatch: etag }).catch(retryOnLostRace([...ref.namespace, ref.name]));
    },
  };
}

/**
 * Takes the name for a new table: the record's create-if-absent inside `namespace`, live (the
 * linearization point of every new table, see createInNamespace), or a replace-if-unchanged of
 * exactly the record that a dead create, a dead drop or a deregister left. Whatever such a
 * predecessor, or a drop, left is then deleted (see leftoverDir: never a deregistered table's
 * data), before the new table writes anything; with `keepData` (registering the directory's own
 * dataset) the name's directory stays as it is. The marker is settled around it (see
 * withMarkerSettled). Returns the etag of the record written.
 */
export async function claimName(
  store: ObjectStore,
  namespace: ResolvedNamespace,
  state: TableState,
  record: TableRecord,
  options: { leaseMs: number; undo?: () => Promise<void>; keepData?: boolean },
): Promise<string> {
  const { ref } = state;
  const id = [...ref.namespace, ref.name];
  if (state.creating?.live) throw tableAlreadyExists(id, 'is being created by another request');
  refuseWhileBusy(state);
  const key = tableRecordKey(ref);
  const markerKey = deregisteredMarkerKey(ref);
  let { marker, markerEtag } = state;
  // A retired directory's marker of an earlier form says so explicitly before the record it hides is replaced.
  if (state.retired && marker && !isTombstone(marker) && marker.retired === undefined) {
    marker = { ...marker, incarnation: marker.incarnation ?? incarnationOf(state) ?? '', retired: true };
    markerEtag = (await store.put(markerKey, encodeRecord(marker), { ifMatch: markerEtag ?? '' }).catch(retryOnLostRace(id))).etag;
  }
  const taken = state.record;
  return withMarkerSettled(store, { ...state, marker, markerEtag }, record, options.leaseMs, async () => {
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
    return etag;
  });
}

/**
 * Puts the name's new record (`change`, which puts `record`) and settles the name's marker around
 * it (see table-state.ts). The marker goes when the table lives in the name's directory or that
 * directory is not retired (and so does the file of a hold that stands for no marker): held from
 * before the change until it is deleted after it, so that no
 * deregister or drop meets the new record while the old marker still stands (the change failing,
 * it is put back). Otherwise it stays: a drop's tombstone in a retired directory becomes its plain
 * retired marker, a deregister's marker stays as it is (it hides only the table it names).
 */
export async function withMarkerSettled<T>(store: ObjectStore, state: TableState, record: TableRecord, leaseMs: number, change: () => Promise<T>): Promise<T> {
  const { marker, markerEtag } = state;
  const hold = markerEtag !== null && (livesInNameDir(record) || !state.retired) ? await holdMarker(store, state, leaseMs) : null;
  let result: T;
  try {
    result = await change();
    await pausePoint('claim:before-settle');
  } catch (e) {
    await hold?.restore().catch(() => undefined);
    throw e;
  }
  if (hold) await hold.release();
  else if (marker && markerEtag && isTombstone(marker)) {
    await store
      .put(deregisteredMarkerKey(state.ref), encodeRecord(retiredMarker()), { ifMatch: markerEtag })
      .catch(retryOnLostRace([...state.ref.namespace, state.ref.name]));
  }
  return result;
}

/** A new table's record placed: in its own directory elsewhere when the name's directory is retired (see table-state.ts). */
export function placed(state: TableState, record: TableRecord): TableRecord {
  return state.retired ? { ...record, dir: ownTableDirKey(state.ref.namespace, record.incarnation ?? randomUUID()) } : record;
}
