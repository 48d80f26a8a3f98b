import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { listAll } from '../../src/store/object-store.js';
import { peopleStream } from '../support/arrow-data.js';
import { type Backend, backends } from '../support/backends.js';
import { manifestBytes } from '../support/manifests.js';
import { type ServiceProcess, useCrashRoot } from '../support/service-process.js';

// DeleteTableBranch against work in flight on the branch (the protocol and its invariant are in
// src/service/tables/table-fences.ts): a commit or a data write on a branch either lands before
// the delete removes the branch's tree, and goes with it, or fails cleanly (404 code 22); nothing
// of it is left in tree/<name>/, so a later branch of the name starts from its own fork alone.
// One process is paused at a step of the write (LANCE_NS_PAUSE_POINTS) while another deletes the
// branch; one is SIGKILLed half-way through a delete. The old code answered the paused commit 200
// after the delete, leaving its manifest in the tree for the next branch of the name to take as its
// latest, and did not wait for the paused write.

const LEASE_MS = 2_500;
const PAUSE_MS = 1_500;
const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

describe.each(backends())('a branch deleted while work on it is in flight, two processes on $name', (backend: Backend) => {
  const crash = useCrashRoot(backend, LEASE_MS);
  // A table is `<table>` in namespace ns, or `m/<table>` in namespace m (managed versioning).
  const nsOf = (table: string) => (table.startsWith('m/') ? 'm' : 'ns');
  const nameOf = (table: string) => table.replace(/^m\//, '');
  const path = (table: string, op: string) => `/v1/table/${nsOf(table)}%24${nameOf(table)}/${op}`;
  const post = (replica: ServiceProcess, table: string, op: string, body: unknown = {}) => replica.call('POST', path(table, op), body);

  /** Creates `table` with rows 1..5 and forks `dev` from it; returns the key of its directory. */
  async function tableWithBranch(table: string): Promise<string> {
    const watcher = crash.watcher();
    if (nsOf(table) === 'm' && (await watcher.call('POST', '/v1/namespace/m/exists', {})).status === 404)
      expect((await watcher.call('POST', '/v1/namespace/m/create', { properties: { managed_versioning: 'true' } })).status).toBe(200);
    const made = await watcher.call('POST', path(table, 'create'), peopleStream([1, 2, 3, 4, 5]), ARROW);
    expect(made.status, made.text).toBe(200);
    expect((await post(watcher, table, 'branches/create', { name: 'dev' })).status).toBe(200);
    return `${nsOf(table)}/${nameOf(table)}.lance/`;
  }

  /** Resolves once `replica` has reached pause point `point` (it says so on its stderr). */
  async function reached(replica: ServiceProcess, point: string): Promise<void> {
    while (!replica.stderr().includes(`pause point ${point}`)) await new Promise((resolve) => setTimeout(resolve, 10));
  }

  const treeKeys = async (dir: string) => (await listAll(crash.root().store, `${dir}tree/`)).objects.map((o) => o.key);
  const versionsOf = async (table: string, branch: string) =>
    ((await post(crash.watcher(), table, 'version/list', { branch })).json.versions as Array<{ version: number }>).map((v) => v.version);

  /** The name taken anew: a fork of main's latest with main's rows, and nothing of the deleted branch. */
  async function forkedAfresh(table: string, rows: number): Promise<void> {
    const watcher = crash.watcher();
    const again = await post(watcher, table, 'branches/create', { name: 'dev' });
    expect(again.status, again.text).toBe(200);
    expect(await versionsOf(table, 'dev')).toEqual([1]);
    expect((await post(watcher, table, 'count_rows', { branch: 'dev' })).text).toBe(String(rows));
  }

  it('a commit on the branch that resolved its ref before the delete and holds its slot after it: 404 code 22, nothing left in the tree', async () => {
    const dir = await tableWithBranch('c1');
    const slow = await crash.start(undefined, { points: ['commit:before-slot'], ms: PAUSE_MS });
    const staged = `${dir}tree/dev/_versions/2.manifest-${randomUUID()}`;
    await crash.root().store.put(staged, manifestBytes(2));
    const commit = post(slow, 'c1', 'version/create', { version: 2, manifest_path: crash.root().store.objectPath(staged), branch: 'dev' });
    await reached(slow, 'commit:before-slot');
    const deleted = await post(crash.watcher(), 'c1', 'branches/delete', { name: 'dev' });
    expect(deleted.status, deleted.text).toBe(200);
    const late = await commit;
    expect([late.status, late.json.code], late.text).toEqual([404, 22]);
    expect(await treeKeys(dir)).toEqual([]);
    await forkedAfresh('c1', 5);
  });

  for (const [point, outcome] of [
    ['batch:after-claims', 'it looks at the ref again after the delete removed it: 404 code 22, rolled back'],
    ['batch:before-commit-point', 'it looked at the ref before: it commits, and its version goes with the branch'],
  ] as const) {
    it(`a batch holding a version slot of the branch at ${point}: the delete waits until it is done; ${outcome}; nothing is left in the tree`, async () => {
      const table = point.replace(/\W/g, '_');
      const dir = await tableWithBranch(table);
      const slow = await crash.start(undefined, { points: [point], ms: PAUSE_MS });
      const staged = `${dir}tree/dev/_versions/2.manifest-${randomUUID()}`;
      await crash.root().store.put(staged, manifestBytes(2));
      const entry = { id: ['ns', table], version: 2, manifest_path: crash.root().store.objectPath(staged), branch: 'dev' };
      const batch = slow.call('POST', '/v1/table/version/batch-create', { entries: [entry] });
      await reached(slow, point);
      const deleted = await post(crash.watcher(), table, 'branches/delete', { name: 'dev' });
      expect(deleted.status, deleted.text).toBe(200);
      const done = await batch;
      if (point === 'batch:after-claims') expect([done.status, done.json.code], done.text).toEqual([404, 22]);
      else expect(done.status, done.text).toBe(200);
      expect(await treeKeys(dir)).toEqual([]);
      expect((await listAll(crash.root().store, `${dir}_catalog/reservations/`)).objects).toEqual([]);
      await forkedAfresh(table, 5);
    });
  }

  for (const managed of [false, true]) {
    it(`a data write on the branch${managed ? ' of a managed table' : ''} paused after it read the ref: the delete waits for it, then nothing of it is left`, async () => {
      const table = managed ? 'm/w2' : 'w1';
      const dir = await tableWithBranch(table);
      const slow = await crash.start(undefined, { points: ['write:after-resolve'], ms: PAUSE_MS });
      const insert = slow.call('POST', `${path(table, 'insert')}?branch=dev`, peopleStream([7, 8]), ARROW);
      await reached(slow, 'write:after-resolve');
      const deleted = await post(crash.watcher(), table, 'branches/delete', { name: 'dev' });
      expect(deleted.status, deleted.text).toBe(200);
      // The write entered before the delete removed the ref: it went ahead, and went with the branch.
      const written = await insert;
      expect(written.status, written.text).toBe(200);
      expect(await treeKeys(dir)).toEqual([]);
      expect((await post(crash.watcher(), table, 'branches/list')).json.branches).toEqual({});
      await forkedAfresh(table, 5);
      expect((await post(crash.watcher(), table, 'count_rows', {})).text).toBe('5');
    });
  }

  it('a write on the branch that reads the ref after the delete removed it: 404 code 22, nothing written', async () => {
    const dir = await tableWithBranch('w3');
    const slow = await crash.start(undefined, { points: ['branch-delete:after-ref'], ms: PAUSE_MS });
    const deleting = post(slow, 'w3', 'branches/delete', { name: 'dev' });
    await reached(slow, 'branch-delete:after-ref');
    const late = await crash.watcher().call('POST', `${path('w3', 'insert')}?branch=dev`, peopleStream([7, 8]), ARROW);
    expect([late.status, late.json.code], late.text).toEqual([404, 22]);
    expect((await deleting).status).toBe(200);
    expect(await treeKeys(dir)).toEqual([]);
    await forkedAfresh('w3', 5);
  });

  // A tag into a branch against the branch's delete (the protocol and its invariant are in
  // src/service/data/tags.ts): the tag's write and the delete hold the table's branch claim in turn,
  // so the tag is there when the delete reads the tags (409 code 19), or the branch is gone when the
  // tag's write reads its ref (404 code 22). The old code took no claim for the tag: the delete read
  // no tag, removed the branch, and the tag written meanwhile pointed into nothing.
  it('a tag into the branch paused after it read the ref: the delete waits for it, then refuses (409 code 19); the tag points into a branch that is there', async () => {
    await tableWithBranch('g1');
    const slow = await crash.start(undefined, { points: ['write:after-resolve'], ms: PAUSE_MS });
    const tagging = post(slow, 'g1', 'tags/create', { tag: 'keep', version: 1, branch: 'dev' });
    await reached(slow, 'write:after-resolve');
    const deleted = await post(crash.watcher(), 'g1', 'branches/delete', { name: 'dev' });
    const tagged = await tagging;
    expect(tagged.status, tagged.text).toBe(200);
    expect([deleted.status, deleted.json.code], deleted.text).toEqual([409, 19]);
    expect(String(deleted.json.error)).toMatch(/keep/);
    const watcher = crash.watcher();
    expect(Object.keys((await post(watcher, 'g1', 'branches/list')).json.branches as object)).toEqual(['dev']);
    expect((await post(watcher, 'g1', 'tags/version', { tag: 'keep' })).json).toEqual({ version: 1, branch: 'dev' });
    expect((await post(watcher, 'g1', 'count_rows', { branch: 'dev', version: 1 })).text).toBe('5');
  });

  it('a delete paused after it read the tags: a tag created or moved into the branch waits for it, then finds the branch gone (404 code 22), and no tag points into it', async () => {
    const dir = await tableWithBranch('g2');
    const watcher = crash.watcher();
    expect((await post(watcher, 'g2', 'tags/create', { tag: 'onmain', version: 1 })).status).toBe(200);
    const slow = await crash.start(undefined, { points: ['branch-delete:after-tags'], ms: PAUSE_MS });
    const deleting = post(slow, 'g2', 'branches/delete', { name: 'dev' });
    await reached(slow, 'branch-delete:after-tags');
    const [created, moved] = await Promise.all([
      post(watcher, 'g2', 'tags/create', { tag: 'keep', version: 1, branch: 'dev' }),
      post(watcher, 'g2', 'tags/update', { tag: 'onmain', version: 1, branch: 'dev' }),
    ]);
    expect([created.status, created.json.code], created.text).toEqual([404, 22]);
    expect([moved.status, moved.json.code], moved.text).toEqual([404, 22]);
    expect((await deleting).status).toBe(200);
    const tags = (await post(watcher, 'g2', 'tags/list')).json.tags as Record<string, { branch?: string }>;
    expect(Object.keys(tags)).toEqual(['onmain']);
    expect(tags.onmain?.branch).toBeUndefined();
    expect(await treeKeys(dir)).toEqual([]);
  });

  it('a delete killed after the ref went, a branch nested under it: a fork of the name works and takes nothing of the old one; the nested one stays whole', async () => {
    const dir = await tableWithBranch('k1');
    const watcher = crash.watcher();
    expect((await post(watcher, 'k1', 'branches/create', { name: 'dev/sub' })).status).toBe(200);
    expect((await post(watcher, 'k1', 'delete', { branch: 'dev', predicate: 'id = 1' })).status).toBe(200);
    expect((await post(watcher, 'k1', 'delete', { branch: 'dev/sub', predicate: 'id <= 2' })).status).toBe(200);
    const nested = (await treeKeys(dir)).filter((k) => k.startsWith(`${dir}tree/dev/sub/`));
    const dying = await crash.start('branch-delete:after-ref');
    await expect(post(dying, 'k1', 'branches/delete', { name: 'dev' })).rejects.toThrow();
    expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // Lance's delete left all of tree/dev/ (dev/sub lives in it); the fork removes dev's part first.
    expect(Object.keys((await post(watcher, 'k1', 'branches/list')).json.branches as object)).toEqual(['dev/sub']);
    await forkedAfresh('k1', 5);
    expect((await post(watcher, 'k1', 'count_rows', { branch: 'dev/sub' })).text).toBe('3');
    expect((await treeKeys(dir)).filter((k) => k.startsWith(`${dir}tree/dev/sub/`))).toEqual(nested);
  });
});
