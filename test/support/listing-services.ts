import type { CatalogDeps } from '../../src/service/catalog/catalog-deps.js';
import { NamespaceService } from '../../src/service/catalog/namespace-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import type { ObjectStore } from '../../src/store/object-store.js';
import { listAll } from '../../src/store/object-store.js';

export const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };

export function servicesOver(deps: CatalogDeps) {
  return {
    namespaces: new NamespaceService(deps),
    tables: new TableService(deps, () => {
      throw new Error('no managed tables here');
    }),
  };
}

export async function pages(tables: TableService, ns: string[], limit: number): Promise<string[]> {
  const names: string[] = [];
  let pageToken: string | undefined;
  for (let i = 0; i < 10_000; i++) {
    const page = await tables.list(ctx, ns, { limit, ...(pageToken ? { pageToken } : {}) });
    names.push(...page.tables);
    if (!page.page_token) return names;
    pageToken = page.page_token;
  }
  throw new Error('listing did not end');
}

export function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve: () => resolve() };
}

export async function keysUnder(store: ObjectStore, prefix: string): Promise<string[]> {
  return (await listAll(store, prefix)).objects.map((o) => o.key);
}
