import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { displayId } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { branchClaimKey, tableRefOf } from '../catalog/layout.js';
import type { RequestContext } from '../context/request-context.js';
import { awaitClaim } from '../coordination/claims.js';

/** How long a change of a table's refs waits for another one of the same table before it is a 409 code 14 (retry). */
const CLAIM_WAIT_MS = 10_000;

/**
 * Runs `work` holding the branch claim of table `id` (`_catalog/branches.json`, coordination/claims.ts):
 * the one change of the table's refs that may run now. Forks and deletes of branches hold it
 * (branch-service.ts), and so do a tag's create and update into a branch (data/tags.ts): the
 * invariants that rest on it are stated where each takes it.
 */
export async function underBranchClaim<T>(
  deps: Pick<CatalogDeps, 'store' | 'settings'>,
  ctx: RequestContext,
  id: string[],
  work: () => Promise<T>,
): Promise<T> {
  const release = await awaitClaim(deps.store, branchClaimKey(tableRefOf(id)), ctx.requestId, deps.settings.leaseMs, Date.now() + CLAIM_WAIT_MS);
  if (release === null)
    throw new NamespaceError(ErrorCode.ConcurrentModification, `another change of the branches or tags of table ${displayId(id)} is under way; try again`);
  try {
    return await work();
  } finally {
    await release();
  }
}
