import { z } from 'zod';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import type { ObjectStore, StoredObject } from '../../store/object-store.js';
import { displayId } from '../catalog/catalog.js';
import {
  CATALOG_DIR,
  DEREGISTERED_MARKER,
  deregisteredMarkerKey,
  isOwnTableDir,
  namespaceDirKey,
  RESERVED_MARKER,
  reservedMarkerKey,
  TABLE_RECORD,
  type TableRef,
  tableDirKey,
  tableRecordKey,
  versionsDirKey,
} from '../catalog/layout.js';
import { LinkedLocation, type Locations, linksOfDir, type StoreDir } from '../catalog/locations.js';
import { readRecord, TableRecord, type Versioned } from '../catalog/records.js';
import { leaseExpired } from '../coordination/leases.js';
import { isCommitted } from '../transactions/transaction-log.js';
import { TableVersions } from '../versions/dataset-versions.js';

// Deregistered data and the name it leaves free.
//
// Invariant: once a table whose data lives in its name's directory (`<ns>/<t>.lance/`) is
// deregistered, that directory is the deregistered table's: the catalog deletes nothing in it, and
// writes there only the name's record, its marker and the transient files of writers of the name
// (write leases, the dataset-creation claim), until that data is registered again in place. Every
// later table of the name that the catalog places (declare, create) gets a directory of its own,
// `<ns>/.lance-table-<incarnation>/` (its record's `dir`), which no other table reads, writes or
// deletes. So the name is free at once, a re-created name never serves nor deletes the old data,
// and the old data is served again only once registered again.
//
// How it holds. The deregister's marker (Lance's `.lance-deregistered`, which hides the directory
// from Lance's own directory catalog too) says `retired` and names the incarnation it hides. From
// then on that marker is only replaced-if-unchanged, never deleted (the next deregister's marker, a
// drop's tombstone, the plain retired marker a claim puts after that drop), and each replacement
// says `retired` again; every reader of a name reads its marker in the same round trip as its
// record, so every decision to delete or to place a table sees it. A directory is handed back only
// by registering its data again in place, which deletes the marker (under a hold, below) after the
// record is replaced.
// Markers of earlier versions (no `retired`) retire the directory when the table they hide lived in
// it; a claim rewrites such a marker in the new form before it replaces the record.
//
// Invariant: a marker is deleted only by the request that holds it. Deleting cannot be made
// conditional, so whoever deletes a name's marker (a claim whose table lives in the name's directory
// or whose directory is not retired, the register in place that ends a retirement, a rename) first
// replaces exactly the marker it read by its held form (`held_until`, see holdMarker in
// name-claim.ts), renewed while it works, and deletes it once the record is changed (or puts the
// marker it replaced back). While the hold runs the name holds no table and nothing but the holder
// replaces the marker (deregisters and drops find no table; claims and namespace drops answer 409),
// so the delete undoes nobody's deregister or drop. A deregister holds the marker too while it
// checks that the name still has the table it read. A hold whose request died stands for the marker
// it replaced once its lease has run out.

/** Lance's deregistered marker as the catalog writes it: a deregister's marker, a drop's tombstone, or a retired directory's plain marker. */
export const NameMarker = z.object({
  deregistered_at: z.string().optional(),
  /** The table the marker hides (its incarnation); markers of earlier versions have none and hide the table living in the directory. */
  incarnation: z.string().optional(),
  /** The name's directory holds a deregistered table's dataset (see the invariant above). */
  retired: z.boolean().optional(),
  /** A plain retired marker (hiding no table): when it was put. */
  since: z.string().optional(),
  dropped_at: z.string().optional(),
  lease_until: z.string().optional(),
  /** The marker is held, until then, by a request changing the name (see the invariant above); its other fields are the marker it replaced. */
  held_until: z.string().optional(),
  /** A held marker that replaced none. */
  was_absent: z.boolean().optional(),
});
export type NameMarker = z.infer<typeof NameMarker>;

