import { describe, expect, it } from 'vitest';
import { EngineError } from '../../src/engine/dataset-location.js';
import type { MaintenanceOps } from '../../src/engine/ports/maintenance.js';
import { NamespaceError } from '../../src/model/errors.js';
import type { CatalogDeps } from '../../src/service/catalog/catalog-deps.js';
import { DataTables } from '../../src/service/data/data-tables.js';
import { JobService } from '../../src/service/jobs/job-service.js';
import { PolicyMarkers, RunSlots } from '../../src/service/maintenance/policy-markers.js';
import { MaintenanceScheduler } from '../../src/service/maintenance/scheduler.js';
import { TransactionLog } from '../../src/service/transactions/transaction-log.js';
import { TableVersionService } from '../../src/service/versions/table-version-service.js';
import { PreconditionFailedError } from '../../src/store/object-store.js';
import { counting, ctx, keysUnder, servicesOver } from '../support/listing-services.js';
import { catalogRootKinds, useCatalogRoot } from '../support/local-catalog.js';
import { storeDouble } from '../support/store-double.js';

// The maintenance scheduler's look at the catalog (issue 33 point 2), without the engine: a tick on
// a catalog without a policy is one LIST, whatever the catalog holds; policy markers follow the
// properties (written where a policy is set, removed once their table or
// namespace is gone or has none); a bad value writes nothing. A declared table is never inspected.

/** Maintenance operations that must not be reached: declared tables have nothing to inspect. */
const unreachableOps: MaintenanceOps = {
  inspect: () => Promise.reject(new EngineError('internal', 'inspect reached')),
  compact: () => Promise.reject(new EngineError('internal', 'compact reached')),
  optimizeIndices: () => Promise.reject(new EngineError('internal', 'optimizeIndices reached')),
  cleanupOldVersions: () => Promise.reject(new EngineError('internal', 'cleanupOldVersions reached')),
};

function schedulerOver(deps: CatalogDeps, leaseMs: number): MaintenanceScheduler {
  const log = new TransactionLog(deps.store);
  const data = new DataTables(deps, new TableVersionService(deps, log, { leaseMs }));
  const jobs = new JobService(data, log, { leaseMs }, () => Promise.reject(new Error('no job table here')));
  return new MaintenanceScheduler(deps, data, jobs, log, unreachableOps, new PolicyMarkers(deps.store), new RunSlots(deps.store), { intervalMs: 0, leaseMs });
}

const POLICY_MARKERS = '_catalog/maintenance/policies/';

