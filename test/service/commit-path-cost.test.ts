import fs from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import type { ObjectStore } from '../../src/store/object-store.js';
import { localCatalogDeps, useLocalRoot } from '../support/local-catalog.js';
import { manifestBytes } from '../support/manifests.js';
import { storeDouble } from '../support/store-double.js';

// Pins the cost of one create_table_version (the count is written next to the protocol, in
// src/service/versions/single-commit.ts): a change that adds a store call or an fsync to the
// commit path has to change these numbers, and say why.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };

/** `inner` with every call counted by method name. */
function counting(inner: ObjectStore): { store: ObjectStore; calls: string[] } {
  const calls: string[] = [];
  const count = <K extends 'get' | 'head' | 'put' | 'copy' | 'list' | 'delete' | 'deletePrefix'>(name: K) =>
    ((...args: unknown[]) => {
      calls.push(name);
      return (inner[name] as (...a: unknown[]) => unknown).apply(inner, args);
    }) as ObjectStore[K];
  return {
    store: storeDouble(inner, {
      get: count('get'),
      head: count('head'),
      put: count('put'),
      copy: count('copy'),
      list: count('list'),
      delete: count('delete'),
      deletePrefix: count('deletePrefix'),
    }),
    calls,
  };
}

/**
 * Counts fsyncs of files and directories made through node's fs.fsync (what the local store uses),
 * and how many of them the caller waits for one after another: an fsync begun after another had
 * finished comes after it in the chain, fsyncs under way at once share a link of it.
 */
function countFsyncs(): { count: () => number; chain: () => number } {
  const original = fs.fsync;
  let finishedDepth = 0; // the longest chain among the fsyncs finished so far
  let chain = 0;
  const spy = vi.spyOn(fs, 'fsync').mockImplementation(((fd: number, callback: (e: NodeJS.ErrnoException | null) => void) => {
    const depth = finishedDepth + 1;
    chain = Math.max(chain, depth);
    original(fd, (e) => {
      finishedDepth = Math.max(finishedDepth, depth);
      callback(e);
    });
  }) as typeof fs.fsync);
  return { count: () => spy.mock.calls.length, chain: () => chain };
}

