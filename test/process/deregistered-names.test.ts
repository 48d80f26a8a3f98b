import type { ChildProcess } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
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

  it('a register in place killed holding the marker: once its lease ends the name is as the marker it replaced says, the data untouched', async () => {
    const table = 'held_register';
    const { oldKey, files } = await deregistered(table, false);
    const dying = await crash.start('claim:before-settle');
    await expect(dying.call('POST', path(table, 'register'), { location: `${table}.lance` })).rejects.toThrow();
    expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // Held: no table, until the hold's lease ends.
    await expectInvisible(crash.watcher(), table);
    const started = Date.now();
    while ((await crash.watcher().call('POST', path(table, 'describe'), {})).status !== 200 && Date.now() - started < LEASE_MS * 4) await pause(50);
    // Its record was in: the data is registered (and the directory still retired, so its drop keeps it).
    expect(await rowCount(crash.watcher(), table)).toBe(2);
    expect((await crash.watcher().call('POST', path(table, 'drop'), {})).status).toBe(200);
    expect(await datasetFiles(crash.root(), oldKey)).toEqual(files);
  });

  it.runIf(backend.name === 'local')('a rename killed holding the marker: once its lease ends the table is back under its name, whole', async () => {
    const made = await crash.watcher().call('POST', path('held_rename', 'create'), peopleStream([1, 2]), ARROW);
    expect(made.status).toBe(200);
    const dying = await crash.start('rename:held');
    await expect(dying.call('POST', path('held_rename', 'rename'), { new_table_name: 'held_renamed' })).rejects.toThrow();
    expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
    await expectInvisible(crash.watcher(), 'held_rename');
    const started = Date.now();
    while ((await crash.watcher().call('POST', path('held_rename', 'describe'), {})).status !== 200 && Date.now() - started < LEASE_MS * 4) await pause(50);
    expect(await rowCount(crash.watcher(), 'held_rename')).toBe(2);
    expect((await crash.watcher().call('POST', path('held_rename', 'rename'), { new_table_name: 'held_renamed' })).status).toBe(200);
    expect(await rowCount(crash.watcher(), 'held_renamed')).toBe(2);
    expect(await crash.root().store.head('ns/held_renamed.lance/.lance-deregistered')).toBeNull();
  });

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

