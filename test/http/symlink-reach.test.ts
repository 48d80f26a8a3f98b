// No request reaches through a symbolic link below a local root.
// Someone who can write the root's file system plants links: a table directory, an entry in one
// (`data/`, `_versions/`, `_catalog/`, ...), a namespace directory or a staged manifest that leads
// elsewhere (out of the root, or to another namespace's data inside it). The catalog follows none
// of them: a table or namespace reached through one does not exist (404), a name held by one
// cannot be taken (400 code 13), a drop (of a table or a namespace) removes the link and never
// what it leads to, and RegisterTable refuses a location reached through one or holding one, so
// that the namespace holding a location is the one its real path lies in. (S3 has no links: local
// only.)

import { createHash, randomUUID } from 'node:crypto';
import { cp, lstat, mkdir, readdir, readFile, rename, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { peopleStream } from '../support/arrow-data.js';
import { localBackend, type TestRoot } from '../support/backends.js';
import { manifestBytes } from '../support/manifests.js';

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

/** Every file under `dir`, relative to it, sorted (links listed, never followed). */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => !e.isDirectory())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort();
}

/** The deregistered dataset's files in a retired name directory: all but the catalog's own (the name's record, marker and writers' leases). */
async function datasetFilesUnder(dir: string): Promise<string[]> {
  return (await filesUnder(dir)).filter((f) => !f.startsWith('.lance-') && !f.startsWith('_catalog/'));
}

const exists = (p: string) =>
  lstat(p).then(
    () => true,
    () => false,
  );

