// No request reaches through a symbolic link below a local root.
// Someone who can write the root's file system plants links: a table directory, a namespace
// directory or a staged manifest that leads elsewhere (out of the root, or to another namespace's
// data inside it). The catalog follows none of them: a table or namespace reached through one does
// not exist (404), a name held by one cannot be taken (400 code 13), a drop removes the link and
// never what it leads to, and RegisterTable refuses a location reached through one, so that the
// namespace holding a location is the one its real path lies in. (S3 has no links: local only.)

import { createHash, randomUUID } from 'node:crypto';
import { lstat, mkdir, readdir, rename, symlink, writeFile } from 'node:fs/promises';
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

  it('refuses a re-created table whose own directory was swapped for a link, and drops nothing through it', async () => {
    expect((await call('/v1/table/fs%24re/create', peopleStream([1, 2]), ARROW)).status).toBe(200);
    expect((await call('/v1/table/fs%24re/deregister')).status).toBe(200);
    const kept = path.join(root.root, 'fs', 're.lance');
    const keptFiles = await filesUnder(kept);
    // The name's next table lives in a directory of its own (the name's holds the deregistered data).
    expect((await call('/v1/table/fs%24re/create', peopleStream([7]), ARROW)).status).toBe(200);
    const own = (await readdir(path.join(root.root, 'fs'))).filter((n) => n.startsWith('.lance-table-'));
    expect(own).toHaveLength(1);
    const ownDir = path.join(root.root, 'fs', own[0] as string);
    await rename(ownDir, path.join(outside.root, `aside-${randomUUID()}`));
    await symlink(foreign, ownDir);
    expectCode(await call('/v1/table/fs%24re/count_rows'), 400, 13);
    expectCode(await call('/v1/table/fs%24re/describe'), 400, 13);
    expectCode(await call('/v1/table/fs%24re/insert', peopleStream([9]), ARROW), 400, 13);
    expectCode(await call('/v1/table/fs%24re/drop'), 404, 4);
    await expectForeignIntact();
    expect(await filesUnder(kept)).toEqual(expect.arrayContaining(keptFiles.filter((f) => f.startsWith('data/') || f.startsWith('_versions/'))));
    expect(await exists(ownDir)).toBe(true);
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
});
