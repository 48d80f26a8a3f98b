import { type ManifestNamingScheme, manifestFileName } from '../../engine/lance-format/manifest-names.js';
import { invalidInput } from '../../model/errors.js';
import { compareKeys } from '../../store/object-store.js';

// Where catalog state lives under the root. Byte-compatible with Lance's own directory ("base")
// namespace: a namespace is a directory holding a `.lance-namespace` file, a table is a
// `<name>.lance` directory, a declared-only table holds a `.lance-reserved` file.
//
//   <root>/.lance-namespace                 root namespace record (optional)
//   <root>/<ns>/.lance-namespace            namespace record: JSON {properties, created_at, state}
//   <root>/<ns>/<t>.lance/                  table directory (a Lance dataset: _versions/, data/, ...)
//   <root>/<ns>/<t>.lance/.lance-table.json service record: properties, registered location
//   <root>/<ns>/<t>.lance/.lance-reserved   declared, no data yet
//   <root>/<ns>/<t>.lance/.lance-deregistered  deregistered: hidden, data kept, the name free (see
//                                           table-state.ts). A drop leaves it too, as its tombstone
//                                           (its body says so): nothing here is a table until the
//                                           name is taken again, for Lance's own directory catalog either
//   <root>/<ns>/.lance-table-<id>/          the directory of a table created after a table of the same
//                                           name was deregistered, whose data still fills `<t>.lance/`
//   <root>/<ns>/<t>.lance/_catalog/writers/ one lease per write under way (a drop waits for them)
//   <root>/<ns>/_catalog/               the namespace's listing index of its children (catalog/listing-index.ts)
//   <root>/_catalog/                        service state that belongs to no namespace
//
// Every key the service builds is built here (the keys of each place below, and their order where
// a listing relies on it); the modules that read and write them say why they are laid out so.

export const NAMESPACE_MARKER = '.lance-namespace';
export const TABLE_RECORD = '.lance-table.json';
export const RESERVED_MARKER = '.lance-reserved';
export const DEREGISTERED_MARKER = '.lance-deregistered';
export const TABLE_SUFFIX = '.lance';
export const VERSIONS_DIR = '_versions';
export const CATALOG_DIR = '_catalog';
/** Directories of tables whose name's directory holds a deregistered table's data: no namespace or table name can start with '.'. */
const OWN_DIR_PREFIX = '.lance-table-';
/** A file name's length on the file systems a local root lives on (and so an S3 key's part between slashes, for a root copied there). */
const MAX_FILE_NAME_BYTES = 255;
const MAX_NAME_BYTES = MAX_FILE_NAME_BYTES - TABLE_SUFFIX.length;

/** A table: its namespace (possibly the root, []) and its name. */
export interface TableRef {
  namespace: string[];
  name: string;
}

/** A C0 control character or DEL: no store or engine can name a path with one. */
export const hasControlCharacter = (text: string): boolean =>
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
  /[\u0000-\u001f\u007f]/.test(text);

// A name is one path segment; it must never climb out of its parent or collide with the
// service's own files. Control characters, separators, '.'/'..' and leading dots are refused.
function nameProblem(name: string): string | null {
  if (name.length === 0) return 'must not be empty';
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES) return `must be at most ${MAX_NAME_BYTES} bytes`;
  if (name === '.' || name === '..') return 'must not be "." or ".."';
  if (name.startsWith('.')) return 'must not start with "."';
  if (/[/\\]/.test(name)) return 'must not contain "/" or "\\"';
  if (hasControlCharacter(name)) return 'must not contain control characters';
  if (name.includes('.~')) return 'must not contain ".~"';
  return null;
}

export function validateNamespaceId(id: string[], what = 'namespace id'): string[] {
  id.forEach((part, i) => {
    const problem =
      nameProblem(part) ??
      (part.toLowerCase().endsWith(TABLE_SUFFIX) ? `must not end with "${TABLE_SUFFIX}"` : null) ??
      (part === CATALOG_DIR ? `"${CATALOG_DIR}" is reserved` : null);
    if (problem) throw invalidInput(`invalid ${what}: part ${i} ${JSON.stringify(part)} ${problem}`);
  });
  return id;
}