/** What the store says about one table name, read in one round trip (see readNameFiles). */
export interface TableState {
  ref: TableRef;
  dirKey: string;
  record: Versioned<TableRecord> | null;
  /** Lance's declared marker of the name's table is there (on an object store, for a table with a record: may be there). */
  reserved: boolean;
  /** The record's table was deregistered: the name is free, its data stays. */
  deregistered: boolean;
  /** The name's directory holds a deregistered table's dataset: kept as it is, and the name's next tables live elsewhere (see the invariant above). */
  retired: boolean;
  /** A drop has begun (its tombstone is there): nothing in the directory is a table until the name is taken again. */
  dropped: boolean;
  /** The drop is still running (its tombstone's lease has not run out). */
  dropUnderWay: boolean;
  /** Another request holds the name's marker to change the name (see the invariant above): no table is the name's meanwhile. */
  held: boolean;
  /** The deregistered marker (or tombstone), or the marker a held one stands for, and the etag of the marker file, when there is one. */
  marker: NameMarker | null;
  markerEtag: string | null;
  /** The record is a CreateTable's claim on the name, not a table yet; `live` while the claim's lease runs. */
  creating: { live: boolean; requestId: string } | null;
  /** The table's own directory may have a `_versions/` folder (false only where a listing showed none). */
  ownVersionsDir: boolean;
  /** No record nor marker, but committed versions: a dataset Lance wrote without the catalog. */
  writtenByLance: boolean;
  /** Anything at all is in the table's directory (exact on a local disk, the one store that renames tables; elsewhere: any catalog file or version). */
  occupied: boolean;
}

/**
 * A table is visible when it is neither deregistered, nor dropped, nor still being created, and
 * has a record (declare, create, register), a reserved marker (declared by Lance's own directory
 * catalog), or versions (written by Lance).
 */
export const isVisible = (s: TableState): boolean =>
  !s.held && !s.deregistered && !s.dropped && s.creating === null && (s.record !== null || s.reserved || s.writtenByLance);

/** Whether the record's table keeps its data in its name's directory (not registered elsewhere, nor placed in a directory of its own). */
export const livesInNameDir = (record: TableRecord): boolean => record.location === undefined && record.dir === undefined;

/** Which table of this name a record stands for: a re-created table is another one, even with the same name. */
export const incarnationOfRecord = (record: TableRecord | null | undefined): string | null => (record ? (record.incarnation ?? record.created_at ?? '') : null);
export const incarnationOf = (s: TableState): string | null => incarnationOfRecord(s.record?.value);

/** The catalog's files in a table's directory, as one request reads them. */
interface NameFiles {
  record: Versioned<TableRecord> | null;
  reserved: boolean;
  marker: StoredObject | null;
  /** Whether the directory has a `_versions/` folder; unknown (null) when not looked at. */
  versionsDir: boolean | null;
  /** Anything at all is in the directory (exact where the directory was listed). */
  occupied: boolean;
}

/**
 * Where a LIST reads the directory and no more (a local disk), one LIST (and at once the record's
 * GET) says which files are there. On an object store a delimited LIST of a table's prefix walks
 * every key under it (versions, data files), so point reads of the three files are cheaper, all at
 * once (the declared marker only for a name without a record): one round trip either way.
 */
async function readNameFiles(store: ObjectStore, ref: TableRef): Promise<NameFiles> {
  const dirKey = tableDirKey(ref);
  if (!store.listsWholeDirectory) {
    const [record, marker] = await Promise.all([readRecord(store, tableRecordKey(ref), TableRecord), store.get(deregisteredMarkerKey(ref))]);
    // Lance's declared marker matters only without a record (a table Lance's catalog declared); with
    // one it is tidied away once data lands, so it is taken as possibly there.
    const reserved = record !== null || (await store.head(reservedMarkerKey(ref))) !== null;
    return { record, reserved, marker, versionsDir: null, occupied: record !== null || reserved || marker !== null };
  }
  const [page, read] = await Promise.all([store.list(dirKey, { delimiter: '/', maxKeys: 1000 }), readRecord(store, tableRecordKey(ref), TableRecord)]);
  const names = new Set(page.objects.map((o) => o.key.slice(dirKey.length)));
  return {
    record: names.has(TABLE_RECORD) ? read : null,
    reserved: names.has(RESERVED_MARKER),
    marker: names.has(DEREGISTERED_MARKER) ? await store.get(deregisteredMarkerKey(ref)) : null,
    versionsDir: page.commonPrefixes.includes(versionsDirKey(dirKey)),
    occupied: page.objects.length > 0 || page.commonPrefixes.length > 0,
  };
}

