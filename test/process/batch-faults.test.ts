import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import pLimit from 'p-limit';
import { afterAll, beforeAll, describe, type ExpectStatic, expect, it } from 'vitest';
import { nextManifestWithSchemaMetadata } from '../../src/engine/lance-format/manifest.js';
import { parseManifestFileName } from '../../src/engine/lance-format/manifest-names.js';
import { listAll } from '../../src/store/object-store.js';
import { peopleStream } from '../support/arrow-data.js';
import { type Backend, backends, type TestRoot } from '../support/backends.js';
import { rootArgs, type ServiceProcess, startServiceProcess, stopService } from '../support/service-process.js';

// Crash tests of BatchCreateTableVersions: the real service process is SIGKILLed at each fault
// point of the batch commit protocol (src/service/versions/), restarted on the same root, and
// the catalog must then be all-or-nothing: every table of the batch has the new version (a crash
// at or after the commit point rolls forward) or none has (a crash before it rolls back), with no
// reservation left behind and the transaction record finished. The batch's entry for t1 is on its
// branch `dev` (its own history, tree/dev/_versions/), those of t0 and t2 on main: a batch
// mixing lines of history rolls each forward or back on its own line.
//
// Service starts dominate the cost (about a second of CPU each), so the tables are made once per
// backend by a clean service in a template root, and every point gets a fresh root holding a copy
// of it: two starts per point (the faulty one, the recovering one) instead of three.

const LEASE_MS = 300;
const TABLES = ['t0', 't1', 't2'] as const;

interface FaultPoint {
  name: string;
  /** Whether the batch is past its commit point when the process dies. */
  forward: boolean;
  /** What the store must hold at the moment of the crash (proves the crash happened there). */
  atCrash: { phase: 'reserving' | 'committing' | 'done'; reservations: number; committed: number };
}

const POINTS: FaultPoint[] = [
  { name: 'batch:after-record', forward: false, atCrash: { phase: 'reserving', reservations: 0, committed: 0 } },
  { name: 'batch:after-reserve-0', forward: false, atCrash: { phase: 'reserving', reservations: 1, committed: 0 } },
  { name: 'batch:after-reserve-1', forward: false, atCrash: { phase: 'reserving', reservations: 2, committed: 0 } },
  { name: 'batch:after-reserve-2', forward: false, atCrash: { phase: 'reserving', reservations: 3, committed: 0 } },
  { name: 'batch:before-commit-point', forward: false, atCrash: { phase: 'reserving', reservations: 3, committed: 0 } },
  { name: 'batch:after-commit-point', forward: true, atCrash: { phase: 'committing', reservations: 3, committed: 0 } },
  { name: 'batch:after-manifest-0', forward: true, atCrash: { phase: 'committing', reservations: 3, committed: 1 } },
  { name: 'batch:after-manifest-1', forward: true, atCrash: { phase: 'committing', reservations: 3, committed: 2 } },
  { name: 'batch:after-succeeded', forward: true, atCrash: { phase: 'done', reservations: 3, committed: 3 } },
];

type Running = ServiceProcess;

/** Starts the service process over the test root with the short lease. */
const startService = (live: Set<ChildProcess>, root: TestRoot, faultPoint?: string): Promise<Running> =>
  startServiceProcess({ args: rootArgs(root, LEASE_MS), live, ...(faultPoint ? { faultPoint } : {}) });

const tableId = (t: string) => `ns$${t}`;
const tableDir = (t: string) => `ns/${t}.lance/`;
/** The branch the batch commits on, by table (absent: main). */
const BRANCH: Record<string, string> = { t1: 'dev' };
const onBranch = (t: string) => (BRANCH[t] === undefined ? {} : { branch: BRANCH[t] });
/** Where the line of history the batch commits on lives: the table's directory, or its branch's tree. */
const lineDir = (t: string) => `${tableDir(t)}${BRANCH[t] === undefined ? '' : `tree/${BRANCH[t]}/`}`;

/** Versions of the line of history of a table the batch commits on, as ListTableVersions reports them. */
async function listedVersions(expect: ExpectStatic, running: Running, t: string): Promise<number[]> {
  const branch = BRANCH[t] === undefined ? '' : `?branch=${BRANCH[t]}`;
  const res = await running.call('GET', `/v1/table/${encodeURIComponent(tableId(t))}/version/list${branch}`);
  expect(res.status, res.text).toBe(200);
  const versions = res.json.versions as Array<{ version: number }>;
  return versions.map((v) => v.version).sort((a, b) => a - b);
}

/** Keys under a prefix of the root. */
async function keysUnder(root: TestRoot, prefix: string): Promise<string[]> {
  return (await listAll(root.store, prefix)).objects.map((o) => o.key);
}

async function committedVersionsInStore(root: TestRoot, t: string): Promise<number[]> {
  const prefix = `${lineDir(t)}_versions/`;
  return (await keysUnder(root, prefix))
    .map((k) => parseManifestFileName(k.slice(prefix.length))?.version)
    .filter((v): v is number => v !== undefined)
    .sort((a, b) => a - b);
}

