import { z } from 'zod';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import type { ObjectStore, StoredObject } from '../../store/object-store.js';
import { displayId } from '../catalog/catalog.js';
import {
  DEREGISTERED_MARKER,
  deregisteredMarkerKey,
  RESERVED_MARKER,
  reservedMarkerKey,
  TABLE_RECORD,
  type TableRef,
  tableDirKey,
  tableRecordKey,
  VERSIONS_DIR,
} from '../catalog/layout.js';
import type { Locations, StoreDir } from '../catalog/locations.js';
import { readManifestSummary, type ManifestSummary } from '../../engine/lance-format/manifest.js';
import { manifestFileName, parseManifestFileName } from '../../engine/lance-format/manifest-names.js';
import { readRecord, TableRecord, type Versioned } from '../catalog/records.js';
import { isCommitted } from '../transactions/transaction-log.js';
import { leaseExpired } from '../coordination/leases.js';

/** What the store says about one table name, read in one round trip (see readNameFiles). */
export interface TableState {
  ref: TableRef;
  dirKey: string;
  record: Versioned<TableRecord> | null;
  /** Lance's declared marker is there (on an object store, for a table with a record: may be there). */
  reserved: boolean;
  deregistered: boolean;
  /** A drop has begun (its tombstone is there): nothing in the directory is a table until the name is taken again. */
  dropped: boolean;
  /** The drop is still running (its tombstone's lease has not run out). */
  dropUnderWay: boolean;
  /** The etag of the deregistered marker (or tombstone), when there is one. */
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
  !s.deregistered && !s.dropped && s.creating === null && (s.record !== null || s.reserved || s.writtenByLance);

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
    versionsDir: page.commonPrefixes.includes(`${dirKey}${VERSIONS_DIR}/`),
    occupied: page.objects.length > 0 || page.commonPrefixes.length > 0,
  };
}

/**
 * The catalog follows no symbolic link below its root (a local disk's; ObjectStore.linkOnPath): a
 * table whose directory is reached through one is none of its tables, wherever the link leads
 * (out of the root, or to another namespace's table, whose grants would not apply). Nothing is
 * read or written through it: to whoever needs the table it does not exist (a 404, see
 * requireVisibleTable), to whoever would take the name it is this 400, and a drop removes the
 * link, never what it leads to (TableService.drop).
 */
export class LinkedTableDir extends NamespaceError {
  constructor(
    readonly ref: TableRef,
    /** The key of the link: the table's directory itself, or a namespace directory above it. */
    readonly link: string,
  ) {
    const where = link === tableDirKey(ref) ? 'is' : 'lies under';
    super(ErrorCode.InvalidInput, `table ${displayId([...ref.namespace, ref.name])} cannot be used: its directory ${where} a symbolic link, and the catalog follows no link below its root`);
  }
}

/** The link through which the table's directory is reached, or null: one realpath on a local disk, nothing on an object store. */
const linkOf = (store: ObjectStore, ref: TableRef): string | null => store.linkOnPath?.(tableDirKey(ref)) ?? null;

/** A 404 when the table's directory is reached through a symbolic link (see LinkedTableDir): for a request that needs the table. */
export function requireUnlinkedTable(store: ObjectStore, ref: TableRef): void {
  if (linkOf(store, ref) !== null) throw tableNotFound([...ref.namespace, ref.name]);
}

/**
 * What the store says about the name; a LinkedTableDir when its directory is reached through a
 * symbolic link (unless the caller looked already: `linkChecked`, so that a request looks once).
 */