describe('the cost of one create_table_version on a local root', () => {
  const root = useLocalRoot('lance-ns-commit-cost-');
  afterEach(() => vi.restoreAllMocks());

  /** `branch`: the commits are on that branch (registered, forked at version 1 of main), else on main. */
  async function commitCost(
    withDataOf: number,
    extra: { naming_scheme?: 'V2' } | 'as Lance' = {},
    branch?: string,
  ): Promise<{ calls: string[]; fsyncs: number; chain: number }> {
    const { store, calls } = counting(root.store);
    const deps = localCatalogDeps(store, root.dir);
    const versions = new TableVersionService(deps, new TransactionLog(store), { leaseMs: 30_000 });
    const tables = new TableService(deps, (...a) => versions.coordinatorFor(...a));
    await tables.declare(ctx, ['t'], {});
    const line = branch === undefined ? '' : `tree/${branch}/`;
    const onLine = branch === undefined ? {} : { branch };
    // The path as Lance's clients send it (object_store's form), relative to the table on main.
    const stage = async (v: number, dir = line) => {
      const staged = `${dir}_versions/${v}.manifest-staged`;
      await root.store.put(`t.lance/${staged}`, manifestBytes(v));
      return dir === '' ? staged : root.store.objectPath(`t.lance/${staged}`);
    };
    if (branch !== undefined) {
      await versions.create(ctx, ['t'], { version: 1, manifest_path: await stage(1, '') });
      await root.store.put(`t.lance/_refs/branches/${branch}.json`, JSON.stringify({ parentVersion: 1, createAt: 1, manifestSize: 1 }));
    }
    // A branch forked at version 1 starts there.
    for (let v = 1; v <= withDataOf; v++) {
      await versions.create(ctx, ['t'], { version: v, manifest_path: await stage(v), ...onLine });
      await versions.settled(); // the hint, if the service places one, in place
      // Lance's clients place the hint themselves after each commit.
      if (extra === 'as Lance') await root.store.put(`t.lance/${line}_versions/latest_version_hint.json`, JSON.stringify({ version: v }));
    }
    const staged = await stage(withDataOf + 1);
    // Lance's clients send what their store reported of the staged file (and name their scheme).
    const info = await root.store.head(`t.lance/${line}_versions/${withDataOf + 1}.manifest-staged`);
    const said =
      extra === 'as Lance'
        ? { e_tag: info?.etag ?? '', manifest_size: info?.size ?? 0, naming_scheme: 'V2' as const }
        : { e_tag: 'e', manifest_size: 10, ...extra };
    calls.length = 0;
    const fsyncs = countFsyncs();
    await versions.create(ctx, ['t'], { version: withDataOf + 1, manifest_path: staged, ...said, ...onLine });
    // Lance's hint and the slot's release end after the answer.
    await versions.settled();
    const result = { calls: [...calls], fsyncs: fsyncs.count(), chain: fsyncs.chain() };
    expect((await versions.describe(ctx, ['t'], withDataOf + 1, branch)).version.e_tag).toBe(said.e_tag);
    return result;
  }

  // The writers below that are not Lance's clients leave the hint to the service, which places it
  // only when the one it found is not the version before: after two commits it names version 1,
  // so the latest version's lookup probes two more versions, and the hint is placed again.
  const hintOneBehind = 'get head head head head'; // the hint (1), its manifest, 2, 4 (none), 3 (none)
  const hintPlaced = 'put delete'; // after the answer: Lance's hint (not fsynced), the slot

  /** The calls of a commit of the next version as Lance asks for it (naming scheme given): `writes`, begun before the slot, are placed only after the checks. */
  const writesBeforeTheSlot = (writes: string, latest: string, afterAnswer: string) =>
    [
      'list get', // the table, resolved once
      'get', // the staged manifest, checked
      writes,
      'put', // the version slot (not fsynced)
      'head head', // the look again at the table, holding the slot: its marker, its record's etag
      latest, // the latest version: hint, its manifest, the next (V2 names only follow V2 ones)
      'delete', // the staged manifest
      afterAnswer,
    ].join(' ');

  it('the next version of a table with versions (its writer leaves the hint to the service): 16 store calls, 4 fsyncs, 3 waited for in turn', async () => {
    const { calls, fsyncs, chain } = await commitCost(2);
    expect(calls.join(' ')).toBe(
      [
        'list get', // the table, resolved once
        'get', // the staged manifest, checked
        'put', // the version slot (not fsynced)
        'head head', // the look again at the table, holding the slot: its marker, its record's etag
        hintOneBehind, // the latest version
        'put put', // manifest and sidecar (fsynced, their files at once; the sidecar placed after the manifest)
        'delete', // the staged manifest
        hintPlaced,
      ].join(' '),
    );
    expect(fsyncs).toBe(4);
    expect(chain).toBe(3);
  });

  it('the next version as Lance asks for it (naming scheme given): the same calls, the writes begun before the slot', async () => {
    const { calls, fsyncs, chain } = await commitCost(2, { naming_scheme: 'V2' });
    // Manifest and sidecar (their files fsynced at once while the checks run).
    expect(calls.join(' ')).toBe(writesBeforeTheSlot('put put', hintOneBehind, hintPlaced));
    expect(fsyncs).toBe(4);
    expect(chain).toBe(3);
  });

  it("the next version as Lance's clients commit it (their e_tag and size of the staged file, their own hint): no sidecar, 12 store calls, 2 fsyncs in turn", async () => {
    const { calls, fsyncs, chain } = await commitCost(2, 'as Lance');
    // The manifest as the staged file (linked, the file fsynced while the checks run); the hint
    // found names the version before, so the client keeps it: only the slot's release after the answer.
    expect(calls.join(' ')).toBe(writesBeforeTheSlot('put', 'get head head', 'delete'));
    expect(fsyncs).toBe(2);
    expect(chain).toBe(2);
  });

  it("the next version of a branch as Lance's clients commit it: main's 12 store calls and two GETs more (the branch's ref, with the staged manifest and again with the latest version), 2 fsyncs in turn", async () => {
    const { calls, fsyncs, chain } = await commitCost(2, 'as Lance', 'dev');
    // The ref is resolved with the staged manifest; holding the slot, the latest version of the
    // branch (its hint, its manifest, the next) and, at once, its ref again (a delete may have
    // removed it: see the branch delete's protocol in table-fences.ts).
    expect(calls.join(' ')).toBe(writesBeforeTheSlot('put', 'get get head head', 'delete').replace('list get get', 'list get get get'));
    expect(fsyncs).toBe(2);
    expect(chain).toBe(2);
  });

  it("reads the staged manifest while the table is resolved (one round trip less on S3), and a missing table's 404 still comes first", async () => {
    const events: string[] = [];
    // The table record's read answers only once the staged manifest's has begun, or (resolved first) never: the commit would hang.
    let stagedBegun: () => void = () => {};
    const begun = new Promise<void>((resolve) => {
      stagedBegun = resolve;
    });
    let armed = false;
    const store = storeDouble(root.store, {
      get: async (key: string) => {
        if (key.includes('manifest-staged')) stagedBegun();
        else if (armed && key === 't.lance/.lance-table.json') await begun;
        events.push(key);
        return root.store.get(key);
      },
    });
    const deps = localCatalogDeps(store, root.dir);
    const versions = new TableVersionService(deps, new TransactionLog(store), { leaseMs: 30_000 });
    await new TableService(deps, (...a) => versions.coordinatorFor(...a)).declare(ctx, ['t'], {});
    await root.store.put('t.lance/_versions/1.manifest-staged', manifestBytes(1));
    armed = true;
    expect((await versions.create(ctx, ['t'], { version: 1, manifest_path: '_versions/1.manifest-staged' })).version.version).toBe(1);
    expect(events.some((k) => k.includes('manifest-staged'))).toBe(true);
    // A table that is not there: its 404, not the staged path's 400.
    await expect(versions.create(ctx, ['missing'], { version: 1, manifest_path: 'not/a/staged/path' })).rejects.toMatchObject({ code: 4 });
    await versions.settled();
  });

  it('the first version of a declared table: 14 store calls, 4 fsyncs, 3 waited for in turn', async () => {
    const { calls, fsyncs, chain } = await commitCost(0);
    // The staged manifest and Lance's reserved marker go before the answer; Lance's hint and the slot's release after it.
    expect(calls.join(' ')).toBe('list get get put head head get list put put delete delete put delete');
    expect(fsyncs).toBe(4);
    expect(chain).toBe(3);
  });
});
