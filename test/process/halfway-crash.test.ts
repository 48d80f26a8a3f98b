import { describe, expect, it } from 'vitest';
import { parseManifestFileName } from '../../src/engine/lance-format/manifest-names.js';
import { listAll } from '../../src/store/object-store.js';
import { peopleStream, readRows } from '../support/arrow-data.js';
import { type Backend, backends, type TestRoot } from '../support/backends.js';
import { type ServiceProcess, useCrashRoot } from '../support/service-process.js';

// A CreateTable (or a DropTable) that dies half-way leaves nothing behind that blocks the name.
// The process creating the table is SIGKILLed at each step of the create protocol
// (src/service/tables/table-service.ts createNew) while a second replica, started before and never restarted,
// watches: the half-made table is never visible (not listed, not described, not taken for a
// declared table), a plain create of the name answers 409 only while the dead create's claim is
// within its lease, and then succeeds and holds only its own rows. The old code left a bare
// table record: listed as declared, and every later create answered 409 forever.

const LEASE_MS = 2_500;
const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const ids = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

/** Waits (bounded) until a plain create of the table succeeds; returns its answer. */
async function createOnceFree(
  replica: ServiceProcess,
  table: string,
  body: Buffer,
): Promise<{ status: number; json: Record<string, unknown>; blockedFor: number }> {
  const started = Date.now();
  for (;;) {
    const res = await replica.call('POST', `/v1/table/ns%24${table}/create`, body, ARROW);
    if (res.status !== 409 || Date.now() - started > LEASE_MS * 4) return { ...res, blockedFor: Date.now() - started };
    // Held by a live claim (5, "being created") or a live drop (14, "being dropped").
    expect([5, 14], res.text).toContain(res.json.code);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function expectInvisible(replica: ServiceProcess, table: string): Promise<void> {
  expect((await replica.call('POST', `/v1/table/ns%24${table}/describe`, {})).status).toBe(404);
  expect((await replica.call('POST', `/v1/table/ns%24${table}/exists`, {})).status).toBe(404);
  const listed = await replica.call('GET', '/v1/namespace/ns/table/list?include_declared=true');
  expect(listed.json.tables).not.toContain(table);
}

async function committedVersions(root: TestRoot, table: string): Promise<number[]> {
  const prefix = `ns/${table}.lance/_versions/`;
  return (await listAll(root.store, prefix)).objects
    .map((o) => parseManifestFileName(o.key.slice(prefix.length))?.version)
    .filter((v): v is number => v !== undefined);
}

describe.each(backends())('CreateTable killed half-way on $name', (backend: Backend) => {
  const crash = useCrashRoot(backend, LEASE_MS);

  for (const point of ['create:after-claim', 'create:after-data']) {
    it(`killed at ${point}: the name is free once the claim's lease ends, and holds only the new table`, async () => {
      const table = point.replace(/\W/g, '_');
      const dying = await crash.start(point);
      await expect(dying.call('POST', `/v1/table/ns%24${table}/create`, peopleStream(ids(0, 5_000)), ARROW)).rejects.toThrow();
      expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
      // The dead create's claim is in the store (the crash happened there) and hides the table.
      expect(await crash.root().store.head(`ns/${table}.lance/.lance-table.json`)).not.toBeNull();
      if (point === 'create:after-data') expect(await committedVersions(crash.root(), table)).toEqual([1]);
      await expectInvisible(crash.watcher(), table);
      const again = await createOnceFree(crash.watcher(), table, peopleStream([7, 8]));
      expect(again.status, JSON.stringify(again.json)).toBe(200);
      expect(again.json.version).toBe(1);
      expect(await committedVersions(crash.root(), table)).toEqual([1]);
      expect((await readRows(String(again.json.location), crash.root().store.engineStorageOptions())).map((r) => r.id)).toEqual([7, 8]);
      const listed = await crash.watcher().call('GET', '/v1/namespace/ns/table/list');
      expect(listed.json.tables).toContain(table);
    });
  }

  it("a drop killed after its tombstone: the table stays dropped, and the name is free once the drop's lease ends", async () => {
    const created = await crash.watcher().call('POST', '/v1/table/ns%24dropme/create', peopleStream([1, 2]), ARROW);
    expect(created.status, created.text).toBe(200);
    const dying = await crash.start('drop:after-tombstone');
    await expect(dying.call('POST', '/v1/table/ns%24dropme/drop', {})).rejects.toThrow();
    expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // Killed before deleting anything: the data is still there, and hidden.
    expect(await committedVersions(crash.root(), 'dropme')).toEqual([1]);
    await expectInvisible(crash.watcher(), 'dropme');
    expect((await crash.watcher().call('POST', '/v1/table/ns%24dropme/drop', {})).status).toBe(404);
    const again = await createOnceFree(crash.watcher(), 'dropme', peopleStream([30]));
    expect(again.status, JSON.stringify(again.json)).toBe(200);
    expect(await committedVersions(crash.root(), 'dropme')).toEqual([1]);
    expect((await readRows(String(again.json.location), crash.root().store.engineStorageOptions())).map((r) => r.id)).toEqual([30]);
  });

  it.runIf(backend.name === 'local')(
    'killed at random moments during 30 MB creates: never a bare table, never a name blocked past the lease',
    async () => {
      const big = peopleStream(ids(0, 1_500_000));
      expect(big.length).toBeGreaterThan(30 * 1024 * 1024);
      for (let round = 0; round < 4; round++) {
        const table = `big${round}`;
        const dying = await crash.start();
        const sent = dying.call('POST', `/v1/table/ns%24${table}/create`, big, ARROW).catch(() => null);
        // Kill once the claim is there, a varying time into the write.
        const claim = `ns/${table}.lance/.lance-table.json`;
        for (let i = 0; i < 400 && !(await crash.root().store.head(claim)); i++) await new Promise((resolve) => setTimeout(resolve, 5));
        await new Promise((resolve) => setTimeout(resolve, round * 60));
        dying.child.kill('SIGKILL');
        const answered = await sent;
        await dying.exited;
        const described = await crash.watcher().call('POST', `/v1/table/ns%24${table}/describe?check_declared=true`, {});
        if (answered?.status === 200) {
          // Acknowledged: the table must be whole.
          expect(described.status).toBe(200);
          expect(described.json.is_only_declared).toBe(false);
          continue;
        }
        // Not acknowledged: either it made it whole before the kill, or it is invisible and the name frees up.
        if (described.status === 200) {
          expect(described.json.is_only_declared).toBe(false);
          continue;
        }
        await expectInvisible(crash.watcher(), table);
        const again = await createOnceFree(crash.watcher(), table, peopleStream([1]));
        expect(again.status, JSON.stringify(again.json)).toBe(200);
        expect((await readRows(String(again.json.location), crash.root().store.engineStorageOptions())).map((r) => r.id)).toEqual([1]);
      }
    },
    180_000,
  ); // four 30 MB creates, each killed once and redone: minutes on a loaded 2-core machine
});