// One process stops, alive, at a step of a request (LANCE_NS_PAUSE_POINTS) while the other
// deregisters, drops, or drops the namespace. Each case but the 404 of a late writer failed on the
// old code: the deregister did not wait for the writes under way, a claim or register deleted the
// name's marker (a deregister's, a drop's tombstone) unconditionally after its record was visible,
// a Cascade namespace drop deleted a live create's own directory and let it answer 200, a rename
// moved a directory a deregister had just retired, and a deregister put its marker over the next
// table of the name.
describe.each(backends())('deregister races, one process paused at a step, on $name', (backend: Backend) => {
  const crash = useCrashRoot(backend, LEASE_MS);
  /** Long enough for the other process's request to be answered while this one waits. */
  const PAUSE_MS = backend.name === 'local' ? 4_000 : 8_000;
  const paused: ServiceProcess[] = [];
  afterEach(() => {
    for (const p of paused.splice(0)) p.child.kill('SIGKILL');
  });

  /** A second process that pauses, alive, at `point`; `reached` resolves once it waits there. */
  async function pausing(point: string): Promise<{ replica: ServiceProcess; reached: () => Promise<void> }> {
    const replica = await crash.start(undefined, { points: [point], ms: PAUSE_MS });
    paused.push(replica);
    const reached = () => expect.poll(() => replica.stderr().includes(`pause point ${point}:`), { timeout: 60_000, interval: 10 }).toBe(true) as Promise<void>;
    return { replica, reached };
  }
  /** A table made and deregistered by the watcher: where its data lies, and its files. */
  async function deregisteredData(id: string): Promise<{ location: string; key: string; files: Record<string, string> }> {
    const made = await crash.watcher().call('POST', `/v1/table/${id}/create`, peopleStream([1, 2]), ARROW);
    expect(made.status, made.text).toBe(200);
    expect((await crash.watcher().call('POST', `/v1/table/${id}/deregister`, {})).status).toBe(200);
    const location = String(made.json.location);
    const key = keyOf(crash.root(), location);
    return { location, key, files: await datasetFiles(crash.root(), key) };
  }

  it('an insert that resolved the table before the deregister lands before its answer: the deregistered data is as the answer left it', async () => {
    const made = await crash.watcher().call('POST', path('ins', 'create'), peopleStream([1, 2]), ARROW);
    const key = keyOf(crash.root(), String(made.json.location));
    const writer = await pausing('write:after-resolve');
    const insert = writer.replica.call('POST', path('ins', 'insert'), peopleStream([3]), ARROW);
    await writer.reached();
    const deregistered = await crash.watcher().call('POST', path('ins', 'deregister'), {});
    const atAnswer = await datasetFiles(crash.root(), key);
    const inserted = await insert;
    expect(deregistered.status, deregistered.text).toBe(200);
    expect(inserted.status, inserted.text).toBe(200);
    // The old code answered the deregister at once; the insert then committed into the deregistered data.
    expect(await datasetFiles(crash.root(), key), 'the deregistered data changed after the answer').toEqual(atAnswer);
    await expectInvisible(crash.watcher(), 'ins');
    expect((await crash.watcher().call('POST', path('insback', 'register'), { location: made.json.location })).status).toBe(200);
    expect(await rowCount(crash.watcher(), 'insback')).toBe(3);
  });

  it('an insert that meets the deregister after taking its lease fails cleanly with 404 and writes nothing', async () => {
    const made = await crash.watcher().call('POST', path('late', 'create'), peopleStream([1, 2]), ARROW);
    const key = keyOf(crash.root(), String(made.json.location));
    const before = await datasetFiles(crash.root(), key);
    const writer = await pausing('write:after-lease');
    const insert = writer.replica.call('POST', path('late', 'insert'), peopleStream([3]), ARROW);
    await writer.reached();
    const deregistered = await crash.watcher().call('POST', path('late', 'deregister'), {});
    expect(deregistered.status, deregistered.text).toBe(200);
    const inserted = await insert;
    expect(inserted.status, inserted.text).toBe(404);
    expect(await datasetFiles(crash.root(), key)).toEqual(before);
  });

  for (const other of ['deregister', 'drop']) {
    it(`a ${other} racing the register in place of deregistered data: whatever it answered holds`, async () => {
      const table = `rip${other}`;
      const { key, files } = await deregisteredData(`ns%24${table}`);
      const registering = await pausing('claim:before-settle');
      const register = registering.replica.call('POST', path(table, 'register'), { location: `${table}.lance` });
      await registering.reached();
      const raced = await crash.watcher().call('POST', path(table, other), {});
      const registered = await register;
      expect(registered.status, registered.text).toBe(200);
      expect([200, 404], raced.text).toContain(raced.status);
      // The old code answered the race 200 while the name was half registered, then deleted its marker (or tombstone): served again.
      if (raced.status === 200) await expectInvisible(crash.watcher(), table);
      else expect(await rowCount(crash.watcher(), table)).toBe(2);
      if (other === 'deregister' || raced.status === 404) expect(await datasetFiles(crash.root(), key)).toEqual(files);
    });
  }

  it('a deregister racing a declare over a deregistered name whose data lived elsewhere: whatever it answered holds', async () => {
    const source = await crash.watcher().call('POST', path('elsewhere', 'create'), peopleStream([1]), ARROW);
    expect((await crash.watcher().call('POST', path('alias', 'register'), { location: source.json.location })).status).toBe(200);
    expect((await crash.watcher().call('POST', path('alias', 'deregister'), {})).status).toBe(200);
    const declaring = await pausing('claim:before-settle');
    const declare = declaring.replica.call('POST', path('alias', 'declare'), {});
    await declaring.reached();
    const deregistered = await crash.watcher().call('POST', path('alias', 'deregister'), {});
    expect((await declare).status).toBe(200);
    expect([200, 404], deregistered.text).toContain(deregistered.status);
    if (deregistered.status === 200) await expectInvisible(crash.watcher(), 'alias');
    else expect((await crash.watcher().call('POST', path('alias', 'describe'), {})).status).toBe(200);
    expect(await rowCount(crash.watcher(), 'elsewhere')).toBe(1);
  });

  it('a Cascade namespace drop racing the create of a deregistered name: the create fails, nothing is left in the dropped namespace', async () => {
    expect((await crash.watcher().call('POST', '/v1/namespace/casc/create', {})).status).toBe(200);
    const { key, files } = await deregisteredData('casc%24t');
    const creating = await pausing('create:after-data');
    const create = creating.replica.call('POST', '/v1/table/casc%24t/create', peopleStream([5, 6, 7]), ARROW);
    await creating.reached();
    const dropped = await crash.watcher().call('POST', '/v1/namespace/casc/drop', { behavior: 'Cascade' });
    expect(dropped.status, dropped.text).toBe(200);
    const created = await create;
    // The old code deleted the create's directory under it and let it answer 200 inside the dropped namespace.
    expect(created.status, created.text).toBe(409);
    expect((await crash.watcher().call('POST', '/v1/namespace/casc/exists', {})).status).toBe(404);
    expect(await datasetFiles(crash.root(), key)).toEqual(files);
    expect((await listAll(crash.root().store, 'casc/')).objects.filter((o) => !o.key.startsWith('casc/t.lance/'))).toEqual([]);
    expect((await crash.watcher().call('POST', '/v1/namespace/casc/create', {})).status).toBe(200);
    expect((await crash.watcher().call('GET', '/v1/namespace/casc/table/list?include_declared=true')).json.tables).toEqual([]);
    expect((await crash.watcher().call('POST', '/v1/table/casc%24t/describe', {})).status).toBe(404);
  });

  it('a namespace drop meeting a name held by a declare fails with 409 and leaves the namespace; the declare goes on at once', async () => {
    expect((await crash.watcher().call('POST', '/v1/namespace/heldns/create', {})).status).toBe(200);
    const source = await crash.watcher().call('POST', '/v1/table/heldns%24src/create', peopleStream([1]), ARROW);
    expect((await crash.watcher().call('POST', '/v1/table/heldns%24alias/register', { location: source.json.location })).status).toBe(200);
    expect((await crash.watcher().call('POST', '/v1/table/heldns%24alias/deregister', {})).status).toBe(200);
    const declaring = await pausing('claim:before-settle');
    const declare = declaring.replica.call('POST', '/v1/table/heldns%24alias/declare', {});
    await declaring.reached();
    for (const behavior of ['Restrict', 'Cascade']) {
      const dropped = await crash.watcher().call('POST', '/v1/namespace/heldns/drop', { behavior });
      expect(dropped.status, dropped.text).toBe(409);
      expect(dropped.json.code, dropped.text).toBe(behavior === 'Restrict' ? 3 : 14);
    }
    expect((await crash.watcher().call('POST', '/v1/namespace/heldns/exists', {})).status).toBe(200);
    expect((await declare).status).toBe(200);
    expect((await crash.watcher().call('POST', '/v1/table/heldns%24alias/describe', {})).status).toBe(200);
  });

  it.runIf(backend.name === 'local')(
    'a rename that checked the table before a deregister moves nothing: the deregistered data stays where it was',
    async () => {
      const made = await crash.watcher().call('POST', path('mv', 'create'), peopleStream([1, 2]), ARROW);
      const key = keyOf(crash.root(), String(made.json.location));
      const files = await datasetFiles(crash.root(), key);
      const renaming = await pausing('rename:after-check');
      const rename = renaming.replica.call('POST', path('mv', 'rename'), { new_table_name: 'mv2' });
      await renaming.reached();
      expect((await crash.watcher().call('POST', path('mv', 'deregister'), {})).status).toBe(200);
      const renamed = await rename;
      // The old code moved the deregistered (retired) directory to the new name.
      expect([404, 409], renamed.text).toContain(renamed.status);
      expect(await datasetFiles(crash.root(), key)).toEqual(files);
      await expectInvisible(crash.watcher(), 'mv2');
      expect((await listAll(crash.root().store, 'ns/mv2.lance/')).objects).toEqual([]);
    },
  );

  it.runIf(backend.name === 'local')('a deregister or drop meeting a rename under way finds no table; the table moves whole', async () => {
    for (const other of ['deregister', 'drop']) {
      const table = `held${other}`;
      expect((await crash.watcher().call('POST', path(table, 'create'), peopleStream([1, 2]), ARROW)).status).toBe(200);
      const renaming = await pausing('rename:held');
      const rename = renaming.replica.call('POST', path(table, 'rename'), { new_table_name: `${table}2` });
      await renaming.reached();
      expect((await crash.watcher().call('POST', path(table, other), {})).status).toBe(404);
      expect((await rename).status).toBe(200);
      expect(await rowCount(crash.watcher(), `${table}2`)).toBe(2);
      expect(await crash.root().store.head(`ns/${table}2.lance/.lance-deregistered`)).toBeNull();
      await expectInvisible(crash.watcher(), table);
      renaming.replica.child.kill('SIGKILL');
    }
  });

  it.runIf(backend.name === 'local')('a deregister that read the table before it was renamed and its name taken again deregisters nothing', async () => {
    const made = await crash.watcher().call('POST', path('mw', 'create'), peopleStream([1, 2]), ARROW);
    expect(made.status).toBe(200);
    const deregistering = await pausing('deregister:after-read');
    const deregister = deregistering.replica.call('POST', path('mw', 'deregister'), {});
    await deregistering.reached();
    expect((await crash.watcher().call('POST', path('mw', 'rename'), { new_table_name: 'mw2' })).status).toBe(200);
    expect((await crash.watcher().call('POST', path('mw', 'create'), peopleStream([3]), ARROW)).status).toBe(200);
    const deregistered = await deregister;
    // The old code put its marker over the new table of the name, retiring its directory.
    expect(deregistered.status, deregistered.text).toBe(404);
    expect(await crash.root().store.head('ns/mw.lance/.lance-deregistered')).toBeNull();
    expect(await rowCount(crash.watcher(), 'mw')).toBe(1);
    expect(await rowCount(crash.watcher(), 'mw2')).toBe(2);
  });
});
