import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { displayId } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { branchClaimKey, type TableRef, tableRefOf } from '../catalog/layout.js';
import type { RequestContext } from '../context/request-context.js';
import { awaitClaim } from '../coordination/claims.js';

/** How long a change of a table's refs waits for another one of the same table before it is a 409 code 14 (retry). */
const CLAIM_WAIT_MS = 10_000;

/**
 * Takes the branch claim of table `ref` (`_catalog/branches.json`, coordination/claims.ts): the one
 * change of the table's refs that may run now; returns its release. Forks and deletes of branches
 * hold it (branch-service.ts), and so do a tag's create and update into a branch (data/tags.ts):
 * the invariants that rest on it are stated where each takes it. Not fsynced: it guards no state of
 * its own (each holder checks the refs and the tree it finds), so a claim lost with the machine's
 * crash, which ends its holder too, loses nothing.
 */
export async function takeBranchClaim(deps: Pick<CatalogDeps, 'store' | 'settings'>, ctx: RequestContext, ref: TableRef): Promise<() => Promise<void>> {
  const release = await awaitClaim(deps.store, branchClaimKey(ref), ctx.requestId, deps.settings.leaseMs, Date.now() + CLAIM_WAIT_MS, { durable: false });
  if (release === null)
    throw new NamespaceError(
      ErrorCode.ConcurrentModification,
      `another change of the branches or tags of table ${displayId([...ref.namespace, ref.name])} is under way; try again`,
    );
  return release;
}

/** Runs `work` holding the branch claim of table `id` (takeBranchClaim). */
export async function underBranchClaim<T>(
  deps: Pick<CatalogDeps, 'store' | 'settings'>,
  ctx: RequestContext,
  id: string[],
  work: () => Promise<T>,
): Promise<T> {
  const release = await takeBranchClaim(deps, ctx, tableRefOf(id));
  try {
    return await work();
  } finally {
    await release();
  }
}
