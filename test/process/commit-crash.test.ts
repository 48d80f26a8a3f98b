import { describe, expect, it } from 'vitest';
import { parseManifestFileName } from '../../src/engine/lance-format/manifest-names.js';
import { listAll } from '../../src/store/object-store.js';
import { peopleStream } from '../support/arrow-data.js';
import { type Backend, backends } from '../support/backends.js';
import { manifestBytes } from '../support/manifests.js';
import { useCrashRoot } from '../support/service-process.js';

// A create_table_version killed at each step of its writes (src/service/versions/commit-steps.ts):
// after its files were written (before the checks allowed their placement), and after the manifest
// was committed (before its sidecar was placed). Never a sidecar without its manifest; a version
// either committed or not; and a retry of the same create by a live replica succeeds; on main and
// on a branch (its own history under tree/<branch>/). And killed just after its answer, before
// what it leaves for after it.

const LEASE_MS = 1_500;
const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

describe.each(backends())('create_table_version killed half-way on $name', (backend: Backend) => {
  const crash = useCrashRoot(backend, LEASE_MS);

  for (const [point, branch] of [
    ['commit:before-place', undefined],
    ['commit:before-sidecar', undefined],
    ['commit:before-place', 'dev'],
    ['commit:before-sidecar', 'dev'],
  ] as const) {
    it(`killed at ${point}${branch ? ' on a branch' : ''}: the version is committed only past the manifest, never a sidecar alone, and a retry succeeds`, async () => {
      const table = `${point}${branch ?? ''}`.replace(/\W/g, '_');
      const path = `/v1/table/ns%24${table}`;
      const created = await crash.watcher().call('POST', `${path}/create`, peopleStream([1, 2]), ARROW);
      expect(created.status, created.text).toBe(200);
      const dir = `ns/${table}.lance/`;
      const store = crash.root().store;
      const v1 = (await listAll(store, `${dir}_versions/`)).objects.find((o) => parseManifestFileName(o.key.slice(`${dir}_versions/`.length))?.version === 1);
      expect(v1).toBeDefined();
      // On a branch: forked at version 1 (its ref, then its first manifest: the table has no managed
      // versioning, where a branch exists only by its ref; see branch-versions.ts).
      const line = branch === undefined ? dir : `${dir}tree/${branch}/`;
      const onBranch = branch === undefined ? {} : { branch };
      if (branch !== undefined) {
        await store.put(`${dir}_refs/branches/${branch}.json`, JSON.stringify({ parentVersion: 1, createAt: 1, manifestSize: 1 }));
        await store.put(`${line}_versions/1.manifest-staged`, (await store.get(v1?.key ?? ''))?.body ?? Buffer.alloc(0));
        const first = await crash
          .watcher()
          .call('POST', `${path}/version/create`, { version: 1, manifest_path: store.objectPath(`${line}_versions/1.manifest-staged`), branch });
        expect(first.status, first.text).toBe(200);
      }
      await store.put(`${line}_versions/2.manifest-staged`, manifestBytes(2));
      const request = {
        version: 2,
        manifest_path: store.objectPath(`${line}_versions/2.manifest-staged`),
        e_tag: 'mine',
        manifest_size: 1,
        naming_scheme: 'V2',
        ...onBranch,
      };

      const dying = await crash.start(point);
      await expect(dying.call('POST', `${path}/version/create`, request)).rejects.toThrow();
      expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
      const committed = point === 'commit:before-sidecar';
      expect((await store.head(`${line}_versions/${'18446744073709551613'}.manifest`)) !== null).toBe(committed);
      expect(await store.head(`${line}_catalog/versions/00000000000000000002.json`)).toBeNull();
      const listed = await crash.watcher().call('GET', `${path}/version/list${branch ? `?branch=${branch}` : ''}`);
      expect((listed.json.versions as Array<{ version: number }>).map((v) => v.version).sort()).toEqual(committed ? [1, 2] : [1]);

      // The dead writer's slot is taken over once its lease ends; the retry commits, or finds its own commit.
      const started = Date.now();
      let retry = await crash.watcher().call('POST', `${path}/version/create`, request);
      while (retry.status === 409 && Date.now() - started < LEASE_MS * 8) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        retry = await crash.watcher().call('POST', `${path}/version/create`, request);
      }
      expect(retry.status, retry.text).toBe(200);
      expect((retry.json.version as { version: number }).version).toBe(2);
      const described = await crash.watcher().call('POST', `${path}/version/describe`, { version: 2, ...onBranch });
      expect(described.status, described.text).toBe(200);
      if (branch !== undefined) {
        const main = await crash.watcher().call('GET', `${path}/version/list`);
        expect((main.json.versions as Array<{ version: number }>).map((v) => v.version)).toEqual([1]);
      }
    });
  }

  it('killed just after its answer (src/service/versions/after-answer.ts): the version stays, its slot hold stays until its lease ends, and the table commits on and drops', async () => {
    const path = '/v1/table/ns%24after_answer';
    const created = await crash.watcher().call('POST', `${path}/create`, peopleStream([1, 2]), ARROW);
    expect(created.status, created.text).toBe(200);
    const dir = 'ns/after_answer.lance/';
    const store = crash.root().store;
    const stage = async (v: number) => {
      await store.put(`${dir}_versions/${v}.manifest-staged`, manifestBytes(v));
      return { version: v, manifest_path: `_versions/${v}.manifest-staged`, naming_scheme: 'V2' };
    };

    const dying = await crash.start('commit:after-answer');
    const answered = await dying.call('POST', `${path}/version/create`, await stage(2));
    expect(answered.status, answered.text).toBe(200);
    expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // What the answer acknowledged is there, and the staged file went before it; the slot's hold, left for after it, stays.
    const listed = await crash.watcher().call('GET', `${path}/version/list`);
    expect((listed.json.versions as Array<{ version: number }>).map((v) => v.version).sort()).toEqual([1, 2]);
    expect(await store.head(`${dir}_versions/2.manifest-staged`)).toBeNull();
    expect(await store.head(`${dir}_catalog/reservations/00000000000000000002.json`)).not.toBeNull();

    // The next version has a slot of its own: it commits at once.
    const next = await crash.watcher().call('POST', `${path}/version/create`, await stage(3));
    expect(next.status, next.text).toBe(200);
    // A drop waits for the dead writer's hold until its lease ends, then leaves only its tombstone.
    expect((await crash.watcher().call('POST', `${path}/drop`, {})).status).toBe(200);
    expect((await crash.watcher().call('POST', `${path}/exists`, {})).status).toBe(404);
    expect((await listAll(store, dir)).objects.map((o) => o.key)).toEqual([`${dir}.lance-deregistered`]);
  });
});
