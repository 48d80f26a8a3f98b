import type { CatalogDeps } from '../../src/service/catalog/catalog-deps.js';
import { NamespaceService } from '../../src/service/catalog/namespace-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import type { ObjectStore } from '../../src/store/object-store.js';
import { listAll } from '../../src/store/object-store.js';
import { storeDouble } from './store-double.js';

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

export interface Counted {
  store: ObjectStore;
  calls: Record<string, number>;
  total(): number;
  reset(): void;
}

/** `inner`, counting its calls by method. */
export function counting(inner: ObjectStore): Counted {
  const calls: Record<string, number> = {};
  /** The answer of a call to `name`, counted. */
  const counted = <T>(name: string, answer: T): T => {
    calls[name] = (calls[name] ?? 0) + 1;
    return answer;
  };
  const store = storeDouble(inner, {
    get: (k) => counted('get', inner.get(k)),
    head: (k) => counted('head', inner.head(k)),
    put: (k, b, c, o) => counted('put', inner.put(k, b, c, o)),
    delete: (k, o) => counted('delete', inner.delete(k, o)),
    list: ((p: string, o?: Parameters<ObjectStore['list']>[1]) => counted('list', inner.list(p, o))) as ObjectStore['list'],
  });
  return {
    store,
    calls,
    total: () => Object.values(calls).reduce((a, b) => a + b, 0),
    reset: () => {
      for (const k of Object.keys(calls)) delete calls[k];
    },
  };
}
