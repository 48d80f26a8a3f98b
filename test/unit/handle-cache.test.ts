import { describe, expect, it } from 'vitest';
import type { LatestCommitted } from '../../src/engine/dataset-location.js';
import { HANDLE_OVERHEAD_BYTES, HandleCache, type KeptHandle } from '../../src/engine/lancedb/handle-cache.js';

// The kept-handle protocol (src/engine/lancedb/handle-cache.ts) over fake datasets: a store of
// locations whose latest version and manifest ETag the test moves behind the cache's back.

interface Dataset {
  version: number;
  /** Which table lives there; a drop and re-create makes a new one. */
  generation: number;
}

class FakeStore {
  readonly datasets = new Map<string, Dataset>();
  opened = 0;
  closed = 0;
  /** Gates opens, so that concurrent first uses overlap. */
  gate: Promise<void> = Promise.resolve();

  latest(location: string, incarnation: string | null = 'inc'): LatestCommitted {
    const d = this.datasets.get(location);
    if (!d) throw new Error(`no dataset at ${location}`);
    return { version: d.version, manifestETag: `${d.generation}-${d.version}`, manifestSize: 1000, incarnation };
  }

  async open(location: string): Promise<FakeHandle> {
    await this.gate;
    const d = this.datasets.get(location);
    if (!d) throw new Error(`no dataset at ${location}`);
    this.opened++;
    return new FakeHandle(this, location, d);
  }
}

class FakeHandle implements KeptHandle {
  closed = false;
  version_: number;
  /** Checked out at a version: as Lance, it then refuses writes. */
  pinned = false;
  constructor(
    private readonly store: FakeStore,
    private readonly location: string,
    private dataset: Dataset,
  ) {
    this.version_ = dataset.version;
  }
  /** What a read through this handle sees. */
  read(): string {
    if (this.closed) throw new Error('read through a closed handle');
    return `${this.dataset.generation}@${this.version_}`;
  }
  async version(): Promise<number> {
    return this.version_;
  }
  async checkout(version: number): Promise<void> {
    const d = this.store.datasets.get(this.location);
    if (!d || d.version < version) throw new Error(`no version ${version}`);
    if (version < this.version_) throw new Error('a kept handle moved backwards');
    this.dataset = d;
    this.version_ = version;
    this.pinned = true;
  }
  /** Commits the next version of the dataset through this handle, as Lance does (rebased onto the latest). */
  async write(): Promise<number> {
    if (this.closed) throw new Error('write through a closed handle');
    if (this.pinned) throw new Error('table cannot be modified when a specific version is checked out');
    const d = this.store.datasets.get(this.location);
    if (!d || d.generation !== this.dataset.generation) throw new Error('the dataset is gone');
    d.version++;
    this.version_ = d.version;
    return d.version;
  }
  close(): void {
    if (!this.closed) this.store.closed++;
    this.closed = true;
  }
}

const badHandle = (e: unknown) => e instanceof Error && e.message === 'bad';

function setup(limits = { maxEntries: 8, maxBytes: 1 << 30 }) {
  const store = new FakeStore();
  const cache = new HandleCache<FakeHandle>(limits, badHandle);
  const read = (location: string, incarnation: string | null = 'inc') =>
    cache.use(
      location,
      store.latest(location, incarnation),
      () => store.open(location),
      async (h) => h.read(),
    );
  /** A write on the kept handle as TableAccess.write tries it first: undefined when the cache declines. */
  const write = (location: string, during: () => Promise<void> = async () => {}) =>
    cache.useToWrite(
      location,
      store.latest(location),
      () => true,
      async (h) => {
        await during();
        return h.write();
      },
    );
  return { store, cache, read, write };
}

