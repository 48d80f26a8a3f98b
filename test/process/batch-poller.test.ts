import type { ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { listAll } from '../../src/store/object-store.js';
import { peopleStream } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';
import { rootArgs, type ServiceProcess, startServiceProcess, stopService } from '../support/service-process.js';

// A batch whose coordinator dies is finished by another replica that is already running, once
// the batch's lease has run out: no restart of anything. The coordinator is a real service
// process SIGKILLed at a fault point of the batch protocol (src/service/versions/); the survivor
// was started before it and is never restarted, so only its poller can do the work.

const LEASE_MS = 1500;
/** Longest the survivor may take: the lease, a poll interval (half the lease), and slack for slow machines. */
const FINISH_BOUND_MS = LEASE_MS * 2 + 15_000;

interface Case {
  point: string;
  /** Whether the batch is past its commit point when its coordinator dies. */
  forward: boolean;
}

const CASES: Case[] = [
  { point: 'batch:before-commit-point', forward: false },
  { point: 'batch:after-commit-point', forward: true },
];

interface TxRecord {
  id: string;
  status: string;
  phase?: string;
  lease_until?: string;
  updated_at: string;
  cleaned_up?: boolean;
}

/** Polls DescribeTransaction on `service` until the transaction is terminal, within FINISH_BOUND_MS. */
async function awaitTerminal(service: ServiceProcess, id: string): Promise<string> {
  const deadline = Date.now() + FINISH_BOUND_MS;
  for (;;) {
    const res = await service.call('POST', `/v1/transaction/${id}/describe`, {});
    expect(res.status, res.text).toBe(200);
    const status = String(res.json.status);
    if (status === 'Succeeded' || status === 'Failed') return status;
    if (Date.now() > deadline) throw new Error(`transaction ${id} still ${status} after ${FINISH_BOUND_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** `promise`, or a failure once FINISH_BOUND_MS have passed. */
async function bounded<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`waited ${FINISH_BOUND_MS} ms for ${what}`)), FINISH_BOUND_MS);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe.each(backends())('a batch whose coordinator died on $name', (backend) => {
  it.for(CASES)('is finished by a running replica after its lease, when killed at $point', { timeout: 120_000 }, async ({ point, forward }, { expect }) => {
    const root = await backend.newRoot();
    const live = new Set<ChildProcess>();
    try {
      const survivor = await startServiceProcess({ args: rootArgs(root, LEASE_MS), live });
      expect((await survivor.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
      const finishedHere = survivor.waitForLog((l) => l.msg === 'finished a batch whose coordinator died');

      // A declare-only BatchCommitTables whose coordinator dies at the fault point.
      const doomed = await startServiceProcess({ args: rootArgs(root, LEASE_MS), live, faultPoint: point });
      const batch = { operations: [{ declare_table: { id: ['ns', 't'], properties: { k: 'v' } } }] };
      await expect(doomed.call('POST', '/v1/table/batch-commit', batch)).rejects.toThrow();
      expect(await doomed.exited).toEqual({ code: null, signal: 'SIGKILL' });
      expect(doomed.stderr()).toContain(`fault point ${point}: killing the process`);

      // What the crash left: the transaction record and the claimed (pending) table record.
      const recordKeys = (await listAll(root.store, '_catalog/transactions/')).objects.map((o) => o.key);
      expect(recordKeys).toHaveLength(1);
      const crashed = JSON.parse((await root.store.get(recordKeys[0] ?? ''))?.body.toString('utf8') ?? '{}') as TxRecord;
      expect(crashed.phase).toBe(forward ? 'committing' : 'reserving');
      const marker = `_catalog/batches/${crashed.id}.json`;
      expect(await root.store.head('ns/t.lance/.lance-table.json')).not.toBeNull();

      // The survivor's poller finishes it; nothing else touches the batch.
      const status = await awaitTerminal(survivor, crashed.id);
      expect(status).toBe(forward ? 'Succeeded' : 'Failed');
      // The status is set before the clean-up; the poller logs once the batch is cleaned up too.
      await bounded(finishedHere, 'the survivor to finish the batch');
      const finished = JSON.parse((await root.store.get(recordKeys[0] ?? ''))?.body.toString('utf8') ?? '{}') as TxRecord;
      expect(finished).toMatchObject({ phase: 'done', cleaned_up: true });
      // Not before its lease ran out: the coordinator might have been alive until then.
      expect(Date.parse(finished.updated_at)).toBeGreaterThanOrEqual(Date.parse(crashed.lease_until ?? ''));
      expect(await root.store.head(marker)).toBeNull();
      expect(survivor.lines.some((l) => l.msg === 'recovered unfinished transactions')).toBe(false);
      expect(survivor.lines.some((l) => l.msg === 'finished a batch whose coordinator died' && l.transaction === crashed.id)).toBe(true);

      if (forward) {
        // Rolled forward: the declared table exists with the batch's properties.
        const described = await survivor.call('POST', '/v1/table/ns%24t/describe', {});
        expect(described.status, described.text).toBe(200);
        expect(described.json.properties).toEqual({ k: 'v' });
      } else {
        // Rolled back: the name is free, and a plain create of it succeeds.
        expect(await root.store.head('ns/t.lance/.lance-table.json')).toBeNull();
        const created = await survivor.call('POST', '/v1/table/ns%24t/create', peopleStream([1, 2]), { 'content-type': 'application/vnd.apache.arrow.stream' });
        expect(created.status, created.text).toBe(200);
        expect(created.json.version).toBe(1);
      }
      await stopService(survivor);
    } finally {
      for (const child of live) child.kill('SIGKILL');
      await root.dispose();
    }
  });
});
