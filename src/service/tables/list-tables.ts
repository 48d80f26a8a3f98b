import type { ListTablesResponse } from '../../model/tables.js';
import { requireNamespace, requireUnlinkedNamespace } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { compareNames, validateNamespaceId } from '../catalog/layout.js';
import type { PageRequest } from '../catalog/namespace-service.js';
import { paginate } from '../catalog/page-token.js';

// ListTables and ListAllTables: pages of the listing index (catalog/listing-index.ts), never a read
// of each table's directory.

/** Names of the tables directly in `ns`, in the listing index's order (see compareNames): a page of the index (catalog/listing-index.ts). */
export async function listTables(deps: CatalogDeps, ns: string[], page: PageRequest & { includeDeclared?: boolean | undefined }): Promise<ListTablesResponse> {
  validateNamespaceId(ns);
  // Before the index is read (and settled) at all: nothing through a link.
  requireUnlinkedNamespace(deps.store, ns);
  const { names, pageToken } = await deps.listingIndex.listPage(
    'table',
    ns,
    page,
    deps.pageTokens,
    () => requireNamespace(deps.store, ns, true),
    page.includeDeclared ?? true,
  );
  return { tables: names, page_token: pageToken };
}

/** Every table in every namespace, as full ids joined with `delimiter`, ordered by id. */
export async function listAllTables(
  deps: CatalogDeps,
  delimiter: string,
  page: PageRequest & { includeDeclared?: boolean | undefined },
): Promise<ListTablesResponse> {
  const after = deps.pageTokens.decode('all-tables', '', page.pageToken);
  const afterId: string[] | undefined = after === undefined || after === '' ? undefined : (JSON.parse(after) as string[]);
  const found: string[][] = [];
  const want = page.limit === undefined || page.limit === null ? Infinity : page.limit + 1;
  await walkTables(deps, [], page.includeDeclared ?? true, afterId, want, found);
  const { page: ids, pageToken } = paginate(
    found,
    page.limit,
    (id) => JSON.stringify(id),
    (last) => deps.pageTokens.encode('all-tables', '', last),
  );
  return { tables: ids.map((id) => id.join(delimiter)), page_token: pageToken };
}

/** Every table (declared ones left out) in `ns` and the namespaces below it, from the listing index: for the maintenance scheduler. */
export async function tablesUnder(deps: CatalogDeps, ns: string[]): Promise<string[][]> {
  const found: string[][] = [];
  await walkTables(deps, ns, false, undefined, Infinity, found);
  return found;
}

/**
 * Depth-first over the namespace tree with the children of each namespace in name order (a table
 * before a namespace of the same name), which is exactly the order of compareIds; so it can stop
 * once `want` ids are found. Tables and child namespaces come from each namespace's listing index.
 */
async function walkTables(
  deps: CatalogDeps,
  ns: string[],
  includeDeclared: boolean,
  afterId: string[] | undefined,
  want: number,
  out: string[][],
): Promise<void> {
  // Within this namespace the token names the last id returned, or the subtree holding it: tables after its name.
  const inside = afterId !== undefined && afterId.length > ns.length && ns.every((p, i) => afterId[i] === p);
  // Both pages of this namespace at once. Child namespaces whose subtrees end before the token are
  // skipped below, unread. Tables are not bounded: the walk takes what a namespace holds up to
  // `want`, however many it skips.
  const [{ names: children }, { names: tables }] = await Promise.all([
    deps.listingIndex.page('namespace', ns, undefined, Infinity),
    deps.listingIndex.page('table', ns, inside ? afterId[ns.length] : undefined, want - out.length, { includeDeclared, bounded: false }),
  ]);
  let t = 0;
  for (const child of children) {
    while (t < tables.length && compareNames(tables[t] ?? '', child) <= 0 && out.length < want) out.push([...ns, tables[t++] ?? '']);
    if (out.length >= want) return;
    const childId = [...ns, child];
    // A subtree wholly before the token holds only ids before it.
    if (afterId && compareIds(childId, afterId.slice(0, childId.length)) < 0) continue;
    await walkTables(deps, childId, includeDeclared, afterId, want, out);
  }
  while (t < tables.length && out.length < want) out.push([...ns, tables[t++] ?? '']);
}

function compareIds(a: string[], b: string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const c = compareNames(a[i] ?? '', b[i] ?? '');
    if (c !== 0) return c;
  }
  return a.length - b.length;
}
