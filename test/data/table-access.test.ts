import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CommitCoordinator, DatasetLocation } from '../../src/engine/dataset-location.js';
import { TableAccess } from '../../src/engine/lancedb/table-access.js';

// The names the engine's private resolver gives locations (src/engine/lancedb/table-access.ts):
// one name per location and options while anyone uses it, so that Lance reuses one object store
// for them; a name of its own per operation for a location with a coordinator.

const noCommits: CommitCoordinator = {
  latest: async () => null,
  describe: async () => null,
  list: async () => [],
  create: async () => {
    throw new Error('not in this test');
  },
};

describe('engine resolver names', () => {
  let access: TableAccess;
  beforeAll(async () => {
    access = await TableAccess.start();
  });
  afterAll(async () => {
    await access?.close();
  });

  const at = (location: string, storageOptions: Record<string, string> = {}): DatasetLocation => ({ location, storageOptions });
  const describeStatus = async (resolverUri: string, handle: string) =>
    (await fetch(`${resolverUri}/v1/table/${handle}/describe`, { method: 'POST', body: '{}' })).status;

  /** Holds `where` registered until the returned release is called; resolves with its name once registered. */
  function hold(where: DatasetLocation): { name: Promise<{ resolverUri: string; handle: string }>; release: () => Promise<void> } {
    let release = () => {};
    let named: (n: { resolverUri: string; handle: string }) => void = () => {};
    const name = new Promise<{ resolverUri: string; handle: string }>((resolve) => (named = resolve));
    const done = access.withResolvedHandle(where, (resolved) => {
      named(resolved);
      return new Promise<void>((resolve) => (release = resolve));
    });
    return {
      name,
      release: async () => {
        release();
        return done;
      },
    };
  }

  it('names a location the same while it is in use, and forgets it once the last user is done', async () => {
    const first = hold(at('/tmp/a.lance', { b: '2', a: '1' }));
    const second = hold(at('/tmp/a.lance', { a: '1', b: '2' }));
    const [one, two] = await Promise.all([first.name, second.name]);
    expect(two.handle).toBe(one.handle);
    expect(await describeStatus(one.resolverUri, one.handle)).toBe(200);
    await first.release();
    // The other operation still uses it.
    expect(await describeStatus(one.resolverUri, one.handle)).toBe(200);
    await second.release();
    expect(await describeStatus(one.resolverUri, one.handle)).toBe(404);
  });

  it('names other options, and every operation on a location with a coordinator, apart', async () => {
    const plain = hold(at('/tmp/b.lance', { a: '1' }));
    const other = hold(at('/tmp/b.lance', { a: '2' }));
    const managed = [hold({ ...at('/tmp/b.lance', { a: '1' }), coordinator: noCommits }), hold({ ...at('/tmp/b.lance', { a: '1' }), coordinator: noCommits })];
    const names = (await Promise.all([plain.name, other.name, ...managed.map((m) => m.name)])).map((n) => n.handle);
    expect(new Set(names).size).toBe(4);
    await Promise.all([plain, other, ...managed].map((h) => h.release()));
  });
});
