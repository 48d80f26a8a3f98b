// Times ListTables over a namespace of N declared tables on a local root, at the service layer
// (no HTTP): one call without a limit, the first page of 100, and every page of 100. The tables
// are written in the catalog's on-disk layout without an index, so the first listing builds it
// (timed separately). Not a test: prints figures.
//   npx tsx scripts/bench-list-tables.ts [tables=1000] [srcDir=../src]
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { NO_METRICS } from '../src/metrics/metrics.js';
import { TableCredentials } from '../src/service/tables/credential-vending.js';
import { timeRuns } from './bench-support.js';

const count = Number(process.argv[2] ?? 1000);
const src = path.resolve(import.meta.dirname, process.argv[3] ?? '../src');
const load = async <T>(rel: string): Promise<T> => (await import(pathToFileURL(path.join(src, rel)).href)) as T;
const { LocalObjectStore } = await load<typeof import('../src/store/local-store.js')>('store/local-store.ts');
const { TableService } = await load<typeof import('../src/service/tables/table-service.js')>('service/tables/table-service.ts');
const { Locations } = await load<typeof import('../src/service/catalog/locations.js')>('service/catalog/locations.ts');
const { PageTokens } = await load<typeof import('../src/service/catalog/page-token.js')>('service/catalog/page-token.ts');
const { storeAt } = await load<typeof import('../src/store/open-store.js')>('store/open-store.ts');
// Built here as app.ts's catalogDeps builds them (a src/ from before it took none and built its own).
const { ListingIndex } = await load<typeof import('../src/service/catalog/listing-index.js')>('service/catalog/listing-index.ts');
const { TableFences } = await load<typeof import('../src/service/tables/table-fences.js')>('service/tables/table-fences.ts');

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'bench-list-tables-'));
const store = new LocalObjectStore(dir);
await store.init();
await store.put('ns/.lance-namespace', JSON.stringify({ properties: {}, created_at: new Date().toISOString(), state: 'active' }));
for (let i = 0; i < count; i += 200) {
  await Promise.all(
    Array.from({ length: Math.min(200, count - i) }, async (_, j) => {
      const t = `ns/t${String(i + j).padStart(6, '0')}.lance/`;
      await store.put(
        `${t}.lance-table.json`,
        JSON.stringify({ properties: {}, created_at: new Date().toISOString(), incarnation: randomUUID(), managed_versioning: false }),
      );
      await store.put(`${t}.lance-reserved`, '');
    }),
  );
}
const locations = new Locations(store, { kind: 'local', dir }, (location) => storeAt(location, { region: 'x', forcePathStyle: true }));
const deps = {
  store,
  engine: new Proxy({}, { get: () => () => Promise.reject(new Error('no engine')) }),
  locations,
  pageTokens: new PageTokens('k'),
  settings: { managedVersioningDefault: false, leaseMs: 30_000 },
  credentials: new TableCredentials(null),
  metrics: NO_METRICS,
  fences: new TableFences(store, 30_000),
  listingIndex: new ListingIndex(store, locations, 30_000),
} as unknown as ConstructorParameters<typeof TableService>[0];
const tables = new TableService(deps, () => {
  throw new Error('no managed tables');
});
const ctx = { requestId: 'bench', principal: null, context: {} };
console.log(`${count} declared tables, ${src}`);
await timeRuns('first listing (builds the index if any)', 1, () => tables.list(ctx, ['ns'], {}));
await timeRuns('one call, no limit', 5, () => tables.list(ctx, ['ns'], {}));
await timeRuns('first page of 100', 10, () => tables.list(ctx, ['ns'], { limit: 100 }));
await timeRuns('every page of 100', 2, async () => {
  let pageToken: string | undefined;
  do {
    const page = await tables.list(ctx, ['ns'], { limit: 100, ...(pageToken ? { pageToken } : {}) });
    pageToken = page.page_token ?? undefined;
  } while (pageToken);
});
await fs.rm(dir, { recursive: true, force: true });
