import type { ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { listAll } from '../../src/store/object-store.js';
import { backends, type TestRoot } from '../support/backends.js';
import { type ServiceProcess, useCrashRoot } from '../support/service-process.js';

// A batch that takes longer than its lease, on two replicas. A 50,000-declare
// BatchCommitTables took minutes; the other replica's poller found its 30 s lease run out (it was
// never renewed) and rolled the batch back under its coordinator, which answered 409 after ~160 s.
// Here the coordinator is a real service process that pauses, alive, at pause points of every
// phase of the protocol (src/service/coordination/fault-points.ts) for several leases each: before its commit
// point (preparation), after it (rolling forward) and after Succeeded (clean-up). The survivor, a
// second replica on the same root, polls for dead batches all the while.
// - Alive, the coordinator keeps its lease: the survivor leaves the batch alone, the batch commits.
// - Frozen (SIGSTOP) past its lease, it loses the batch: the survivor rolls it back, and the
//   coordinator, thawed, stops before its commit point (409) instead of committing over the rollback.

const LEASE_MS = 300;
/** Five leases (ten poll intervals of the survivor) at each pause point. */
const PAUSE_MS = 5 * LEASE_MS;
const PAUSE_POINTS = ['batch:before-commit-point', 'batch:after-commit-point', 'batch:after-succeeded'];
const DIED = 'finished a batch whose coordinator died';

interface TxRecord {
  id: string;
  status: string;
  phase?: string;
  cleaned_up?: boolean;
}

const declares = (...names: string[]) => ({ operations: names.map((name) => ({ declare_table: { id: ['ns', name] } })) });

/** Whether every thread of process `pid` has stopped (SIGSTOP is delivered to each in turn). */
function allStopped(pid: number): boolean {
  return readdirSync(`/proc/${pid}/task`).every((task) => /^\d+ \(.*\) T /s.test(readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8')));
}

/**
 * SIGSTOPs `child`, but never while it holds `lockFile`: a local root's replace-if-unchanged holds
 * a lock file across its stat, compare and rename, and a holder frozen inside keeps every other
 * writer of the key out until the lock is broken as stale, 30 s later; thawed after that, it would
 * rename its stale write over theirs (a hazard of the local store under a freeze longer than 30 s,
 * not of the batch protocol, which this test is about). A frozen process holds no such lock on S3,
 * where the store applies the condition itself (`lockFile` null).
 */
async function freezeOutside(child: ChildProcess, lockFile: string | null): Promise<void> {
  const pid = child.pid ?? 0;
  for (;;) {
    child.kill('SIGSTOP');
    while (!allStopped(pid)) await new Promise((resolve) => setTimeout(resolve, 1));
    if (lockFile === null || !existsSync(lockFile)) return;
    child.kill('SIGCONT');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe.each(backends())('a batch that outlasts its lease, on two replicas, on $name', (backend) => {
  const crash = useCrashRoot(backend, LEASE_MS);
  let root: TestRoot;
  let survivor: ServiceProcess;
  let coordinator: ServiceProcess;
  beforeAll(async () => {
    root = crash.root();
    survivor = crash.watcher();
    coordinator = await crash.start(undefined, { points: PAUSE_POINTS, ms: PAUSE_MS });
  }, 60_000);

  const pauses = (point: string) => coordinator.stderr().split(`pause point ${point}:`).length - 1;
  const record = async (id: string): Promise<TxRecord> =>
    JSON.parse((await root.store.get(`_catalog/transactions/${id}.json`))?.body.toString('utf8') ?? '{}') as TxRecord;
  const onlyNewRecord = async (before: Set<string>): Promise<TxRecord> => {
    const keys = (await listAll(root.store, '_catalog/transactions/')).objects.map((o) => o.key).filter((k) => !before.has(k));
    expect(keys).toHaveLength(1);
    return JSON.parse((await root.store.get(keys[0] ?? ''))?.body.toString('utf8') ?? '{}') as TxRecord;
  };
  const recordKeys = async () => new Set((await listAll(root.store, '_catalog/transactions/')).objects.map((o) => o.key));

  it('is left to its coordinator while it works, in every phase, and commits', { timeout: 60_000 }, async () => {
    const answer = await coordinator.call('POST', '/v1/table/batch-commit', declares('a1', 'a2'));
    expect(answer.status, answer.text).toBe(200);
    // It did pause, alive, for five leases at each phase.
    for (const point of PAUSE_POINTS) expect(pauses(point), point).toBe(1);
    expect(survivor.lines.filter((l) => l.msg === DIED)).toEqual([]);
    const id = String(answer.json.transaction_id);
    expect(await record(id)).toMatchObject({ status: 'Succeeded', phase: 'done', cleaned_up: true });
    expect(await root.store.head(`_catalog/batches/${id}.json`)).toBeNull();
    for (const name of ['a1', 'a2']) expect((await survivor.call('POST', `/v1/table/ns%24${name}/describe`, {})).status, name).toBe(200);
  });

  it('frozen past its lease, is rolled back by the other replica, and its coordinator stops before its commit point', { timeout: 60_000 }, async () => {
    const before = await recordKeys();
    const pausedBefore = pauses('batch:before-commit-point');
    const rolledBack = survivor.waitForLog((l) => l.msg === DIED);
    const answer = coordinator.call('POST', '/v1/table/batch-commit', declares('b1', 'b2'));
    // At its commit point, with both names claimed: frozen there, its lease is no longer renewed.
    await expect.poll(() => pauses('batch:before-commit-point'), { timeout: 30_000, interval: 10 }).toBe(pausedBefore + 1);
    const { id } = await onlyNewRecord(before);
    await freezeOutside(coordinator.child, root.s3.endpoint ? null : `${path.join(root.root, '_catalog/transactions', `${id}.json`)}.~lock~`);
    try {
      await rolledBack;
      const taken = await onlyNewRecord(before);
      expect(taken).toMatchObject({ status: 'Failed', phase: 'done', cleaned_up: true });
    } finally {
      coordinator.child.kill('SIGCONT');
    }
    const told = await answer;
    expect(told.status, told.text).toBe(409);
    expect(told.json.code).toBe(14);
    // Nothing of it committed over the rollback: the record stays Failed, the names are free.
    expect(await onlyNewRecord(before)).toMatchObject({ status: 'Failed', phase: 'done', cleaned_up: true });
    for (const name of ['b1', 'b2']) {
      expect((await survivor.call('POST', `/v1/table/ns%24${name}/describe`, {})).status, name).toBe(404);
      expect((await survivor.call('POST', `/v1/table/ns%24${name}/declare`, {})).status, name).toBe(200);
    }
  });
});