/**
 * The catalog follows no symbolic link below its root (a local disk's; ObjectStore.linkOnPath and
 * linksIn): a table is none of its tables when a link is its directory or lies above it, or is an
 * entry of the directory its dataset lives in (`_versions/`, `data/`, `_catalog/`, `_indices/`,
 * ...: the engine and the service read, write and delete in every one), or is the `_catalog/` of
 * its name's directory (where writers of the name put their leases), wherever the link leads (out
 * of the root, or to another namespace's table, whose grants would not apply). Nothing is read or
 * written through it: to whoever needs the table it does not exist (a 404, see
 * requireVisibleTable), to whoever would take the name it is this 400, and a drop removes the
 * link, never what it leads to (stateWithoutLinks). Links in a retired name directory are the
 * deregistered table's, and no concern of the name's next table (see the invariant above).
 */
export class LinkedTableDir extends NamespaceError {
  constructor(
    readonly ref: TableRef,
    /** The keys of the links: one on the way to the table's directory, or entries of a directory (the name's, or the table's own). */
    readonly links: string[],
  ) {
    super(
      ErrorCode.InvalidInput,
      `table ${displayId([...ref.namespace, ref.name])} cannot be used: ${whereLinked(ref, links[0] ?? '')} a symbolic link, and the catalog follows no link below its root`,
    );
  }
}

/** Where a link lies, as LinkedTableDir says it. */
function whereLinked(ref: TableRef, link: string): string {
  const dir = tableDirKey(ref);
  const nsKey = namespaceDirKey(ref.namespace);
  if (link === dir) return 'its directory is';
  if (link.startsWith(dir)) return `the entry ${link.slice(dir.length, -1)} of its directory is`;
  if (!isOwnTableDir(nsKey, link)) return 'its directory lies under';
  const entry = link.slice(link.indexOf('/', nsKey.length) + 1, -1);
  return entry === '' ? 'its own directory is' : `the entry ${entry} of its own directory is`;
}

/** Where writers of a name put their leases (layout.ts): in the name's directory, whichever directory its table's dataset lives in. */
const nameCatalogKey = (dirKey: string): string => `${dirKey}${CATALOG_DIR}/`;

/**
 * The symbolic links among the entries of the name's directory (see LinkedTableDir, which is
 * thrown when the directory is, or lies under, a link, or its `_catalog/` is one); which of the
 * others matter depends on where the table's dataset lives (readTableState). One realpath and one
 * read of the directory on a local disk (a stat when its listing was kept), nothing elsewhere.
 */
export function nameDirLinks(store: ObjectStore, ref: TableRef): string[] {
  const dirKey = tableDirKey(ref);
  const links = linksOfDir(store, dirKey);
  const [first] = links;
  if (first === undefined) return links;
  if (first.length <= dirKey.length) throw new LinkedTableDir(ref, [first]);
  if (links.includes(nameCatalogKey(dirKey))) throw new LinkedTableDir(ref, [nameCatalogKey(dirKey)]);
  return links;
}

/**
 * A 404 when the table's name directory is reached through a symbolic link or its `_catalog/` is
 * one (see nameDirLinks): for a request that needs the table, before it reads or writes there.
 * Returns the links among the directory's entries, for readTableState.
 */
export function requireUnlinkedTable(store: ObjectStore, ref: TableRef): string[] {
  try {
    return nameDirLinks(store, ref);
  } catch (e) {
    if (e instanceof LinkedTableDir) throw tableNotFound([...ref.namespace, ref.name]);
    throw e;
  }
}

/**
 * What the store says about the name; a LinkedTableDir when a symbolic link keeps the catalog out
 * of its table (see LinkedTableDir). `nameLinks`: the links among the name directory's entries,
 * when the caller looked already (nameDirLinks), so that a request looks once.
 */
