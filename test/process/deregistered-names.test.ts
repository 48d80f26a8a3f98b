import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listAll } from '../../src/store/object-store.js';
import { peopleStream, readRows } from '../support/arrow-data.js';
import { type Backend, backends, type TestRoot } from '../support/backends.js';
import { rootArgs, type ServiceProcess, startServiceProcess, useCrashRoot } from '../support/service-process.js';

// A deregistered table frees its name and keeps its data: the next table of
// the name lives in a directory of its own, and nothing the name's later tables do (create, fill,
// drop, a create or drop killed half-way, a dead create taken over) reads, changes or deletes the
// deregistered data (the invariant in src/service/tables/table-state.ts). Two service processes on
// one root race deregisters against creates and drops of the same name; another process is
// SIGKILLed at each step of a create and of a drop over a deregistered name. The old code answered
// every create of the name 409 code 5 after a deregister, for good.

const LEASE_MS = 2_500;
const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const path = (table: string, op: string) => `/v1/table/ns%24${table}/${op}`;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
/** CountTableRows of a table (its answer is a bare number). */
const rowCount = async (replica: ServiceProcess, table: string): Promise<number> => Number((await replica.call('POST', path(table, 'count_rows'), {})).text);

/** The dataset files in a table directory (not the catalog's files of its name), each with its etag. */
async function datasetFiles(root: TestRoot, dirKey: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const o of (await listAll(root.store, dirKey, { details: true })).objects) {
    const rel = o.key.slice(dirKey.length);
    if (/^(_versions|_transactions|data|_indices|_deletions)\//.test(rel)) files[rel] = o.etag;
  }
  return files;
}

/** The key of a location inside the root. */
const keyOf = (root: TestRoot, location: string): string => `${location.slice(root.store.location('').replace(/\/+$/, '').length).replace(/^\/+/, '')}/`;

async function expectInvisible(replica: ServiceProcess, table: string): Promise<void> {
  expect((await replica.call('POST', path(table, 'describe'), {})).status).toBe(404);
  expect((await replica.call('POST', path(table, 'exists'), {})).status).toBe(404);
  expect((await replica.call('GET', '/v1/namespace/ns/table/list?include_declared=true')).json.tables).not.toContain(table);
}

