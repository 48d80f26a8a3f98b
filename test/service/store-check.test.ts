import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ServiceLogger } from '../../src/service/context/logger.js';
import { StoreCheck, type StoreCheckOptions, UnsafeStoreError } from '../../src/service/health/store-check.js';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import { listAll, type ObjectStore, type PutCondition, StoreUnavailableError } from '../../src/store/object-store.js';
import { backends } from '../support/backends.js';
import { storeDouble } from '../support/store-double.js';

// The check that the store honours conditional writes: a store that ignores
// If-None-Match or If-Match stops the service at start-up, with a message naming the store and
// what it did not honour, unless allowed (then loudly); found later, the replica is no longer
// ready; a probe that fails for another reason (a read-only or unreachable store) decides nothing.
// Every probe leaves no key behind.

type Logged = { level: 'info' | 'warn' | 'error'; msg: string; obj: object };

function logger(): ServiceLogger & { lines: Logged[] } {
  const lines: Logged[] = [];
  return {
    lines,
    info: (obj, msg) => void lines.push({ level: 'info', obj, msg }),
    warn: (obj, msg) => void lines.push({ level: 'warn', obj, msg }),
    error: (obj, msg) => void lines.push({ level: 'error', obj, msg }),
  };
}

/** What a store double ignores, switchable while it serves. */
interface Carelessness {
  ifNoneMatch: boolean;
  ifMatch: boolean;
  /** Every put fails as on a store that cannot be written (read-only, full, unreachable). */
  unwritable: boolean;
}

/** A memory store that ignores the conditions `careless` says, as some S3-compatible stores have. */
function careless(inner: ObjectStore, how: Partial<Carelessness>): { store: ObjectStore; how: Carelessness } {
  const state: Carelessness = { ifNoneMatch: false, ifMatch: false, unwritable: false, ...how };
  const kept = (condition?: PutCondition): PutCondition | undefined => {
    if (!condition) return undefined;
    if ('ifNoneMatch' in condition) return state.ifNoneMatch ? undefined : condition;
    return state.ifMatch ? undefined : condition;
  };
  const store = storeDouble(inner, {
    put: (key, body, condition, options) =>
      state.unwritable ? Promise.reject(new StoreUnavailableError('the store refused the write')) : inner.put(key, body, kept(condition), options),
  });
  return { store, how: state };
}

const ONCE: StoreCheckOptions = { intervalMs: 0, allowUnsafe: false };
const keysLeft = async (store: ObjectStore) => (await listAll(store, '')).objects.map((o) => o.key);

