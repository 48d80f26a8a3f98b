import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../src/model/errors.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersions } from '../../src/service/versions/dataset-versions.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import type { ObjectStore } from '../../src/store/object-store.js';
import { catalogRootKinds, useCatalogRoot } from '../support/local-catalog.js';
import { manifestBytes } from '../support/manifests.js';
import { storeDouble } from '../support/store-double.js';

// A version's sidecar is written while its manifest is, but placed only once the manifest's
// create-if-absent has succeeded (writeManifest in src/service/versions/commit-steps.ts): a
// sidecar is only ever found beside the manifest its writer committed. These tests try to break
// that with a writer that wins the manifest first, a failing manifest write, and a look at the
// store while the manifest's write is held back. A request that names its naming scheme writes
// both before it holds the version's slot (SingleCommits.commit), placing them only if its
// checks pass: two such writers of one version, and a version that is not the next, try that.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };
const table = new TableVersions({ store: null as unknown as ObjectStore, key: 't.lance/', owned: true });
const FINAL_2 = table.finalKey(2, 'V2');
const SIDECAR_2 = table.sidecarKey(2);

describe.each(catalogRootKinds)('the sidecar of a version follows its manifest (%s)', (kind) => {
  const root = useCatalogRoot(kind);

  /** The services over `store`, a table t at version 1, and version 2's manifest staged. */
  async function tableAtVersion1(store: ObjectStore): Promise<{ versions: TableVersionService; staged: string }> {
    const deps = root.deps(store);
    const versions = new TableVersionService(deps, new TransactionLog(store), { leaseMs: 30_000 });
    const tables = new TableService(deps, (...a) => versions.coordinatorFor(...a));
    await tables.declare(ctx, ['t'], {});
    await root.store.put('t.lance/_versions/1.manifest-a', manifestBytes(1));
    await versions.create(ctx, ['t'], { version: 1, manifest_path: '_versions/1.manifest-a' });
    await root.store.put('t.lance/_versions/2.manifest-b', manifestBytes(2));
    return { versions, staged: '_versions/2.manifest-b' };
  }

  it('a writer that creates the manifest first (a Lance writer outside the service) keeps it, and gets no sidecar of the loser', async () => {
    const theirs = Buffer.concat([manifestBytes(2), Buffer.from('theirs')]);
    const store = storeDouble(root.store, {
      put: async (key, body, condition, options) => {
        // The other writer lands between the loser's look at the latest version and its create.
        if (key === FINAL_2) await root.store.put(FINAL_2, theirs, { ifNoneMatch: '*' });
        return root.store.put(key, body, condition, options);
      },
    });
    const { versions, staged } = await tableAtVersion1(store);
    await expect(versions.create(ctx, ['t'], { version: 2, manifest_path: staged, e_tag: 'loser', metadata: { by: 'loser' } })).rejects.toMatchObject({
      code: ErrorCode.ConcurrentModification,
    });
    expect((await root.store.get(FINAL_2))?.body.equals(theirs)).toBe(true);
    expect(await root.store.head(SIDECAR_2)).toBeNull();
    const described = (await versions.describe(ctx, ['t'], 2)).version;
    expect(described.e_tag).not.toBe('loser');
    expect(described.metadata).toEqual({});
  });

  it('a manifest write that fails places no sidecar, and a retry then commits both', async () => {
    let failing = true;
    const store = storeDouble(root.store, {
      put: async (key, body, condition, options) => {
        if (key === FINAL_2 && failing) throw new Error('the disk went away');
        return root.store.put(key, body, condition, options);
      },
    });
    const { versions, staged } = await tableAtVersion1(store);
    const sidecarsBefore = (await root.store.list('t.lance/_catalog/versions/')).objects.map((o) => o.key);
    await expect(versions.create(ctx, ['t'], { version: 2, manifest_path: staged, e_tag: 'mine' })).rejects.toThrow('the disk went away');
    expect(await root.store.head(FINAL_2)).toBeNull();
    expect(await root.store.head(SIDECAR_2)).toBeNull();
    expect((await root.store.list('t.lance/_catalog/versions/')).objects.map((o) => o.key)).toEqual(sidecarsBefore);
    failing = false;
    expect((await versions.create(ctx, ['t'], { version: 2, manifest_path: staged, e_tag: 'mine' })).version.e_tag).toBe('mine');
    expect((await versions.describe(ctx, ['t'], 2)).version.e_tag).toBe('mine');
  });

  it('while the manifest is being written the sidecar is not placed; once the commit returns both are', async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    // Wrapped: a promise resolved with a promise would wait for it.
    let sidecarPut = (_put: { placed: Promise<unknown> }) => {};
    const sidecarIssued = new Promise<{ placed: Promise<unknown> }>((resolve) => (sidecarPut = resolve));
    const store = storeDouble(root.store, {
      put: async (key, body, condition, options) => {
        if (key === FINAL_2) await held;
        const placed = root.store.put(key, body, condition, options);
        if (key === SIDECAR_2) sidecarPut({ placed });
        return placed;
      },
    });
    const { versions, staged } = await tableAtVersion1(store);
    const commit = versions.create(ctx, ['t'], { version: 2, manifest_path: staged, e_tag: 'mine' });
    let sidecarPlaced = false;
    void (await sidecarIssued).placed.then(() => (sidecarPlaced = true));
    // A durable write issued after the sidecar's: the sidecar's own write would be done by its end.
    await root.store.put('t.lance/_catalog/elsewhere.json', '{}');
    expect(sidecarPlaced).toBe(false);
    expect(await root.store.head(SIDECAR_2)).toBeNull();
    expect(await root.store.head(FINAL_2)).toBeNull();
    release();
    expect((await commit).version.e_tag).toBe('mine');
    expect(sidecarPlaced).toBe(true);
    expect(await root.store.head(FINAL_2)).not.toBeNull();
    expect(await root.store.head(SIDECAR_2)).not.toBeNull();
  });

  /** Temporary files left in the table's version directories (a local disk only; never listed). */
  const leftovers = (): string[] =>
    kind === 'local'
      ? ['t.lance/_versions', 't.lance/_catalog/versions'].flatMap((d) =>
          (fs.existsSync(root.store.location(d)) ? fs.readdirSync(root.store.location(d)) : []).filter((n) => n.includes('~tmp~')),
        )
      : [];

  it('of two writers of one version that both write before holding the slot, one commits and the other places nothing', async () => {
    const { versions } = await tableAtVersion1(root.store);
    const staged2 = (await root.store.get('t.lance/_versions/2.manifest-b'))?.body;
    const other = manifestBytes(2, 'other');
    await root.store.put('t.lance/_versions/2.manifest-c', other);
    const results = await Promise.allSettled([
      versions.create(ctx, ['t'], { version: 2, manifest_path: '_versions/2.manifest-b', e_tag: 'b', naming_scheme: 'V2' }),
      versions.create(ctx, ['t'], { version: 2, manifest_path: '_versions/2.manifest-c', e_tag: 'c', naming_scheme: 'V2' }),
    ]);
    const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
    expect(won).toHaveLength(1);
    const lost = results.find((r) => r.status === 'rejected');
    expect(lost?.status === 'rejected' ? lost.reason : null).toMatchObject({ code: ErrorCode.ConcurrentModification });
    const winner = won[0] === 0 ? { bytes: staged2 ?? Buffer.alloc(0), e_tag: 'b' } : { bytes: other, e_tag: 'c' };
    expect((await root.store.get(FINAL_2))?.body.equals(winner.bytes)).toBe(true);
    expect((await versions.describe(ctx, ['t'], 2)).version.e_tag).toBe(winner.e_tag);
    expect(leftovers()).toEqual([]);
  });

  it('a version that is not the next places nothing it wrote before holding the slot', async () => {
    const { versions } = await tableAtVersion1(root.store);
    await root.store.put('t.lance/_versions/3.manifest-d', manifestBytes(3));
    await expect(versions.create(ctx, ['t'], { version: 3, manifest_path: '_versions/3.manifest-d', e_tag: 'd', naming_scheme: 'V2' })).rejects.toMatchObject({
      code: ErrorCode.ConcurrentModification,
    });
    expect(await root.store.head(table.finalKey(3, 'V2'))).toBeNull();
    expect(await root.store.head(table.sidecarKey(3))).toBeNull();
    expect(JSON.parse((await root.store.get('t.lance/_versions/latest_version_hint.json'))?.body.toString() ?? '{}')).toEqual(
      kind === 'local' ? { version: 1 } : {},
    );
    expect(leftovers()).toEqual([]);
    // And the next version, asked for the same way, commits.
    expect((await versions.create(ctx, ['t'], { version: 2, manifest_path: '_versions/2.manifest-b', e_tag: 'b', naming_scheme: 'V2' })).version.e_tag).toBe(
      'b',
    );
    expect(leftovers()).toEqual([]);
  });
});

