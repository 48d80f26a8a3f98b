import { describe, expect, it, vi } from 'vitest';
import { EngineError } from '../../src/engine/dataset-location.js';
import { versionSidecarKey } from '../../src/service/catalog/layout.js';
import { CLOCK_ALLOWANCE_MS } from '../../src/service/maintenance/maintenance-plan.js';
import { listAll } from '../../src/store/object-store.js';
import { committedVersions, metricSamples, type TestApp, useTestApp } from '../support/app.js';
import { peopleStream } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';
import { waitForJob } from '../support/jobs.js';

// Table maintenance run by the service (issue 33) through the HTTP API, with the real engine: the
// policy as properties (a bad value is a 400 code 13 naming the key and changes nothing; a
// namespace's policy is inherited, a table's wins), and a scheduler tick that starts a run which
// compacts through the table's commit path, is described by DescribeTransaction, and is counted
// by /metrics. Ticks are driven by the test (--maintenance-interval-ms 0 starts none).

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const LEASE_MS = 2000;

async function appendSmall(t: TestApp, table: string, appends: number): Promise<void> {
  for (let i = 0; i < appends; i++) {
    const res = await t.call('POST', `/v1/table/${table}/insert`, peopleStream([100 + i]), ARROW);
    expect(res.status, res.text).toBe(200);
  }
}

async function countRows(t: TestApp, table: string): Promise<number> {
  return Number((await t.call('POST', `/v1/table/${table}/count_rows`, {})).json.value);
}

/**
 * One scheduler tick; waits for every run it started (a run's summary reaches the table's slot
 * after its record); returns the job ids of the runs of `table` (other tables of the file may be due too).
 */
async function tickFor(t: TestApp, table: string[]): Promise<string[]> {
  const { started } = await t.app.maintenance.tick();
  await Promise.all(started.map((s) => t.app.jobSettled(s.job)));
  return started.filter((s) => JSON.stringify(s.table) === JSON.stringify(table)).map((s) => s.job);
}

async function metric(t: TestApp, name: string): Promise<number> {
  const scraped = await t.app.server.inject({ method: 'GET', url: '/metrics' });
  return metricSamples(scraped.body).get(name) ?? 0;
}

