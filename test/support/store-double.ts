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