// What Lance's clients send with a create (the e_tag and size their store reported of the staged
// file, no metadata) says nothing the manifest's own object does not, once a local disk has linked
// the staged file into place: such a version has no sidecar (needsNoSidecar in commit-steps.ts), and
// every answer about it reads the object. These tests check that the answers still agree and that
// a staged file changed behind the service's back still commits what was validated.
describe.each(catalogRootKinds)('a version with nothing to keep beside its manifest (%s)', (kind) => {
  const root = useCatalogRoot(kind);

  async function services(store: ObjectStore = root.store): Promise<TableVersionService> {
    const deps = root.deps(store);
    const versions = new TableVersionService(deps, new TransactionLog(store), { leaseMs: 30_000 });
    await new TableService(deps, (...a) => versions.coordinatorFor(...a)).declare(ctx, ['t'], {});
    return versions;
  }

  /** Stages version `v` as Lance does (not fsynced) and returns what a Lance client would send. */
  async function stageAsLance(v: number, name: string): Promise<{ manifest_path: string; e_tag: string; manifest_size: number; naming_scheme: 'V2' }> {
    const info = await root.store.put(`t.lance/_versions/${v}.manifest-${name}`, manifestBytes(v), undefined, { durable: false });
    return { manifest_path: `_versions/${v}.manifest-${name}`, e_tag: info.etag, manifest_size: info.size, naming_scheme: 'V2' };
  }

  it("commits the staged file itself on a local disk (no sidecar); every answer agrees with the create's", async () => {
    const versions = await services();
    const request = await stageAsLance(1, 'a');
    const stagedIno = kind === 'local' ? fs.statSync(root.store.location(`t.lance/${request.manifest_path}`)).ino : 0;
    const created = (await versions.create(ctx, ['t'], { version: 1, ...request })).version;
    expect(created.e_tag).toBe(request.e_tag);
    expect(created.manifest_size).toBe(request.manifest_size);
    // Deleted after the answer (after-answer.ts).
    await versions.settled();
    expect(await root.store.head(`t.lance/${request.manifest_path}`)).toBeNull();
    expect((await root.store.head(table.sidecarKey(1))) === null).toBe(kind === 'local');
    if (kind === 'local') expect(fs.statSync(root.store.location(table.finalKey(1, 'V2'))).ino).toBe(stagedIno);
    const { version: described } = await versions.describe(ctx, ['t'], 1);
    const [listed] = (await versions.list(ctx, ['t'], {})).versions;
    for (const answer of [described, listed]) {
      expect(answer).toMatchObject({ version: 1, e_tag: created.e_tag, manifest_size: created.manifest_size, timestamp_millis: created.timestamp_millis });
    }
  });

  it('a retry of a committed create whose staged file is gone is recognised by its e_tag; another e_tag is a 409', async () => {
    const versions = await services();
    const request = await stageAsLance(1, 'a');
    const created = (await versions.create(ctx, ['t'], { version: 1, ...request })).version;
    expect((await versions.create(ctx, ['t'], { version: 1, ...request })).version).toMatchObject({ version: 1, e_tag: created.e_tag });
    // The e_tag alone recognises it (no sidecar holds it; the file's own etag is the request's).
    const { manifest_size: _size, ...withoutSize } = request;
    expect((await versions.create(ctx, ['t'], { version: 1, ...withoutSize })).version).toMatchObject({ version: 1, e_tag: created.e_tag });
    await expect(versions.create(ctx, ['t'], { version: 1, ...request, e_tag: '"someone-else"', manifest_size: 1 })).rejects.toMatchObject({
      code: ErrorCode.ConcurrentModification,
    }); // Another e_tag is another writer's manifest, even of the same size.
    await expect(versions.create(ctx, ['t'], { version: 1, ...request, e_tag: '"someone-else"' })).rejects.toMatchObject({
      code: ErrorCode.ConcurrentModification,
    });
  });

  it('a staged file replaced after the service read it: the bytes validated are committed, and the client keeps its e_tag', async () => {
    const request = await stageAsLance(1, 'a');
    const validated = (await root.store.get(`t.lance/${request.manifest_path}`))?.body;
    const store = storeDouble(root.store, {
      put: async (key, body, condition, options) => {
        if (key === table.finalKey(1, 'V2')) await root.store.put(`t.lance/${request.manifest_path}`, manifestBytes(1, 'swapped'));
        return root.store.put(key, body, condition, options);
      },
    });
    const versions = await services(store);
    expect((await versions.create(ctx, ['t'], { version: 1, ...request })).version.e_tag).toBe(request.e_tag);
    expect((await root.store.get(table.finalKey(1, 'V2')))?.body.equals(validated ?? Buffer.alloc(0))).toBe(true);
    expect(await root.store.head(table.sidecarKey(1))).not.toBeNull();
    expect((await versions.describe(ctx, ['t'], 1)).version.e_tag).toBe(request.e_tag);
  });

  it('of two such writers of one version, one commits and the other gets a 409, its link discarded', async () => {
    const versions = await services();
    const [a, b] = [await stageAsLance(1, 'a'), await stageAsLance(1, 'b')];
    const results = await Promise.allSettled([versions.create(ctx, ['t'], { version: 1, ...a }), versions.create(ctx, ['t'], { version: 1, ...b })]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const lost = results.find((r) => r.status === 'rejected');
    expect(lost?.status === 'rejected' ? lost.reason : null).toMatchObject({ code: ErrorCode.ConcurrentModification });
    const winner = results[0]?.status === 'fulfilled' ? a : b;
    expect((await versions.describe(ctx, ['t'], 1)).version.e_tag).toBe(winner.e_tag);
    if (kind === 'local') expect(fs.readdirSync(root.store.location('t.lance/_versions')).filter((n) => n.includes('~tmp~'))).toEqual([]);
  });

  it('metadata keeps a sidecar', async () => {
    const versions = await services();
    const request = await stageAsLance(1, 'a');
    await versions.create(ctx, ['t'], { version: 1, ...request, metadata: { by: 'me' } });
    expect(await root.store.head(table.sidecarKey(1))).not.toBeNull();
    expect((await versions.describe(ctx, ['t'], 1)).version).toMatchObject({ e_tag: request.e_tag, metadata: { by: 'me' } });
  });
});