describe.each(catalogRootKinds)('the maintenance scheduler on a %s root', (kind) => {
  const root = useCatalogRoot(kind);

  it('costs one LIST per tick on a catalog of tables without a policy', async () => {
    const { namespaces, tables } = servicesOver(root.deps(root.store));
    for (let n = 0; n < 3; n++) {
      await namespaces.create(ctx, [`n${n}`], { properties: { owner: 'x' } });
      await Promise.all(Array.from({ length: 100 }, (_, i) => tables.declare(ctx, [`n${n}`, `t${i}`], { properties: { k: 'v' } })));
    }
    const counted = counting(root.store);
    const report = await schedulerOver(root.deps(counted.store), 30_000).tick();
    expect(report).toEqual({ markers: 0, tables: 0, started: [] });
    expect(counted.calls).toEqual({ list: 1 });
  });

  it("marks what sets a policy, and never inspects a declared table (a namespace's are not even listed)", async () => {
    const { namespaces, tables } = servicesOver(root.deps(root.store));
    await namespaces.create(ctx, ['p'], { properties: { 'maintenance.compact': 'true' } });
    await namespaces.create(ctx, ['p', 'q'], {});
    await tables.declare(ctx, ['p', 'q', 'a'], {});
    await tables.declare(ctx, ['p', 'b'], {});
    await namespaces.create(ctx, ['o'], {});
    await tables.declare(ctx, ['o', 'c'], { properties: { 'maintenance.cleanup_older_than': '7d' } });
    await tables.declare(ctx, ['o', 'd'], {});
    expect(await keysUnder(root.store, POLICY_MARKERS)).toHaveLength(2);
    const report = await schedulerOver(root.deps(root.store), 30_000).tick();
    expect(report).toEqual({ markers: 2, tables: 1, started: [] });
  });

  it('refuses a bad value before anything is written', async () => {
    const { namespaces, tables } = servicesOver(root.deps(root.store));
    await expect(namespaces.create(ctx, ['bad'], { properties: { 'maintenance.compact': 'maybe' } })).rejects.toSatisfy(
      (e: unknown) => e instanceof NamespaceError && e.code === 13 && e.message.includes('maintenance.compact'),
    );
    await namespaces.create(ctx, ['ok'], {});
    await expect(tables.declare(ctx, ['ok', 't'], { properties: { 'maintenance.max_unindexed_rows': '-1' } })).rejects.toSatisfy(
      (e: unknown) => e instanceof NamespaceError && e.code === 13 && e.message.includes('maintenance.max_unindexed_rows'),
    );
    expect(await keysUnder(root.store, POLICY_MARKERS)).toEqual([]);
    expect(await keysUnder(root.store, 'bad/')).toEqual([]);
    expect(await keysUnder(root.store, 'ok/t.lance/')).toEqual([]);
  });

  it('removes a marker once its table is gone or its namespace sets no policy, after a quiet lease', async () => {
    const { namespaces, tables } = servicesOver(root.deps(root.store));
    await namespaces.create(ctx, ['r'], { properties: { 'maintenance.optimize_indices': 'true' } });
    await tables.declare(ctx, ['r', 't'], { properties: { 'maintenance.compact': 'true' } });
    // Within the lease the markers stay whatever the tick finds (a policy may be being set).
    await tables.drop(ctx, ['r', 't']);
    await namespaces.create(ctx, ['r'], { mode: 'Overwrite', properties: {} });
    expect((await schedulerOver(root.deps(root.store), 60_000).tick()).markers).toBe(2);
    expect(await keysUnder(root.store, POLICY_MARKERS)).toHaveLength(2);
    // Past it, both go.
    expect((await schedulerOver(root.deps(root.store), 0).tick()).tables).toBe(0);
    expect(await keysUnder(root.store, POLICY_MARKERS)).toEqual([]);
  });

  // Invariant: a stored policy has a marker no tick deletes. A tick that found the table without a
  // policy deletes only the markers it listed; a set racing it (its marker put after that LIST,
  // its properties after the tick read them) keeps its own marker.
  it('keeps the marker of a policy set while a tick removes the old ones', async () => {
    const { namespaces, tables } = servicesOver(root.deps(root.store));
    await namespaces.create(ctx, ['race'], {});
    await tables.declare(ctx, ['race', 't'], { properties: { 'maintenance.compact': 'true' } });
    const markers = new PolicyMarkers(root.store);
    const [listed] = await markers.list();
    if (!listed) throw new Error('no marker listed');
    // The set racing the tick: its marker, then (as the tick deletes) its properties.
    await markers.note({ kind: 'table', id: ['race', 't'] }, { 'maintenance.compact': 'true' });
    await markers.removeQuiet(listed, -1);
    const after = await markers.list();
    expect(after.map((l) => [l.target, l.markers.length])).toEqual([[{ kind: 'table', id: ['race', 't'] }, 1]]);
    expect(after[0]?.markers[0]?.key).not.toBe(listed.markers[0]?.key);
  });

  it('says so when a run cannot be recorded in its slot, instead of dropping it silently', async () => {
    const racing = storeDouble(root.store, { put: (key) => Promise.reject(new PreconditionFailedError(key, 'etag changed')) });
    const summary = { job_id: 'j1', status: 'Succeeded' as const, finished_at: new Date().toISOString(), version: 3, steps: ['compact' as const] };
    await expect(new RunSlots(racing).recordRun(['ns', 't'], summary, null)).rejects.toThrow(/changed at each of 10 attempts to record run j1/);
  });

  it('names markers by a digest, so a target of long names has one', async () => {
    const long = (c: string) => c.repeat(240);
    const { namespaces, tables } = servicesOver(root.deps(root.store));
    await namespaces.create(ctx, [long('a')], {});
    await namespaces.create(ctx, [long('a'), long('b')], {});
    await tables.declare(ctx, [long('a'), long('b'), long('c')], { properties: { 'maintenance.cleanup_older_than': '1d' } });
    const listed = await new PolicyMarkers(root.store).list();
    expect(listed.map((l) => l.target.id)).toContainEqual([long('a'), long('b'), long('c')]);
  });
});
