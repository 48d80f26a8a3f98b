import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { takeClaim } from '../../src/service/coordination/claims.js';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import { storeDouble } from '../support/store-double.js';

// A claim's release: within its lease it is still its holder's (nobody may take it over before
// the lease runs out), so it goes with one DELETE; past it, only if it is still exactly the
// holder's own, so that a holder that was frozen past its lease never deletes its successor's.
describe('claims', () => {
  const LEASE_MS = 300;
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const counted = (store: MemoryObjectStore) => {
    const calls: string[] = [];
    const double = storeDouble(store, {
      head: (key) => {
        calls.push(`head ${key}`);
        return store.head(key);
      },
      delete: (key) => {
        calls.push(`delete ${key}`);
        return store.delete(key);
      },
    });
    return { double, calls };
  };

  it('is released within its lease by one DELETE, without a HEAD', async () => {
    const store = new MemoryObjectStore();
    const { double, calls } = counted(store);
    const release = await takeClaim(double, 'c.json', 'r1', LEASE_MS, { durable: false });
    expect(release).not.toBeNull();
    await vi.advanceTimersByTimeAsync(LEASE_MS / 2);
    await release?.();
    expect(calls).toEqual(['delete c.json']);
    expect(await store.head('c.json')).toBeNull();
  });

  it('a holder frozen past its lease, its claim taken over, leaves its successor’s claim in place', async () => {
    const store = new MemoryObjectStore();
    const { double, calls } = counted(store);
    const frozen = await takeClaim(double, 'c.json', 'r1', LEASE_MS);
    expect(await takeClaim(store, 'c.json', 'r2', LEASE_MS)).toBeNull();
    // The clock moves on while the holder's renewals do not run (a frozen process).
    vi.setSystemTime(Date.now() + 2 * LEASE_MS);
    const successor = await takeClaim(store, 'c.json', 'r2', LEASE_MS);
    expect(successor).not.toBeNull();
    const held = await store.get('c.json');
    await frozen?.();
    expect(calls).toEqual(['head c.json']);
    expect((await store.get('c.json'))?.etag).toBe(held?.etag);
    await successor?.();
    expect(await store.head('c.json')).toBeNull();
  });
});
