import { afterAll, describe, expect, it } from 'vitest';
import { CLOCK_ALLOWANCE_MS } from '../../src/service/maintenance/maintenance-plan.js';
import { listAll } from '../../src/store/object-store.js';
import { peopleStream } from '../support/arrow-data.js';
import { backends, type TestRoot } from '../support/backends.js';
import { type PausePoints, processesByRoot, rootArgs, type ServiceProcess, startServiceProcess, stopService } from '../support/service-process.js';

// Table maintenance across service processes on one root (issue 33 point 2): two replicas whose
// schedulers both find the same table due (held at the claim so that both read the same slot)
// start exactly one run, worked by one runner; a replica SIGKILLed before or after each step of a
// run (index upkeep, compaction, cleanup) leaves the run Running under its lease, and another
// process takes it over once the lease has run out, finishes it, and the table keeps every row.

const LEASE_MS = 1000;
const INTERVAL_MS = 100;
const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

/** The processes of each test (they run at once), by root: a test kills only its own. */
const { liveOn, dispose, killAll } = processesByRoot();
afterAll(killAll);

function start(root: TestRoot, options: { faultPoint?: string; pause?: PausePoints } = {}): Promise<ServiceProcess> {
  return startServiceProcess({ args: [...rootArgs(root, LEASE_MS), '--maintenance-interval-ms', String(INTERVAL_MS)], live: liveOn(root), ...options });
}

interface StoredRecord {
  id: string;
  status: string;
  operation: string;
  properties: Record<string, string>;
  job: { attempts: number; owner?: string; steps_done?: string[] };
}

/** Every maintenance run's transaction record on the root. */
async function runRecords(root: TestRoot): Promise<StoredRecord[]> {
  const { objects } = await listAll(root.store, '_catalog/transactions/', { delimiter: '/' });
  const records = await Promise.all(objects.map(async (o) => JSON.parse((await root.store.get(o.key))?.body.toString('utf8') ?? '{}') as StoredRecord));
  return records.filter((r) => r.operation === 'maintain_table');
}

async function until<T>(what: string, probe: () => Promise<T | null>, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found !== null) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * ns$t with 7 one-row fragments, then a policy that compacts at 4 (set by an update of no row): due
 * from the next tick on. `allSteps`: also a BTREE index the last 6 appends are outside of, and old
 * versions out of the reader window when the policy is set, so that one run does every step
 * (optimize_indices, compact, cleanup).
 */