describe('symbolic links below a local root', () => {
  let root: TestRoot;
  let outside: TestRoot;
  let app: TestApp;
  let elsewhere: TestApp;
  /** A Lance dataset of 3 rows in another root: outside `root`. */
  let foreign: string;
  let foreignFiles: string[];

  const call = (url: string, body: unknown = {}, headers?: Record<string, string>) => app.call('POST', url, body, headers);
  const expectCode = (res: { status: number; text: string; json: Record<string, unknown> }, status: number, code: number) => {
    expect(res.status, res.text).toBe(status);
    expect(res.json.code, res.text).toBe(code);
  };
  /** The outside dataset is exactly as it was: its rows, and every one of its files. */
  const expectForeignIntact = async () => {
    expect((await elsewhere.call('POST', '/v1/table/ns%24v/count_rows', {})).json).toEqual({ value: 3 });
    expect(await filesUnder(foreign)).toEqual(foreignFiles);
  };

  beforeAll(async () => {
    [root, outside] = await Promise.all([localBackend.newRoot(), localBackend.newRoot()]);
    [app, elsewhere] = await Promise.all([startTestApp(root), startTestApp(outside)]);
    for (const ns of ['fs', 'a', 'b']) expect((await app.call('POST', `/v1/namespace/${ns}/create`, {})).status).toBe(200);
    expect((await elsewhere.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
    const made = await elsewhere.call('POST', '/v1/table/ns%24v/create', peopleStream([1, 2, 3]), ARROW);
    expect(made.status, made.text).toBe(200);
    foreign = String(made.json.location);
    foreignFiles = await filesUnder(foreign);
    expect(foreignFiles.some((f) => f.startsWith('data/'))).toBe(true);
    expect(foreignFiles.some((f) => f.startsWith('_versions/'))).toBe(true);
  });
  afterAll(async () => {
    await Promise.all([app?.close(), elsewhere?.close()]);
    await Promise.all([root?.dispose(), outside?.dispose()]);
  });

  /** Plants `<root>/fs/<name>.lance -> foreign`; returns the link's path. */
  const plant = async (name: string) => {
    const link = path.join(root.root, 'fs', `${name}.lance`);
    await symlink(foreign, link);
    return link;
  };

  /** A directory outside the root holding one file, `precious`: what a link may lead to instead of a dataset's entry. */
  const decoy = async () => {
    const dir = path.join(outside.root, `decoy-${randomUUID()}`);
    await mkdir(path.join(dir, 'versions'), { recursive: true });
    // Named like a version's sidecar, so that a write through a linked `_catalog/` would replace it.
    await writeFile(path.join(dir, 'versions', '00000000000000000003.json'), 'precious');
    return dir;
  };
  const expectDecoyIntact = async (dir: string) => {
    expect(await filesUnder(dir)).toEqual(['versions/00000000000000000003.json']);
    expect(await readFile(path.join(dir, 'versions', '00000000000000000003.json'), 'utf8')).toBe('precious');
  };
  /** Puts a link to `target` in place of `dir/entry` (what was there goes aside, outside the root). */
  const swapForLink = async (dir: string, entry: string, target: string) => {
    const at = path.join(dir, entry);
    if (await exists(at)) await rename(at, path.join(outside.root, `aside-${randomUUID()}`));
    await symlink(target, at);
    return at;
  };

  it('reads nothing through a table directory that is a link out of the root', async () => {
    await plant('read');
    expectCode(await call('/v1/table/fs%24read/describe'), 404, 4);
    expectCode(await call('/v1/table/fs%24read/describe?load_detailed_metadata=true'), 404, 4);
    expectCode(await call('/v1/table/fs%24read/exists'), 404, 4);
    expectCode(await call('/v1/table/fs%24read/count_rows'), 404, 4);
    expectCode(await call('/v1/table/fs%24read/version/list'), 404, 4);
  });

  it('writes nothing through a table directory that is a link out of the root', async () => {
    await plant('write');
    expectCode(await call('/v1/table/fs%24write/insert', peopleStream([9]), ARROW), 404, 4);
    expectCode(await call('/v1/table/fs%24write/delete', { predicate: 'id > 0' }), 404, 4);
    await expectForeignIntact();
  });

  it('creates nothing through a table directory that is a link: the name is not free', async () => {
    await plant('create');
    for (const [url, body, headers] of [
      ['/v1/table/fs%24create/declare', {}, undefined],
      ['/v1/table/fs%24create/create', peopleStream([9]), ARROW],
      ['/v1/table/fs%24create/register', { location: 'create.lance' }, undefined],
      ['/v1/table/batch-commit', { operations: [{ declare_table: { id: ['fs', 'create'] } }] }, undefined],
    ] as const) {
      const res = await call(url, body, headers);
      expectCode(res, 400, 13);
      expect(String(res.json.error), url).toMatch(/symbolic link/);
    }
    await expectForeignIntact();
  });

  it('drops the link of a table directory, never what it leads to', async () => {
    const link = await plant('drop');
    const dropped = await call('/v1/table/fs%24drop/drop');
    await expectForeignIntact();
    expect(dropped.status, dropped.text).toBe(200);
    expect(await exists(link)).toBe(false);
    // The name is free again, and a table made under it lives in the root.
    expect((await call('/v1/table/fs%24drop/create', peopleStream([5]), ARROW)).status).toBe(200);
    expect((await lstat(link)).isDirectory()).toBe(true);
    expect((await call('/v1/table/fs%24drop/count_rows')).json).toEqual({ value: 1 });
    await expectForeignIntact();
  });

  it('refuses a table whose directory was swapped for a link after it was served, and its drop leaves the target', async () => {
    expect((await call('/v1/table/fs%24t/create', peopleStream([1]), ARROW)).status).toBe(200);
    // Served once, so the engine keeps the dataset open.
    expect((await call('/v1/table/fs%24t/count_rows')).json).toEqual({ value: 1 });
    const dir = path.join(root.root, 'fs', 't.lance');
    await rename(dir, path.join(outside.root, `aside-${randomUUID()}`));
    await symlink(foreign, dir);
    expectCode(await call('/v1/table/fs%24t/count_rows'), 404, 4);
    expectCode(await call('/v1/table/fs%24t/describe'), 404, 4);
    expectCode(await call('/v1/table/fs%24t/insert', peopleStream([9]), ARROW), 404, 4);
    expectCode(await call('/v1/table/fs%24t/delete', { predicate: 'id > 0' }), 404, 4);
    const dropped = await call('/v1/table/fs%24t/drop');
    await expectForeignIntact();
    expect(dropped.status, dropped.text).toBe(200);
    expect(await exists(dir)).toBe(false);
  });

  it('refuses a table whose _versions was swapped for a link: no manifest is read, written or deleted through it, and its drop removes only the link', async () => {
    expect((await call('/v1/table/fs%24vl/create', peopleStream([1]), ARROW)).status).toBe(200);
    expect((await call('/v1/table/fs%24vl/insert', peopleStream([2]), ARROW)).status).toBe(200);
    const versions = path.join(root.root, 'fs', 'vl.lance', '_versions');
    await rename(versions, path.join(outside.root, `aside-${randomUUID()}`));
    await symlink(path.join(foreign, '_versions'), versions);
    expectCode(await call('/v1/table/fs%24vl/count_rows'), 404, 4);
    expectCode(await call('/v1/table/fs%24vl/version/list'), 404, 4);
    expectCode(await call('/v1/table/fs%24vl/insert', peopleStream([9]), ARROW), 404, 4);
    expectCode(await call('/v1/table/fs%24vl/version/delete', { ranges: [{ start_version: 1, end_version: -1 }] }), 404, 4);
    expectCode(await call('/v1/table/fs%24vl/create', peopleStream([3]), ARROW), 400, 13);
    const dropped = await call('/v1/table/fs%24vl/drop');
    expect(dropped.status, dropped.text).toBe(200);
    await expectForeignIntact();
    expect(await exists(path.join(root.root, 'fs', 'vl.lance', '_versions'))).toBe(false);
    expect((await call('/v1/table/fs%24vl/create', peopleStream([4]), ARROW)).status).toBe(200);
  });

  // Every top-level entry of a dataset directory is the service's or the engine's to read, write
  // and delete in: a link among them is refused as the directory itself would be.
  it.each(['data', '_versions', '_catalog', '_indices', '_transactions', '_deletions', 'tree'])(
    'refuses a table whose %s entry is a link, writes and deletes nothing through it, and its drop removes only the link',
    async (entry) => {
      const name = `e${entry.replace(/_/g, '')}`;
      const url = `/v1/table/fs%24${name}`;
      expect((await call(`${url}/create`, peopleStream([1]), ARROW)).status).toBe(200);
      expect((await call(`${url}/insert`, peopleStream([2]), ARROW)).status).toBe(200);
      const dir = path.join(root.root, 'fs', `${name}.lance`);
      // Where the foreign dataset has such an entry, the link leads to it; else to a decoy.
      const target = (await exists(path.join(foreign, entry))) ? path.join(foreign, entry) : await decoy();
      const staged = `_versions/3.manifest-${randomUUID()}`;
      if (entry !== '_versions') await writeFile(path.join(dir, staged), manifestBytes(3));
      const link = await swapForLink(dir, entry, target);
      expectCode(await call(`${url}/describe`), 404, 4);
      expectCode(await call(`${url}/exists`), 404, 4);
      expectCode(await call(`${url}/count_rows`), 404, 4);
      expectCode(await call(`${url}/version/list`), 404, 4);
      expectCode(await call(`${url}/insert`, peopleStream([9]), ARROW), 404, 4);
      expectCode(await call(`${url}/delete`, { predicate: 'id > 0' }), 404, 4);
      expectCode(await call(`${url}/create_index`, { column: 'id', index_type: 'BTREE' }), 404, 4);
      if (entry !== '_versions') expectCode(await call(`${url}/version/create`, { version: 3, manifest_path: staged, metadata: { a: 'b' } }), 404, 4);
      const taken = await call(`${url}/create`, peopleStream([3]), ARROW);
      expectCode(taken, 400, 13);
      expect(String(taken.json.error)).toMatch(/symbolic link/);
      if (!target.startsWith(foreign)) await expectDecoyIntact(target);
      await expectForeignIntact();
      const dropped = await call(`${url}/drop`);
      expect(dropped.status, dropped.text).toBe(200);
      expect(await exists(link)).toBe(false);
      if (!target.startsWith(foreign)) await expectDecoyIntact(target);
      await expectForeignIntact();
      // The name is free again.
      expect((await call(`${url}/create`, peopleStream([4]), ARROW)).status).toBe(200);
      expect((await call(`${url}/count_rows`)).json).toEqual({ value: 1 });
    },
  );

  /** Creates `fs$<name>`, deregisters it and creates it again: the new table lives in a directory of its own. */
  const recreated = async (name: string) => {
    expect((await call(`/v1/table/fs%24${name}/create`, peopleStream([1, 2]), ARROW)).status).toBe(200);
    expect((await call(`/v1/table/fs%24${name}/deregister`)).status).toBe(200);
    const before = new Set(await readdir(path.join(root.root, 'fs')));
    expect((await call(`/v1/table/fs%24${name}/create`, peopleStream([7]), ARROW)).status).toBe(200);
    const own = (await readdir(path.join(root.root, 'fs'))).filter((n) => n.startsWith('.lance-table-') && !before.has(n));
    expect(own).toHaveLength(1);
    const kept = path.join(root.root, 'fs', `${name}.lance`);
    return { kept, keptFiles: await datasetFilesUnder(kept), ownDir: path.join(root.root, 'fs', own[0] as string) };
  };

  it('refuses a re-created table whose own directory was swapped for a link (404, as any linked table), and its drop removes the link and frees the name', async () => {
    const { kept, keptFiles, ownDir } = await recreated('re');
    await swapForLink(path.dirname(ownDir), path.basename(ownDir), foreign);
    expectCode(await call('/v1/table/fs%24re/count_rows'), 404, 4);
    expectCode(await call('/v1/table/fs%24re/describe'), 404, 4);
    expectCode(await call('/v1/table/fs%24re/insert', peopleStream([9]), ARROW), 404, 4);
    expectCode(await call('/v1/table/fs%24re/deregister'), 404, 4);
    const dropped = await call('/v1/table/fs%24re/drop');
    expect(dropped.status, dropped.text).toBe(200);
    await expectForeignIntact();
    expect(await exists(ownDir)).toBe(false);
    // The retired name directory keeps the deregistered data, untouched.
    expect(await datasetFilesUnder(kept)).toEqual(keptFiles);
    expect((await call('/v1/table/fs%24re/create', peopleStream([8]), ARROW)).status).toBe(200);
    expect((await call('/v1/table/fs%24re/count_rows')).json).toEqual({ value: 1 });
  });

  it("refuses a re-created table whose own directory's data entry is a link, and its drop removes the link, never deleting in the retired directory", async () => {
    const { kept, keptFiles, ownDir } = await recreated('reentry');
    await swapForLink(ownDir, 'data', path.join(foreign, 'data'));
    expectCode(await call('/v1/table/fs%24reentry/count_rows'), 404, 4);
    expectCode(await call('/v1/table/fs%24reentry/insert', peopleStream([9]), ARROW), 404, 4);
    const dropped = await call('/v1/table/fs%24reentry/drop');
    expect(dropped.status, dropped.text).toBe(200);
    await expectForeignIntact();
    expect(await exists(ownDir)).toBe(false);
    expect(await datasetFilesUnder(kept)).toEqual(keptFiles);
    expectCode(await call('/v1/table/fs%24reentry/count_rows'), 404, 4);
  });

  it("a link planted in a retired name directory does not block the name's new table, and is left alone", async () => {
    expect((await call('/v1/table/fs%24rl/create', peopleStream([1, 2]), ARROW)).status).toBe(200);
    expect((await call('/v1/table/fs%24rl/deregister')).status).toBe(200);
    // The name's directory now holds the deregistered table's data: its entries are none of the name's next table's.
    const kept = path.join(root.root, 'fs', 'rl.lance');
    const sham = await decoy();
    await swapForLink(kept, '_versions', path.join(foreign, '_versions'));
    await swapForLink(kept, '_indices', sham);
    const keptFiles = await datasetFilesUnder(kept);
    const made = await call('/v1/table/fs%24rl/create', peopleStream([7]), ARROW);
    expect(made.status, made.text).toBe(200);
    expect((await call('/v1/table/fs%24rl/insert', peopleStream([8]), ARROW)).status).toBe(200);
    expect((await call('/v1/table/fs%24rl/count_rows')).json).toEqual({ value: 2 });
    expect((await call('/v1/table/fs%24rl/describe')).status).toBe(200);
    const dropped = await call('/v1/table/fs%24rl/drop');
    expect(dropped.status, dropped.text).toBe(200);
    expect(await datasetFilesUnder(kept)).toEqual(keptFiles);
    await expectDecoyIntact(sham);
    await expectForeignIntact();
    // Its `_catalog/`, where the name's writers put their leases, is the name's: a link there is refused, and a drop removes it.
    expect((await call('/v1/table/fs%24rl/create', peopleStream([5]), ARROW)).status).toBe(200);
    const catalogLink = await swapForLink(kept, '_catalog', sham);
    expectCode(await call('/v1/table/fs%24rl/insert', peopleStream([9]), ARROW), 404, 4);
    expectCode(await call('/v1/table/fs%24rl/count_rows'), 404, 4);
    expect((await call('/v1/table/fs%24rl/drop')).status).toBe(200);
    expect(await exists(catalogLink)).toBe(false);
    await expectDecoyIntact(sham);
    expect((await call('/v1/table/fs%24rl/create', peopleStream([6]), ARROW)).status).toBe(200);
  });

  it('a Restrict namespace drop counts no linked child and removes the links, never what they lead to', async () => {
    expect((await call('/v1/namespace/nr/create')).status).toBe(200);
    expect((await call('/v1/table/nr%24t/create', peopleStream([1]), ARROW)).status).toBe(200);
    const sham = await decoy();
    await swapForLink(path.join(root.root, 'nr', 't.lance'), '_versions', path.join(foreign, '_versions'));
    await symlink(foreign, path.join(root.root, 'nr', 'p.lance'));
    await symlink(sham, path.join(root.root, 'nr', 'q'));
    const dropped = await call('/v1/namespace/nr/drop', { behavior: 'Restrict' });
    expect(dropped.status, dropped.text).toBe(200);
    expect(await exists(path.join(root.root, 'nr'))).toBe(false);
    await expectDecoyIntact(sham);
    await expectForeignIntact();
  });

  it('a Cascade namespace drop drops its tables, removes the links and follows none', async () => {
    expect((await call('/v1/namespace/nc/create')).status).toBe(200);
    for (const t of ['u', 'v', 'w']) expect((await call(`/v1/table/nc%24${t}/create`, peopleStream([1]), ARROW)).status).toBe(200);
    await swapForLink(path.join(root.root, 'nc', 'v.lance'), '_versions', path.join(foreign, '_versions'));
    await swapForLink(path.join(root.root, 'nc', 'w.lance'), 'data', path.join(foreign, 'data'));
    await symlink(foreign, path.join(root.root, 'nc', 'p.lance'));
    const refused = await call('/v1/namespace/nc/drop', { behavior: 'Restrict' });
    expectCode(refused, 409, 3);
    expect(String(refused.json.error)).toMatch(/contains table u$/);
    const dropped = await call('/v1/namespace/nc/drop', { behavior: 'Cascade' });
    expect(dropped.status, dropped.text).toBe(200);
    expect(await exists(path.join(root.root, 'nc'))).toBe(false);
    await expectForeignIntact();
  });

  it('refuses a dataset under an allowed location whose entries are links out of it, at register time and per request', async () => {
    const shared = path.join(outside.root, `shared-${randomUUID()}`);
    await cp(foreign, path.join(shared, 'real'), { recursive: true });
    // Entries that lead out of the allowed location (to the foreign dataset), and entries that stay under it.
    for (const [name, to] of [
      ['out', foreign],
      ['in', path.join(shared, 'real')],
    ] as const) {
      await mkdir(path.join(shared, name));
      for (const entry of ['_versions', 'data', '_transactions']) await symlink(path.join(to, entry), path.join(shared, name, entry));
    }
    const allowing = await startTestApp(root, { allowedLocations: [shared] });
    try {
      const refused = await allowing.call('POST', '/v1/table/fs%24out/register', { location: path.join(shared, 'out') });
      expectCode(refused, 400, 13);
      expect(String(refused.json.error)).toMatch(/symbolic link/);
      expectCode(await allowing.call('POST', '/v1/table/fs%24out/exists', {}), 404, 4);
      const registered = await allowing.call('POST', '/v1/table/fs%24in/register', { location: path.join(shared, 'in') });
      expect(registered.status, registered.text).toBe(200);
      expect((await allowing.call('POST', '/v1/table/fs%24in/count_rows', {})).json).toEqual({ value: 3 });
      // Registered, then one entry swapped for a link out: the table is none (404), and its drop frees the name only.
      await rename(path.join(shared, 'in', 'data'), path.join(shared, `aside-${randomUUID()}`));
      await symlink(path.join(foreign, 'data'), path.join(shared, 'in', 'data'));
      expectCode(await allowing.call('POST', '/v1/table/fs%24in/count_rows', {}), 404, 4);
      expectCode(await allowing.call('POST', '/v1/table/fs%24in/delete', { predicate: 'id > 0' }), 404, 4);
      expect((await allowing.call('POST', '/v1/table/fs%24in/drop', {})).status).toBe(200);
      expect((await lstat(path.join(shared, 'in', 'data'))).isSymbolicLink()).toBe(true);
      expectCode(await allowing.call('POST', '/v1/table/fs%24in/exists', {}), 404, 4);
    } finally {
      await allowing.close();
    }
    await expectForeignIntact();
  });

  it('serves nothing through a namespace directory that is a link, and drops nothing through it', async () => {
    // The outside root's namespace `ns`: its record and its table v.
    await symlink(path.join(outside.root, 'ns'), path.join(root.root, 'nslink'));
    expectCode(await call('/v1/namespace/nslink/describe'), 404, 1);
    expectCode(await call('/v1/namespace/nslink/exists'), 404, 1);
    expectCode(await app.call('GET', '/v1/namespace/nslink/table/list'), 404, 1);
    expectCode(await app.call('GET', '/v1/namespace/nslink/list'), 404, 1);
    expectCode(await call('/v1/table/nslink%24v/count_rows'), 404, 4);
    expectCode(await call('/v1/table/nslink%24v/describe'), 404, 4);
    expectCode(await call('/v1/table/nslink%24v/insert', peopleStream([9]), ARROW), 404, 4);
    expectCode(await call('/v1/table/nslink%24v/drop'), 404, 4);
    expectCode(await call('/v1/table/nslink%24new/create', peopleStream([9]), ARROW), 404, 1);
    expectCode(await call('/v1/namespace/nslink/drop', { behavior: 'Cascade' }), 404, 1);
    for (const ns of ['nslink', 'nslink%24child']) {
      const res = await call(`/v1/namespace/${ns}/create`, { mode: 'Overwrite', properties: { k: 'v' } });
      expectCode(res, 400, 13);
      expect(String(res.json.error)).toMatch(/symbolic link/);
    }
    expect(await filesUnder(path.join(outside.root, 'ns'))).toEqual(expect.arrayContaining(foreignFiles.map((f) => `v.lance/${f}`)));
    expect((await elsewhere.call('POST', '/v1/namespace/ns/describe', {})).json).toEqual({ properties: {} });
    await expectForeignIntact();
  });

  it('commits no staged manifest that is a link', async () => {
    expect((await call('/v1/table/fs%24m/declare')).status).toBe(200);
    const target = path.join(outside.root, `manifest-${randomUUID()}`);
    await writeFile(target, manifestBytes(1));
    const staged = `_versions/1.manifest-${randomUUID()}`;
    await mkdir(path.join(root.root, 'fs', 'm.lance', '_versions'), { recursive: true });
    await symlink(target, path.join(root.root, 'fs', 'm.lance', staged));
    const res = await call('/v1/table/fs%24m/version/create', { version: 1, manifest_path: staged });
    expectCode(res, 400, 13);
    expect((await call('/v1/table/fs%24m/describe?check_declared=true')).json.is_only_declared).toBe(true);
    expect(await exists(target)).toBe(true);
  });

  it("follows no link that stays inside the root either: a name never aliases another namespace's table", async () => {
    expect((await call('/v1/table/a%24secret/create', peopleStream([1, 2]), ARROW)).status).toBe(200);
    const secret = path.join(root.root, 'a', 'secret.lance');
    const before = await filesUnder(secret);
    await symlink(secret, path.join(root.root, 'b', 'peek.lance'));
    await symlink(path.join(root.root, 'a'), path.join(root.root, 'c'));
    expectCode(await call('/v1/table/b%24peek/count_rows'), 404, 4);
    expectCode(await call('/v1/table/c%24secret/count_rows'), 404, 4);
    expectCode(await call('/v1/table/b%24peek/delete', { predicate: 'id > 0' }), 404, 4);
    expect((await call('/v1/table/b%24peek/drop')).status).toBe(200);
    expect(await exists(path.join(root.root, 'b', 'peek.lance'))).toBe(false);
    expect((await call('/v1/table/a%24secret/count_rows')).json).toEqual({ value: 2 });
    expect(await filesUnder(secret)).toEqual(before);
  });
});

describe('RegisterTable through a link across namespaces', () => {
  const sha256 = (key: string) => createHash('sha256').update(key).digest('hex');
  const as = (who: string) => ({ 'x-api-key': `${who}-key` });
  let root: TestRoot;
  let app: TestApp;

  beforeAll(async () => {
    root = await localBackend.newRoot();
    app = await startTestApp(root, {
      auth: { apiKeys: ['admin', 'b-admin'].map((p) => ({ principal: p, sha256: sha256(`${p}-key`) })) },
      authorization: {
        roles: { everything: [{ namespace: [], privilege: 'manage' }], 'b-manager': [{ namespace: ['b'], privilege: 'manage' }] },
        principals: { admin: ['everything'], 'b-admin': ['b-manager'] },
      },
    });
    for (const ns of ['a', 'b']) expect((await app.call('POST', `/v1/namespace/${ns}/create`, {}, as('admin'))).status).toBe(200);
    expect((await app.call('POST', '/v1/table/a%24secret/create', peopleStream([1, 2]), { ...ARROW, ...as('admin') })).status).toBe(200);
  });
  afterAll(async () => {
    await app?.close();
    await root?.dispose();
  });

  it("refuses a location in b that is a link to a's table, however it is named", async () => {
    const secret = path.join(root.root, 'a', 'secret.lance');
    const before = await filesUnder(secret);
    const link = path.join(root.root, 'b', 'link.lance');
    await symlink(secret, link);
    // Directly, the location is a's: b's manager may not register it.
    expect((await app.call('POST', '/v1/table/b%24direct/register', { location: secret }, as('b-admin'))).status).toBe(403);
    for (const location of ['link.lance', link, `file://${link}`]) {
      const res = await app.call('POST', '/v1/table/b%24stolen/register', { location }, as('b-admin'));
      expect(res.status, `${location}: ${res.text}`).toBe(400);
      expect(res.json.code).toBe(13);
      expect(String(res.json.error)).toMatch(/symbolic link/);
    }
    // Not for a manager of both either: a link below the root is never a location.
    expect((await app.call('POST', '/v1/table/b%24stolen/register', { location: 'link.lance' }, as('admin'))).status).toBe(400);
    expect((await app.call('POST', '/v1/table/b%24stolen/exists', {}, as('admin'))).status).toBe(404);
    expect((await app.call('POST', '/v1/table/a%24secret/count_rows', {}, as('admin'))).json).toEqual({ value: 2 });
    expect(await filesUnder(secret)).toEqual(before);
  });

  it("refuses a real directory in b whose entries are links to a's table", async () => {
    const secret = path.join(root.root, 'a', 'secret.lance');
    const before = await filesUnder(secret);
    const x = path.join(root.root, 'b', 'x.lance');
    await mkdir(x, { recursive: true });
    await symlink(path.join(secret, '_versions'), path.join(x, '_versions'));
    await symlink(path.join(secret, 'data'), path.join(x, 'data'));
    for (const who of ['b-admin', 'admin']) {
      const res = await app.call('POST', '/v1/table/b%24stolen/register', { location: 'x.lance' }, as(who));
      expect(res.status, `${who}: ${res.text}`).toBe(400);
      expect(res.json.code).toBe(13);
      expect(String(res.json.error)).toMatch(/symbolic link/);
    }
    expect((await app.call('POST', '/v1/table/b%24stolen/count_rows', {}, as('b-admin'))).status).toBe(404);
    expect((await app.call('POST', '/v1/table/b%24stolen/delete', { predicate: 'id > 0' }, as('b-admin'))).status).toBe(404);
    expect((await app.call('POST', '/v1/table/a%24secret/count_rows', {}, as('admin'))).json).toEqual({ value: 2 });
    expect(await filesUnder(secret)).toEqual(before);
  });

  it("serves no registered location whose entry became a link to a's table, and its drop frees the name, leaving the location", async () => {
    const secret = path.join(root.root, 'a', 'secret.lance');
    const before = await filesUnder(secret);
    const adminCall = (url: string, body: unknown = {}, headers: Record<string, string> = {}) => app.call('POST', url, body, { ...headers, ...as('admin') });
    expect((await adminCall('/v1/table/b%24src/create', peopleStream([5]), ARROW)).status).toBe(200);
    const registered = await app.call('POST', '/v1/table/b%24reg/register', { location: 'src.lance' }, as('b-admin'));
    expect(registered.status, registered.text).toBe(200);
    expect((await app.call('POST', '/v1/table/b%24reg/count_rows', {}, as('b-admin'))).json).toEqual({ value: 1 });
    const data = path.join(root.root, 'b', 'src.lance', 'data');
    await rename(data, path.join(root.root, `aside-${randomUUID()}`));
    await symlink(path.join(secret, 'data'), data);
    for (const [url, body, headers] of [
      ['/v1/table/b%24reg/count_rows', {}, {}],
      ['/v1/table/b%24reg/describe', {}, {}],
      ['/v1/table/b%24reg/delete', { predicate: 'id > 0' }, {}],
      ['/v1/table/b%24reg/insert', peopleStream([9]), ARROW],
      ['/v1/table/b%24reg/deregister', {}, {}],
    ] as const) {
      const res = await app.call('POST', url, body, { ...headers, ...as('b-admin') });
      expect(res.status, `${url}: ${res.text}`).toBe(404);
    }
    const dropped = await app.call('POST', '/v1/table/b%24reg/drop', {}, as('b-admin'));
    expect(dropped.status, dropped.text).toBe(200);
    expect((await app.call('POST', '/v1/table/b%24reg/exists', {}, as('b-admin'))).status).toBe(404);
    // A registered location is not the catalog's to delete in: the link stays, and so does what it leads to.
    expect((await lstat(data)).isSymbolicLink()).toBe(true);
    expect((await adminCall('/v1/table/a%24secret/count_rows')).json).toEqual({ value: 2 });
    expect(await filesUnder(secret)).toEqual(before);
  });
});