/** Stages a version 2 manifest made from the line's committed v1 manifest; returns its path (relative to the table on main, else the object path). */
async function stageManifest(root: TestRoot, t: string): Promise<{ relative: string; bytes: Buffer }> {
  const prefix = `${lineDir(t)}_versions/`;
  const v1 = (await keysUnder(root, prefix)).find((k) => parseManifestFileName(k.slice(prefix.length))?.version === 1);
  if (!v1) throw new Error(`table ${t} has no committed version 1`);
  const base = (await root.store.get(v1))?.body;
  if (!base) throw new Error(`manifest ${v1} vanished`);
  const bytes = nextManifestWithSchemaMetadata(base, { version: 2, schemaMetadata: { staged: randomUUID() }, timestampMillis: Date.now() });
  const name = `_versions/2.manifest-${randomUUID()}`;
  await root.store.put(`${lineDir(t)}${name}`, bytes);
  return { relative: BRANCH[t] === undefined ? name : root.store.objectPath(`${lineDir(t)}${name}`), bytes };
}

interface TxRecord {
  id: string;
  status: string;
  phase?: string;
  lease_until?: string;
}

async function transactionRecords(root: TestRoot): Promise<TxRecord[]> {
  const records: TxRecord[] = [];
  for (const key of await keysUnder(root, '_catalog/transactions/')) {
    const object = await root.store.get(key);
    if (object) records.push(JSON.parse(object.body.toString('utf8')) as TxRecord);
  }
  return records;
}

async function reservationsOf(root: TestRoot): Promise<string[]> {
  const found: string[] = [];
  for (const t of TABLES) found.push(...(await keysUnder(root, `${tableDir(t)}_catalog/reservations/`)));
  return found;
}

