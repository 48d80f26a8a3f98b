import { ErrorCode, NamespaceError } from '../../model/errors.js';
import type { ObjectStore } from '../../store/object-store.js';
import { leaseExpired, pollUntil } from '../coordination/leases.js';
import { namespaceDirKey, namespaceRecordKey } from './layout.js';
import { NamespaceRecord, readRecord, type Versioned } from './records.js';

export const MANAGED_VERSIONING = 'managed_versioning';

const flagOf = (properties: Record<string, string> | undefined): boolean | undefined => {
  const v = properties?.[MANAGED_VERSIONING]?.trim().toLowerCase();
  return v === 'true' ? true : v === 'false' ? false : undefined;
};

/**
 * Whether a table's versions are managed by the service: the table's own `managed_versioning`
 * property, else that of the nearest enclosing namespace that sets it, else the server default.
 * `deps` is the CatalogDeps, of which only these are named here (catalog-deps.ts builds on this module).
 */
export async function resolveManagedVersioning(
  deps: { store: ObjectStore; settings: { managedVersioningDefault: boolean } },
  namespace: string[] | ResolvedNamespace,
  properties: Record<string, string>,
): Promise<boolean> {
  const own = flagOf(properties);
  if (own !== undefined) return own;
  // A namespace the request resolved already answers for itself; only its ancestors are read.
  const resolved = Array.isArray(namespace) ? null : namespace;
  const id = resolved ? resolved.id : (namespace as string[]);
  for (let depth = id.length; depth >= 0; depth--) {
    const record = resolved && depth === id.length ? resolved.record : await readNamespace(deps.store, id.slice(0, depth));
    const inherited = flagOf(record?.value.properties);
    if (inherited !== undefined) return inherited;
  }
  return deps.settings.managedVersioningDefault;
}

export const displayId = (id: string[]): string => (id.length === 0 ? 'the root namespace' : JSON.stringify(id));

export const namespaceNotFound = (ns: string[]) => new NamespaceError(ErrorCode.NamespaceNotFound, `namespace ${displayId(ns)} does not exist`);

/** The namespace record; the root always exists, with or without a record file. */
export async function readNamespace(store: ObjectStore, ns: string[]): Promise<Versioned<NamespaceRecord> | null> {
  const record = await readRecord(store, namespaceRecordKey(ns), NamespaceRecord);
  if (record || ns.length > 0) return record;
  return { value: NamespaceRecord.parse({}), etag: '' };
}

/**
 * The link through which a namespace's directory is reached, or null: one realpath on a local
 * disk, nothing on an object store. The catalog follows no symbolic link below its root: a
 * namespace reached through one is none of its namespaces, wherever the link leads (see
 * LinkedTableDir in tables/table-state.ts for tables).
 */
export const namespaceLink = (store: ObjectStore, ns: string[]): string | null => (ns.length === 0 ? null : (store.linkOnPath?.(namespaceDirKey(ns)) ?? null));

/** A 404 when the namespace's directory is reached through a symbolic link (see namespaceLink). */
export function requireUnlinkedNamespace(store: ObjectStore, ns: string[]): void {
  if (namespaceLink(store, ns) !== null) throw namespaceNotFound(ns);
}

/**
 * Throws NamespaceNotFound unless the namespace exists (a namespace being dropped still exists)
 * and is not reached through a symbolic link (unless `linkChecked`: the caller looked).
 */
export async function requireNamespace(store: ObjectStore, ns: string[], linkChecked = false): Promise<Versioned<NamespaceRecord>> {
  if (!linkChecked) requireUnlinkedNamespace(store, ns);
  const record = await readNamespace(store, ns);
  if (!record) throw namespaceNotFound(ns);
  return record;
}

/** A namespace as one request resolved it: later steps receive this instead of reading the record again. */
export interface ResolvedNamespace {
  id: string[];
  record: Versioned<NamespaceRecord>;
}

/** Resolves an existing namespace once for a request (NamespaceNotFound otherwise). */
export async function resolveNamespace(store: ObjectStore, ns: string[]): Promise<ResolvedNamespace> {
  return { id: ns, record: await requireNamespace(store, ns) };
}

/**
 * The namespace's record once no live drop is deciding its fate (waiting while one is), or null
 * when the namespace is gone. A `dropping` mark whose lease ran out was left by a dead drop and
 * counts as active.
 */
async function settledNamespace(store: ObjectStore, ns: string[], known?: Versioned<NamespaceRecord>): Promise<Versioned<NamespaceRecord> | null> {
  let record = known ?? (await readNamespace(store, ns));
  const deciding = () => record !== null && record.value.state === 'dropping' && !leaseExpired(record.value.dropping_until);
  if (!deciding()) return record;
  await pollUntil(
    async () => {
      record = await readNamespace(store, ns);
      return !deciding();
    },
    Date.parse(record?.value.dropping_until ?? '') || Date.now(),
  );
  return record;
}

/**
 * Creates a child (namespace or table) inside `parent` so that a concurrent drop of the parent
 * never leaves it orphaned, and so that every answer is true.
 *
 * Invariant: a child exists only in a parent that exists, and a creator answers 404 only when the
 * parent is gone. A drop first marks the parent `dropping` (replace-if-unchanged, with a lease),
 * then lists its children, then either deletes the record (no children) or puts the mark back
 * (Restrict with children). A creator reads the parent after its own create-if-absent landed; if
 * a drop is deciding, it waits for the outcome. If the drop's listing ran after the create, the
 * drop saw the child and failed, the parent is active again, and the child stays. If it ran
 * before, the drop deletes the parent and the creator undoes itself and answers 404. A parent
 * dropped and created again in between is another namespace: the child is undone too.
 *
 * The read before the create is the parent as the request resolved it, when it did (a parent
 * resolved earlier in the request is as good a "before": a drop and re-create since then makes
 * the read after differ and the child is undone). The read after is the protocol itself, never
 * a repeat: it is what a concurrent drop is seen by.
 */
export async function createInNamespace<T>(
  store: ObjectStore,
  parent: string[] | ResolvedNamespace,
  create: () => Promise<T>,
  undo: () => Promise<void>,
): Promise<T> {
  const id = Array.isArray(parent) ? parent : parent.id;
  const before = await settledNamespace(store, id, Array.isArray(parent) ? undefined : parent.record);
  if (!before) throw namespaceNotFound(id);
  const result = await create();
  const after = await settledNamespace(store, id);
  if (!after || after.value.created_at !== before.value.created_at) {
    await undo();
    throw namespaceNotFound(id);
  }
  return result;
}
