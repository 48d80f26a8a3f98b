import { describe, expect, it } from 'vitest';
import { listAll } from '../../src/store/object-store.js';
import { peopleStream } from '../support/arrow-data.js';
import { type Backend, backends, type TestRoot } from '../support/backends.js';
import { type ServiceProcess, useCrashRoot } from '../support/service-process.js';

// The listing index (src/service/catalog/listing-index.ts) through a SIGKILL between a table's write
// and the index's: the process dies at `index:before-settle`, after the create (or drop) changed
// the table and before the index says so. Another replica's listings answer from the table's
// state while the dead operation's pending entry is there, and settle the index once its lease
// ran out; from then on a listing reads no table.

const LEASE_MS = 1_500;
const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

/** The table's index entries, as `tables/v`, `data/t`, `pending/<until>.<op>` (not its keys in the log of changes, `tables.log/`). */
async function indexEntries(root: TestRoot, table: string): Promise<string[]> {
  const prefix = 'ns/_catalog/';
  return (await listAll(root.store, prefix)).objects
    .map((o) => o.key.slice(prefix.length).split('/'))
    .map(([kind = '', name = '', entry]) => {
      // A pending entry is one file, `pending/<name>.~<until>.<op>` (layout.ts).
      const flat = kind === 'pending' && entry === undefined ? name.indexOf('.~') : -1;
      return flat >= 0 ? [kind, name.slice(0, flat), name.slice(flat + 2)] : [kind, name, entry];
    })
    .filter(([kind, name]) => name === table && kind !== 'tables.log')
    .map(([kind, , entry]) => `${kind}/${entry}`);
}

async function listed(replica: ServiceProcess): Promise<string[]> {
  const res = await replica.call('GET', '/v1/namespace/ns/table/list');
  expect(res.status, res.text).toBe(200);
  return res.json.tables as string[];
}

/** Lists until the table's pending entry is gone (a listing settled it), bounded by a few leases. */
async function listUntilSettled(replica: ServiceProcess, root: TestRoot, table: string): Promise<void> {
  const deadline = Date.now() + LEASE_MS * 6;
  while ((await indexEntries(root, table)).some((e) => e.startsWith('pending/'))) {
    expect(Date.now() < deadline, 'a listing settles the dead operation once its lease ran out').toBe(true);
    await listed(replica);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.each(backends())('listing index through a SIGKILL on $name', (backend: Backend) => {
  const crash = useCrashRoot(backend, LEASE_MS);

  it('a create killed after its table was made and before the index heard of it: listed at once, indexed once the lease ends', async () => {
    const dying = await crash.start('index:before-settle');
    await expect(dying.call('POST', '/v1/table/ns%24made/create', peopleStream([1, 2]), ARROW)).rejects.toThrow();
    expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
    const entries = await indexEntries(crash.root(), 'made');
    expect(entries.filter((e) => e.startsWith('pending/'))).toHaveLength(1);
    expect(entries.filter((e) => !e.startsWith('pending/'))).toEqual([]);
    // The table exists (its data is in): the listing reads its state and shows it.
    expect((await crash.watcher().call('POST', '/v1/table/ns%24made/describe', {})).status).toBe(200);
    expect(await listed(crash.watcher())).toContain('made');
    await listUntilSettled(crash.watcher(), crash.root(), 'made');
    expect((await indexEntries(crash.root(), 'made')).sort()).toEqual(['data/t', 'tables/v']);
    expect(await listed(crash.watcher())).toContain('made');
  });

  it('a drop killed after the table went and before the index heard of it: never listed again', async () => {
    const created = await crash.watcher().call('POST', '/v1/table/ns%24doomed/create', peopleStream([1]), ARROW);
    expect(created.status, created.text).toBe(200);
    expect(await listed(crash.watcher())).toContain('doomed');
    const dying = await crash.start('index:before-settle');
    await expect(dying.call('POST', '/v1/table/ns%24doomed/drop', {})).rejects.toThrow();
    expect(await dying.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await indexEntries(crash.root(), 'doomed')).toContain('tables/v');
    expect(await listed(crash.watcher())).not.toContain('doomed');
    await listUntilSettled(crash.watcher(), crash.root(), 'doomed');
    expect(await indexEntries(crash.root(), 'doomed')).toEqual([]);
    expect(await listed(crash.watcher())).not.toContain('doomed');
  });
});