/** Splits a table id into namespace and name, validating every part. */
export function tableRefOf(id: string[]): TableRef {
  if (id.length === 0) throw invalidInput('invalid table id: it must name a table, not the root namespace');
  const namespace = validateNamespaceId(id.slice(0, -1), 'table id');
  const name = id[id.length - 1] ?? '';
  const problem = nameProblem(name);
  if (problem) throw invalidInput(`invalid table name ${JSON.stringify(name)}: ${problem}`);
  return { namespace, name };
}

export const namespaceDirKey = (ns: string[]): string => ns.map((p) => `${p}/`).join('');

/**
 * The namespace whose subtree holds a key of the root: its directories down to the first one no
 * namespace can be (a table directory, or a name starting with '.' such as a table's own directory).
 */
export function namespaceHolding(key: string): string[] {
  const parts = key.split('/').filter((p) => p !== '');
  const table = parts.findIndex((p) => p.toLowerCase().endsWith(TABLE_SUFFIX) || p.startsWith('.'));
  return table === -1 ? parts : parts.slice(0, table);
}
export const namespaceRecordKey = (ns: string[]): string => `${namespaceDirKey(ns)}${NAMESPACE_MARKER}`;
export const tableDirKey = (t: TableRef): string => `${namespaceDirKey(t.namespace)}${t.name}${TABLE_SUFFIX}/`;
export const tableRecordKey = (t: TableRef): string => `${tableDirKey(t)}${TABLE_RECORD}`;
export const reservedMarkerKey = (t: TableRef): string => `${tableDirKey(t)}${RESERVED_MARKER}`;
export const deregisteredMarkerKey = (t: TableRef): string => `${tableDirKey(t)}${DEREGISTERED_MARKER}`;
/** The own directory of a table of namespace `ns` that cannot live in its name's directory (see table-state.ts): one per table, by its incarnation. */
export const ownTableDirKey = (ns: string[], incarnation: string): string => `${namespaceDirKey(ns)}${OWN_DIR_PREFIX}${incarnation}/`;
/** Whether a common prefix under the namespace directory `nsKey` is such a table directory. */
export const isOwnTableDir = (nsKey: string, prefix: string): boolean => prefix.startsWith(`${nsKey}${OWN_DIR_PREFIX}`);

/** Name of the child namespace or table a common prefix under `parentKey` stands for, if any. */
export function childOfPrefix(parentKey: string, commonPrefix: string): { kind: 'namespace' | 'table'; name: string } | null {
  const segment = commonPrefix.slice(parentKey.length, -1);
  if (segment.endsWith(TABLE_SUFFIX)) {
    const name = segment.slice(0, -TABLE_SUFFIX.length);
    return nameProblem(name) ? null : { kind: 'table', name };
  }
  if (segment === CATALOG_DIR || nameProblem(segment)) return null;
  return { kind: 'namespace', name: segment };
}

// ---- <root>/_catalog/: service state that belongs to no namespace.

/** Transaction records (transactions/transaction-log.ts): `<id>.json`. */
export const TRANSACTIONS_DIR = `${CATALOG_DIR}/transactions/`;
export const transactionRecordKey = (id: string): string => `${TRANSACTIONS_DIR}${id}.json`;
/** Markers of unfinished batches (versions/batch-recovery.ts) and jobs (jobs/job-service.ts), one `<id>.json` each (coordination/markers.ts). */
export const BATCH_MARKERS_DIR = `${CATALOG_DIR}/batches/`;
export const JOB_MARKERS_DIR = `${CATALOG_DIR}/jobs/`;
export const markerKey = (dir: string, id: string): string => `${dir}${id}.json`;
/**
 * Table maintenance (service/maintenance/): a marker per table or namespace whose properties set a
 * policy, so that the scheduler finds them with one LIST; and per table the slot naming its
 * current run and the last ones (`<encoded id>.json` each, maintenance/policy-markers.ts).
 */
