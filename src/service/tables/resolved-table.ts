import type { LatestCommitted } from '../../engine/lance-engine.js';
import type { BranchRef } from '../branches/branch-refs.js';
import { type ResolvedNamespace, resolveManagedVersioning } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { tableDirKey, tableRefOf } from '../catalog/layout.js';
import { type StoreDir, sameDir } from '../catalog/locations.js';
import { type CommittedVersion, TableVersions } from '../versions/dataset-versions.js';
import { dataDir, incarnationOf, requireUnlinkedTable, requireVisibleTable, type TableState } from './table-state.js';

/**
 * A table as one request resolved it. Every later step of the request, including the engine's
 * version callbacks for a managed table, receives this instead of the id to look up again.
 */
export interface ResolvedTable {
  id: string[];
  /** What the store said about the name when it was resolved (record, markers). */
  state: TableState;
  /** Where its Lance dataset lives. */
  dir: StoreDir;
  /** Whether the service manages its versions: the record's flag, else inherited (read at most once, when first asked). */
  managedVersioning(): Promise<boolean>;
}

/** The handle of a table whose state the request has read. */
export function resolvedTable(
  deps: CatalogDeps,
  id: string[],
  state: TableState,
  options: { dir?: StoreDir; namespace?: ResolvedNamespace } = {},
): ResolvedTable {
  let managed: Promise<boolean> | undefined;
  return {
    id,
    state,
    dir: options.dir ?? dataDir(deps.locations, state),
    // A method, not an arrow bound to the key: esbuild's keepNames (tsx) would name each one anew, per request.
    managedVersioning() {
      const recorded = state.record?.value.managed_versioning;
      if (recorded !== undefined) return Promise.resolve(recorded);
      managed ??= resolveManagedVersioning(deps, options.namespace ?? state.ref.namespace, state.record?.value.properties ?? {});
      return managed;
    },
  };
}

/** Resolves the visible table `id` (404 otherwise; `creatingRequest` also finds the table that request is creating). */
export async function resolveTable(deps: CatalogDeps, id: string[], creatingRequest?: string): Promise<ResolvedTable> {
  return resolvedTable(deps, id, await requireVisibleTable(deps.store, tableRefOf(id), { creatingRequest }));
}

/**
 * Resolves the visible table `id` (404 otherwise) and reads the latest committed version of its
 * dataset (null: none, declared only) at the same time: the version is looked up in the table's
 * own directory alongside its state, since that is where the data of every table but a
 * registered one lives (whose record names its location, looked up after). Both only once the
 * directory is known not to be reached through a symbolic link, and the version only when no
 * entry of the directory is one (`nameLinks`: the caller looked, see requireUnlinkedTable).
 */
export async function resolveTableWithLatest(
  deps: CatalogDeps,
  id: string[],
  nameLinks?: string[],
): Promise<{ table: ResolvedTable; latest: CommittedVersion | null }> {
  const ref = tableRefOf(id);
  const links = nameLinks ?? requireUnlinkedTable(deps.store, ref);
  const ownDir = deps.locations.own(tableDirKey(ref));
  const [state, ownLatest] = await Promise.all([
    requireVisibleTable(deps.store, ref, { nameLinks: links }),
    // With a link among its entries, the name's directory is not its table's dataset (or the state refuses the table).
    links.length === 0 ? new TableVersions(ownDir).latest().catch(() => undefined) : undefined,
  ]);
  const table = resolvedTable(deps, id, state);
  const own = sameDir(table.dir, ownDir) && ownLatest !== undefined;
  return { table, latest: own ? ownLatest : await new TableVersions(table.dir).latest() };
}

/** A committed version as the engine checks the dataset it keeps open against (handle-cache.ts). */
export const latestCommitted = (latest: CommittedVersion | null, state: TableState): LatestCommitted | undefined =>
  latest ? { version: latest.version, manifestETag: latest.etag, manifestSize: latest.size, incarnation: incarnationOf(state) } : undefined;

/**
 * The same of a branch's latest version. A branch deleted and forked again under its name is
 * another line of history in the same table: its ref's etag is part of the incarnation the engine
 * checks its kept dataset against, so a dataset kept for the old branch is never served for it.
 */
export const branchLatestCommitted = (latest: CommittedVersion | null, state: TableState, branch: BranchRef): LatestCommitted | undefined => {
  const committed = latestCommitted(latest, state);
  return committed && { ...committed, incarnation: committed.incarnation === null ? null : `${committed.incarnation} ${branch.etag}` };
};
