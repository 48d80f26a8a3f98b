import { describe, expect, it } from 'vitest';
import { type Metrics, NO_METRICS, type StoreOutcome } from '../../src/metrics/metrics.js';
import { InstrumentedStore } from '../../src/store/instrumented-store.js';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import { PreconditionFailedError } from '../../src/store/object-store.js';
import { storeDouble } from '../support/store-double.js';

// The outcome each store call is counted with: an operator alerts on `error`, so a lost condition
// and a put its caller withdrew are never counted as one.

function recording(): { metrics: Metrics; outcomes: Array<[string, StoreOutcome]> } {
  const outcomes: Array<[string, StoreOutcome]> = [];
  return { metrics: { ...NO_METRICS, storeCall: (operation, outcome) => void outcomes.push([operation, outcome]) }, outcomes };
}

describe('InstrumentedStore outcomes', () => {
  it('a lost create-if-absent or replace-if-unchanged is precondition_failed', async () => {
    const { metrics, outcomes } = recording();
    const store = new InstrumentedStore(new MemoryObjectStore(), metrics);
    await store.put('k', 'a', { ifNoneMatch: '*' });
    await expect(store.put('k', 'b', { ifNoneMatch: '*' })).rejects.toBeInstanceOf(PreconditionFailedError);
    await expect(store.put('k', 'b', { ifMatch: '"stale"' })).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(outcomes).toEqual([
      ['put', 'ok'],
      ['put', 'precondition_failed'],
      ['put', 'precondition_failed'],
    ]);
  });

  it('a put withdrawn by its caller is withdrawn, or precondition_failed when the write it followed lost its condition', async () => {
    const { metrics, outcomes } = recording();
    const store = new InstrumentedStore(new MemoryObjectStore(), metrics);
    await expect(store.put('a', 'x', undefined, { placeAfter: Promise.reject(new Error('the commit did not go ahead')) })).rejects.toThrow('did not go ahead');
    await expect(store.put('b', 'x', undefined, { placeAfter: Promise.reject(new PreconditionFailedError('m', 'object exists')) })).rejects.toBeInstanceOf(
      PreconditionFailedError,
    );
    expect(outcomes).toEqual([
      ['put', 'withdrawn'],
      ['put', 'precondition_failed'],
    ]);
    expect(await store.head('a')).toBeNull();
  });

  it('a put that fails on its own is an error, even with a placeAfter that rejected differently', async () => {
    const { metrics, outcomes } = recording();
    const failing = storeDouble(new MemoryObjectStore(), {
      put: async (_key, _body, _condition, options) => {
        await options?.placeAfter?.catch(() => undefined);
        throw new Error('disk on fire');
      },
    });
    const store = new InstrumentedStore(failing, metrics);
    await expect(store.put('a', 'x')).rejects.toThrow('disk on fire');
    await expect(store.put('b', 'x', undefined, { placeAfter: Promise.reject(new Error('withdrawn')) })).rejects.toThrow('disk on fire');
    expect(outcomes).toEqual([
      ['put', 'error'],
      ['put', 'error'],
    ]);
  });
});