export const MAINTENANCE_POLICIES_DIR = `${CATALOG_DIR}/maintenance/policies/`;
export const MAINTENANCE_RUNS_DIR = `${CATALOG_DIR}/maintenance/runs/`;
/** The id of a `<id>.json` key directly under `dir` (a transaction record, a marker), or null for any other key. */
export function idOfJsonKey(dir: string, key: string): string | null {
  const name = key.startsWith(dir) ? key.slice(dir.length) : '';
  return name.endsWith('.json') && !name.includes('/') ? name.slice(0, -'.json'.length) : null;
}
/** A replica's readiness probe (health.ts). */
export const healthProbeKey = (probe: string): string => `${CATALOG_DIR}/health/${probe}`;
/** A probe of one process's store check (store-check.ts): the process's id and the probe's number. */
export const storeCheckKey = (process: string, probe: number): string => `${CATALOG_DIR}/store-check/${process}-${probe}`;

// ---- <root>/<ns>/_catalog/: the namespace's listing index of its children (catalog/listing-index.ts).
//
//   tables/<name>/v                         a table of this name is visible
//   data/<name>/t                           ... and has data
//   namespaces/<name>/v                     a child namespace of this name exists
//   pending/<name>.~<until>.<op>            an operation is changing what the table name holds
//                                           (pending/<name>/<until>.<op> for a name too long for one file name)
//   namespace-pending/<name>.~<until>.<op>  the same for a child namespace
//   index.ready                             the index covers every child
//   tables.stamp, tables.snapshot           the index in one object (catalog/listing-snapshot.ts)
//   tables.log/<name>.<token>               a change of the name's entries since the snapshot (the same;
//                                           <name>/<token> for a long name)
//   namespaces.stamp, namespaces.snapshot, namespaces.log/   the same for child namespaces

/** The two kinds of child a namespace's listing index holds. */
export type ChildKind = 'table' | 'namespace';

const INDEX_FOLDERS: Record<ChildKind, { visible: string; pending: string }> = {
  table: { visible: 'tables', pending: 'pending' },
  namespace: { visible: 'namespaces', pending: 'namespace-pending' },
};
/** A key-safe form of an operation id. */
const pendingOpPart = (op: string): string => (/^[A-Za-z0-9_-]+$/.test(op) ? op : Buffer.from(op).toString('base64url'));
/** A name's directory in an index folder; where a LIST resumes after the name. */
export const indexNameDirKey = (folder: string, name: string): string => `${folder}${name}/`;
/** The name a common prefix of an index folder stands for. */
export const nameInIndexDir = (folder: string, commonPrefix: string): string => commonPrefix.slice(folder.length, -1);
/** The order of names in the index (and in listings): by the bytes of `<name>/`, as their directories sort. */
export const compareNames = (a: string, b: string): number => compareKeys(`${a}/`, `${b}/`);

export const namespaceCatalogDirKey = (ns: string[]): string => `${namespaceDirKey(ns)}${CATALOG_DIR}/`;
/** The folder of a kind's names: a directory `<name>/` per child. */
export const indexVisibleDirKey = (kind: ChildKind, ns: string[]): string => `${namespaceCatalogDirKey(ns)}${INDEX_FOLDERS[kind].visible}/`;
export const indexVisibleKey = (kind: ChildKind, ref: TableRef): string => `${indexNameDirKey(indexVisibleDirKey(kind, ref.namespace), ref.name)}v`;
/** The folder of the tables that have data. */
export const indexDataDirKey = (ns: string[]): string => `${namespaceCatalogDirKey(ns)}data/`;
export const indexDataKey = (ref: TableRef): string => `${indexNameDirKey(indexDataDirKey(ref.namespace), ref.name)}t`;
/**
 * The folder of a kind's pending entries: `<name>.~<until>.<op>`, one file each, so that an entry
 * costs its own put and delete, not a directory's too (a local disk's mkdir and rmdir, the most
 * costly steps of a catalog write's index entries). No name holds '.~' (nameProblem), so the
 * first one ends the name. A name whose entry would not fit in one file name (with the suffix a
 * local store's write adds for a while) has `<name>/<until>.<op>` instead, as every name had
 * before: readers take both.
 */