describe.each(backends())('table maintenance on $name', (backend) => {
  const fx = useTestApp(backend, { maintenanceIntervalMs: 0, transactionLeaseMs: LEASE_MS });

  it('refuses a bad policy value with 400 code 13 naming the key, and changes nothing', async () => {
    const { t } = fx;
    const ns = await t.call('POST', '/v1/namespace/bad/create', { properties: { 'maintenance.compact': 'sometimes' } });
    expect(ns.status).toBe(400);
    expect(ns.json.code).toBe(13);
    expect(ns.json.error).toContain('maintenance.compact');
    expect((await t.call('POST', '/v1/namespace/bad/describe', {})).status).toBe(404);

    expect((await t.call('POST', '/v1/namespace/good/create', {})).status).toBe(200);
    const declared = await t.call('POST', '/v1/table/good%24t/declare', { properties: { 'maintenance.cleanup_older_than': '7 days' } });
    expect(declared.status).toBe(400);
    expect(declared.json.code).toBe(13);
    expect(declared.json.error).toContain('maintenance.cleanup_older_than');
    expect((await t.call('POST', '/v1/table/good%24t/describe', {})).status).toBe(404);

    const created = await t.call('POST', '/v1/table/good%24u/create', peopleStream([1, 2]), ARROW);
    expect(created.status, created.text).toBe(200);
    const update = await t.call('POST', '/v1/table/good%24u/update', {
      updates: [['name', "'x'"]],
      properties: { 'maintenance.min_fragments': '1' },
    });
    expect(update.status).toBe(400);
    expect(update.json.error).toContain('maintenance.min_fragments');
    // The update's rows were not written either: one version, the create's.
    expect((await t.call('POST', '/v1/table/good%24u/version/list', {})).json.versions).toHaveLength(1);
    expect((await t.call('POST', '/v1/table/good%24u/describe', {})).json.properties ?? {}).toEqual({});
  });

  it("starts one run for a table its namespace's policy covers, compacts it through the commit path, and records the run", async () => {
    const { t } = fx;
    expect((await t.call('POST', '/v1/namespace/m/create', { properties: { 'maintenance.compact': 'true', 'maintenance.min_fragments': '4' } })).status).toBe(
      200,
    );
    // A child namespace inherits; its table u opts out with its own value.
    expect((await t.call('POST', '/v1/namespace/m%24sub/create', {})).status).toBe(200);
    for (const table of ['m%24sub%24t', 'm%24sub%24u']) {
      const res = await t.call('POST', `/v1/table/${table}/create`, peopleStream([1]), ARROW);
      expect(res.status, res.text).toBe(200);
      await appendSmall(t, table, 5);
    }
    const optOut = await t.call('POST', '/v1/table/m%24sub%24u/update', { updates: [['name', 'name']], properties: { 'maintenance.compact': 'false' } });
    expect(optOut.status, optOut.text).toBe(200);
    const rowsBefore = await countRows(t, 'm%24sub%24t');

    const first = await tickFor(t, ['m', 'sub', 't']);
    expect(first).toHaveLength(1);
    const jobId = first[0] as string;
    const job = await waitForJob(t, jobId);
    expect(job.status, JSON.stringify(job)).toBe('Succeeded');
    expect(Number(job.properties.fragments_before)).toBeGreaterThanOrEqual(6);
    expect(Number(job.properties.fragments_after)).toBe(1);
    expect(job.properties.steps).toBe('compact');
    expect(await countRows(t, 'm%24sub%24t')).toBe(rowsBefore);
    expect(await metric(t, 'lance_ns_maintenance_runs_total{outcome="succeeded"}')).toBe(1);
    expect(await metric(t, 'lance_ns_maintenance_fragments_after_total')).toBe(1);

    // Compacted: nothing due on the next tick; the opted-out table never was.
    expect(await tickFor(t, ['m', 'sub', 't'])).toEqual([]);
    expect(await tickFor(t, ['m', 'sub', 'u'])).toEqual([]);

    // DescribeTable with_maintenance (the console's table page): the policy key by key, and the run.
    const described = await t.call('POST', '/v1/table/m%24sub%24t/describe?with_maintenance=true', {});
    const maintenance = described.json.maintenance as { policy: Array<Record<string, unknown>>; last_runs: Array<Record<string, unknown>> };
    expect(maintenance.policy).toContainEqual({ key: 'maintenance.compact', value: 'true', from: 'namespace', namespace: ['m'] });
    expect(maintenance.policy).toContainEqual({ key: 'maintenance.min_fragments', value: '4', from: 'namespace', namespace: ['m'] });
    expect(maintenance.policy).toContainEqual({ key: 'maintenance.cleanup_older_than', value: 'none', from: 'default' });
    expect(maintenance.last_runs).toHaveLength(1);
    expect(maintenance.last_runs[0]).toMatchObject({ job_id: jobId, status: 'Succeeded', steps: ['compact'], fragments_after: 1 });
    // The version the table was at when the run ended: the compaction's, the latest since.
    const latest = await t.call('POST', '/v1/table/m%24sub%24t/version/list', { descending: true, limit: 1 });
    expect(maintenance.last_runs[0]?.version).toBe((latest.json.versions as Array<{ version: number }>)[0]?.version);
    const optedOut = await t.call('POST', '/v1/table/m%24sub%24u/describe', { with_maintenance: true });
    expect((optedOut.json.maintenance as { policy: unknown[] }).policy).toContainEqual({ key: 'maintenance.compact', value: 'false', from: 'table' });
    // Without the flag, no extension field.
    expect((await t.call('POST', '/v1/table/m%24sub%24t/describe', {})).json.maintenance).toBeUndefined();
  });

  it('removes old versions but the tagged one, a branch base, the one a reader may hold and the latest', async () => {
    const { t } = fx;
    expect((await t.call('POST', '/v1/namespace/c/create', {})).status).toBe(200);
    expect((await t.call('POST', '/v1/table/c%24t/create', peopleStream([1]), ARROW)).status).toBe(200);
    await appendSmall(t, 'c%24t', 3); // versions 2, 3, 4
    expect((await t.call('POST', '/v1/table/c%24t/tags/create', { tag: 'release', version: 1 })).status).toBe(200);
    expect((await t.call('POST', '/v1/table/c%24t/branches/create', { name: 'dev', from_version: 2 })).status).toBe(200);
    const set = await t.call('POST', '/v1/table/c%24t/update', { updates: [['name', 'name']], properties: { 'maintenance.cleanup_older_than': '1s' } });
    expect(set.status, set.text).toBe(200); // version 5
    // Time is the input here: every version but the latest must be older than the reader window (lease and clock allowance).
    await new Promise((r) => setTimeout(r, LEASE_MS + CLOCK_ALLOWANCE_MS + 500));
    await appendSmall(t, 'c%24t', 1); // version 6: 5 was the latest a moment ago, so a reader may hold it
    const rows = await countRows(t, 'c%24t');
    const started = await tickFor(t, ['c', 't']);
    expect(started).toHaveLength(1);
    const job = await waitForJob(t, started[0] as string);
    expect(job.status, JSON.stringify(job)).toBe('Succeeded');
    expect(job.properties.versions_removed).toBe('2');
    const left = (await t.call('POST', '/v1/table/c%24t/version/list', {})).json.versions as Array<{ version: number }>;
    expect(left.map((v) => v.version).sort((a, b) => a - b)).toEqual([1, 2, 5, 6]);
    expect(await countRows(t, 'c%24t')).toBe(rows);
    expect((await t.call('POST', '/v1/table/c%24t/count_rows', { version: 1 })).json.value).toBe(1);
    expect(await metric(t, 'lance_ns_maintenance_versions_removed_total')).toBe(2);
    // What only the tag and the branch keep is not tried again at every tick.
    expect(await tickFor(t, ['c', 't'])).toEqual([]);
  });

  it('a run that loses its commit race ends Failed, is counted, and a later tick starts another', async () => {
    const { t } = fx;
    expect((await t.call('POST', '/v1/namespace/k/create', { properties: { 'maintenance.compact': 'true', 'maintenance.min_fragments': '3' } })).status).toBe(
      200,
    );
    expect((await t.call('POST', '/v1/table/k%24t/create', peopleStream([1]), ARROW)).status).toBe(200);
    await appendSmall(t, 'k%24t', 3);
    // The engine's compaction answers as Lance does when a writer committed first.
    const lost = vi.spyOn(t.app.engine.maintenance, 'compact').mockRejectedValueOnce(new EngineError('conflict', 'a writer committed first'));
    try {
      const first = await tickFor(t, ['k', 't']);
      expect(first).toHaveLength(1);
      const failed = await waitForJob(t, first[0] as string);
      expect(failed.status).toBe('Failed');
      expect(failed.properties.error).toContain('lost a commit race');
      expect(await metric(t, 'lance_ns_maintenance_runs_total{outcome="conflict"}')).toBe(1);
      const second = await tickFor(t, ['k', 't']);
      expect(second).toHaveLength(1);
      const done = await waitForJob(t, second[0] as string);
      expect(done.status, JSON.stringify(done)).toBe('Succeeded');
      expect(done.properties.fragments_after).toBe('1');
      const runs = (await t.call('POST', '/v1/table/k%24t/describe', { with_maintenance: true })).json.maintenance as { last_runs: Array<{ status: string }> };
      expect(runs.last_runs.map((r) => r.status)).toEqual(['Succeeded', 'Failed']);
    } finally {
      lost.mockRestore();
    }
  });

  it('a table dropped and created again under its name shows none of the runs of the one before', async () => {
    const { t } = fx;
    const policy = { 'maintenance.compact': 'true', 'maintenance.min_fragments': '3' };
    expect((await t.call('POST', '/v1/namespace/r/create', { properties: policy })).status).toBe(200);
    const lastRuns = async () =>
      ((await t.call('POST', '/v1/table/r%24t/describe', { with_maintenance: true })).json.maintenance as { last_runs: Array<{ job_id: string }> }).last_runs;
    expect((await t.call('POST', '/v1/table/r%24t/create', peopleStream([1]), ARROW)).status).toBe(200);
    await appendSmall(t, 'r%24t', 3);
    const [first] = await tickFor(t, ['r', 't']);
    expect((await lastRuns()).map((r) => r.job_id)).toEqual([first]);
    expect((await t.call('POST', '/v1/table/r%24t/drop', {})).status).toBe(200);
    expect((await t.call('POST', '/v1/table/r%24t/create', peopleStream([1]), ARROW)).status).toBe(200);
    expect(await lastRuns()).toEqual([]);
    // Its own runs are its history from then on.
    await appendSmall(t, 'r%24t', 3);
    const [second] = await tickFor(t, ['r', 't']);
    expect(second).toBeDefined();
    expect((await lastRuns()).map((r) => r.job_id)).toEqual([second]);
  });

  it('inspects a table with a policy again only once a version was committed to it', async () => {
    const { t } = fx;
    expect((await t.call('POST', '/v1/namespace/q/create', { properties: { 'maintenance.compact': 'true', 'maintenance.min_fragments': '50' } })).status).toBe(
      200,
    );
    expect((await t.call('POST', '/v1/table/q%24t/create', peopleStream([1]), ARROW)).status).toBe(200);
    const inspected = vi.spyOn(t.app.engine.maintenance, 'inspect');
    try {
      const inspectionsOfQ = () => inspected.mock.calls.filter(([at]) => at.location.includes('/q/')).length;
      expect(await tickFor(t, ['q', 't'])).toEqual([]);
      expect(inspectionsOfQ()).toBe(1);
      // Without a cleanup in the policy, the versions (every manifest read) are not asked for.
      expect(inspected.mock.calls.find(([at]) => at.location.includes('/q/'))?.[1]).toMatchObject({ withVersions: false });
      expect(await tickFor(t, ['q', 't'])).toEqual([]);
      expect(inspectionsOfQ()).toBe(1);
      await appendSmall(t, 'q%24t', 1);
      expect(await tickFor(t, ['q', 't'])).toEqual([]);
      expect(inspectionsOfQ()).toBe(2);
    } finally {
      inspected.mockRestore();
    }
  });

  it('brings an index up to date once max_unindexed_rows rows are outside it', async () => {
    const { t } = fx;
    expect((await t.call('POST', '/v1/namespace/ix/create', {})).status).toBe(200);
    expect((await t.call('POST', '/v1/table/ix%24t/create', peopleStream([1, 2, 3, 4, 5]), ARROW)).status).toBe(200);
    const indexed = await t.call('POST', '/v1/table/ix%24t/create_scalar_index', { column: 'id', index_type: 'btree', name: 'by_id' });
    expect(indexed.status, indexed.text).toBe(200);
    await appendSmall(t, 'ix%24t', 3);
    const unindexed = async () => Number((await t.call('POST', '/v1/table/ix%24t/index/by_id/stats', {})).json.num_unindexed_rows);
    expect(await unindexed()).toBe(3);
    const set = await t.call('POST', '/v1/table/ix%24t/update', {
      updates: [['name', 'name']],
      predicate: 'id < 0',
      properties: { 'maintenance.optimize_indices': 'true', 'maintenance.max_unindexed_rows': '3' },
    });
    expect(set.status, set.text).toBe(200);
    const started = await tickFor(t, ['ix', 't']);
    expect(started).toHaveLength(1);
    const run = await waitForJob(t, started[0] as string);
    expect(run.status, JSON.stringify(run)).toBe('Succeeded');
    expect(run.properties.steps).toBe('optimize_indices');
    expect(Number(run.properties.indices_updated)).toBe(1);
    expect(await unindexed()).toBe(0);
    expect(await countRows(t, 'ix%24t')).toBe(8);
    expect(await tickFor(t, ['ix', 't'])).toEqual([]);
  });

  it('on a managed table, a run commits through the service like a client commit', async () => {
    const { t } = fx;
    const ns = await t.call('POST', '/v1/namespace/mv/create', {
      properties: { managed_versioning: 'true', 'maintenance.compact': 'true', 'maintenance.min_fragments': '3' },
    });
    expect(ns.status, ns.text).toBe(200);
    expect((await t.call('POST', '/v1/table/mv%24t/create', peopleStream([1]), ARROW)).status).toBe(200);
    await appendSmall(t, 'mv%24t', 3);
    expect((await t.call('POST', '/v1/table/mv%24t/describe', {})).json.managed_versioning).toBe(true);
    const committed = await committedVersions(t);
    const started = await tickFor(t, ['mv', 't']);
    expect(started).toHaveLength(1);
    const run = await waitForJob(t, started[0] as string);
    expect(run.status, JSON.stringify(run)).toBe('Succeeded');
    expect(run.properties.fragments_after).toBe('1');
    // Every version the run committed (Lance's compaction may reserve fragment ids in a version of its own) went through the table's commit coordinator.
    const versions = (await t.call('POST', '/v1/table/mv%24t/version/list', {})).json.versions as Array<{ version: number }>;
    const latest = Math.max(...versions.map((v) => v.version));
    expect(latest).toBe(Number(run.properties.last_committed_version));
    expect(latest).toBeGreaterThan(4);
    expect(await committedVersions(t)).toBe(committed + (latest - 4));
    expect(await countRows(t, 'mv%24t')).toBe(4);

    // A cleanup removes the service's sidecars of the versions it removed along with them (as if every version had one: metadata a client committed with).
    const listed = async () => ((await t.call('POST', '/v1/table/mv%24t/version/list', {})).json.versions as Array<{ version: number }>).map((v) => v.version);
    const set = await t.call('POST', '/v1/table/mv%24t/update', {
      updates: [['name', 'name']],
      predicate: 'id < 0',
      properties: { 'maintenance.cleanup_older_than': '1s' },
    });
    expect(set.status, set.text).toBe(200);
    for (const v of await listed()) {
      await fx.root.store.put(
        versionSidecarKey('mv/t.lance/', v),
        JSON.stringify({ version: v, naming_scheme: 'V2', committed_at: new Date().toISOString(), metadata: { k: 'v' } }),
      );
    }
    await new Promise((r) => setTimeout(r, LEASE_MS + CLOCK_ALLOWANCE_MS + 500));
    const cleanup = await tickFor(t, ['mv', 't']);
    expect(cleanup).toHaveLength(1);
    const cleaned = await waitForJob(t, cleanup[0] as string);
    expect(cleaned.status, JSON.stringify(cleaned)).toBe('Succeeded');
    expect(Number(cleaned.properties.versions_removed)).toBeGreaterThan(0);
    const left = await listed();
    const sidecars = (await listAll(fx.root.store, 'mv/t.lance/_catalog/versions/')).objects.map((o) => o.key);
    expect(sidecars.sort()).toEqual(left.map((v) => versionSidecarKey('mv/t.lance/', v)).sort());
    expect(await countRows(t, 'mv%24t')).toBe(4);
  });
});
