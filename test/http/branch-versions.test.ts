import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { manifestFileName } from '../../src/engine/lance-format/manifest-names.js';
import { versionsOn } from '../../src/service/versions/branch-versions.js';
import { TableVersions } from '../../src/service/versions/dataset-versions.js';
import { startTestApp, useTestApp } from '../support/app.js';
import { backends } from '../support/backends.js';
import { manifestBytes } from '../support/manifests.js';

// Managed versioning on a table's branches over HTTP: CreateTableVersion, DescribeTableVersion,
// ListTableVersions and BatchDeleteTableVersions with `branch` work on the branch's own history
// (`tree/<name>/_versions/`), with the protocol and invariants of main's; the batches mix lines
// of history of several tables, all or nothing. Manifests are minimal Lance manifest files; a
// branch's ref is written as pylance 14 writes it. What pylance itself sends is in
// test/realclient/pylance_client.py (test_managed_branch_commits_through_the_service).

/** A ref exactly as pylance 14's ds.create_branch writes it (probed). */
const pylanceRef = (parentVersion: number) =>
  JSON.stringify({
    parentBranch: null,
    identifier: { version_mapping: [[parentVersion, '762478eb6a64463ea5be7db2b0300a10']] },
    parentVersion,
    createAt: 1795795132,
    manifestSize: 423,
    metadata: {},
  });

const numbers = (body: Record<string, unknown>) => (body.versions as Array<{ version: number }>).map((v) => v.version);