export const indexPendingDirKey = (kind: ChildKind, ns: string[]): string => `${namespaceCatalogDirKey(ns)}${INDEX_FOLDERS[kind].pending}/`;
const PENDING_NAME_END = '.~';
/**
 * The longest file name a flat key of the index (a pending entry, a log key) may have: well below a
 * file name's 255 bytes less the suffix a local store's write adds to it for a while (18 bytes).
 */
const FLAT_ENTRY_MAX_BYTES = 200;
export const indexPendingKey = (kind: ChildKind, ref: TableRef, until: number, op: string): string => {
  const entry = `${until}.${pendingOpPart(op)}`;
  const flat = `${ref.name}${PENDING_NAME_END}${entry}`;
  const dir = indexPendingDirKey(kind, ref.namespace);
  return Buffer.byteLength(flat) <= FLAT_ENTRY_MAX_BYTES ? `${dir}${flat}` : `${indexNameDirKey(dir, ref.name)}${entry}`;
};
/** The prefix of every pending key of the name, in either form (and of other names that start with it: parsePendingKey tells them apart). */
export const indexPendingNamePrefix = (kind: ChildKind, ref: TableRef): string => `${indexPendingDirKey(kind, ref.namespace)}${ref.name}`;
/** Whether a pending key is one of the operation `op`'s. */
export const isPendingOf = (key: string, op: string): boolean => key.endsWith(`.${pendingOpPart(op)}`);
/** A pending key under a kind's folder `dir`, read back: its name and until when its operation is trusted (0: unreadable). */
export function parsePendingKey(dir: string, key: string): { name: string; until: number } | null {
  const rest = key.slice(dir.length);
  const slash = rest.indexOf('/');
  const end = slash >= 0 ? slash : rest.indexOf(PENDING_NAME_END);
  if (end <= 0) return null;
  const name = rest.slice(0, end);
  const entry = rest.slice(end + (slash >= 0 ? 1 : PENDING_NAME_END.length));
  if (!entry || entry.includes('/')) return null;
  const until = Number(entry.split('.')[0]);
  return { name, until: Number.isFinite(until) ? until : 0 };
}
export const indexReadyKey = (ns: string[]): string => `${namespaceCatalogDirKey(ns)}index.ready`;
export const listingStampKey = (ns: string[], kind: ChildKind): string => `${namespaceCatalogDirKey(ns)}${INDEX_FOLDERS[kind].visible}.stamp`;
export const listingSnapshotKey = (ns: string[], kind: ChildKind): string => `${namespaceCatalogDirKey(ns)}${INDEX_FOLDERS[kind].visible}.snapshot`;
/** The folder of the log of changes of a kind's entries: `<name>.<token>`, a token never written twice. */
export const listingLogDirKey = (ns: string[], kind: ChildKind): string => `${namespaceCatalogDirKey(ns)}${INDEX_FOLDERS[kind].visible}.log/`;
/**
 * `<name>.<token>`, flat, so that a LIST of the log on a local disk reads one directory, not one
 * per name; `<name>/<token>` for a name too long for both to fit a file name (and as logs written
 * before the flat form hold them). The token holds no '.' or '/'.
 */
export const listingLogKey = (kind: ChildKind, ref: TableRef, token: string): string => {
  const dir = listingLogDirKey(ref.namespace, kind);
  return Buffer.byteLength(ref.name, 'utf8') + 1 + Buffer.byteLength(token, 'utf8') <= FLAT_ENTRY_MAX_BYTES
    ? `${dir}${ref.name}.${token}`
    : `${indexNameDirKey(dir, ref.name)}${token}`;
};
/** The name a log key under the folder `dir` is of, in either form (null: not one). */
export function nameOfLogKey(dir: string, key: string): string | null {
  const [first, token, rest] = key.slice(dir.length).split('/');
  if (!first || rest !== undefined) return null;
  if (token !== undefined) return token === '' ? null : first;
  const dot = first.lastIndexOf('.');
  return dot > 0 && dot < first.length - 1 ? first.slice(0, dot) : null;
}