describe.each(backends())('deregistered names, two processes on $name', (backend: Backend) => {
  const rounds = backend.name === 'local' ? 12 : 6;
  const live = new Set<ChildProcess>();
  let root: TestRoot;
  let one: ServiceProcess;
  let two: ServiceProcess;

  beforeAll(async () => {
    root = await backend.newRoot();
    [one, two] = await Promise.all([
      startServiceProcess({ args: rootArgs(root, LEASE_MS), live }),
      startServiceProcess({ args: rootArgs(root, LEASE_MS), live }),
    ]);
    expect((await one.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
  });
  afterAll(async () => {
    for (const child of live) child.kill('SIGKILL');
    await root?.dispose();
  });

  it(`${rounds} rounds of deregister vs. two creates of the name: the data stays as it was, at most one create wins, and it holds only its rows`, async () => {
    const outcomes = { created: 0, refused: 0 };
    for (let round = 0; round < rounds; round++) {
      const table = `d${round}`;
      const made = await one.call('POST', path(table, 'create'), peopleStream([1, 2]), ARROW);
      expect(made.status, made.text).toBe(200);
      const oldLocation = String(made.json.location);
      const before = await datasetFiles(root, keyOf(root, oldLocation));
      expect(Object.keys(before).length).toBeGreaterThan(0);
      // The creates start at varying times around the deregister's, so that they land before and after it.
      const lead = ([-10, 0, 10, 20, 40, 80][round % 6] ?? 0) * (backend.name === 'local' ? 1 : 5);
      const [deregistered, ...creates] = await Promise.all([
        pause(-lead).then(() => one.call('POST', path(table, 'deregister'), {})),
        pause(lead).then(() => two.call('POST', path(table, 'create'), peopleStream([10 + round]), ARROW)),
        pause(lead).then(() => one.call('POST', path(table, 'create'), peopleStream([100 + round]), ARROW)),
      ]);
      expect(deregistered.status, deregistered.text).toBe(200);
      expect(deregistered.json.location).toBe(oldLocation);
      for (const c of creates) {
        expect([200, 409], c.text).toContain(c.status);
        if (c.status === 409) expect([5, 14], c.text).toContain(c.json.code);
      }
      const won = creates.filter((c) => c.status === 200);
      expect(won.length, `round ${round}: creates answered ${creates.map((c) => c.status).join(', ')}`).toBeLessThanOrEqual(1);
      const described = await two.call('POST', path(table, 'describe'), {});
      const winner = won[0];
      if (winner) {
        outcomes.created++;
        const location = String(winner.json.location);
        expect(location).not.toBe(oldLocation);
        expect(described.json.location).toBe(location);
        expect(await rowCount(one, table)).toBe(1);
        expect((await one.call('GET', '/v1/namespace/ns/table/list')).json.tables).toContain(table);
        // Dropped, the new table takes its own directory along and nothing else.
        expect((await two.call('POST', path(table, 'drop'), {})).status).toBe(200);
        expect((await listAll(root.store, keyOf(root, location))).objects).toEqual([]);
      } else {
        outcomes.refused++;
        await expectInvisible(two, table);
      }
      expect(await datasetFiles(root, keyOf(root, oldLocation)), `round ${round}: the deregistered data changed`).toEqual(before);
      expect((await readRows(oldLocation, root.store.engineStorageOptions())).map((r) => r.id)).toEqual([1, 2]);
      // The name is free: a create now is placed elsewhere again.
      const after = await two.call('POST', path(table, 'create'), peopleStream([7]), ARROW);
      expect(after.status, after.text).toBe(200);
      expect(after.json.location).not.toBe(oldLocation);
    }
    console.log(`deregister vs. creates on ${backend.name}:`, outcomes);
  });

  it(`${rounds} rounds of deregister vs. drop of a re-created table: one wins, the other answers 404, and no deregistered data is lost`, async () => {
    for (let round = 0; round < rounds; round++) {
      const table = `r${round}`;
      const first = await one.call('POST', path(table, 'create'), peopleStream([1]), ARROW);
      expect((await one.call('POST', path(table, 'deregister'), {})).status).toBe(200);
      const firstFiles = await datasetFiles(root, keyOf(root, String(first.json.location)));
      const second = await two.call('POST', path(table, 'create'), peopleStream([2, 3]), ARROW);
      expect(second.status, second.text).toBe(200);
      const secondKey = keyOf(root, String(second.json.location));
      const secondFiles = await datasetFiles(root, secondKey);
      const lead = ((round % 3) - 1) * (backend.name === 'local' ? 3 : 25);
      const [deregistered, dropped] = await Promise.all([
        pause(lead).then(() => one.call('POST', path(table, 'deregister'), {})),
        pause(-lead).then(() => two.call('POST', path(table, 'drop'), {})),
      ]);
      expect([deregistered.status, dropped.status].sort(), `${deregistered.text} / ${dropped.text}`).toEqual([200, 404]);
      if (deregistered.status === 200) {
        // Deregistered: its data stays, and serves again once registered.
        expect(await datasetFiles(root, secondKey)).toEqual(secondFiles);
        expect((await one.call('POST', path(`${table}back`, 'register'), { location: second.json.location })).status).toBe(200);
        expect(await rowCount(two, `${table}back`)).toBe(2);
      } else {
        expect((await listAll(root.store, secondKey)).objects).toEqual([]);
      }
      await expectInvisible(one, table);
      expect(await datasetFiles(root, keyOf(root, String(first.json.location)))).toEqual(firstFiles);
    }
  });

  it('a Restrict namespace drop after deregisters succeeds and leaves the deregistered data where it was; a Cascade one too', async () => {
    for (const behavior of ['Restrict', 'Cascade']) {
      const ns = `gone${behavior}`;
      expect((await one.call('POST', `/v1/namespace/${ns}/create`, {})).status).toBe(200);
      const first = await one.call('POST', `/v1/table/${ns}%24t/create`, peopleStream([1]), ARROW);
      expect((await two.call('POST', `/v1/table/${ns}%24t/deregister`, {})).status).toBe(200);
      const second = await one.call('POST', `/v1/table/${ns}%24t/create`, peopleStream([2]), ARROW);
      expect((await two.call('POST', `/v1/table/${ns}%24t/deregister`, {})).status).toBe(200);
      if (behavior === 'Cascade') expect((await one.call('POST', `/v1/table/${ns}%24live/create`, peopleStream([3]), ARROW)).status).toBe(200);
      const kept = await Promise.all([first, second].map((c) => datasetFiles(root, keyOf(root, String(c.json.location)))));
      const dropped = await two.call('POST', `/v1/namespace/${ns}/drop`, { behavior });
      expect(dropped.status, dropped.text).toBe(200);
      expect((await one.call('POST', `/v1/namespace/${ns}/exists`, {})).status).toBe(404);
      for (const [i, c] of [first, second].entries()) expect(await datasetFiles(root, keyOf(root, String(c.json.location)))).toEqual(kept[i]);
      // The namespace created anew knows no table; the data is registered again from where it lies.
      expect((await one.call('POST', `/v1/namespace/${ns}/create`, {})).status).toBe(200);
      expect((await one.call('GET', `/v1/namespace/${ns}/table/list`)).json.tables).toEqual([]);
      expect((await two.call('POST', `/v1/table/${ns}%24t/register`, { location: 't.lance' })).status).toBe(200);
      expect(Number((await one.call('POST', `/v1/table/${ns}%24t/count_rows`, {})).text)).toBe(1);
    }
  });
});

describe.each(backends())('a create or drop over a deregistered name killed half-way on $name', (backend: Backend) => {
  const crash = useCrashRoot(backend, LEASE_MS);

  /** A table created, deregistered, and (with `again`) created once more in a directory of its own: its name's directory and that directory. */
  async function deregistered(table: string, again: boolean): Promise<{ oldKey: string; files: Record<string, string>; newKey?: string }> {
    const made = await crash.watcher().call('POST', path(table, 'create'), peopleStream([1, 2]), ARROW);
    expect(made.status, made.text).toBe(200);
    expect((await crash.watcher().call('POST', path(table, 'deregister'), {})).status).toBe(200);
    const oldKey = keyOf(crash.root(), String(made.json.location));
    const files = await datasetFiles(crash.root(), oldKey);
    if (!again) return { oldKey, files };
    const next = await crash.watcher().call('POST', path(table, 'create'), peopleStream([3]), ARROW);
    expect(next.status, next.text).toBe(200);
    return { oldKey, files, newKey: keyOf(crash.root(), String(next.json.location)) };
  }

  /** Creates the table once the name is free (a dead claim or drop holds it until its lease ends). */
  async function createOnceFree(table: string, ids: number[]): Promise<{ status: number; json: Record<string, unknown> }> {
    const started = Date.now();
    for (;;) {
      const res = await crash.watcher().call('POST', path(table, 'create'), peopleStream(ids), ARROW);
      if (res.status !== 409 || Date.now() - started > LEASE_MS * 4) return res;
      expect([5, 14], res.text).toContain(res.json.code);
      await pause(50);
    }
  }

  for (const point of ['claim:after-record', 'create:after-claim', 'create:after-data']) {
    it(`a create killed at ${point}: hidden, then taken over; the deregistered data is untouched and the dead create's directory goes`, async () => {
      const table = point.replace(/\W/g, '_');
      const { oldKey, files } = await deregistered(table, false);
      const dying = await crash.start(point);
      await expect(dying.call('POST', path(table, 'create'), peopleStream([5, 6]), ARROW)).rejects.toThrow();
      expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
      await expectInvisible(crash.watcher(), table);
      const claim = JSON.parse((await crash.root().store.get(`ns/${table}.lance/.lance-table.json`))?.body.toString() ?? '{}') as { dir?: string };
      expect(claim.dir).toMatch(/^ns\/\.lance-table-/);
      const again = await createOnceFree(table, [9]);
      expect(again.status, JSON.stringify(again.json)).toBe(200);
      expect(await rowCount(crash.watcher(), table)).toBe(1);
      expect((await listAll(crash.root().store, claim.dir ?? '')).objects).toEqual([]);
      expect(await datasetFiles(crash.root(), oldKey)).toEqual(files);
    });
  }

  for (const point of ['drop:after-tombstone', 'drop:before-record']) {
    it(`a drop of a re-created table killed at ${point}: the table stays dropped, the name frees up, the deregistered data is untouched`, async () => {
      const table = point.replace(/\W/g, '_');
      const { oldKey, files, newKey } = await deregistered(table, true);
      const dying = await crash.start(point);
      await expect(dying.call('POST', path(table, 'drop'), {})).rejects.toThrow();
      expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
      await expectInvisible(crash.watcher(), table);
      expect((await crash.watcher().call('POST', path(table, 'drop'), {})).status).toBe(404);
      const again = await createOnceFree(table, [9]);
      expect(again.status, JSON.stringify(again.json)).toBe(200);
      expect(await rowCount(crash.watcher(), table)).toBe(1);
      expect((await listAll(crash.root().store, newKey ?? '')).objects).toEqual([]);
      expect(await datasetFiles(crash.root(), oldKey)).toEqual(files);
    });
  }
});
