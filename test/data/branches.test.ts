import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { manifestFileName } from '../../src/engine/lance-format/manifest-names.js';
import { DEFAULT_INDEX_PYTHON } from '../../src/engine/pylance/pylance-worker.js';
import { useNamespaceFixture } from '../support/app.js';
import { connectTable, peopleStream } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

describe.each(backends())('branches on $name', (backend) => {
  const { fx, path, post, createTable, engineOptions: options } = useNamespaceFixture(backend);
  let engineOptions: Record<string, string>;
  beforeAll(() => {
    engineOptions = options();
  });

  /** [version, rows] of a branch (main when null) as the engine reads it from the store. */
  async function engineView(location: string, branch: string | null): Promise<[number, number]> {
    const table = await connectTable(location, engineOptions);
    try {
      const on = branch === null ? table : await (await table.branches()).checkout(branch);
      return [await on.version(), await on.countRows()];
    } finally {
      table.close();
    }
  }

  const expectError = (res: { status: number; json: Record<string, unknown> }, status: number, code: number, message?: RegExp) => {
    expect([res.status, res.json.code], JSON.stringify(res.json)).toEqual([status, code]);
    if (message) expect(String(res.json.error)).toMatch(message);
  };

  it('forks from main at its latest by default, from a version, and from another branch; lists them as Lance records them', async () => {
    const location = await createTable('b1', 3);
    expect((await post('b1', 'branches/create', { name: 'dev' })).status).toBe(200);
    expect((await post('b1', 'branches/create', { name: 'old', from_version: 1 })).status).toBe(200);
    expect((await post('b1', 'branches/create', { name: 'dev/sub', from_branch: 'dev', from_version: 3 })).status).toBe(200);
    expect((await post('b1', 'branches/create', { name: 'main-too', from_branch: 'main' })).status).toBe(200);
    expect(await engineView(location, 'dev')).toEqual([3, 3]);
    expect(await engineView(location, 'old')).toEqual([1, 5]);
    expect(await engineView(location, 'dev/sub')).toEqual([3, 3]);
    expect(await engineView(location, null)).toEqual([3, 3]);

    const listed = await post('b1', 'branches/list');
    expect(listed.status).toBe(200);
    const branches = listed.json.branches as Record<string, Record<string, unknown>>;
    expect(Object.keys(branches)).toEqual(['dev%2Fsub', 'dev', 'main-too', 'old'].map(decodeURIComponent));
    expect(branches.dev).toMatchObject({ parentVersion: 3, metadata: {} });
    expect(branches.dev).not.toHaveProperty('parentBranch');
    expect(branches['dev/sub']).toMatchObject({ parentBranch: 'dev', parentVersion: 3 });
    expect(branches.old).toMatchObject({ parentVersion: 1 });
    for (const contents of Object.values(branches)) {
      expect(Number(contents.manifestSize)).toBeGreaterThan(0);
      expect(Math.abs(Number(contents.createAt) - Date.now() / 1000)).toBeLessThan(3600);
    }
    // The engine lists the same branches with the same parents.
    const table = await connectTable(location, engineOptions);
    try {
      const engine = await (await table.branches()).list();
      expect(Object.keys(engine).sort()).toEqual(Object.keys(branches).sort());
      for (const [name, c] of Object.entries(engine))
        expect([c.parentVersion, c.manifestSize]).toEqual([branches[name]?.parentVersion, branches[name]?.manifestSize]);
    } finally {
      table.close();
    }
    expect((await fx.t.call('GET', path('b1', 'branches/list'))).json.branches).toEqual(branches);
  });

  it('refuses a taken name (409 code 23), a missing source branch (404 code 22), a missing version (404 code 11) and names Lance refuses (400 code 13), changing nothing', async () => {
    const location = await createTable('b2', 2);
    expect((await post('b2', 'branches/create', { name: 'dev' })).status).toBe(200);
    const before = (await post('b2', 'branches/list')).json.branches;
    expectError(await post('b2', 'branches/create', { name: 'dev' }), 409, 23, /dev/);
    expectError(await post('b2', 'branches/create', { name: 'dev', from_version: 1 }), 409, 23);
    expectError(await post('b2', 'branches/create', { name: 'x', from_branch: 'nope' }), 404, 22, /nope/);
    expectError(await post('b2', 'branches/create', { name: 'x', from_version: 9 }), 404, 11, /version 9/);
    expectError(await post('b2', 'branches/create', { name: 'x', from_branch: 'dev', from_version: 9 }), 404, 11, /version 9/);
    for (const name of ['main', '', 'a..b', 'a//b', '/a', 'a/', 'x.lock', 'sp ace', 'at@', 'back\\slash'])
      expectError(await post('b2', 'branches/create', { name }), 400, 13, /branch name/);
    for (const name of ['.', 'a/./b', 'dev/.']) {
      expectError(await post('b2', 'branches/create', { name, from_branch: 'dev' }), 400, 13, /segment "\."/);
      expectError(await post('b2', 'count_rows', { branch: name }), 400, 13, /segment "\."/);
      expectError(await post('b2', 'branches/delete', { name }), 400, 13, /segment "\."/);
    }
    expectError(await post('b2', 'branches/create', { name: 'x', from_branch: 'a..b' }), 400, 13, /from_branch/);
    // A name no store can hold as a file name (255 bytes on a local disk; S3 keys end at 1,024).
    for (const name of ['x'.repeat(300), 'é'.repeat(200), `${'seg/'.repeat(300)}x`]) {
      const res = await post('b2', 'branches/create', { name });
      expect([res.status, res.json.code], res.text).toEqual([400, 13]);
      expectError(await post('b2', 'count_rows', { branch: name }), 400, 13);
    }
    expect((await post('b2', 'branches/list')).json.branches).toEqual(before);
    expect(await engineView(location, 'dev')).toEqual([2, 4]);
    expectError(await post('missing', 'branches/create', { name: 'x' }), 404, 4);
    expectError(await post('missing', 'branches/list'), 404, 4);
    expectError(await post('missing', 'branches/list', { limit: 0 }), 404, 4);
  });

  it('on a table without managed versioning a branch exists only by its ref: a commit on a branch without one is 404 code 22 and writes nothing; the name stays forkable', async () => {
    await createTable('b2u', 3);
    const dir = 'ns/b2u.lance/';
    // What a client might stage for a branch it never forked: main's version 1, under the branch's tree.
    const main1 = await fx.root.store.get(`${dir}_versions/${manifestFileName(1, 'V2')}`);
    const stage = async () => {
      const key = `${dir}tree/ghost/_versions/1.manifest-${randomUUID()}`;
      await fx.root.store.put(key, main1?.body ?? Buffer.alloc(0));
      return fx.root.store.objectPath(key);
    };
    const entry = async () => ({ id: ['ns', 'b2u'], version: 1, manifest_path: await stage(), naming_scheme: 'V2', branch: 'ghost' });
    const { id: _, ...single } = await entry();
    expectError(await post('b2u', 'version/create', single), 404, 22, /ghost/);
    expectError(await fx.t.call('POST', '/v1/table/version/batch-create', { entries: [await entry()] }), 404, 22, /ghost/);
    expectError(await fx.t.call('POST', '/v1/table/batch-commit', { operations: [{ create_table_version: await entry() }] }), 404, 22, /ghost/);
    await fx.t.app.settled();
    const tree = (await fx.root.store.list(`${dir}tree/`, {})).objects.map((o) => o.key);
    expect(tree.filter((key) => !/\/_versions\/1\.manifest-[0-9a-f-]+$/.test(key))).toEqual([]);
    expect((await fx.root.store.list(`${dir}_catalog/reservations/`, {})).objects).toEqual([]);
    // The name is free: it forks, once.
    expect((await post('b2u', 'branches/create', { name: 'ghost', from_version: 1 })).status).toBe(200);
    expectError(await post('b2u', 'branches/create', { name: 'ghost' }), 409, 23);
    expect((await post('b2u', 'count_rows', { branch: 'ghost' })).text).toBe('5');
  });

  it("deletes a branch and its tree, keeps one others were forked from (Lance's rule: 409 code 19 naming them), 404 code 22 for a missing one", async () => {
    const location = await createTable('b3', 2);
    expect((await post('b3', 'branches/create', { name: 'parent' })).status).toBe(200);
    expect((await post('b3', 'branches/create', { name: 'child', from_branch: 'parent' })).status).toBe(200);
    const { store } = fx.root;
    const treeKey = `${location.slice(store.location('').length).replace(/^\//, '')}/tree/`;
    expect((await store.list(treeKey)).objects.length).toBeGreaterThan(0);
    expectError(await post('b3', 'branches/delete', { name: 'parent' }), 409, 19, /child/);
    // Lance keeps a branch a tag points into as well.
    expect((await post('b3', 'tags/create', { branch: 'child', tag: 'on-child', version: 2 })).status).toBe(200);
    expectError(await post('b3', 'branches/delete', { name: 'child' }), 409, 19, /on-child/);
    expect((await post('b3', 'tags/delete', { tag: 'on-child' })).status).toBe(200);
    expect(Object.keys((await post('b3', 'branches/list')).json.branches as object).sort()).toEqual(['child', 'parent']);
    expect((await post('b3', 'branches/delete', { name: 'child' })).status).toBe(200);
    expect((await post('b3', 'branches/delete', { name: 'parent' })).status).toBe(200);
    expect((await post('b3', 'branches/list')).json.branches).toEqual({});
    expect((await store.list(treeKey)).objects).toEqual([]);
    expectError(await post('b3', 'branches/delete', { name: 'parent' }), 404, 22, /parent/);
    expectError(await post('b3', 'branches/delete', { name: 'main' }), 400, 13);
    // A deleted name can be taken again.
    expect((await post('b3', 'branches/create', { name: 'parent' })).status).toBe(200);
    expect(await engineView(location, null)).toEqual([2, 4]);
  });

  it("keeps a branch's tree whole: a name whose later segment names one of its directories is 400 code 13 to create and 409 code 19 to delete", async () => {
    const location = await createTable('b3n', 1);
    expect((await post('b3n', 'branches/create', { name: 'x' })).status).toBe(200);
    expect((await fx.t.call('POST', path('b3n', 'insert', '?branch=x'), peopleStream([10, 11]), ARROW)).status).toBe(200);
    const before = await engineView(location, 'x');
    for (const segment of ['data', '_versions', '_transactions', '_indices', '_deletions', '_refs', '_catalog', 'tree'])
      expectError(await post('b3n', 'branches/create', { name: `x/${segment}`, from_branch: 'x' }), 400, 13, new RegExp(`"${segment}"`));
    expectError(await post('b3n', 'branches/create', { name: 'x/ok/data' }), 400, 13, /"x\/ok"/);
    // pylance makes such a name; deleting it through Lance would remove x's data files: the service refuses.
    const { store } = fx.root;
    const refs = `${location.slice(store.location('').length).replace(/^\//, '')}/_refs/branches/`;
    const xRef = await store.get(`${refs}x.json`);
    await store.put(`${refs}x%2Fdata.json`, xRef?.body ?? '');
    expect(Object.keys((await post('b3n', 'branches/list')).json.branches as object).sort()).toEqual(['x', 'x/data']);
    expectError(await post('b3n', 'branches/delete', { name: 'x/data' }), 409, 19, /x\/data/);
    expect(await engineView(location, 'x')).toEqual(before);
    expect((await post('b3n', 'count_rows', { branch: 'x' })).text).toBe(String(before[1]));
    // A segment that merely starts or ends like one is a name like any other, and so is a first segment.
    for (const name of ['data', 'tree', 'x/database', 'x/my_data'])
      expect((await post('b3n', 'branches/create', { name, from_branch: 'x' })).status, name).toBe(200);
  });

  it('deletes a branch others are nested under (a while a/b lives in tree/a/b/): a/b stays whole, a is gone from every API, and a fork of a works', async () => {
    const location = await createTable('n1', 2);
    const { store } = fx.root;
    const treeKey = `${location.slice(store.location('').length).replace(/^\//, '')}/tree/`;
    expect((await post('n1', 'branches/create', { name: 'a' })).status).toBe(200);
    expect((await post('n1', 'branches/create', { name: 'a/b' })).status).toBe(200);
    expect((await post('n1', 'delete', { branch: 'a', predicate: 'id = 3' })).status).toBe(200);
    expect((await post('n1', 'delete', { branch: 'a/b', predicate: 'id = 1' })).status).toBe(200);
    const nested = (await store.list(`${treeKey}a/b/`)).objects.map((o) => o.key);
    expect((await post('n1', 'branches/delete', { name: 'a' })).status).toBe(200);
    expect(Object.keys((await post('n1', 'branches/list')).json.branches as object)).toEqual(['a/b']);
    // Lance's own delete leaves all of tree/a/ (a/b lives in it); the service keeps only a/b's tree.
    expect((await store.list(treeKey)).objects.map((o) => o.key).sort()).toEqual(nested.sort());
    // The old code still read a's history here (200) and refused the fork below (409 code 23, Lance's internal error).
    expectError(await post('n1', 'version/list', { branch: 'a' }), 404, 22);
    expectError(await post('n1', 'version/describe', { branch: 'a' }), 404, 22);
    expectError(await post('n1', 'count_rows', { branch: 'a' }), 404, 22);
    expect((await post('n1', 'count_rows', { branch: 'a/b' })).text).toBe('3');
    const again = await post('n1', 'branches/create', { name: 'a' });
    expect(again.status, again.text).toBe(200);
    expect((await post('n1', 'count_rows', { branch: 'a' })).text).toBe('4');
    expect(((await post('n1', 'version/list', { branch: 'a' })).json.versions as Array<{ version: number }>).map((v) => v.version)).toEqual([2]);
    expect((await engineView(location, 'a/b'))[1]).toBe(3);
    expect(await engineView(location, null)).toEqual([2, 4]);
  });

  it('settles concurrent creates of one name: one wins, the others are 409 code 23, and the branch is whole', async () => {
    const location = await createTable('b5', 2);
    const results = await Promise.all([1, 2, 3, 4].map((v) => post('b5', 'branches/create', { name: 'race', from_version: v <= 2 ? v : undefined })));
    const statuses = results.map((r) => [r.status, r.json.code ?? null]);
    expect(
      statuses.filter(([s]) => s === 200),
      JSON.stringify(statuses),
    ).toHaveLength(1);
    for (const [s, code] of statuses.filter(([s]) => s !== 200)) expect([s, code]).toEqual([409, 23]);
    const winner = results.findIndex((r) => r.status === 200);
    const version = winner < 2 ? winner + 1 : 2;
    const listed = (await post('b5', 'branches/list')).json.branches as Record<string, { parentVersion: number }>;
    expect(listed.race?.parentVersion).toBe(version);
    expect(await engineView(location, 'race')).toEqual([version, version === 1 ? 5 : 4]);
  });

  /** Forks `branch` from main's latest and deletes the rows `predicate` selects on it straight through the engine (a Lance client writing the branch). */
  async function forkAndDelete(location: string, table: string, branch: string, predicate: string): Promise<void> {
    expect((await post(table, 'branches/create', { name: branch })).status).toBe(200);
    const opened = await connectTable(location, engineOptions);
    try {
      const on = await (await opened.branches()).checkout(branch);
      await on.delete(predicate);
      on.close();
    } finally {
      opened.close();
    }
  }

  /** The ids a query returns, through the service. */
  async function queryIds(table: string, body: Record<string, unknown>): Promise<number[]> {
    const res = await fx.t.app.server.inject({
      method: 'POST',
      url: path(table, 'query'),
      payload: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode, res.body).toBe(200);
    return arrow
      .tableFromIPC(res.rawPayload)
      .toArray()
      .map((r: { id: bigint }) => Number(r.id))
      .sort((a: number, b: number) => a - b);
  }

  it('reads a branch: describe, count, query, plans, stats, indices and index stats see its history, main stays as it was', async () => {
    const location = await createTable('r1', 2);
    expect((await post('r1', 'create_scalar_index', { column: 'id', index_type: 'btree', name: 'id_idx' })).status).toBe(200);
    await forkAndDelete(location, 'r1', 'dev', 'id <= 4');
    const [mainVersion] = await engineView(location, null);
    const [devVersion, devRows] = await engineView(location, 'dev');
    expect(devRows).toBe(1);

    const described = await post('r1', 'describe', { branch: 'dev', load_detailed_metadata: true });
    expect(described.status).toBe(200);
    expect(described.json.version).toBe(devVersion);
    expect((described.json.schema as { fields: Array<{ name: string }> }).fields.map((f) => f.name)).toEqual(['id', 'name']);
    expect((await post('r1', 'describe', { load_detailed_metadata: true })).json.version).toBe(mainVersion);
    const devAtFork = await post('r1', 'describe', { branch: 'dev', version: devVersion - 1, load_detailed_metadata: true });
    expect(devAtFork.json.version).toBe(devVersion - 1);

    expect((await post('r1', 'count_rows', { branch: 'dev' })).text).toBe('1');
    expect((await fx.t.call('GET', path('r1', 'count_rows', '?branch=dev'))).text).toBe('1');
    expect((await post('r1', 'count_rows', { branch: 'dev', version: devVersion - 1 })).text).toBe('4');
    expect((await post('r1', 'count_rows', {})).text).toBe('4');
    expect((await post('r1', 'count_rows', { branch: 'main' })).text).toBe('4');

    expect(await queryIds('r1', { branch: 'dev', k: 10, vector: null })).toEqual([5]);
    expect(await queryIds('r1', { k: 10, vector: null })).toEqual([1, 3, 4, 5]);
    const plan = await post('r1', 'explain_plan', { branch: 'dev', query: { k: 10, vector: null, filter: 'id > 0' } });
    expect(plan.status).toBe(200);
    const analyzed = await post('r1', 'analyze_plan', { branch: 'dev', k: 10, vector: null, filter: 'id > 0' });
    expect(analyzed.text).toMatch(/output_rows=1\b/);
    expectError(await post('r1', 'explain_plan', { branch: 'dev', query: { branch: 'other', k: 1, vector: null } }), 400, 13, /different branches/);

    const stats = await post('r1', 'stats', { branch: 'dev' });
    expect(stats.json).toMatchObject({ num_rows: 1, num_indices: 1 });
    expect((await post('r1', 'stats', {})).json).toMatchObject({ num_rows: 4 });
    const indices = await fx.t.call('GET', path('r1', 'index/list', '?branch=dev'));
    expect((indices.json.indexes as Array<{ index_name: string }>).map((i) => i.index_name)).toEqual(['id_idx']);
    const indexStats = await fx.t.call('GET', path('r1', 'index/id_idx/stats', '?branch=dev'));
    expect(indexStats.json).toMatchObject({ index_type: 'BTREE' });

    // A missing branch is 404 code 22 on every read; a bad name 400 code 13.
    for (const [op, body] of [
      ['describe', { branch: 'nope' }],
      ['count_rows', { branch: 'nope' }],
      ['query', { branch: 'nope', k: 1, vector: null }],
      ['explain_plan', { query: { branch: 'nope', k: 1, vector: null } }],
      ['analyze_plan', { branch: 'nope', k: 1, vector: null }],
      ['stats', { branch: 'nope' }],
      ['index/list', { branch: 'nope' }],
      ['index/id_idx/stats', { branch: 'nope' }],
    ] as const)
      expectError(await post('r1', op, body), 404, 22, /nope/);
    expectError(await post('r1', 'count_rows', { branch: 'a..b' }), 400, 13);
    expectError(await post('r1', 'count_rows', { branch: 'dev', version: 99 }), 404, 11);
  });

  /** What a write may change of a line of history, as the engine reads it: version, rows (ids), columns, indices. */
  async function lineOf(location: string, branch: string | null) {
    const opened = await connectTable(location, engineOptions);
    try {
      const on = branch === null ? opened : await (await opened.branches()).checkout(branch);
      const rows = (await on.query().toArray()) as Array<{ id: bigint }>;
      return {
        version: await on.version(),
        ids: rows.map((r) => Number(r.id)).sort((a, b) => a - b),
        columns: (await on.schema()).fields.map((f) => f.name),
        indices: (await on.listIndices()).map((i) => i.name).sort(),
      };
    } finally {
      opened.close();
    }
  }

  it('describes by a tag on the branch the tag points into; a tag with a version or a branch is 400 code 13', async () => {
    await createTable('dt1', 3); // main: v1 5 rows, v2 4, v3 3
    expect((await post('dt1', 'branches/create', { name: 'dev', from_version: 1 })).status).toBe(200);
    expect((await fx.t.call('POST', path('dt1', 'insert', '?branch=dev'), peopleStream([10, 11, 12]), ARROW)).status).toBe(200); // dev v2: 8 rows
    expect((await post('dt1', 'tags/create', { branch: 'dev', tag: 'devtag', version: 2 })).status).toBe(200);
    const detailed = { load_detailed_metadata: true };
    const byTag = await post('dt1', 'describe', { tag: 'devtag', ...detailed });
    const devV2 = await post('dt1', 'describe', { branch: 'dev', version: 2, ...detailed });
    const mainV2 = await post('dt1', 'describe', { version: 2, ...detailed });
    expect(devV2.json.stats).not.toEqual(mainV2.json.stats);
    expect([byTag.status, byTag.json.version, byTag.json.stats]).toEqual([200, 2, devV2.json.stats]);
    for (const branch of ['dev', 'other', 'main']) expectError(await post('dt1', 'describe', { tag: 'devtag', branch, ...detailed }), 400, 13, /branch or tag/);
    expectError(await post('dt1', 'describe', { tag: 'devtag', branch: 'dev' }), 400, 13, /branch or tag/);
    expectError(await post('dt1', 'describe', { tag: 'devtag', version: 2, ...detailed }), 400, 13, /version or tag/);
  });

  it('a branch in the query string and another in the body is 400 code 13, changing nothing; the same line in both is one', async () => {
    await createTable('qb1', 1);
    expect((await post('qb1', 'create_scalar_index', { column: 'id', index_type: 'btree', name: 'id_idx' })).status).toBe(200);
    expect((await post('qb1', 'branches/create', { name: 'dev' })).status).toBe(200);
    const names = async (query: string) =>
      ((await fx.t.call('GET', path('qb1', 'index/list', query))).json.indexes as Array<{ index_name: string }>).map((i) => i.index_name);
    for (const query of ['?branch=', '?branch=main', '?branch=other'])
      expectError(await fx.t.call('POST', path('qb1', 'index/id_idx/drop', query), { branch: 'dev' }), 400, 13, /different lines/);
    expectError(await fx.t.call('POST', path('qb1', 'index/id_idx/drop', '?branch=dev'), { branch: '' }), 400, 13, /different lines/);
    expect([await names(''), await names('?branch=dev')]).toEqual([['id_idx'], ['id_idx']]);
    for (const op of ['count_rows', 'version/list', 'stats', 'index/list'])
      expectError(await post('qb1', op, { branch: 'dev' }, '?branch=main'), 400, 13, /different lines/);
    expect((await post('qb1', 'count_rows', { branch: 'main' }, '?branch=')).status).toBe(200);
    expect((await post('qb1', 'count_rows', { branch: null }, '?branch=dev')).status).toBe(200);
    expect((await fx.t.call('POST', path('qb1', 'index/id_idx/drop', '?branch=dev'), { branch: 'dev' })).status).toBe(200);
    expect([await names(''), await names('?branch=dev')]).toEqual([['id_idx'], []]);
  });

  it('names the branch in a 404 code 11: a version it lacks, and a branch whose every version was deleted', async () => {
    await createTable('nv1', 2);
    expect((await post('nv1', 'branches/create', { name: 'dev' })).status).toBe(200);
    for (const [op, body] of [
      ['count_rows', { branch: 'dev', version: 99 }],
      ['describe', { branch: 'dev', version: 99, load_detailed_metadata: true }],
      ['restore', { branch: 'dev', version: 99 }],
      ['tags/create', { branch: 'dev', tag: 't99', version: 99 }],
    ] as const)
      expectError(await post('nv1', op, body), 404, 11, /has no version 99 on branch "dev"$/);
    expect((await post('nv1', 'version/delete', { branch: 'dev', ranges: [{ start_version: 0, end_version: 100 }] })).status).toBe(200);
    for (const res of [
      await post('nv1', 'count_rows', { branch: 'dev' }),
      await post('nv1', 'describe', { branch: 'dev', load_detailed_metadata: true }),
      await fx.t.call('POST', path('nv1', 'insert', '?branch=dev'), peopleStream([11]), ARROW),
    ]) {
      expectError(res, 404, 11, /has no version on branch "dev"/);
      expect(String(res.json.error)).not.toMatch(/undefined|_versions/);
    }
  });

  it('writes on a branch land on it alone: rows, columns, metadata, indices, tags and restore; main and the other branches stay as they were', async () => {
    const location = await createTable('w1', 1);
    expect((await post('w1', 'branches/create', { name: 'dev' })).status).toBe(200);
    expect((await post('w1', 'branches/create', { name: 'other' })).status).toBe(200);
    const main = await lineOf(location, null);
    const other = await lineOf(location, 'other');
    const ok = async (res: Promise<{ status: number; json: Record<string, unknown>; text: string }>) => {
      const r = await res;
      expect(r.status, r.text).toBe(200);
      return r.json;
    };
    const dev = { branch: 'dev' };
    expect((await ok(fx.t.call('POST', path('w1', 'insert', '?branch=dev'), peopleStream([6, 7]), ARROW))).num_inserted_rows).toBe(2);
    await ok(
      fx.t.call(
        'POST',
        path('w1', 'merge_insert', '?branch=dev&on=id&when_matched_update_all=true&when_not_matched_insert_all=true'),
        peopleStream([7, 8]),
        ARROW,
      ),
    );
    expect((await ok(post('w1', 'update', { ...dev, updates: [['name', "'u'"]], predicate: 'id = 1' }))).updated_rows).toBe(1);
    await ok(post('w1', 'delete', { ...dev, predicate: 'id = 2' }));
    expect(await lineOf(location, 'dev')).toMatchObject({ ids: [1, 3, 4, 5, 6, 7, 8] });
    await ok(post('w1', 'add_columns', { ...dev, new_columns: [{ name: 'twice', expression: 'id * 2' }] }));
    await ok(post('w1', 'alter_columns', { ...dev, alterations: [{ path: 'twice', rename: 'double' }] }));
    await ok(post('w1', 'update_field_metadata', { ...dev, updates: [{ path: 'name', metadata: { k: 'v' } }] }));
    await ok(post('w1', 'drop_columns', { ...dev, columns: ['double'] }));
    await ok(post('w1', 'add_columns', { ...dev, new_columns: [{ name: 'kept', expression: 'id + 1' }] }));
    await ok(post('w1', 'create_scalar_index', { ...dev, column: 'id', index_type: 'btree', name: 'id_idx' }));
    await ok(post('w1', 'create_index', { ...dev, column: 'name', index_type: 'FTS', name: 'name_fts' }));
    await ok(fx.t.call('POST', path('w1', 'index/name_fts/drop', '?branch=dev'), {}));
    const devLine = await lineOf(location, 'dev');
    expect(devLine).toMatchObject({ ids: [1, 3, 4, 5, 6, 7, 8], columns: ['id', 'name', 'kept'], indices: ['id_idx'] });
    const described = await post('w1', 'describe', { ...dev, load_detailed_metadata: true });
    expect(described.json.version).toBe(devLine.version);
    // LanceDB opens the branch the service wrote straight from the store.
    const lancedbDev = await connectTable(location, engineOptions, 'dev');
    try {
      expect([await lancedbDev.version(), await lancedbDev.countRows(), lancedbDev.currentBranch()]).toEqual([devLine.version, 7, 'dev']);
    } finally {
      lancedbDev.close();
    }

    // Tags into the branch: Lance records the branch, and the listing says it.
    await ok(post('w1', 'tags/create', { ...dev, tag: 'dev-head', version: devLine.version }));
    await ok(post('w1', 'tags/create', { tag: 'main-head', version: main.version }));
    await ok(post('w1', 'tags/update', { ...dev, tag: 'main-head', version: 2 }));
    const tags = (await post('w1', 'tags/list')).json.tags as Record<string, { branch?: string; version: number }>;
    expect(tags['dev-head']).toMatchObject({ branch: 'dev', version: devLine.version });
    expect(tags['main-head']).toMatchObject({ branch: 'dev', version: 2 });
    expect((await post('w1', 'tags/version', { tag: 'dev-head' })).json).toEqual({ version: devLine.version, branch: 'dev' });
    expectError(await post('w1', 'tags/create', { ...dev, tag: 'far', version: 99 }), 404, 11);

    // Restore on the branch: an earlier version of the branch becomes its latest.
    const restored = await ok(post('w1', 'restore', { ...dev, version: 2 }));
    expect(restored).toEqual({});
    expect(await lineOf(location, 'dev')).toMatchObject({ version: devLine.version + 1, ids: [1, 2, 3, 4, 5, 6, 7] });

    expect(await lineOf(location, null)).toEqual(main);
    expect(await lineOf(location, 'other')).toEqual(other);

    // A write naming a missing branch is 404 code 22 and changes nothing.
    expectError(await post('w1', 'delete', { branch: 'nope', predicate: 'true' }), 404, 22);
    expectError(await fx.t.call('POST', path('w1', 'insert', '?branch=nope'), peopleStream([9]), ARROW), 404, 22);
    expect(await lineOf(location, null)).toEqual(main);
  });

  it("replaces a branch's schema metadata on the branch alone; a missing branch is 404 code 22 and changes nothing", async () => {
    const location = await createTable('sm', 1);
    expect((await post('sm', 'branches/create', { name: 'dev' })).status).toBe(200);
    expect((await post('sm', 'branches/create', { name: 'other' })).status).toBe(200);
    const metadataOf = async (branch: string | null) => {
      const opened = await connectTable(location, engineOptions);
      try {
        const on = branch === null ? opened : await (await opened.branches()).checkout(branch);
        return { version: await on.version(), metadata: Object.fromEntries((await on.schema()).metadata) };
      } finally {
        opened.close();
      }
    };
    const main = await lineOf(location, null);
    const mainMetadata = await metadataOf(null);
    const other = await metadataOf('other');
    const dev = await metadataOf('dev');
    // The old code answered 406 here: the service's own commit knew main's history only.
    // The body is the bare map: its key "branch" is metadata, the branch is the query's.
    const updated = await fx.t.call('POST', path('sm', 'schema_metadata/update', '?branch=dev'), { owner: 'dev-team', branch: 'x' });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.json).toEqual({ owner: 'dev-team', branch: 'x' });
    expect(await metadataOf('dev')).toEqual({ version: dev.version + 1, metadata: { owner: 'dev-team', branch: 'x' } });
    const described = await post('sm', 'describe', { branch: 'dev', load_detailed_metadata: true });
    expect([described.json.version, (described.json.schema as { metadata?: unknown }).metadata]).toEqual([dev.version + 1, { owner: 'dev-team', branch: 'x' }]);
    // The branch's history goes on from the service's commit: the engine writes on top of it.
    expect((await fx.t.call('POST', path('sm', 'insert', '?branch=dev'), peopleStream([6]), ARROW)).status).toBe(200);
    expect(await metadataOf('dev')).toEqual({ version: dev.version + 2, metadata: { owner: 'dev-team', branch: 'x' } });
    expect(await lineOf(location, 'dev')).toMatchObject({ ids: [1, 2, 3, 4, 5, 6] });
    expect(await lineOf(location, null)).toEqual(main);
    expect(await metadataOf(null)).toEqual(mainMetadata);
    expect(await metadataOf('other')).toEqual(other);

    const missing = await fx.t.call('POST', path('sm', 'schema_metadata/update', '?branch=nope'), { owner: 'x' });
    expectError(missing, 404, 22);
    expectError(await fx.t.call('POST', path('sm', 'schema_metadata/update', '?branch=..'), { owner: 'x' }), 400, 13);
    expect(await metadataOf(null)).toEqual(mainMetadata);
    expect(await metadataOf('other')).toEqual(other);
  });

  /** A table `<ns>$m` with rows 1..3 in a new namespace with managed versioning, and a branch `dev` of it. */
  async function managedTableWithBranch(ns: string) {
    expect((await fx.t.call('POST', `/v1/namespace/${ns}/create`, { properties: { managed_versioning: 'true' } })).status).toBe(200);
    const made = await fx.t.call('POST', `/v1/table/${ns}%24m/create`, peopleStream([1, 2, 3]), ARROW);
    expect(made.status).toBe(200);
    const mpost = (op: string, body: unknown) => fx.t.call('POST', `/v1/table/${ns}%24m/${op}`, body);
    const versionsOf = async (branch?: string) =>
      ((await mpost('version/list', branch === undefined ? {} : { branch })).json.versions as Array<{ version: number }>).map((v) => v.version);
    expect((await mpost('branches/create', { name: 'dev' })).status).toBe(200);
    return { location: String(made.json.location), mpost, versionsOf };
  }

  it("replaces the schema metadata of a managed table's branch through the service, on the branch alone", async () => {
    const { mpost, versionsOf } = await managedTableWithBranch('msm');
    const devBefore = await versionsOf('dev');
    const mainBefore = await versionsOf();
    const updated = await fx.t.call('POST', '/v1/table/msm%24m/schema_metadata/update?branch=dev', { owner: 'dev-team' });
    expect(updated.status, updated.text).toBe(200);
    expect(await versionsOf('dev')).toEqual([...devBefore, (devBefore.at(-1) ?? 0) + 1]);
    expect(await versionsOf()).toEqual(mainBefore);
    const schemaOf = async (branch?: string) =>
      ((await mpost('describe', { ...(branch ? { branch } : {}), load_detailed_metadata: true })).json.schema as { metadata?: unknown }).metadata ?? {};
    expect(await schemaOf('dev')).toEqual({ owner: 'dev-team' });
    expect(await schemaOf()).toEqual({});
  });

  it.skipIf(!existsSync(DEFAULT_INDEX_PYTHON))('builds the index types pylance builds on the branch alone', async () => {
    const location = await createTable('x1', 1);
    expect((await post('x1', 'branches/create', { name: 'dev' })).status).toBe(200);
    const built = await post('x1', 'create_scalar_index', { branch: 'dev', column: 'id', index_type: 'ZONEMAP', name: 'id_zones' });
    expect(built.status, built.text).toBe(200);
    expect(await lineOf(location, null)).toMatchObject({ version: 1, indices: [] });
    const listed = await fx.t.call('GET', path('x1', 'index/list', '?branch=dev'));
    expect((listed.json.indexes as Array<{ index_name: string; index_type: string }>).map((i) => [i.index_name, i.index_type])).toEqual([
      ['id_zones', 'ZONEMAP'],
    ]);
    expect((await fx.t.call('GET', path('x1', 'index/list'))).json.indexes).toEqual([]);
  });

  it('writes to a branch of a managed table through the service, on the branch alone', async () => {
    const { location, mpost, versionsOf } = await managedTableWithBranch('managed');
    const devBefore = await versionsOf('dev');
    const mainBefore = await versionsOf();
    const main = await lineOf(location, null);
    // The old code answered 406 here: the engine's commit path knew main's history only.
    const deleted = await mpost('delete', { branch: 'dev', predicate: 'id = 1' });
    expect(deleted.status, deleted.text).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/managed%24m/insert?branch=dev', peopleStream([7, 8]), ARROW)).status).toBe(200);
    expect((await mpost('count_rows', { branch: 'dev' })).text).toBe('4');
    expect((await mpost('count_rows', {})).text).toBe('3');
    // Both commits went through the service onto the branch's history; main did not move.
    const devAfter = await versionsOf('dev');
    expect(devAfter.slice(0, devBefore.length)).toEqual(devBefore);
    expect(devAfter.length).toBe(devBefore.length + 2);
    expect(await versionsOf()).toEqual(mainBefore);
    expect(await lineOf(location, null)).toEqual(main);
  });

  it('drop takes the branches with the table; rename carries them; deregister and register keep them with the data', async () => {
    const location = await createTable('d1', 1);
    await forkAndDelete(location, 'd1', 'dev', 'id = 1');
    expect((await post('d1', 'drop', {})).status).toBe(200);
    await createTable('d1', 1);
    expect((await post('d1', 'branches/list')).json.branches).toEqual({});
    expectError(await post('d1', 'count_rows', { branch: 'dev' }), 404, 22);

    const moved = await createTable('d2', 1);
    await forkAndDelete(moved, 'd2', 'dev', 'id = 1');
    const renamed = await post('d2', 'rename', { new_table_name: 'd2moved' });
    if (renamed.status === 200) {
      expect(Object.keys((await post('d2moved', 'branches/list')).json.branches as object)).toEqual(['dev']);
      expect((await post('d2moved', 'count_rows', { branch: 'dev' })).text).toBe('4');
      expect((await post('d2moved', 'count_rows', {})).text).toBe('5');
    } else {
      // RenameTable is a 406 on S3 (no atomic rename of a directory): the branches stay where they are.
      expectError(renamed, 406, 0);
      expect(Object.keys((await post('d2', 'branches/list')).json.branches as object)).toEqual(['dev']);
    }

    const kept = await createTable('d3', 1);
    await forkAndDelete(kept, 'd3', 'dev', 'id = 1');
    expect((await post('d3', 'deregister', {})).status).toBe(200);
    expectError(await post('d3', 'branches/list'), 404, 4);
    expect((await post('d3again', 'register', { location: kept })).status).toBe(200);
    expect(Object.keys((await post('d3again', 'branches/list')).json.branches as object)).toEqual(['dev']);
    expect((await post('d3again', 'count_rows', { branch: 'dev' })).text).toBe('4');
  });

  it('a branch deleted and forked again under its name is read afresh, never from the dataset kept for the old one', async () => {
    await createTable('k1', 1);
    expect((await post('k1', 'branches/create', { name: 'dev' })).status).toBe(200);
    expect((await post('k1', 'delete', { branch: 'dev', predicate: 'id <= 2' })).status).toBe(200);
    expect((await post('k1', 'delete', { branch: 'dev', predicate: 'id = 3' })).status).toBe(200);
    expect((await post('k1', 'count_rows', { branch: 'dev' })).text).toBe('2');
    expect((await post('k1', 'branches/delete', { name: 'dev' })).status).toBe(200);
    expect((await post('k1', 'branches/create', { name: 'dev' })).status).toBe(200);
    expect((await post('k1', 'count_rows', { branch: 'dev' })).text).toBe('5');
    expect((await post('k1', 'delete', { branch: 'dev', predicate: 'id = 5' })).status).toBe(200);
    expect((await post('k1', 'count_rows', { branch: 'dev' })).text).toBe('4');
    expect((await post('k1', 'count_rows', {})).text).toBe('5');
  });

  it('pages the listing with signed tokens bound to the table', async () => {
    await createTable('b4', 1);
    const names = ['a', 'b', 'c', 'd', 'e'];
    for (const name of names) expect((await post('b4', 'branches/create', { name })).status).toBe(200);
    const seen: string[] = [];
    let token: string | null = null;
    do {
      const query: string = `?limit=2${token ? `&page_token=${encodeURIComponent(token)}` : ''}`;
      const page = await fx.t.call('GET', path('b4', 'branches/list', query));
      expect(page.status).toBe(200);
      const got = Object.keys(page.json.branches as object);
      expect(got.length).toBeLessThanOrEqual(2);
      seen.push(...got);
      token = (page.json.page_token as string | null | undefined) ?? null;
    } while (token !== null);
    expect(seen).toEqual(names);
    expect((await post('b4', 'branches/list', { limit: 0 })).json).toEqual({ branches: {}, page_token: null });
    const first = await post('b4', 'branches/list', { limit: 1 });
    expectError(await post('b1', 'branches/list', { page_token: first.json.page_token }), 400, 13, /page_token/);
  });
});
