import { ErrorCode, NamespaceError } from '../../model/errors.js';
import type { RequestContext } from '../context/request-context.js';
import { type ResolvedNamespace, resolveNamespace } from './catalog.js';
import type { CatalogDeps } from './catalog-deps.js';
import { NamespaceService } from './namespace-service.js';

// Geneva keeps its own tables (its job table `geneva_jobs`, and others it opens) in the namespace
// `__system`. In remote mode it leaves creating that namespace to the server, so the service
// creates it the first time a table is made there, or a job is written there.

export const SYSTEM_NAMESPACE: readonly string[] = Object.freeze(['__system']);

export const isSystemNamespace = (ns: readonly string[]): boolean => ns.length === 1 && ns[0] === SYSTEM_NAMESPACE[0];

/**
 * The namespace `ns`, resolved; the system namespace is created first when it does not exist
 * (ExistOk: concurrent creators all succeed). Any other missing namespace is a 404 as usual.
 */
export async function resolveNamespaceCreatingSystem(deps: CatalogDeps, ctx: RequestContext, ns: string[]): Promise<ResolvedNamespace> {
  try {
    return await resolveNamespace(deps.store, ns);
  } catch (e) {
    if (!(e instanceof NamespaceError && e.code === ErrorCode.NamespaceNotFound && isSystemNamespace(ns))) throw e;
  }
  await new NamespaceService(deps).create(ctx, ns, { mode: 'ExistOk' });
  return resolveNamespace(deps.store, ns);
}
