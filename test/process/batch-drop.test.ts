import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { tableDirKey } from '../../src/service/catalog/layout.js';
import { listAll } from '../../src/store/object-store.js';
import { backends, type TestRoot } from '../support/backends.js';
import { manifestBytes } from '../support/manifests.js';
import { type ServiceProcess, useCrashRoot } from '../support/service-process.js';

// A drop of a table while a batch that commits versions of it works longer than a lease, on two
// replicas. The batch's slot reservations used to expire one lease after their claim (only its
// record's lease is renewed), so the drop stopped waiting for them and deleted the table, staged
// manifest included; the batch, past its commit point, then met the missing manifest and answered
// 400 though committed, its record stayed `committing` for good (every poller retried it at every
// poll) and the reservations of its other tables stayed, so that a later commit of another table
// answered 400 naming the dropped table's staged manifest.
//
// Here the coordinator is a real service process that pauses, alive, at a step of the batch
// protocol for several leases (LANCE_NS_PAUSE_POINTS); the other replica drops one of the batch's
// tables meanwhile: after the batch claimed its slots (it then sees the drop and stops before its
// commit point: 404), just before its commit point (the drop waits for it), and past it (the drop
// brings the batch to its end first). Every time: the batch's record reaches its end, no
// reservation is left, the table not dropped has exactly what the batch did to it, and both it and
// a table outside the batch commit as usual afterwards.

const LEASE_MS = 300;
/** Five leases (ten poll intervals of the other replica) at each pause point. */
const PAUSE_MS = 5 * LEASE_MS;
const PAUSE_POINTS = ['batch:after-claims', 'batch:before-commit-point', 'batch:after-commit-point'];

interface TxRecord {
  status: string;
  phase?: string;
  cleaned_up?: boolean;
}