// ---- <root>/<ns>/<t>.lance/_catalog/: what writers of a table name leave while they write.

/** One lease per write under way (tables/table-fences.ts): `<id>.json`. */
export const writersDirKey = (t: TableRef): string => `${tableDirKey(t)}${CATALOG_DIR}/writers/`;
export const writeLeaseKey = (t: TableRef, id: string): string => `${writersDirKey(t)}${id}.json`;
/** The claim of the one request that creates a declared table's dataset (tables/dataset-creation.ts). */
export const creationClaimKey = (t: TableRef): string => `${tableDirKey(t)}${CATALOG_DIR}/dataset-create.json`;
/** The claim of the one request that forks or deletes a branch of the table now (branches/branch-service.ts). */
export const branchClaimKey = (t: TableRef): string => `${tableDirKey(t)}${CATALOG_DIR}/branches.json`;

// ---- A table's dataset directory (`dataset`: a key ending in '/', in whichever store holds it).
//
//   _versions/<manifest name>               committed manifests, V1 and V2 names (engine/lance-format/manifest-names.ts)
//   _versions/<manifest name>-<uuid>        staged manifests (what Lance writers stage, and the service too)
//   _versions/latest_version_hint.json      Lance's hint of the latest version
//   _transactions/<file>.txn                Lance's transaction files
//   _catalog/versions/<version>.json        the service's version metadata (versions/dataset-versions.ts)
//   _catalog/reservations/<version>.json    version-slot reservations (versions/version-slots.ts)
//   _catalog/reservations/branches/<b>/<version>.json  the same for branch <b> (its name as one segment):
//                                           here, not in the branch's tree, so that a drop, which waits for
//                                           every reservation under `_catalog/reservations/`, sees them too
//   tree/<branch>/                          a branch's own history (Lance's layout): `_versions/`, `_transactions/`,
//                                           and the service's `_catalog/versions/` of its versions
//   _udfs/<sha256>                          UDF envelopes (data/python-udf-columns.ts)

/** Lance's latest-version hint, in `_versions/`. */
export const LATEST_HINT = 'latest_version_hint.json';
const UDF_DIR = '_udfs';
/** Version numbers in the service's keys: zero-padded, so that keys sort as versions do. */
const padVersion = (version: number): string => String(version).padStart(20, '0');

export const versionsDirKey = (dataset: string): string => `${dataset}${VERSIONS_DIR}/`;
export const manifestKey = (dataset: string, version: number, scheme: ManifestNamingScheme): string =>
  `${versionsDirKey(dataset)}${manifestFileName(version, scheme)}`;
export const latestHintKey = (dataset: string): string => `${versionsDirKey(dataset)}${LATEST_HINT}`;
/** A staged manifest's path relative to its dataset (the form clients send as manifest_path). */
export const stagedManifestPath = (version: number, id: string): string => `${VERSIONS_DIR}/${version}.manifest-${id}`;
export const lanceTransactionsDirKey = (dataset: string): string => `${dataset}_transactions/`;
export const lanceTransactionKey = (dataset: string, file: string): string => `${lanceTransactionsDirKey(dataset)}${file}`;
export const versionSidecarKey = (dataset: string, version: number): string => `${dataset}${CATALOG_DIR}/versions/${padVersion(version)}.json`;
export const reservationsDirKey = (dataset: string): string => `${dataset}${CATALOG_DIR}/reservations/`;
/** The reservations of a branch's versions (`branchSegment`: its name as one path segment). */
export const branchReservationsDirKey = (dataset: string, branchSegment: string): string => `${reservationsDirKey(dataset)}branches/${branchSegment}/`;
/** The reservation of `version` in a reservations directory (reservationsDirKey, branchReservationsDirKey). */
export const reservationKey = (reservationsDir: string, version: number): string => `${reservationsDir}${padVersion(version)}.json`;
/** Where, relative to a dataset, the envelope whose sha256 is `hash` is stored. */
export const udfEnvelopePath = (hash: string): string => `${UDF_DIR}/${hash}`;