/** Makes namespace `ns` with tables t0..t2 at version 1 through a clean service, on a fresh root. */
async function makeTemplate(expect: ExpectStatic, backend: Backend): Promise<TestRoot> {
  const root = await backend.newRoot();
  const live = new Set<ChildProcess>();
  try {
    const setup = await startService(live, root);
    expect((await setup.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
    for (const [i, t] of TABLES.entries()) {
      const res = await setup.call('POST', `/v1/table/${encodeURIComponent(tableId(t))}/create`, peopleStream([i * 10, i * 10 + 1]), {
        'content-type': 'application/vnd.apache.arrow.stream',
      });
      expect(res.status, res.text).toBe(200);
      expect(res.json.version).toBe(1);
      const branch = BRANCH[t];
      if (branch !== undefined) {
        // The branch forked at version 1: its ref, then its first manifest (the table has no managed
        // versioning, where a branch exists only by its ref; see branch-versions.ts).
        await root.store.put(`${tableDir(t)}_refs/branches/${branch}.json`, JSON.stringify({ parentVersion: 1, createAt: 1, manifestSize: 1 }));
        const prefix = `${tableDir(t)}_versions/`;
        const v1 = (await keysUnder(root, prefix)).find((k) => parseManifestFileName(k.slice(prefix.length))?.version === 1) ?? '';
        const staged = `${lineDir(t)}_versions/1.manifest-${randomUUID()}`;
        await root.store.put(staged, (await root.store.get(v1))?.body ?? Buffer.alloc(0));
        const first = await setup.call('POST', `/v1/table/${encodeURIComponent(tableId(t))}/version/create`, {
          version: 1,
          manifest_path: root.store.objectPath(staged),
          branch,
        });
        expect(first.status, first.text).toBe(200);
      }
    }
    await stopService(setup, expect);
    return root;
  } catch (e) {
    for (const child of live) child.kill('SIGKILL');
    await root.dispose();
    throw e;
  }
}

/** Copies every object of one root into another (both fresh roots of one backend). */
async function copyRoot(from: TestRoot, to: TestRoot): Promise<void> {
  const limit = pLimit(8);
  const { objects } = await listAll(from.store, '');
  await Promise.all(
    objects.map((o) =>
      limit(async () => {
        const object = await from.store.get(o.key);
        if (object) await to.store.put(o.key, object.body);
      }),
    ),
  );
}

/** One fault point, start to finish, on a fresh root of its own (so points can run side by side). */
async function runPoint(expect: ExpectStatic, backend: Backend, template: TestRoot, point: FaultPoint): Promise<void> {
  const root = await backend.newRoot();
  const live = new Set<ChildProcess>();
  try {
    await copyRoot(template, root);
    await crashAndRecover(expect, root, live, point);
  } finally {
    for (const child of live) child.kill('SIGKILL');
    await root.dispose();
  }
}

async function crashAndRecover(expect: ExpectStatic, root: TestRoot, live: Set<ChildProcess>, point: FaultPoint): Promise<void> {
  // 1. Three tables at version 1 (copied from the template) and a staged v2 manifest in each.
  for (const t of TABLES) expect(await committedVersionsInStore(root, t)).toEqual([1]);
  const staged = new Map<string, { relative: string; bytes: Buffer }>();
  for (const t of TABLES) staged.set(t, await stageManifest(root, t));
  const stagedOf = (t: string) => {
    const s = staged.get(t);
    if (!s) throw new Error(`nothing staged for ${t}`);
    return s;
  };

  // 2. The same root with the fault armed: the batch kills the process, so the request fails.
  const faulty = await startService(live, root, point.name);
  const batch = { entries: TABLES.map((t) => ({ id: ['ns', t], version: 2, manifest_path: stagedOf(t).relative, ...onBranch(t) })) };
  await expect(faulty.call('POST', '/v1/table/version/batch-create', batch)).rejects.toThrow();
  expect(await faulty.exited).toEqual({ code: null, signal: 'SIGKILL' });
  expect(faulty.stderr()).toContain(`fault point ${point.name}: killing the process`);

  // The store is in the state the fault point names (the client never learnt the transaction id).
  const [crashed, ...others] = await transactionRecords(root);
  expect(others).toEqual([]);
  if (!crashed) throw new Error('the batch left no transaction record');
  expect(crashed.phase).toBe(point.atCrash.phase);
  expect(await reservationsOf(root)).toHaveLength(point.atCrash.reservations);
  let committedAtCrash = 0;
  for (const t of TABLES) if ((await committedVersionsInStore(root, t)).includes(2)) committedAtCrash++;
  expect(committedAtCrash).toBe(point.atCrash.committed);

  // 3. Restart without the fault. Start-up recovery rolls a batch back only once its lease is
  // over; a restart takes longer than the 300 ms lease anyway, but wait for the recorded instant
  // (bounded by the lease) so that this can never depend on the machine's speed.
  const leaseUntil = crashed.lease_until ? Date.parse(crashed.lease_until) : 0;
  const wait = leaseUntil + 5 - Date.now();
  expect(wait).toBeLessThanOrEqual(LEASE_MS + 5);
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  const recovered = await startService(live, root);
  // Start-up recovery did the work: nothing below triggers recovery before the checks.
  expect(recovered.lines.some((l) => l.msg === 'recovered unfinished transactions' && l.recovered === 1)).toBe(true);

  // 4. All or nothing, as ListTableVersions reports it.
  for (const t of TABLES) {
    expect(await listedVersions(expect, recovered, t), `${t} after ${point.name}`).toEqual(point.forward ? [1, 2] : [1]);
  }
  expect(await reservationsOf(root), 'reservations left after recovery').toEqual([]);
  const described = await recovered.call('POST', `/v1/transaction/${crashed.id}/describe`, {});
  expect(described.status, described.text).toBe(200);
  expect(described.json.status).toBe(point.forward ? 'Succeeded' : 'Failed');
  const [finished] = await transactionRecords(root);
  expect(finished).toMatchObject({ id: crashed.id, status: point.forward ? 'Succeeded' : 'Failed', phase: 'done' });

  if (point.forward) {
    // Rolled forward: each committed v2 holds the staged bytes, and the staged copies are gone.
    for (const t of TABLES) {
      const prefix = `${lineDir(t)}_versions/`;
      const finals = (await keysUnder(root, prefix)).filter((k) => parseManifestFileName(k.slice(prefix.length))?.version === 2);
      expect(finals).toHaveLength(1);
      expect((await root.store.get(finals[0] ?? ''))?.body.equals(stagedOf(t).bytes)).toBe(true);
      const stagedName = stagedOf(t).relative.slice(stagedOf(t).relative.lastIndexOf('_versions/'));
      expect(await root.store.head(`${lineDir(t)}${stagedName}`), `staged manifest of ${t}`).toBeNull();
    }
  } else {
    // Rolled back: the slots are free, so a plain CreateTableVersion of version 2 succeeds.
    for (const t of TABLES) {
      const single = await stageManifest(root, t);
      const res = await recovered.call('POST', `/v1/table/${encodeURIComponent(tableId(t))}/version/create`, {
        version: 2,
        manifest_path: single.relative,
        ...onBranch(t),
      });
      expect(res.status, res.text).toBe(200);
      expect((res.json.version as { version: number }).version).toBe(2);
      expect(await listedVersions(expect, recovered, t)).toEqual([1, 2]);
    }
    // Each single commit releases its slot just after its answer (src/service/versions/after-answer.ts).
    await expect.poll(() => reservationsOf(root), { timeout: 5_000, interval: 20 }).toEqual([]);
  }
  await stopService(recovered, expect);
}

// Each point starts two service processes in turn; a few points run side by side (each on its own
// root) to keep the file's wall time down on a small machine. Queued points wait inside their
// test, hence the generous timeout.
const limit = pLimit(3);

describe.concurrent('BatchCreateTableVersions crash recovery', () => {
  describe.each(backends())('on $name', (backend) => {
    let template: TestRoot | undefined;
    beforeAll(async () => {
      template = await limit(() => makeTemplate(expect, backend));
    });
    afterAll(async () => {
      await template?.dispose();
    });

    it.for(POINTS)('is all-or-nothing after a crash at $name', { timeout: 120_000 }, async (point, { expect }) => {
      if (!template) throw new Error('no template root');
      const from = template;
      await limit(() => runPoint(expect, backend, from, point));
    });
  });
});