export async function readTableState(store: ObjectStore, ref: TableRef, linkChecked = false): Promise<TableState> {
  const dirKey = tableDirKey(ref);
  const link = linkChecked ? null : linkOf(store, ref);
  if (link !== null) throw new LinkedTableDir(ref, link);
  const files = await readNameFiles(store, ref);
  let { record } = files;
  const recordFile = record !== null;
  // A table declared by a batch commit that has not reached its commit point does not exist yet.
  const pending = record?.value.pending_transaction;
  if (pending !== undefined && !(await isCommitted(store, pending))) record = null;
  const { reserved, marker } = files;
  const tombstone = marker ? tombstoneOf(marker.body) : null;
  const claim = record?.value.creating;
  // Only a directory without any catalog file is looked at for versions: staged manifests alone
  // (a client staging before its batch commit declares the table) do not make a table.
  // After a drop, versions are what late writers left behind, never a table.
  const writtenByLance = record === null && !reserved && !tombstone && !recordFile && files.versionsDir !== false
    ? await hasCommittedVersion({ store, key: dirKey, owned: true })
    : false;
  return {
    ref,
    dirKey,
    record,
    reserved,
    deregistered: marker !== null && !tombstone,
    dropped: tombstone !== null,
    dropUnderWay: tombstone !== null && !leaseExpired(tombstone.lease_until),
    markerEtag: marker?.etag ?? null,
    creating: claim ? { live: !leaseExpired(claim.lease_until), requestId: claim.request_id } : null,
    ownVersionsDir: files.versionsDir ?? true,
    writtenByLance,
    occupied: files.occupied || writtenByLance,
  };
}

/**
 * A drop's tombstone is Lance's deregistered marker (so that Lance's directory catalog hides the
 * directory too) whose body names the drop; a deregistered table's marker has any other body.
 */
export const Tombstone = z.object({ dropped_at: z.string(), lease_until: z.string() });
export type Tombstone = z.infer<typeof Tombstone>;

function tombstoneOf(body: Buffer): Tombstone | null {
  try {
    const parsed = Tombstone.safeParse(JSON.parse(body.toString('utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

export const tableNotFound = (id: string[]) => new NamespaceError(ErrorCode.TableNotFound, `table ${displayId(id)} does not exist`);

/**
 * The table's state; 404 unless it is visible, or (given `creatingRequest`) being created by that
 * request, and not reached through a symbolic link (unless `linkChecked`: the caller looked).
 */
export async function requireVisibleTable(store: ObjectStore, ref: TableRef, options: { creatingRequest?: string | undefined; linkChecked?: boolean } = {}): Promise<TableState> {
  const { creatingRequest } = options;
  if (!options.linkChecked) requireUnlinkedTable(store, ref);
  const state = await readTableState(store, ref, true);
  const ownCreate = creatingRequest !== undefined && state.creating?.requestId === creatingRequest && !state.dropped;
  if (!isVisible(state) && !ownCreate) throw tableNotFound([...ref.namespace, ref.name]);
  return state;
}

/** Where the table's Lance dataset lives: its own directory, or the registered location. */
export function dataDir(locations: Locations, state: TableState): StoreDir {
  const registered = state.record?.value.location;
  return registered === undefined ? locations.own(state.dirKey) : locations.resolve(registered);
}

/** Whether a committed manifest exists under the dataset directory (staged ones do not count). */
export async function hasCommittedVersion(dir: StoreDir): Promise<boolean> {
  const prefix = `${dir.key}${VERSIONS_DIR}/`;
  let startAfter: string | undefined;
  for (;;) {
    const page = await dir.store.list(prefix, { delimiter: '/', maxKeys: 100, ...(startAfter ? { startAfter } : {}) });
    if (page.objects.some((o) => parseManifestFileName(o.key.slice(prefix.length)) !== null)) return true;
    if (!page.nextStartAfter) return false;
    startAfter = page.nextStartAfter;
  }
}

/** Whether the table has data: for its own directory, skip the second LIST when there is no `_versions/`. */
export async function tableHasData(locations: Locations, state: TableState): Promise<boolean> {
  if (state.record?.value.location === undefined && !state.ownVersionsDir) return false;
  return hasCommittedVersion(dataDir(locations, state));
}

/** The summary of one version's manifest (V2 name first, then V1), or null when it does not exist. */
export async function readVersionManifest(dir: StoreDir, version: number): Promise<ManifestSummary | null> {
  for (const scheme of ['V2', 'V1'] as const) {
    const object = await dir.store.get(`${dir.key}${VERSIONS_DIR}/${manifestFileName(version, scheme)}`);
    if (object) return readManifestSummary(object.body);
  }
  return null;
}
