import type { ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Backend, backends } from '../support/backends.js';
import { useClientCredentials } from '../support/client-credentials.js';
import { INSTALL_TIMEOUT_MS, installPythonTestDeps } from '../support/python.js';
import { useCrashRoot } from '../support/service-process.js';
import { startSpreader } from '../support/spreader.js';
import { type AppendReport, startPylanceWriter, writerRows, writerSchema } from './replica-clients.js';

// Real clients whose managed commit dies with the replica serving it: the deterministic form of
// what replicas.test.ts meets at random. Through the spreader (test/support/spreader.ts), the
// client's create_table_version goes to a replica armed to be SIGKILLed at a step of the commit
// (src/service/versions/commit-steps.ts), everything else to one that lives; the spreader answers
// the cut-off commit 502 "in doubt". The client settles it by asking for that version:
// - killed after the manifest was placed (commit:before-sidecar): the version is committed; the
//   client finds its manifest there and reports success; its rows are in the table once;
// - killed before (commit:before-place): nothing is committed; the client finds no such version
//   and reports the outcome as unknown (it does not commit again by itself); none of its rows is
//   in the table, and its next append commits as that version once the dead writer's slot lease
//   has run out.

const require = createRequire(import.meta.url);
const lancedb = require('@lancedb/lancedb') as typeof import('@lancedb/lancedb');

const LEASE_MS = 1000;
const SEED = [0, 1, 2];

const cases = ['lancedb', 'pylance'].flatMap((client) =>
  ['commit:before-sidecar', 'commit:before-place'].map((point) => ({ client, point, committed: point === 'commit:before-sidecar' })),
);

describe.each(backends())("a real client's commit cut off by a dying replica, on $name", (backend: Backend) => {
  const crash = useCrashRoot(backend, LEASE_MS);
  const live = new Set<ChildProcess>();
  beforeAll(async () => {
    await installPythonTestDeps();
    const created = await crash.watcher().call('POST', '/v1/namespace/mv/create', { properties: { managed_versioning: 'true' } });
    expect(created.status, created.text).toBe(200);
  }, INSTALL_TIMEOUT_MS + 60_000);
  afterAll(() => {
    for (const child of live) child.kill('SIGKILL');
  });

  it.each(cases)('$client, killed at $point', { timeout: 120_000 }, async ({ client, point, committed }) => {
    const restoreEnv = useClientCredentials(crash.root());
    const spreader = await startSpreader(2);
    spreader.setSlot(0, crash.watcher().url);
    const db = await lancedb.connectNamespace('rest', { uri: spreader.url });
    const name = `${client}_${point.replace(/\W/g, '_')}`;
    const append = async (ids: number[]): Promise<AppendReport> => {
      if (client === 'lancedb') {
        const table = await db.openTable(name, ['mv']);
        try {
          return { first: ids[0] ?? 0, count: ids.length, version: (await table.add(writerRows(ids, 'node'))).version };
        } catch (e) {
          return { first: ids[0] ?? 0, count: ids.length, error: e instanceof Error ? e.message : String(e) };
        } finally {
          table.close();
        }
      }
      const reports: AppendReport[] = [];
      const config = { url: spreader.url, table_id: ['mv', name], writer: 'py', first_id: ids[0] ?? 0, phases: [1], rows_per_append: ids.length };
      const writer = startPylanceWriter(config, crash.root(), (r) => reports.push(r), live);
      await writer.ready;
      writer.go();
      await writer.done;
      const [report] = reports;
      if (!report) throw new Error('the pylance writer reported no append');
      return report;
    };
    const ids = async (): Promise<number[]> => {
      const table = await db.openTable(name, ['mv']);
      try {
        return (await table.query().select(['id']).toArray()).map((r: { id: bigint }) => Number(r.id)).sort((a, b) => a - b);
      } finally {
        table.close();
      }
    };
    const versions = async (): Promise<number[]> => {
      const listed = await crash.watcher().call('GET', `/v1/table/mv%24${name}/version/list`);
      expect(listed.status, listed.text).toBe(200);
      return (listed.json.versions as Array<{ version: number }>).map((v) => v.version).sort((a, b) => a - b);
    };
    try {
      (await db.createTable(name, writerRows(SEED, 'seed'), ['mv'], { schema: writerSchema })).close();
      const dying = await crash.start(point);
      spreader.setSlot(1, dying.url);
      spreader.pinNext(/\/version\/create/, 1);

      const first = await append([10, 11]);
      expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
      expect(dying.stderr()).toContain(`fault point ${point}`);
      expect(spreader.stats.inDoubt).toEqual([`POST /v1/table/mv%24${name}/version/create?delimiter=%24`]);
      expect(spreader.stats.inDoubtResent, 'the client does not send the cut-off commit again').toEqual([]);
      if (committed) {
        expect(first).toEqual({ first: 10, count: 2, version: 2 });
        expect(await ids()).toEqual([...SEED, 10, 11]);
        expect(await versions()).toEqual([1, 2]);
      } else {
        expect(first.version).toBeUndefined();
        expect(first.error).toMatch(/unknown/i);
        expect(await ids()).toEqual(SEED);
        expect(await versions()).toEqual([1]);
        // The dead writer holds version 2's slot until its lease runs out; the next append then takes it.
        const deadline = Date.now() + 10 * LEASE_MS;
        let next = await append([20, 21]);
        while (next.error !== undefined && Date.now() < deadline) next = await append([20, 21]);
        expect(next).toEqual({ first: 20, count: 2, version: 2 });
        expect(await ids()).toEqual([...SEED, 20, 21]);
      }
    } finally {
      db.close();
      await spreader.close();
      restoreEnv();
    }
  });
});
