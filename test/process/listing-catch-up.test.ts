import { describe, expect, it } from 'vitest';
import { listAll } from '../../src/store/object-store.js';
import { type Backend, backends, type TestRoot } from '../support/backends.js';
import { type ServiceProcess, useCrashRoot } from '../support/service-process.js';

// The listing snapshot's catch-up (src/service/catalog/listing-catch-up.ts, its invariants in
// listing-snapshot.ts) across processes on one root, each keeping its own snapshot of the index and
// catching it up by the index's log: writes through two processes interleaved with lists through
// the others, each list checked against every write acknowledged before it; a SIGKILL at each step
// of a change (pending entry written, index written, log key written, stamp deleted) and of a
// compaction (snapshot stored, the log it reflects not yet deleted), after which every process's
// next list is exact.

const LEASE_MS = 1_500;
const COMPACT_AT = 64; // listing-catch-up.ts

const enc = (name: string) => `ns%24${encodeURIComponent(name)}`;

/** Every table of ns as one call lists it. */
async function listed(p: ServiceProcess): Promise<string[]> {
  const res = await p.call('GET', '/v1/namespace/ns/table/list');
  expect(res.status, res.text).toBe(200);
  return res.json.tables as string[];
}

/** Every table of ns, page by page. */
async function paged(p: ServiceProcess, limit: number): Promise<string[]> {
  const names: string[] = [];
  let token: string | undefined;
  for (let i = 0; i < 1_000; i++) {
    const res = await p.call('GET', `/v1/namespace/ns/table/list?limit=${limit}${token ? `&page_token=${encodeURIComponent(token)}` : ''}`);
    expect(res.status, res.text).toBe(200);
    names.push(...(res.json.tables as string[]));
    token = (res.json.page_token as string | null | undefined) ?? undefined;
    if (!token) return names;
  }
  throw new Error('listing did not end');
}

/** Every child namespace of ns as one call lists it. */
async function listedNamespaces(p: ServiceProcess): Promise<string[]> {
  const res = await p.call('GET', '/v1/namespace/ns/list');
  expect(res.status, res.text).toBe(200);
  return res.json.namespaces as string[];
}

async function tableExists(p: ServiceProcess, name: string): Promise<boolean> {
  const res = await p.call('POST', `/v1/table/${enc(name)}/exists`, {});
  expect([200, 404], res.text).toContain(res.status);
  return res.status === 200;
}

/** The keys under ns/_catalog/ that start with `folder`. */
async function catalogKeys(root: TestRoot, folder: string): Promise<string[]> {
  return (await listAll(root.store, `ns/_catalog/${folder}`)).objects.map((o) => o.key);
}