describe.each(backends())('a drop during a batch longer than a lease, on two replicas, on $name', (backend) => {
  const crash = useCrashRoot(backend, LEASE_MS);
  let root: TestRoot;
  let dropper: ServiceProcess;
  let coordinator: ServiceProcess;
  beforeAll(async () => {
    root = crash.root();
    dropper = crash.watcher();
    coordinator = await crash.start(undefined, { points: PAUSE_POINTS, ms: PAUSE_MS });
  }, 60_000);

  const pauses = (point: string) => coordinator.stderr().split(`pause point ${point}:`).length - 1;
  const dirOf = (name: string) => tableDirKey({ namespace: ['ns'], name });
  /** Stages a manifest of `version` for table `name`, as a Lance writer does; its path relative to the table. */
  const stage = async (name: string, version: number) => {
    const relative = `_versions/${version}.manifest-${randomUUID()}`;
    await root.store.put(`${dirOf(name)}${relative}`, manifestBytes(version));
    return relative;
  };
  const versionsOf = async (name: string) => {
    const listed = await dropper.call('GET', `/v1/table/ns%24${name}/version/list`);
    expect(listed.status, listed.text).toBe(200);
    return (listed.json.versions as Array<{ version: number }>).map((v) => v.version);
  };
  const declare = async (...names: string[]) => {
    for (const name of names) expect((await dropper.call('POST', `/v1/table/ns%24${name}/declare`, {})).status, name).toBe(200);
  };

  /**
   * Starts a batch committing version 1 of `kept` and `dropped` on the coordinator, drops `dropped`
   * on the other replica once the batch pauses at `point`, and checks what every such race must
   * leave. Returns the batch's and the drop's answers.
   */
  async function race(point: string, kept: string, dropped: string, body: (staged: Record<string, string>) => { path: string; body: unknown }) {
    await declare(kept, dropped);
    const staged: Record<string, string> = { [kept]: await stage(kept, 1), [dropped]: await stage(dropped, 1) };
    const paused = pauses(point);
    const request = body(staged);
    const answer = coordinator.call('POST', request.path, request.body);
    await expect.poll(() => pauses(point), { timeout: 30_000, interval: 10 }).toBe(paused + 1);
    const drop = await dropper.call('POST', `/v1/table/ns%24${dropped}/drop`, {});
    expect(drop.status, drop.text).toBe(200);
    const told = await answer;

    const id = String(told.json.transaction_id ?? '');
    const records = (await listAll(root.store, '_catalog/transactions/')).objects;
    const mine = [];
    for (const o of records) {
      const record = JSON.parse((await root.store.get(o.key))?.body.toString('utf8') ?? '{}') as TxRecord & { properties?: Record<string, string> };
      if (record.properties?.tables?.includes(`ns$${dropped}`)) mine.push(record);
    }
    // The record reached its end, and nothing of the batch is left unfinished.
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({ phase: 'done', cleaned_up: true });
    expect((await listAll(root.store, '_catalog/batches/')).objects).toEqual([]);
    expect(mine[0]?.status).toBe(id !== '' ? 'Succeeded' : 'Failed');
    // No reservation is left, in the table kept nor in the one dropped.
    for (const name of [kept, dropped]) expect((await listAll(root.store, `${dirOf(name)}_catalog/reservations/`)).objects, name).toEqual([]);
    expect((await dropper.call('POST', `/v1/table/ns%24${dropped}/describe`, {})).status).toBe(404);
    // No replica kept retrying the batch.
    for (const replica of [dropper, coordinator]) expect(replica.lines.filter((l) => String(l.msg).startsWith('could not finish'))).toEqual([]);
    return { told };
  }

  /** The kept table commits its next version as usual, and so does a table outside the batch. */
  async function othersCommit(kept: string, outside: string, keptLatest: number) {
    const next = keptLatest + 1;
    const commit = await dropper.call('POST', `/v1/table/ns%24${kept}/version/create`, { version: next, manifest_path: await stage(kept, next) });
    expect(commit.status, commit.text).toBe(200);
    expect(await versionsOf(kept)).toEqual(Array.from({ length: next }, (_, i) => i + 1));
    await declare(outside);
    const elsewhere = await dropper.call('POST', `/v1/table/ns%24${outside}/version/create`, { version: 1, manifest_path: await stage(outside, 1) });
    expect(elsewhere.status, elsewhere.text).toBe(200);
  }

  it('past the commit point: the drop brings the batch to its end first; the batch answers 200 with every version', { timeout: 60_000 }, async () => {
    const { told } = await race('batch:after-commit-point', 'a1', 'a2', (staged) => ({
      path: '/v1/table/version/batch-create',
      body: { entries: ['a1', 'a2'].map((t) => ({ id: ['ns', t], version: 1, manifest_path: staged[t] })) },
    }));
    expect(told.status, told.text).toBe(200);
    // The batch happened before the drop: the dropped table's version is reported as committed.
    expect((told.json.versions as Array<{ version: number }>).map((v) => v.version)).toEqual([1, 1]);
    expect(await versionsOf('a1')).toEqual([1]);
    await othersCommit('a1', 'a3', 1);
  });

  it('at the commit point: the drop waits for the batch, which commits; BatchCommitTables answers every operation', { timeout: 60_000 }, async () => {
    const { told } = await race('batch:before-commit-point', 'b1', 'b2', (staged) => ({
      path: '/v1/table/batch-commit',
      body: { operations: ['b1', 'b2'].map((t) => ({ create_table_version: { id: ['ns', t], version: 1, manifest_path: staged[t] } })) },
    }));
    expect(told.status, told.text).toBe(200);
    expect(told.json.results).toHaveLength(2);
    expect(await versionsOf('b1')).toEqual([1]);
    await othersCommit('b1', 'b3', 1);
  });

  it('after its claims, before it looks again: the batch sees the drop and stops before its commit point (404)', { timeout: 60_000 }, async () => {
    const { told } = await race('batch:after-claims', 'c1', 'c2', (staged) => ({
      path: '/v1/table/version/batch-create',
      body: { entries: ['c1', 'c2'].map((t) => ({ id: ['ns', t], version: 1, manifest_path: staged[t] })) },
    }));
    expect(told.status, told.text).toBe(404);
    expect(told.json.code).toBe(4);
    expect(await versionsOf('c1')).toEqual([]);
    await othersCommit('c1', 'c3', 0);
  });
});