export async function readTableState(store: ObjectStore, ref: TableRef, nameLinks?: string[]): Promise<TableState> {
  const dirKey = tableDirKey(ref);
  const links = nameLinks ?? nameDirLinks(store, ref);
  const files = await readNameFiles(store, ref);
  let { record } = files;
  const recordFile = record !== null;
  const stored = files.marker ? markerOf(files.marker.body) : null;
  const { held_until: heldUntil, was_absent: wasAbsent, ...replaced } = stored ?? {};
  // A held marker stands for the marker it replaced (see the invariant above).
  const marker = stored === null || wasAbsent ? null : heldUntil === undefined ? stored : replaced;
  const tombstone = marker !== null && isTombstone(marker) ? marker : null;
  const retired =
    marker !== null && (tombstone ? tombstone.retired === true : (marker.retired ?? (files.record === null || livesInNameDir(files.record.value))));
  // The table of the record, unless a deregister hid it: its dataset's entries, in its name's
  // directory or in its own, are looked at (a retired directory's are the deregistered table's).
  const current = files.record !== null && !(marker !== null && !tombstone && hides(marker, files.record.value)) ? files.record.value : null;
  if ((current ? livesInNameDir(current) : !retired) && links.length > 0) throw new LinkedTableDir(ref, links);
  // A table placed in a directory of its own (a retired name's next table): one more realpath and read of a directory, for such tables only.
  const ownLinks = current?.dir === undefined ? [] : linksOfDir(store, current.dir);
  if (ownLinks.length > 0) throw new LinkedTableDir(ref, ownLinks);
  // A table declared by a batch commit that has not reached its commit point does not exist yet.
  const pending = record?.value.pending_transaction;
  if (pending !== undefined && !(await isCommitted(store, pending))) record = null;
  // Lance's declared marker in a retired directory is the deregistered table's.
  const reserved = files.reserved && !retired;
  const claim = record?.value.creating;
  // Only a directory without any catalog file is looked at for versions: staged manifests alone
  // (a client staging before its batch commit declares the table) do not make a table.
  // After a drop or a deregister, versions are never a table of the name's.
  const writtenByLance =
    record === null && !reserved && stored === null && !recordFile && files.versionsDir !== false
      ? await new TableVersions({ store, key: dirKey, owned: true }).hasCommitted()
      : false;
  return {
    ref,
    dirKey,
    record,
    reserved,
    held: heldUntil !== undefined && !leaseExpired(heldUntil),
    deregistered: marker !== null && !tombstone && record !== null && hides(marker, record.value),
    retired,
    dropped: tombstone !== null,
    dropUnderWay: tombstone !== null && !leaseExpired(tombstone.lease_until),
    marker,
    markerEtag: files.marker?.etag ?? null,
    creating: claim ? { live: !leaseExpired(claim.lease_until), requestId: claim.request_id } : null,
    ownVersionsDir: files.versionsDir ?? true,
    writtenByLance,
    occupied: files.occupied || writtenByLance,
  };
}

/** Rounds of link removal a drop makes: the name's directory, then its table's own directory. */
const LINK_REMOVALS = 2;

/**
 * For a drop: the name's state once the symbolic links that keep the catalog out of its table
 * (see LinkedTableDir) are removed, never what they lead to (ObjectStore.deletePrefix of a link):
 * entries of the name's directory, the table's own directory, or entries of that. A link that is
 * the name's directory, or lies above it, is not the table's to remove: LinkedTableDir. So is one
 * planted again while the drop removes them.
 */
export async function stateWithoutLinks(store: ObjectStore, ref: TableRef): Promise<TableState> {
  const dirKey = tableDirKey(ref);
  const nsKey = namespaceDirKey(ref.namespace);
  const removable = (link: string) => (link.startsWith(dirKey) && link !== dirKey) || isOwnTableDir(nsKey, link);
  for (let round = 0; ; round++) {
    try {
      return await readTableState(store, ref);
    } catch (e) {
      if (!(e instanceof LinkedTableDir) || round === LINK_REMOVALS || !e.links.every(removable)) throw e;
      for (const link of e.links) await store.deletePrefix(link);
    }
  }
}

/**
 * A drop's tombstone is Lance's deregistered marker (so that Lance's directory catalog hides the
 * directory too) whose body names the drop; a deregistered table's marker has any other body.
 */
export const isTombstone = (m: NameMarker): m is NameMarker & { dropped_at: string; lease_until: string } =>
  m.dropped_at !== undefined && m.lease_until !== undefined;

/** A marker that does not parse (Lance's own are empty) is a deregister's marker of an earlier form. */
function markerOf(body: Buffer): NameMarker {
  try {
    const parsed = NameMarker.safeParse(JSON.parse(body.toString('utf8')));
    return parsed.success ? parsed.data : {};
  } catch {
    return {};
  }
}