describe.each(backends())('table versions on branches on $name', (backend) => {
  const fx = useTestApp(backend);
  let counter = 0;

  /**
   * A table with managed versioning (what Lance's clients commit through the version API) in its
   * own namespace, with versions 1..`mainVersions` on main; helpers bound to it.
   */
  async function table(mainVersions = 2) {
    const ns = `bv${++counter}`;
    await fx.t.call('POST', `/v1/namespace/${ns}/create`, { properties: { managed_versioning: 'true' } });
    expect((await fx.t.call('POST', `/v1/table/${ns}%24t/declare`, {})).status).toBe(200);
    const dir = `${ns}/t.lance/`;
    const path = `/v1/table/${ns}%24t`;
    /** Where a line of history lives: main's directory, or a branch's tree. */
    const lineDir = (branch?: string) => (branch === undefined ? dir : `${dir}tree/${branch}/`);
    /** Stages bytes the way a Lance writer does (in the line's own `_versions/`), returns the path relative to the table. */
    const stage = async (version: number, branch?: string, body = manifestBytes(version)) => {
      const rel = `${branch === undefined ? '' : `tree/${branch}/`}_versions/${version}.manifest-${randomUUID()}`;
      await fx.root.store.put(`${dir}${rel}`, body);
      return { rel, body, path: fx.root.store.objectPath(`${dir}${rel}`) };
    };
    const commit = async (version: number, branch?: string) => {
      const { path: manifest_path } = await stage(version, branch);
      return fx.t.call('POST', `${path}/version/create`, { version, manifest_path, ...(branch === undefined ? {} : { branch }) });
    };
    const register = (branch: string, parentVersion: number) =>
      fx.root.store.put(`${dir}_refs/branches/${encodeURIComponent(branch)}.json`, pylanceRef(parentVersion));
    const list = async (branch?: string) => {
      const res = await fx.t.call('GET', `${path}/version/list${branch === undefined ? '' : `?branch=${encodeURIComponent(branch)}`}`);
      expect(res.status, JSON.stringify(res.json)).toBe(200);
      return numbers(res.json);
    };
    const manifest = (version: number, branch?: string) => fx.root.store.get(`${lineDir(branch)}_versions/${manifestFileName(version, 'V2')}`);
    const reservations = async () => (await fx.root.store.list(`${dir}_catalog/reservations/`, {})).objects.map((o) => o.key);
    for (let v = 1; v <= mainVersions; v++) expect((await commit(v)).status).toBe(200);
    return { ns, id: [ns, 't'], dir, path, stage, commit, register, list, manifest, reservations };
  }

  it("takes a branch's first commit as Lance's create_branch sends it, then only the next version, and never touches main", async () => {
    const t = await table(2);
    // pylance 14 first asks for the branch's latest version: a branch that does not exist is 404 code 22.
    const missing = await fx.t.call('POST', `${t.path}/version/list?limit=1&descending=true&branch=dev`);
    expect([missing.status, missing.json.code]).toEqual([404, 22]);
    // Then it commits the branch's first manifest (a clone of the source version, 2) before it writes the ref.
    const first = await t.commit(2, 'dev');
    expect(first.status, JSON.stringify(first.json)).toBe(200);
    expect(first.json.version).toMatchObject({
      version: 2,
      manifest_path: fx.root.store.objectPath(`${t.dir}tree/dev/_versions/${manifestFileName(2, 'V2')}`),
    });
    expect((await fx.t.call('POST', `${t.path}/version/describe`, { version: 2, branch: 'dev' })).status).toBe(200);
    await t.register('dev', 2);
    expect((await t.commit(3, 'dev')).status).toBe(200);
    // Only latest + 1: a gap is 409 code 14, the version taken is a 409 too (other bytes).
    for (const version of [5, 3]) {
      const refused = await t.commit(version, 'dev');
      expect([refused.status, refused.json.code]).toEqual([409, 14]);
    }
    expect(await t.list('dev')).toEqual([2, 3]);
    expect(await t.list()).toEqual([1, 2]);
    expect(await t.list('main')).toEqual([1, 2]);
    expect((await fx.t.call('POST', `${t.path}/version/describe`, { branch: 'dev' })).json.version).toMatchObject({ version: 3 });
    expect((await fx.t.call('POST', `${t.path}/version/describe`, {})).json.version).toMatchObject({ version: 2 });
    // Main goes on from its own latest, whatever the branch did.
    expect((await t.commit(3)).status).toBe(200);
    expect(await t.manifest(3)).not.toEqual(await t.manifest(3, 'dev'));
    await fx.t.app.settled();
    expect(await t.reservations()).toEqual([]);
  });

  it("starts a registered branch's history at the version it was forked at", async () => {
    const t = await table(3);
    await t.register('feature/x', 2);
    const early = await t.commit(3, 'feature/x');
    expect([early.status, early.json.code]).toEqual([409, 14]);
    expect((await t.commit(2, 'feature/x')).status).toBe(200);
    expect((await t.commit(3, 'feature/x')).status).toBe(200);
    expect(await t.list('feature/x')).toEqual([2, 3]);
    expect(await fx.root.store.head(`${t.dir}tree/feature/x/_versions/${manifestFileName(3, 'V2')}`)).not.toBeNull();
  });

  it('answers 404 code 22 for a branch that is not there and 400 code 13 for a name Lance refuses, changing nothing', async () => {
    const t = await table(2);
    const calls = (branch: string) => [
      () => fx.t.call('POST', `${t.path}/version/describe`, { branch }),
      () => fx.t.call('POST', `${t.path}/version/describe`, { version: 1, branch }),
      () => fx.t.call('GET', `${t.path}/version/list?branch=${encodeURIComponent(branch)}`),
      () => fx.t.call('POST', `${t.path}/version/list`, { branch, descending: true, limit: 1 }),
      () => fx.t.call('POST', `${t.path}/version/delete`, { branch, ranges: [{ start_version: 0, end_version: -1 }] }),
    ];
    for (const call of calls('nope')) {
      const res = await call();
      expect([res.status, res.json.code], JSON.stringify(res.json)).toEqual([404, 22]);
    }
    for (const bad of ['a..b', '/x', 'x/', 'a//b', 'x.lock', 'sp ace']) {
      const commit = async () => fx.t.call('POST', `${t.path}/version/create`, { version: 3, manifest_path: (await t.stage(3)).path, branch: bad });
      for (const call of [...calls(bad), commit]) {
        const res = await call();
        expect([res.status, res.json.code], `${bad}: ${JSON.stringify(res.json)}`).toEqual([400, 13]);
      }
    }
    // A branch whose ref went (deleted) while its tree is still there takes no new version.
    await t.register('gone', 2);
    expect((await t.commit(2, 'gone')).status).toBe(200);
    await fx.root.store.delete(`${t.dir}_refs/branches/gone.json`);
    const late = await t.commit(3, 'gone');
    expect([late.status, late.json.code]).toEqual([404, 22]);
    expect(await t.list()).toEqual([1, 2]);
    expect((await fx.root.store.list(`${t.dir}tree/`, {})).objects.filter((o) => !o.key.includes('/gone/'))).toEqual([]);
  });

  it('deletes versions of the branch only', async () => {
    const t = await table(3);
    await t.register('dev', 1);
    for (const v of [1, 2, 3, 4]) expect((await t.commit(v, 'dev')).status).toBe(200);
    const res = await fx.t.call('POST', `${t.path}/version/delete`, { branch: 'dev', ranges: [{ start_version: 1, end_version: 3 }] });
    expect(res.json).toEqual({ deleted_count: 2 });
    expect(await t.list('dev')).toEqual([3, 4]);
    expect(await t.list()).toEqual([1, 2, 3]);
  });

  it('pages a branch with tokens that are good for that branch only', async () => {
    const t = await table(3);
    await t.register('dev', 3);
    for (const v of [3, 4, 5]) expect((await t.commit(v, 'dev')).status).toBe(200);
    const first = await fx.t.call('GET', `${t.path}/version/list?branch=dev&limit=2`);
    expect(numbers(first.json)).toEqual([3, 4]);
    const token = encodeURIComponent(String(first.json.page_token));
    expect(numbers((await fx.t.call('GET', `${t.path}/version/list?branch=dev&limit=2&page_token=${token}`)).json)).toEqual([5]);
    const elsewhere = await fx.t.call('GET', `${t.path}/version/list?limit=2&page_token=${token}`);
    expect([elsewhere.status, elsewhere.json.code]).toEqual([400, 13]);
  });

  it('of 20 concurrent writers of the next version of a branch exactly one wins; the others get 409 code 14', async () => {
    const t = await table(2);
    await t.register('dev', 2);
    expect((await t.commit(2, 'dev')).status).toBe(200);
    const staged = await Promise.all(Array.from({ length: 20 }, () => t.stage(3, 'dev')));
    const results = await Promise.all(staged.map((s) => fx.t.call('POST', `${t.path}/version/create`, { version: 3, manifest_path: s.path, branch: 'dev' })));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status !== 200).every((r) => r.status === 409 && r.json.code === 14)).toBe(true);
    const winner = staged[results.findIndex((r) => r.status === 200)];
    expect((await t.manifest(3, 'dev'))?.body.equals(winner?.body ?? Buffer.alloc(0))).toBe(true);
    await fx.t.app.settled();
    expect(await t.reservations()).toEqual([]);
  });

  it('two replicas over one root: of 20 writers of the next version of a branch, split between them, exactly one wins', async () => {
    const other = await startTestApp(fx.root);
    try {
      const t = await table(1);
      await t.register('dev', 1);
      for (let version = 1; version <= 3; version++) {
        const staged = await Promise.all(Array.from({ length: 20 }, () => t.stage(version, 'dev')));
        const results = await Promise.all(
          staged.map((s, i) => (i % 2 === 0 ? fx.t : other).call('POST', `${t.path}/version/create`, { version, manifest_path: s.path, branch: 'dev' })),
        );
        expect(
          results.filter((r) => r.status === 200),
          `version ${version}`,
        ).toHaveLength(1);
        expect(results.filter((r) => r.status !== 200).every((r) => r.status === 409 && r.json.code === 14)).toBe(true);
        const winner = staged[results.findIndex((r) => r.status === 200)];
        expect((await t.manifest(version, 'dev'))?.body.equals(winner?.body ?? Buffer.alloc(0))).toBe(true);
      }
      expect(await t.list('dev')).toEqual([1, 2, 3]);
      expect(await t.list()).toEqual([1]);
      await Promise.all([fx.t.app.settled(), other.app.settled()]);
      expect(await t.reservations()).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it('commits a batch across lines of history of several tables all or nothing', async () => {
    const a = await table(2);
    const b = await table(1);
    await a.register('dev', 2);
    expect((await a.commit(2, 'dev')).status).toBe(200);
    await b.register('exp', 1);
    expect((await b.commit(1, 'exp')).status).toBe(200);
    const entries = async (bVersion: number) => [
      { id: a.id, version: 3, manifest_path: (await a.stage(3)).path },
      { id: a.id, version: 3, manifest_path: (await a.stage(3, 'dev')).path, branch: 'dev' },
      { id: a.id, version: 4, manifest_path: (await a.stage(4, 'dev')).path, branch: 'dev' },
      { id: b.id, version: bVersion, manifest_path: (await b.stage(bVersion, 'exp')).path, branch: 'exp' },
    ];
    // One entry that is not the next version of its branch: nothing is committed anywhere.
    const bad = await fx.t.call('POST', '/v1/table/version/batch-create', { entries: await entries(3) });
    expect([bad.status, bad.json.code]).toEqual([409, 14]);
    expect([await a.list(), await a.list('dev'), await b.list(), await b.list('exp')]).toEqual([[1, 2], [2], [1], [1]]);
    const res = await fx.t.call('POST', '/v1/table/version/batch-create', { entries: await entries(2) });
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(numbers(res.json)).toEqual([3, 3, 4, 2]);
    expect([await a.list(), await a.list('dev'), await b.list(), await b.list('exp')]).toEqual([[1, 2, 3], [2, 3, 4], [1], [1, 2]]);
    expect(await a.manifest(4, 'dev')).not.toBeNull();
    for (const t of [a, b]) expect(await t.reservations()).toEqual([]);
    // BatchCommitTables: a version on one branch and a delete on another, together.
    const commitRes = await fx.t.call('POST', '/v1/table/batch-commit', {
      operations: [
        { create_table_version: { id: b.id, version: 3, manifest_path: (await b.stage(3, 'exp')).path, branch: 'exp' } },
        { delete_table_versions: { id: a.id, branch: 'dev', ranges: [{ start_version: 2, end_version: 3 }] } },
      ],
    });
    expect(commitRes.status, JSON.stringify(commitRes.json)).toBe(200);
    expect([await a.list(), await a.list('dev'), await b.list('exp')]).toEqual([
      [1, 2, 3],
      [3, 4],
      [1, 2, 3],
    ]);
    const missing = await fx.t.call('POST', '/v1/table/batch-commit', {
      operations: [
        { create_table_version: { id: b.id, version: 4, manifest_path: (await b.stage(4, 'exp')).path, branch: 'exp' } },
        { delete_table_versions: { id: a.id, branch: 'nope', ranges: [{ start_version: 0, end_version: -1 }] } },
      ],
    });
    expect([missing.status, missing.json.code]).toEqual([404, 22]);
    expect(await b.list('exp')).toEqual([1, 2, 3]);
    // A table the batch declares has no branch yet: nothing is declared.
    const fresh = [a.ns, 'fresh'];
    const declaring = await fx.t.call('POST', '/v1/table/batch-commit', {
      operations: [
        { declare_table: { id: fresh } },
        { create_table_version: { id: fresh, version: 1, manifest_path: '_versions/1.manifest-x', branch: 'dev' } },
      ],
    });
    expect([declaring.status, declaring.json.code]).toEqual([404, 22]);
    expect((await fx.t.call('POST', `/v1/table/${a.ns}%24fresh/exists`, {})).status).toBe(404);
  });

  it("holds a branch's version slots where a drop of the table waits for slots, outside the branch's tree", async () => {
    const dataDir = { store: fx.root.store, key: 'ns/t.lance/', owned: true };
    const main = new TableVersions(dataDir);
    for (const branch of ['dev', 'feature/x']) {
      const versions = versionsOn(dataDir, branch);
      expect(versions.dir.key).toBe(`ns/t.lance/tree/${branch}/`);
      // table-fences.ts lists every reservation under main's prefix, branches' included.
      expect(versions.reservationKey(7).startsWith(main.reservationsPrefix)).toBe(true);
      expect(versions.reservationKey(7).startsWith(versions.dir.key)).toBe(false);
    }
    expect(versionsOn(dataDir, 'a').reservationsPrefix.startsWith(versionsOn(dataDir, 'a/b').reservationsPrefix)).toBe(false);
    expect(versionsOn(dataDir, 'a/b').reservationsPrefix.startsWith(versionsOn(dataDir, 'a').reservationsPrefix)).toBe(false);
  });

  it('a commit on a branch racing a drop of its table: the drop waits for it, and nothing of the branch outlives the table', async () => {
    const rounds = backend.name === 'local' ? 20 : 6;
    for (let round = 0; round < rounds; round++) {
      const t = await table(1);
      await t.register('dev', 1);
      expect((await t.commit(1, 'dev')).status).toBe(200);
      const staged = await t.stage(2, 'dev');
      const [commit, drop] = await Promise.all([
        fx.t.call('POST', `${t.path}/version/create`, { version: 2, manifest_path: staged.path, branch: 'dev' }),
        fx.t.call('POST', `${t.path}/drop`, {}),
      ]);
      expect([200, 404], JSON.stringify(commit.json)).toContain(commit.status);
      expect(drop.status).toBe(200);
      await fx.t.app.settled();
      // The drop deleted the table's directory only once no slot of any of its lines was held.
      expect((await fx.root.store.list(t.dir, {})).objects.map((o) => o.key)).toEqual([`${t.dir}.lance-deregistered`]);
    }
  });
});
