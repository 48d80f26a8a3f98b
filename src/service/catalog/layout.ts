import { invalidInput } from '../../model/errors.js';

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

export const NAMESPACE_MARKER = '.lance-namespace';
export const TABLE_RECORD = '.lance-table.json';
export const RESERVED_MARKER = '.lance-reserved';
export const DEREGISTERED_MARKER = '.lance-deregistered';
export const TABLE_SUFFIX = '.lance';
export const VERSIONS_DIR = '_versions';
export const CATALOG_DIR = '_catalog';
/** Directories of tables whose name's directory holds a deregistered table's data: no namespace or table name can start with '.'. */
const OWN_DIR_PREFIX = '.lance-table-';
const MAX_NAME_BYTES = 255 - TABLE_SUFFIX.length;

/** A table: its namespace (possibly the root, []) and its name. */
export interface TableRef {
  namespace: string[];
  name: string;
}

// A name is one path segment; it must never climb out of its parent or collide with the
// service's own files. Control characters, separators, '.'/'..' and leading dots are refused.
function nameProblem(name: string): string | null {
  if (name.length === 0) return 'must not be empty';
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES) return `must be at most ${MAX_NAME_BYTES} bytes`;
  if (name === '.' || name === '..') return 'must not be "." or ".."';
  if (name.startsWith('.')) return 'must not start with "."';
  if (/[/\\]/.test(name)) return 'must not contain "/" or "\\"';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'must not contain control characters';
  if (name.includes('.~')) return 'must not contain ".~"';
  return null;
}

export function validateNamespaceId(id: string[], what = 'namespace id'): string[] {
  id.forEach((part, i) => {
    const problem = nameProblem(part) ??
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