/** Whether a deregister's marker hides the record's table (see NameMarker.incarnation). */
const hides = (marker: NameMarker, record: TableRecord): boolean =>
  marker.incarnation !== undefined ? marker.incarnation === incarnationOfRecord(record) : record.dir === undefined;

/** The marker that deregisters the table `state` holds: the directory is retired if it was, or if the table lives in it. */
export function deregisterMarker(state: TableState): NameMarker {
  const record = state.record?.value;
  return {
    deregistered_at: new Date().toISOString(),
    incarnation: incarnationOf(state) ?? '',
    retired: state.retired || record === undefined || livesInNameDir(record),
  };
}

/** The marker of a retired directory whose name holds no deregistered record: it hides nothing. */
export const retiredMarker = (): NameMarker => ({ retired: true, since: new Date().toISOString() });

/**
 * The directory that what a table of this name left may be deleted from once the name holds no
 * table (dropped, abandoned by a dead create, taken over): the name's directory, unless it is
 * retired; then only the table's own directory, if it had one and was not deregistered.
 */
export function leftoverDir(state: TableState): string | null {
  if (!state.retired) return state.dirKey;
  const dir = state.record?.value.dir;
  return dir !== undefined && !state.deregistered ? dir : null;
}

export const tableNotFound = (id: string[]) => new NamespaceError(ErrorCode.TableNotFound, `table ${displayId(id)} does not exist`);

/**
 * The table's state; 404 unless it is visible, or (given `creatingRequest`) being created by that
 * request, and no symbolic link keeps the catalog out of it (see LinkedTableDir; `nameLinks`: the
 * caller looked at its name's directory already, see requireUnlinkedTable).
 */
export async function requireVisibleTable(
  store: ObjectStore,
  ref: TableRef,
  options: { creatingRequest?: string | undefined; nameLinks?: string[] } = {},
): Promise<TableState> {
  const { creatingRequest } = options;
  const state = await readTableState(store, ref, options.nameLinks ?? requireUnlinkedTable(store, ref)).catch((e: unknown) => {
    if (e instanceof LinkedTableDir) throw tableNotFound([...ref.namespace, ref.name]);
    throw e;
  });
  const ownCreate = creatingRequest !== undefined && state.creating?.requestId === creatingRequest && !state.dropped;
  if (!isVisible(state) && !ownCreate) throw tableNotFound([...ref.namespace, ref.name]);
  return state;
}

/**
 * Where the table's Lance dataset lives: its name's directory, its own directory elsewhere, or the
 * registered location; for a request that needs the table, a 404 when a symbolic link keeps the
 * catalog out of that location (see Locations), as for any table reached through one.
 */
export function dataDir(locations: Locations, state: TableState): StoreDir {
  try {
    return recordDir(locations, state.dirKey, state.record?.value);
  } catch (e) {
    if (e instanceof LinkedLocation) throw tableNotFound([...state.ref.namespace, state.ref.name]);
    throw e;
  }
}

/**
 * Where a drop waits for the table's writes under way (TableFences.finishDrop): its dataset's
 * directory, but for a registered location a symbolic link keeps the catalog out of, which is not
 * looked at (nothing is read through the link; the location is not the catalog's to delete in
 * anyway): the name's directory stands in, which holds no dataset of the table's.
 */
export function dropDataDir(locations: Locations, state: TableState): StoreDir {
  try {
    return recordDir(locations, state.dirKey, state.record?.value);
  } catch (e) {
    if (e instanceof LinkedLocation) return locations.own(state.dirKey);
    throw e;
  }
}

/** Where the dataset of the table `record` describes lives, its name's directory being `nameDirKey`. */
export function recordDir(locations: Locations, nameDirKey: string, record: TableRecord | undefined): StoreDir {
  if (record?.dir !== undefined) return locations.own(record.dir);
  return record?.location === undefined ? locations.own(nameDirKey) : locations.resolve(record.location);
}

/** Whether the table has data: for its own directory, skip the second LIST when there is no `_versions/`. A LinkedLocation when a link keeps the catalog out of its registered location. */
export async function tableHasData(locations: Locations, state: TableState): Promise<boolean> {
  if ((!state.record || livesInNameDir(state.record.value)) && !state.ownVersionsDir) return false;
  return new TableVersions(recordDir(locations, state.dirKey, state.record?.value)).hasCommitted();
}
