import { describe, expect, it } from 'vitest';
import { ErrorCode, NamespaceError } from '../../src/model/errors.js';
import {
  allBranchNames,
  branchDir,
  branchNameProblem,
  branchRefKey,
  branchTreeDir,
  listBranchRefs,
  normalizeBranch,
  requireBranchName,
  requireDeletableBranchName,
  resolveBranch,
  treeClashProblem,
} from '../../src/service/branches/branch-refs.js';
import type { StoreDir } from '../../src/service/catalog/locations.js';
import { MemoryObjectStore } from '../../src/store/memory-store.js';

// A ref exactly as pylance 14's ds.create_branch("dev") writes it (probed).
const pylanceRef = (parentVersion: number, parentBranch: string | null = null) =>
  JSON.stringify(
    {
      parentBranch,
      identifier: { version_mapping: [[parentVersion, '762478eb6a64463ea5be7db2b0300a10']] },
      parentVersion,
      createAt: 1795795132,
      manifestSize: 423,
      metadata: {},
    },
    null,
    2,
  );

const dataset = (): StoreDir => ({ store: new MemoryObjectStore(), key: 'ns/t.lance/', owned: true });

describe('branch names, as Lance checks them', () => {
  it('accepts the names lance-table accepts', () => {
    for (const name of [
      'feature/login',
      'bugfix/issue-123',
      'release/v1.2.3',
      'user/someone/my-feature',
      'normal',
      'with-dash',
      'with_underscore',
      'with.dot',
      '.x/x.',
      'é',
    ])
      expect(branchNameProblem(name), name).toBeNull();
  });
  it('refuses the names lance-table refuses, and main', () => {
    for (const name of [
      '',
      '/start-with-slash',
      'end-with-slash/',
      'have//consecutive-slash',
      'have..dot-dot',
      'have\\backslash',
      'name.lock',
      'bad@character',
      'bad segment',
      'main',
      'a%2Fb',
      '.',
      'a/./b',
      'dev/.',
      'x'.repeat(201),
      'é'.repeat(34),
    ])
      expect(branchNameProblem(name), name).not.toBeNull();
  });
  it('refuses a new name whose later segment names a directory of a branch tree, and still reads one', () => {
    for (const name of ['x/data', 'x/_versions', 'x/_catalog', 'a/b/tree', 'x/_new_dir/y'])
      expect([treeClashProblem(name), normalizeBranch(name)], name).toEqual([expect.stringContaining('segment'), name]);
    for (const name of ['data', '_x', 'tree/a', 'x/database', 'x/my_data']) expect(treeClashProblem(name), name).toBeNull();
    expect(treeClashProblem('a/b/data')).toContain('"a/b"');
    expect(() => requireBranchName('x/data')).toThrow(/not a valid branch name/);
    expect(() => requireDeletableBranchName('x/data')).toThrow(expect.objectContaining({ code: ErrorCode.InvalidTableState }));
    expect(() => requireDeletableBranchName('main')).toThrow(expect.objectContaining({ code: ErrorCode.InvalidInput }));
  });
  it('reads absent, null, "" and "main" as main, and refuses a bad name with 400 code 13 naming the field', () => {
    for (const branch of [undefined, null, '', 'main']) expect(normalizeBranch(branch)).toBeNull();
    expect(normalizeBranch('feature/x')).toBe('feature/x');
    const refused = (() => {
      try {
        normalizeBranch('a..b', 'from_branch');
      } catch (e) {
        return e;
      }
    })();
    expect(refused).toBeInstanceOf(NamespaceError);
    expect((refused as NamespaceError).code).toBe(ErrorCode.InvalidInput);
    expect((refused as NamespaceError).message).toContain('from_branch');
  });
});

describe('branch refs in the store', () => {
  it('names the ref and the tree as pylance lays them out', () => {
    const dir = dataset();
    expect(branchRefKey(dir, 'feature/login')).toBe('ns/t.lance/_refs/branches/feature%2Flogin.json');
    expect(branchRefKey(dir, 'é')).toBe('ns/t.lance/_refs/branches/%C3%A9.json');
    expect(branchTreeDir(dir, 'feature/login').key).toBe('ns/t.lance/tree/feature/login/');
    expect(branchDir(dir, null)).toBe(dir);
  });

  it('resolves main without a store call, a branch with one GET, a missing one as 404 code 22', async () => {
    const dir = dataset();
    await dir.store.put(branchRefKey(dir, 'dev'), pylanceRef(2));
    await dir.store.put(branchRefKey(dir, 'dev/sub'), pylanceRef(3, 'dev'));
    expect(await resolveBranch(dir, null, 'ns.t')).toBeNull();
    const dev = await resolveBranch(dir, 'dev', 'ns.t');
    expect(dev?.contents).toEqual({ parentVersion: 2, createAt: 1795795132, manifestSize: 423, metadata: {} });
    expect((await resolveBranch(dir, 'dev/sub', 'ns.t'))?.contents.parentBranch).toBe('dev');
    await expect(resolveBranch(dir, 'nope', 'ns.t')).rejects.toMatchObject({ code: ErrorCode.TableBranchNotFound });
  });

  it('lists branches a page at a time, skipping what is not a ref', async () => {
    const dir = dataset();
    const names = ['a', 'b/c', 'b', 'é', 'z'];
    for (const name of names) await dir.store.put(branchRefKey(dir, name), pylanceRef(1));
    await dir.store.put('ns/t.lance/_refs/branches/not-json.txt', 'x');
    await dir.store.put('ns/t.lance/_refs/branches/bad..name.json', pylanceRef(1));
    const seen: string[] = [];
    let afterName: string | undefined;
    for (;;) {
      const page = await listBranchRefs(dir, { afterName, limit: 2 });
      expect(page.branches.length).toBeLessThanOrEqual(2);
      seen.push(...page.branches.map((b) => b.name));
      if (page.lastName === null) break;
      afterName = page.lastName;
    }
    // b%2Fc.json sorts before b.json: '%' is below '.'.
    const inKeyOrder = ['é', 'a', 'b/c', 'b', 'z'];
    expect(seen).toEqual(inKeyOrder);
    expect(await allBranchNames(dir)).toEqual(inKeyOrder);
  });
});