async function dueTable(service: ServiceProcess, allSteps = false): Promise<number> {
  expect((await service.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
  expect((await service.call('POST', '/v1/table/ns%24t/create', peopleStream([1]), ARROW)).status).toBe(200);
  if (allSteps)
    expect((await service.call('POST', '/v1/table/ns%24t/create_scalar_index', { column: 'id', index_type: 'BTREE', name: 'by_id' })).status).toBe(200);
  for (let i = 2; i <= 7; i++) expect((await service.call('POST', '/v1/table/ns%24t/insert', peopleStream([i]), ARROW)).status).toBe(200);
  // Time is the input of a cleanup: the versions must have left the reader window (lease and clock allowance).
  if (allSteps) await new Promise((r) => setTimeout(r, LEASE_MS + CLOCK_ALLOWANCE_MS + 500));
  const set = await service.call('POST', '/v1/table/ns%24t/update', {
    updates: [['name', 'name']],
    predicate: 'id < 0',
    properties: {
      'maintenance.compact': 'true',
      'maintenance.min_fragments': '4',
      ...(allSteps ? { 'maintenance.optimize_indices': 'true', 'maintenance.max_unindexed_rows': '1', 'maintenance.cleanup_older_than': '1s' } : {}),
    },
  });
  expect(set.status, set.text).toBe(200);
  return 7;
}

const finished = (records: StoredRecord[]) => (records.length > 0 && records.every((r) => ['Succeeded', 'Failed'].includes(r.status)) ? records : null);

describe.concurrent.each(backends())('table maintenance across processes on $name', (backend) => {
  it('two replicas that both find the table due start exactly one run', { timeout: 240_000 }, async () => {
    const root = await backend.newRoot();
    try {
      // Both schedulers wait at the claim, alive, so both claim the slot they read before either wrote it.
      const pause = { points: ['maintenance:before-claim'], ms: 4000 };
      const [a, b] = await Promise.all([start(root, { pause }), start(root, { pause })]);
      const rows = await dueTable(a as ServiceProcess);
      // Both got to the claim (each having read the slot before either claimed it) ...
      const reached = (p: ServiceProcess) => (p.stderr().match(/pause point maintenance:before-claim/g) ?? []).length;
      await until('both schedulers at the claim', async () => (reached(a as ServiceProcess) >= 1 && reached(b as ServiceProcess) >= 1 ? true : null));
      // ... and both have claimed, or lost, once the pause is over; then the runs end.
      await new Promise((r) => setTimeout(r, pause.ms + 500));
      const records = await until('the runs to end', async () => finished(await runRecords(root)));
      expect(records).toHaveLength(1);
      const run = records[0] as StoredRecord;
      expect(run.status, JSON.stringify(run)).toBe('Succeeded');
      expect(run.job.attempts).toBe(1);
      expect(run.properties.fragments_after).toBe('1');
      const started = [a, b].flatMap((p) => (p as ServiceProcess).lines.filter((l) => l.msg === 'maintenance run started'));
      expect(started).toHaveLength(1);
      // The run's audit line, by the replica that ran it. It is logged after the record is finished,
      // and reaches this process through a pipe: wait for it rather than read the lines once.
      const auditLines = () =>
        [a, b].flatMap((p) =>
          (p as ServiceProcess).lines.filter((l) => l.msg === 'audit' && (l.audit as { operation?: string } | undefined)?.operation === 'MaintainTable'),
        );
      await until("the run's audit line", async () => (auditLines().length > 0 ? true : null), 30_000);
      const audited = auditLines();
      expect(audited).toHaveLength(1);
      expect(audited[0]?.audit).toMatchObject({ id: ['ns', 't'], status: 'succeeded', job_id: run.id, fragments_after: 1 });
      // Visible like any job.
      const described = await (b as ServiceProcess).call('POST', `/v1/transaction/${run.id}/describe`, {});
      expect(described.json.status).toBe('Succeeded');
      expect(Number((await (b as ServiceProcess).call('POST', '/v1/table/ns%24t/count_rows', {})).text)).toBe(rows);
      await Promise.all([stopService(a as ServiceProcess), stopService(b as ServiceProcess)]);
    } finally {
      await dispose(root);
    }
  });

  it.each(['optimize_indices', 'compact', 'cleanup'].flatMap((step) => [`maintenance:before-${step}`, `maintenance:after-${step}`]))(
    'a replica killed at %s: another takes the run over after its lease',
    { timeout: 240_000 },
    async (point) => {
      const root = await backend.newRoot();
      try {
        const crashing = await start(root, { faultPoint: point });
        const rows = await dueTable(crashing, true);
        expect(await crashing.exited).toEqual({ code: null, signal: 'SIGKILL' });
        const [atCrash] = await runRecords(root);
        expect(atCrash?.status).toBe('Running');
        expect(atCrash?.job.owner).toBeDefined();

        const recovering = await start(root);
        const records = await until('the run to end', async () => finished(await runRecords(root)));
        expect(records).toHaveLength(1); // the unfinished run was taken over, no second one started
        const run = records[0] as StoredRecord;
        expect(run.status, JSON.stringify(run)).toBe('Succeeded');
        expect(run.job.attempts).toBe(2);
        expect(run.job.steps_done).toEqual(['optimize_indices', 'compact', 'cleanup']);
        // What the run did is done once, whichever process did it: one fragment, every row indexed, old versions gone.
        const stats = await recovering.call('POST', '/v1/table/ns%24t/index/by_id/stats', {});
        expect(stats.json.num_unindexed_rows, stats.text).toBe(0);
        const versions = (await recovering.call('POST', '/v1/table/ns%24t/version/list', {})).json.versions as unknown[];
        expect(versions.length).toBeLessThan(8);
        expect(Number((await recovering.call('POST', '/v1/table/ns%24t/count_rows', {})).text)).toBe(rows);
        const inspected = await recovering.call('POST', '/v1/table/ns%24t/describe', {});
        expect(inspected.status).toBe(200);
        await stopService(recovering);
      } finally {
        await dispose(root);
      }
    },
  );
});