/** Lists through `p` until no pending entry is left (a listing settles a dead operation once its lease ran out). */
async function listUntilSettled(p: ServiceProcess, root: TestRoot): Promise<void> {
  const deadline = Date.now() + LEASE_MS * 8;
  while ((await catalogKeys(root, 'pending/')).length > 0) {
    expect(Date.now() < deadline, 'a listing settles the dead operation once its lease ran out').toBe(true);
    await listed(p);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.each(backends())('listing snapshot catch-up across processes on $name', (backend: Backend) => {
  const crash = useCrashRoot(backend, LEASE_MS);

  it('writes through two processes interleaved with lists through the others: every list shows each write acknowledged before it, and nothing else', async () => {
    const watcher = crash.watcher();
    const writers = await Promise.all([crash.start(), crash.start()]);
    const all = [watcher, ...writers];
    const stable = Array.from({ length: 20 }, (_, i) => `s${String(i).padStart(2, '0')}`);
    for (const t of stable) expect((await watcher.call('POST', `/v1/table/${enc(t)}/declare`, {})).status).toBe(200);
    // Every process keeps the namespace's snapshot from here on, and must catch it up.
    for (const p of all) expect(await listed(p)).toEqual(stable);
    const everMade = new Set(stable);
    const work = async (w: number) => {
      const self = writers[w] as ServiceProcess;
      const others = all.filter((p) => p !== self);
      // This writer's names change only through it: after each acknowledgement their state is known.
      const present = new Set<string>();
      const presentNs = new Set<string>();
      // Enough changes between the two writers for the log to be compacted on the way.
      for (let i = 0; i < 40; i++) {
        if (i % 5 === 4) {
          const n = `n${w}-${i % 3}`;
          if (presentNs.has(n)) {
            expect((await self.call('POST', `/v1/namespace/ns%24${n}/drop`, {})).status).toBe(200);
            presentNs.delete(n);
          } else {
            expect((await self.call('POST', `/v1/namespace/ns%24${n}/create`, {})).status).toBe(200);
            presentNs.add(n);
          }
        } else {
          const t = `w${w}-${i % 7}`;
          everMade.add(t);
          if (present.has(t)) {
            expect((await self.call('POST', `/v1/table/${enc(t)}/drop`, {})).status).toBe(200);
            present.delete(t);
          } else {
            expect((await self.call('POST', `/v1/table/${enc(t)}/declare`, {})).status).toBe(200);
            present.add(t);
          }
        }
        const mine = (names: string[]) => names.filter((n) => n.startsWith(`w${w}-`)).sort();
        const reader = others[i % others.length] as ServiceProcess;
        const [whole, pages, namespaces] = await Promise.all([
          listed(reader),
          paged(others[(i + 1) % others.length] as ServiceProcess, 3 + (i % 5)),
          listedNamespaces(reader),
        ]);
        for (const seen of [whole, pages]) {
          expect(mine(seen), `writer ${w}, change ${i}: its tables as acknowledged`).toEqual([...present].sort());
          for (const t of stable) expect(seen, `${t} there throughout`).toContain(t);
          for (const t of seen) expect(everMade.has(t), `${t} was made`).toBe(true);
          expect(new Set(seen).size, 'no table twice').toBe(seen.length);
        }
        expect(namespaces.filter((n) => n.startsWith(`n${w}-`)).sort(), `writer ${w}, change ${i}: its namespaces as acknowledged`).toEqual(
          [...presentNs].sort(),
        );
      }
      return present;
    };
    const [a, b] = await Promise.all([work(0), work(1)]);
    const expected = [...stable, ...(a ?? []), ...(b ?? [])].sort();
    for (const p of all) {
      expect([...(await listed(p))].sort()).toEqual(expected);
      expect([...(await paged(p, 4))].sort()).toEqual(expected);
    }
    // The log was compacted on the way: what is left of it is shorter than a compaction's threshold
    // plus the changes since the last one.
    expect((await catalogKeys(crash.root(), 'tables.log/')).length).toBeLessThan(20 + 2 * 40);
    for (const t of [...(a ?? []), ...(b ?? [])]) await watcher.call('POST', `/v1/table/${enc(t)}/drop`, {});
  }, 240_000);

  for (const op of ['declare', 'drop'] as const)
    for (const point of ['index:after-pending', 'index:before-settle', 'index:after-log', 'index:after-stamp'])
      it(`a ${op} killed at ${point}: every process's next list shows the table as it is, and so after the dead change is settled`, async () => {
        const watcher = crash.watcher();
        const other = await crash.start();
        const name = `k-${op}-${point.replace(/[^a-z]/g, '')}`;
        if (op === 'drop') expect((await watcher.call('POST', `/v1/table/${enc(name)}/declare`, {})).status).toBe(200);
        // Both keep a current snapshot that the change must catch up with.
        for (const p of [watcher, other]) expect((await listed(p)).includes(name)).toBe(op === 'drop');
        const dying = await crash.start(point);
        await expect(dying.call('POST', `/v1/table/${enc(name)}/${op}`, {})).rejects.toThrow();
        expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
        const exists = await tableExists(watcher, name);
        // Killed before it changed the table, the declare made nothing and the drop dropped nothing.
        if (point === 'index:after-pending') expect(exists).toBe(op === 'drop');
        else expect(exists).toBe(op === 'declare');
        for (const p of [other, watcher]) {
          expect((await listed(p)).includes(name), `${name} listed as it is`).toBe(exists);
          expect((await paged(p, 2)).includes(name)).toBe(exists);
        }
        // A change of another name through another process: seen by the next list of each. (A change
        // killed before it took the stamp leaves a pending entry that the snapshots made before it
        // do not know of, and need not: it changed nothing. The next change takes the stamp, and a
        // listing then meets the entry and settles it.)
        const next = `${name}-next`;
        expect((await other.call('POST', `/v1/table/${enc(next)}/declare`, {})).status).toBe(200);
        for (const p of [watcher, other]) expect(await listed(p)).toContain(next);
        await listUntilSettled(watcher, crash.root());
        for (const p of [other, watcher]) expect((await listed(p)).includes(name)).toBe(exists);
        // A change of the name itself after it, seen by the next list of each.
        expect((await other.call('POST', `/v1/table/${enc(name)}/${exists ? 'drop' : 'declare'}`, {})).status).toBe(200);
        for (const p of [watcher, other]) expect((await listed(p)).includes(name)).toBe(!exists);
        for (const t of exists ? [next] : [next, name]) await other.call('POST', `/v1/table/${enc(t)}/drop`, {});
        other.child.kill('SIGKILL');
      }, 60_000);

  it('a compaction killed after it stored its snapshot and before it deleted the log it reflects: every process lists exactly, and a later compaction deletes the log', async () => {
    const watcher = crash.watcher();
    const writer = await crash.start();
    const before = await listed(watcher);
    // Changes until the log is one key short of a compaction, none listed whole since; the write
    // that makes it COMPACT_AT keys long compacts it (listing-catch-up.ts), and dies doing so.
    const logged = (await catalogKeys(crash.root(), 'tables.log/')).length;
    const made = Array.from({ length: COMPACT_AT - logged }, (_, i) => `c${String(i).padStart(3, '0')}`);
    const first = made.slice(0, -1);
    for (let i = 0; i < first.length; i += 8) {
      const batch = first.slice(i, i + 8);
      await Promise.all(batch.map(async (t) => expect((await writer.call('POST', `/v1/table/${enc(t)}/declare`, {})).status).toBe(200)));
    }
    const snapshotBefore = await crash.root().store.head('ns/_catalog/tables.snapshot');
    const dying = await crash.start('listing:before-log-delete');
    // The compaction is not waited for by the declare's answer: the answer may get out before the kill.
    await dying.call('POST', `/v1/table/${enc(made[made.length - 1] ?? '')}/declare`, {}).catch(() => undefined);
    expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // It stored its snapshot (the watcher's kept one is not that any more) and left the log.
    expect((await crash.root().store.head('ns/_catalog/tables.snapshot'))?.etag).not.toBe(snapshotBefore?.etag);
    expect((await catalogKeys(crash.root(), 'tables.log/')).length).toBeGreaterThanOrEqual(COMPACT_AT);
    const expected = [...before, ...made].sort();
    expect([...(await listed(watcher))].sort()).toEqual(expected);
    expect([...(await listed(writer))].sort()).toEqual(expected);
    // Changes after it: seen by the next list of each, and the log compacted again by the way.
    for (const t of made.slice(0, 10)) expect((await writer.call('POST', `/v1/table/${enc(t)}/drop`, {})).status).toBe(200);
    const after = expected.filter((t) => !made.slice(0, 10).includes(t));
    expect([...(await listed(watcher))].sort()).toEqual(after);
    expect([...(await paged(writer, 9))].sort()).toEqual(after);
    expect((await catalogKeys(crash.root(), 'tables.log/')).length).toBeLessThan(COMPACT_AT);
    for (const t of after.filter((t) => made.includes(t))) await writer.call('POST', `/v1/table/${enc(t)}/drop`, {});
    writer.child.kill('SIGKILL');
  }, 120_000);
});