describe('kept dataset handles', () => {
  it('serves the latest version after a write behind its back, reloading the kept handle', async () => {
    const { store, cache, read } = setup();
    store.datasets.set('a', { version: 1, generation: 1 });
    expect(await read('a')).toBe('1@1');
    store.datasets.set('a', { version: 2, generation: 1 });
    expect(await read('a')).toBe('1@2');
    expect(cache.stats()).toMatchObject({ opens: 1, reloads: 1, hits: 1 });
  });

  it('brings a kept handle forward to the version each request checked, never backwards, one checkout at a time', async () => {
    const { store, cache } = setup();
    store.datasets.set('a', { version: 1, generation: 1 });
    const read = (latest: LatestCommitted) =>
      cache.use(
        'a',
        latest,
        () => store.open('a'),
        async (h) => h.read(),
      );
    await read(store.latest('a'));
    store.datasets.set('a', { version: 2, generation: 1 });
    const at2 = store.latest('a');
    store.datasets.set('a', { version: 3, generation: 1 });
    const at3 = store.latest('a');
    // Requests that looked up the latest version at different moments, served concurrently.
    const seen = await Promise.all([read(at3), read(at2), read(at3), read(at2)]);
    for (const s of seen) expect(['1@2', '1@3']).toContain(s);
    expect(seen[0]).toBe('1@3');
    expect(await read(at2)).toBe('1@3');
    expect(cache.stats()).toMatchObject({ opens: 1 });
  });

  it('never serves a re-created table from the old handle: another incarnation, or (without one) another manifest at the same version', async () => {
    const { store, cache, read } = setup();
    store.datasets.set('a', { version: 3, generation: 1 });
    expect(await read('a', 'first')).toBe('1@3');
    // Re-created by another replica with a new record, and already at a higher version.
    store.datasets.set('a', { version: 5, generation: 2 });
    expect(await read('a', 'second')).toBe('2@5');
    expect(store.opened).toBe(2);
    // A table without a record, re-created at the very same version: the manifest ETag differs.
    store.datasets.set('b', { version: 1, generation: 1 });
    expect(await read('b', null)).toBe('1@1');
    store.datasets.set('b', { version: 1, generation: 2 });
    expect(await read('b', null)).toBe('2@1');
    // ... and re-created with fewer versions: the kept handle is ahead of the store.
    store.datasets.set('b', { version: 4, generation: 2 });
    expect(await read('b', null)).toBe('2@4');
    store.datasets.set('b', { version: 2, generation: 3 });
    expect(await read('b', null)).toBe('3@2');
    expect(cache.stats().entries).toBe(2);
    expect(store.closed).toBe(store.opened - 2);
  });

  it('opens a location once for concurrent first uses', async () => {
    const { store, cache, read } = setup();
    store.datasets.set('a', { version: 1, generation: 1 });
    let release = () => {};
    store.gate = new Promise((resolve) => {
      release = resolve;
    });
    const reads = Array.from({ length: 8 }, () => read('a'));
    release();
    expect(await Promise.all(reads)).toEqual(Array(8).fill('1@1'));
    expect(store.opened).toBe(1);
    expect(cache.stats().entries).toBe(1);
  });

  it('keeps at most maxEntries handles, least recently used evicted first, and closes a handle in use only when its use ends', async () => {
    const { store, cache, read } = setup({ maxEntries: 2, maxBytes: 1 << 30 });
    for (const l of ['a', 'b', 'c']) store.datasets.set(l, { version: 1, generation: 1 });
    await read('a');
    await read('b');
    await read('a'); // a is now the most recently used
    let inUse: FakeHandle | undefined;
    let finish = () => {};
    const long = cache.use(
      'b',
      store.latest('b'),
      () => store.open('b'),
      async (h) => {
        inUse = h;
        await new Promise<void>((resolve) => {
          finish = resolve;
        });
        return h.read();
      },
    );
    await read('c'); // evicts a: b was used more recently
    expect(cache.stats().entries).toBe(2);
    await read('a'); // evicts b, which is still in use
    expect(inUse?.closed).toBe(false);
    finish();
    expect(await long).toBe('1@1');
    expect(inUse?.closed).toBe(true);
    expect(cache.stats().entries).toBe(2);
    expect(store.opened).toBe(4); // a, b, c, a again
  });

  it('keeps the charged bytes under maxBytes', async () => {
    const perHandle = 1000 + HANDLE_OVERHEAD_BYTES;
    const { store, cache, read } = setup({ maxEntries: 100, maxBytes: 3 * perHandle });
    for (let i = 0; i < 10; i++) {
      store.datasets.set(`t${i}`, { version: 1, generation: 1 });
      await read(`t${i}`);
      expect(cache.stats().bytes).toBeLessThanOrEqual(3 * perHandle);
    }
    expect(cache.stats()).toMatchObject({ entries: 3, bytes: 3 * perHandle });
    expect(store.closed).toBe(7);
  });

  it('forgets a location (drop): the kept handle closes, and an open in flight is served but not kept', async () => {
    const { store, cache, read } = setup();
    store.datasets.set('a', { version: 1, generation: 1 });
    await read('a');
    cache.forget('a');
    expect(cache.stats().entries).toBe(0);
    expect(store.closed).toBe(1);
    let release = () => {};
    store.gate = new Promise((resolve) => {
      release = resolve;
    });
    const inFlight = read('a');
    await Promise.resolve();
    cache.forget('a');
    release();
    expect(await inFlight).toBe('1@1');
    expect(cache.stats().entries).toBe(0);
    expect(store.closed).toBe(2);
  });

  it('evicts a handle whose use failed in a way that suggests it is bad, not one whose request was wrong', async () => {
    const { store, cache } = setup();
    store.datasets.set('a', { version: 1, generation: 1 });
    const use = (fail: Error) =>
      cache.use(
        'a',
        store.latest('a'),
        () => store.open('a'),
        async () => {
          throw fail;
        },
      );
    await expect(use(new Error('bad input'))).rejects.toThrow();
    expect(cache.stats().entries).toBe(1);
    await expect(use(new Error('bad'))).rejects.toThrow();
    expect(cache.stats().entries).toBe(0);
    expect(store.closed).toBe(1);
  });

  it('runs a write on the kept handle when it is current and was never checked out; the next read neither opens nor reloads', async () => {
    const { store, cache, read, write } = setup();
    store.datasets.set('a', { version: 1, generation: 1 });
    expect(await write('a')).toBeUndefined(); // nothing kept
    await read('a');
    expect(await write('a')).toEqual({ value: 2 });
    expect(await write('a')).toEqual({ value: 3 });
    expect(await read('a')).toBe('1@3');
    expect(cache.stats()).toMatchObject({ opens: 1, reloads: 0 });
    // Behind the store (another replica wrote): declined, the caller writes on a handle of its own.
    store.datasets.set('a', { version: 4, generation: 1 });
    expect(await write('a')).toBeUndefined();
    // Reloaded by a read, it is checked out at a version: read through only.
    expect(await read('a')).toBe('1@4');
    expect(await write('a')).toBeUndefined();
    // The caller's own handle, current after its write, is kept and written through again.
    const writer = await store.open('a');
    cache.adopt('a', 'inc', writer, await writer.write(), 1000);
    expect(await write('a')).toEqual({ value: 6 });
    // Another incarnation, or a handle the caller does not accept: declined.
    expect(
      await cache.useToWrite(
        'a',
        store.latest('a', 'other'),
        () => true,
        (h) => h.write(),
      ),
    ).toBeUndefined();
    expect(
      await cache.useToWrite(
        'a',
        store.latest('a'),
        () => false,
        (h) => h.write(),
      ),
    ).toBeUndefined();
    expect(store.opened).toBe(2);
  });

  it("takes a write's version from its result when told how, without asking the handle; a version behind the handle's only costs a reload", async () => {
    const { store, cache, read } = setup();
    store.datasets.set('a', { version: 1, generation: 1 });
    await read('a');
    const kept = (await cache.withKeptAsIs('a', async (h) => h)) as { value: FakeHandle };
    let asked = 0;
    const version = kept.value.version.bind(kept.value);
    kept.value.version = () => {
      asked++;
      return version();
    };
    const written = await cache.useToWrite(
      'a',
      store.latest('a'),
      () => true,
      (h) => h.write(),
      (v) => v,
    );
    expect(written).toEqual({ value: 2 });
    expect(asked).toBe(0);
    // Current at the version the write named: the next read neither opens nor reloads, the next write runs on it.
    expect(await read('a')).toBe('1@2');
    expect(cache.stats()).toMatchObject({ opens: 1, reloads: 0 });
    // A result that names less than the handle reached (a concurrent write took it further) is safe: the next read reloads it to what the store says.
    expect(
      await cache.useToWrite(
        'a',
        store.latest('a'),
        () => true,
        (h) => h.write(),
        () => 2,
      ),
    ).toEqual({ value: 3 });
    expect(await read('a')).toBe('1@3');
    expect(cache.stats()).toMatchObject({ opens: 1, reloads: 1 });
  });

  it('never reloads a handle under its writer: a read that finds it behind meanwhile opens afresh', async () => {
    const { store, cache, read, write } = setup();
    store.datasets.set('a', { version: 1, generation: 1 });
    await read('a');
    let resume = () => {};
    let started = () => {};
    const writing = new Promise<void>((resolve) => {
      started = resolve;
    });
    const written = write('a', async () => {
      started();
      await new Promise<void>((resolve) => {
        resume = resolve;
      });
    });
    await writing;
    // Another replica commits version 2; a read that checked it comes while the write runs.
    store.datasets.set('a', { version: 2, generation: 1 });
    expect(await read('a')).toBe('1@2');
    expect(store.opened).toBe(2);
    resume();
    // The write went on on its handle, which was not checked out under it.
    expect(await written).toEqual({ value: 3 });
    expect(await read('a')).toBe('1@3');
    expect(cache.stats().entries).toBe(1);
  });

  it("adopts a writer's handle unless the kept one is as new, and reads then need no reload", async () => {
    const { store, cache, read } = setup();
    store.datasets.set('a', { version: 1, generation: 1 });
    await read('a');
    store.datasets.set('a', { version: 2, generation: 1 });
    const writer = await store.open('a');
    cache.adopt('a', 'inc', writer, 2, 1000);
    expect(store.closed).toBe(1); // the old kept handle
    expect(await read('a')).toBe('1@2');
    expect(cache.stats()).toMatchObject({ reloads: 0, entries: 1 });
    const older = await store.open('a');
    older.version_ = 1;
    cache.adopt('a', 'inc', older, 1, 1000);
    expect(older.closed).toBe(true);
  });
});