describe('the store check', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('passes an honest store, leaving no key behind', async () => {
    const memory = new MemoryObjectStore('honest');
    const log = logger();
    const check = new StoreCheck(memory, ONCE, log);
    await check.atStart();
    expect(await check.unready()).toBeNull();
    expect(await keysLeft(memory)).toEqual([]);
    expect(log.lines.map((l) => [l.level, l.msg])).toEqual([['info', 'the store honours conditional writes']]);
  });

  it.each([
    ['If-None-Match', { ifNoneMatch: true }, ['a create-if-absent (If-None-Match: *) of an existing key replaced it']],
    ['If-Match', { ifMatch: true }, ['a replace-if-unchanged (If-Match) with a stale etag replaced the object']],
    [
      'either',
      { ifNoneMatch: true, ifMatch: true },
      ['a create-if-absent (If-None-Match: *) of an existing key replaced it', 'a replace-if-unchanged (If-Match) with a stale etag replaced the object'],
    ],
  ])('refuses at start-up a store that ignores %s, naming the store and what it did not honour', async (_, how, broken) => {
    const memory = new MemoryObjectStore('careless');
    const check = new StoreCheck(careless(memory, how).store, ONCE, logger());
    const refused = await check.atStart().then(
      () => null,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(UnsafeStoreError);
    expect(refused).toMatchObject({ root: 'memory://careless', broken });
    expect((refused as Error).message).toMatch(/^refusing to serve the store memory:\/\/careless: it does not honour conditional writes \(/);
    expect((refused as Error).message).toContain(broken[0]);
    expect((refused as Error).message).toContain('--allow-unsafe-store');
    expect(await keysLeft(memory)).toEqual([]);
  });

  it('with --allow-unsafe-store it serves such a store, warning at start and at each probe', async () => {
    const memory = new MemoryObjectStore('careless');
    const log = logger();
    const check = new StoreCheck(careless(memory, { ifNoneMatch: true }).store, { intervalMs: 0, allowUnsafe: true }, log);
    await check.atStart();
    expect(await check.unready()).toBeNull();
    const warnings = log.lines.filter((l) => l.level === 'warn').map((l) => l.msg);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/^--allow-unsafe-store is set/);
    expect(warnings[1]).toMatch(
      /^the store memory:\/\/careless does not honour conditional writes \(.*If-None-Match.*\).*serving it anyway \(--allow-unsafe-store\)$/,
    );
    expect(await keysLeft(memory)).toEqual([]);
  });

  it('a store that cannot be written is not "does not honour": it starts, not ready, until a probe gets through', async () => {
    const memory = new MemoryObjectStore('read-only');
    const { store, how } = careless(memory, { unwritable: true });
    const log = logger();
    const check = new StoreCheck(store, ONCE, log);
    await check.atStart();
    expect(log.lines.map((l) => [l.level, l.msg])).toEqual([['warn', expect.stringMatching(/^could not check that the store honours conditional writes/)]]);
    // Readiness asks again each time, until a probe gets through.
    expect(await check.unready()).toBe('the store could not be checked for conditional writes yet');
    how.unwritable = false;
    expect(await check.unready()).toBeNull();
    expect(await keysLeft(memory)).toEqual([]);
  });

  it('a store found careless by a later probe makes the replica not ready for good, loudly', async () => {
    vi.useFakeTimers();
    const memory = new MemoryObjectStore('turns');
    const { store, how } = careless(memory, {});
    const log = logger();
    const check = new StoreCheck(store, { intervalMs: 60_000, allowUnsafe: false }, log);
    await check.atStart();
    check.start();
    how.ifMatch = true;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(await check.unready()).toBe('the store does not honour conditional writes');
    expect(log.lines.filter((l) => l.level === 'error').map((l) => l.msg)).toEqual([
      expect.stringMatching(/^the store memory:\/\/turns does not honour conditional writes \(.*stale etag.*\).*not ready from now on/),
    ]);
    // Honest again: writes may have been lost meanwhile, so it stays not ready (and says so).
    how.ifMatch = false;
    await vi.advanceTimersByTimeAsync(60_000);
    await check.stop();
    expect(await check.unready()).toBe('the store does not honour conditional writes');
    expect(log.lines.filter((l) => l.level === 'error')).toHaveLength(2);
    expect(await keysLeft(memory)).toEqual([]);
  });

  it('replicas probing one store at once use keys of their own', async () => {
    const memory = new MemoryObjectStore('shared');
    const checks = Array.from({ length: 8 }, () => new StoreCheck(memory, ONCE, logger()));
    await Promise.all(checks.map((c) => c.atStart()));
    expect(await Promise.all(checks.map((c) => c.unready()))).toEqual(checks.map(() => null));
    expect(await keysLeft(memory)).toEqual([]);
  });
});

describe.each(backends())('the store check on $name', (backend) => {
  it('passes, leaving no key (and on a local disk no directory) behind', async () => {
    const root = await backend.newRoot();
    try {
      const log = logger();
      // Several replicas starting at once on one root.
      await Promise.all(Array.from({ length: 3 }, () => new StoreCheck(root.store, ONCE, log).atStart()));
      expect(log.lines.map((l) => l.msg)).toEqual(Array.from({ length: 3 }, () => 'the store honours conditional writes'));
      expect(await keysLeft(root.store)).toEqual([]);
      expect((await root.store.list('', { delimiter: '/' })).commonPrefixes).toEqual([]);
    } finally {
      await root.dispose();
    }
  });
});
