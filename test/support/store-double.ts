import type { ObjectStore } from '../../src/store/object-store.js';

/** `inner` with some of its methods replaced (each replacement may call `inner` itself). */
export function storeDouble(inner: ObjectStore, overrides: Partial<ObjectStore>): ObjectStore {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const override: unknown = Reflect.get(overrides, prop);
      if (override !== undefined) return override;
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** `inner`, recording the key of every get, head and list ("list <prefix>") in `reads`. */
export function readLog(inner: ObjectStore): { store: ObjectStore; reads: string[] } {
  const reads: string[] = [];
  /** The answer of a read, its key logged. */
  const logged = <T>(key: string, answer: T): T => {
    reads.push(key);
    return answer;
  };
  return {
    store: storeDouble(inner, {
      get: (key) => logged(key, inner.get(key)),
      head: (key) => logged(key, inner.head(key)),
      list: ((prefix: string, options?: Parameters<ObjectStore['list']>[1]) => logged(`list ${prefix}`, inner.list(prefix, options))) as ObjectStore['list'],
    }),
    reads,
  };
}
