import { describe, expect, it } from 'vitest';
import type { CatalogDeps } from '../../src/service/catalog/catalog-deps.js';
import { compareNames } from '../../src/service/catalog/layout.js';
import { COMPACT_AT } from '../../src/service/catalog/listing-catch-up.js';
import { SNAPSHOT_MAX_NAMES } from '../../src/service/catalog/listing-snapshot.js';
import { NamespaceService } from '../../src/service/catalog/namespace-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import { listAll, type ObjectStore, type PutCondition, type PutOptions } from '../../src/store/object-store.js';
import { type Backend, backends } from '../support/backends.js';
import { counting } from '../support/listing-services.js';
import { catalogRootKinds, testRootCatalogDeps, useCatalogRoot, withSettings } from '../support/local-catalog.js';
import { storeDouble } from '../support/store-double.js';

// The listing index (src/service/catalog/listing-index.ts): a page costs what the page costs, and the
// index never shows a table that is not there nor hides one that is, through crashes (a store that
// stops answering half-way), tables it never saw, and creates, drops and renames racing listings.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };

function servicesOver(deps: CatalogDeps) {
  return {
    namespaces: new NamespaceService(deps),
    tables: new TableService(deps, () => {
      throw new Error('no managed tables here');
    }),
  };
}

async function pagesOf(tables: TableService, ns: string[], limit: number, includeDeclared = true): Promise<string[][]> {
  const pages: string[][] = [];
  let pageToken: string | undefined;
  for (let i = 0; i < 10_000; i++) {
    const page = await tables.list(ctx, ns, { limit, includeDeclared, ...(pageToken ? { pageToken } : {}) });
    pages.push(page.tables);
    if (!page.page_token) return pages;
    pageToken = page.page_token;
  }
  throw new Error('listing did not end');
}

async function pagesOfNamespaces(namespaces: NamespaceService, ns: string[]): Promise<string[][]> {
  const pages: string[][] = [];
  let pageToken: string | undefined;
  do {
    const page = await namespaces.list(ctx, ns, { limit: 2, ...(pageToken ? { pageToken } : {}) });
    pages.push(page.namespaces);
    pageToken = page.page_token ?? undefined;
  } while (pageToken);
  return pages;
}

const keysOf = (objects: { key: string }[]): string[] => objects.map((o) => o.key);
const name = (i: number) => `t${String(i).padStart(4, '0')}`;

describe.each(catalogRootKinds)('listing index (%s)', (kind) => {
  const root = useCatalogRoot(kind);
  const withLease = (store: ObjectStore, leaseMs: number): CatalogDeps => {
    return withSettings(root.deps(store), { leaseMs });
  };

  it('a page costs a bounded number of store calls, whatever the namespace holds; pages never repeat or skip', async () => {
    const writer = root.deps(root.store);
    const { namespaces, tables } = servicesOver(writer);
    await namespaces.create(ctx, ['ns'], {});
    const all = Array.from({ length: 250 }, (_, i) => name(i));
    for (let i = 0; i < all.length; i += 25) {
      await Promise.all(all.slice(i, i + 25).map((t) => tables.declare(ctx, ['ns', t], {})));
      await writer.listingIndex.settled(); // the compactions the declares left for after their answers
    }
    await namespaces.create(ctx, ['ns', 'child'], {});
    await writer.listingIndex.settled();

    const counted = counting(root.store);
    const listing = servicesOver(root.deps(counted.store)).tables;
    const first = await listing.list(ctx, ['ns'], { limit: 10 });
    expect(first.tables).toEqual(all.slice(0, 10));
    // The namespace record, the index marker, one LIST of the pending entries (none), one of the index.
    expect(counted.calls).toEqual({ get: 1, head: 1, list: 2 });
    counted.reset();
    const second = await listing.list(ctx, ['ns'], { limit: 10, pageToken: first.page_token ?? '' });
    expect(second.tables).toEqual(all.slice(10, 20));
    expect(counted.total()).toBe(4);

    // No limit: one pass over the index and its data names, kept as the index's snapshot; still no table read.
    counted.reset();
    expect((await listing.list(ctx, ['ns'], {})).tables).toEqual(all);
    // The writes kept the index's log short (each that made it COMPACT_AT keys long stored the
    // snapshot caught up by it): the namespace record, the stamp and that snapshot; a new stamp;
    // the ready marker's token, the log and the pending entries; the snapshot's etag; two HEADs per
    // name in the log (at most COMPACT_AT, and the declares of one batch running at once), no LIST of the index.
    expect([counted.calls.get, counted.calls.list]).toEqual([4, 2]);
    expect(counted.calls.head).toBeLessThanOrEqual(1 + 2 * (COMPACT_AT + 25));
    // Another process reads the stored snapshot (with the pending entries) instead of LISTing the
    // index, and catches it up as the first did (the log is not compacted before COMPACT_AT keys).
    const elsewhere = servicesOver(root.deps(counted.store)).tables;
    counted.reset();
    expect((await elsewhere.list(ctx, ['ns'], {})).tables).toEqual(all);
    expect([counted.calls.get, counted.calls.list]).toEqual([4, 2]);
    // A page after it there: the snapshot from memory, since the stamp says it still holds.
    counted.reset();
    expect((await elsewhere.list(ctx, ['ns'], { limit: 10, pageToken: first.page_token ?? '' })).tables).toEqual(all.slice(10, 20));
    expect(counted.calls).toEqual({ get: 2 });
    // A change elsewhere takes the stamp and adds to the index's log: the page catches the kept
    // snapshot up by it (the namespace record, the stamp gone and a new one, the ready marker's
    // token, the log and the pending entries, the snapshot's etag, the changed name's two entries),
    // not LISTing the index.
    await tables.declare(ctx, ['ns', 't0010a'], {});
    counted.reset();
    expect((await elsewhere.list(ctx, ['ns'], { limit: 2, pageToken: first.page_token ?? '' })).tables).toEqual(['t0010', 't0010a']);
    expect(counted.calls).toEqual({ get: 3, put: 1, list: 2, head: 3 });
    // ... and a whole listing after it is current under the new stamp.
    counted.reset();
    expect((await elsewhere.list(ctx, ['ns'], {})).tables).toEqual([...all.slice(0, 11), 't0010a', ...all.slice(11)]);
    expect(counted.calls).toEqual({ get: 2 });
    await tables.drop(ctx, ['ns', 't0010a']);
    counted.reset();
    expect((await elsewhere.list(ctx, ['ns'], {})).tables).toEqual(all);
    // Both changes of the name are in the log; the one already applied is not read again.
    expect(counted.calls).toEqual({ get: 3, put: 1, list: 2, head: 3 });

    // ListAllTables: per namespace on the way, its directory and its index, not its tables.
    await listing.listAll(ctx, '.', { limit: 5 }); // the root's first listing indexes it (it has no tables)
    counted.reset();
    const everywhere = await listing.listAll(ctx, '.', { limit: 5 });
    expect(everywhere.tables).toEqual(all.slice(0, 5).map((t) => `ns.${t}`));
    // The root, ns and ns.child (it sorts before the tables): each, for its child namespaces (listed
    // whole, so from the snapshot this service keeps) the snapshot's stamp; for its tables (a page),
    // in ns the stamp of the snapshot this service keeps (the first ListAllTables caught it up),
    // elsewhere the index marker, the pending entries and a page of the index.
    expect(counted.total()).toBe(3 * 1 + 1 + 2 * 3);

    // Small pages visit every table exactly once, in order.
    expect((await pagesOf(tables, ['ns'], 7)).flat()).toEqual(all);
  });

  it('include_declared=false reads only the declared entries of the page, and sees data written behind the catalog', async () => {
    const { namespaces, tables } = servicesOver(root.deps(root.store));
    await namespaces.create(ctx, ['ns'], {});
    for (const t of ['a', 'b', 'c']) await tables.declare(ctx, ['ns', t], {});
    // A Lance client writes b's first version directly: the service is never told.
    await root.store.put('ns/b.lance/_versions/1.manifest', 'x');
    const counted = counting(root.store);
    const listing = servicesOver(root.deps(counted.store)).tables;
    expect((await listing.list(ctx, ['ns'], { includeDeclared: false })).tables).toEqual(['b']);
    // Namespace record, marker, pending, index, data index, and the snapshot of the whole listing
    // (stamp, snapshot, its etag, the log, its two puts, the three log keys deleted); then each of
    // the three declared names on the page one table read (a LIST and a GET, or two GETs) and a
    // LIST of its versions at most.
    expect(counted.total()).toBeLessThanOrEqual(14 + 3 * 3);
    expect((await listing.list(ctx, ['ns'], {})).tables).toEqual(['a', 'b', 'c']);
  });

  it('include_declared=false over many declared tables: pages end short rather than read the namespace, and still miss nothing', async () => {
    const { namespaces, tables } = servicesOver(root.deps(root.store));
    await namespaces.create(ctx, ['ns'], {});
    const all = Array.from({ length: 250 }, (_, i) => name(i));
    for (let i = 0; i < all.length; i += 25) await Promise.all(all.slice(i, i + 25).map((t) => tables.declare(ctx, ['ns', t], {})));
    // Two get data behind the catalog's back.
    for (const t of [name(3), name(240)]) await root.store.put(`ns/${t}.lance/_versions/1.manifest`, 'x');
    const counted = counting(root.store);
    const listing = servicesOver(root.deps(counted.store)).tables;
    const seen: string[] = [];
    let pageToken: string | undefined;
    for (let i = 0; i < 100; i++) {
      counted.reset();
      const page = await listing.list(ctx, ['ns'], { limit: 5, includeDeclared: false, ...(pageToken ? { pageToken } : {}) });
      // At most about a hundred declared tables checked (three calls each), not all 250.
      expect(counted.total()).toBeLessThan(400);
      seen.push(...page.tables);
      if (!page.page_token) break;
      pageToken = page.page_token;
    }
    expect(seen).toEqual([name(3), name(240)]);
  });

  it('children the index never saw (a namespace written before it, or by Lance) are indexed once, by the first listing', async () => {
    const { namespaces, tables } = servicesOver(root.deps(root.store));
    await namespaces.create(ctx, ['ns'], {});
    await namespaces.create(ctx, ['ns', 'sub'], {});
    for (const t of ['a', 'c', 'dropped']) await tables.declare(ctx, ['ns', t], {});
    await tables.drop(ctx, ['ns', 'dropped']);
    // As a version of the service without the index, or Lance's directory catalog, left it.
    await root.store.deletePrefix('ns/_catalog/');
    await root.store.put('ns/b.lance/.lance-reserved', '');
    await root.store.put('ns/d.lance/_versions/1.manifest', 'x');
    await root.store.put('ns/lance-made/.lance-namespace', '');
    const counted = counting(root.store);
    const services = servicesOver(root.deps(counted.store));
    expect((await services.tables.list(ctx, ['ns'], {})).tables).toEqual(['a', 'b', 'c', 'd']);
    expect(await root.store.head('ns/_catalog/index.ready')).not.toBeNull();
    expect((await services.namespaces.list(ctx, ['ns'], {})).namespaces).toEqual(['lance-made', 'sub']);
    counted.reset();
    expect((await services.tables.list(ctx, ['ns'], { limit: 2 })).tables).toEqual(['a', 'b']);
    // The namespace record and the stamp of the snapshot the whole listing above kept.
    expect(counted.total()).toBe(2);
    // The catalog wiped again while this process keeps that snapshot: its stamp went with it, so the
    // next listing finds the marker gone and indexes what is there.
    await root.store.deletePrefix('ns/_catalog/');
    await root.store.put('ns/e.lance/.lance-reserved', '');
    expect((await services.tables.list(ctx, ['ns'], {})).tables).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('a namespace create or drop whose store stops half-way is listed as its record says, and settled once dead', async () => {
    const { namespaces } = servicesOver(root.deps(root.store));
    await namespaces.create(ctx, ['ns'], {});
    await namespaces.create(ctx, ['ns', 'doomed'], {});
    let dead = false;
    const dying = storeDouble(root.store, {
      put: (k: string, b: Buffer | string, c?: PutCondition) =>
        dead
          ? Promise.reject(new Error('died'))
          : root.store.put(k, b, c).then((r) => {
              dead = k.endsWith('/made/.lance-namespace');
              return r;
            }),
      delete: (k: string) =>
        dead
          ? Promise.reject(new Error('died'))
          : root.store.delete(k).then(() => {
              dead = k === 'ns/doomed/.lance-namespace';
            }),
    });
    const deps = root.deps(dying);
    const halfway = servicesOver(withSettings(deps, { leaseMs: -1 })).namespaces;
    await halfway.create(ctx, ['ns', 'made'], {}).catch(() => undefined);
    dead = false;
    await halfway.drop(ctx, ['ns', 'doomed'], {}).catch(() => undefined);
    expect(await root.store.head('ns/_catalog/namespaces/doomed/v')).not.toBeNull();
    expect(await root.store.head('ns/_catalog/namespaces/made/v')).toBeNull();
    expect((await namespaces.list(ctx, ['ns'], {})).namespaces).toEqual(['made']);
    expect((await listAll(root.store, 'ns/_catalog/namespace-pending/')).objects).toEqual([]);
    expect(await root.store.head('ns/_catalog/namespaces/doomed/v')).toBeNull();
    expect(await root.store.head('ns/_catalog/namespaces/made/v')).not.toBeNull();
  });

  it('pending entries are one file each, a long name under a directory of its own; a listing reads and settles both forms, and entries left by earlier versions', async () => {
    const deps = withLease(root.store, 60_000);
    const { namespaces, tables } = servicesOver(deps);
    await namespaces.create(ctx, ['ns'], {});
    // A change whose store stops right after the pending entry (the process "dies"): the entry stays.
    const died = (k: string) => k.includes('/_catalog/pending/');
    const dying = storeDouble(root.store, {
      put: (k: string, b: Buffer | string, c?: PutCondition, o?: PutOptions) =>
        root.store.put(k, b, c, o).then((r) => (died(k) ? Promise.reject(new Error('the process died')) : r)),
    });
    const long = 'l'.repeat(240);
    for (const t of ['short', long]) await expect(servicesOver(withLease(dying, -1)).tables.declare(ctx, ['ns', t], {})).rejects.toThrow('died');
    // An entry as earlier versions wrote every one, `<name>/<until>.<op>`, of an operation long dead.
    await root.store.put('ns/_catalog/pending/old/1.op', '', undefined, { durable: false });
    await tables.declare(ctx, ['ns', 'old'], {});
    const pendingKeys = async () => keysOf((await listAll(root.store, 'ns/_catalog/pending/')).objects);
    const before = await pendingKeys();
    expect(before.filter((k) => k.startsWith('ns/_catalog/pending/short.~'))).toHaveLength(1);
    expect(before.filter((k) => k.startsWith(`ns/_catalog/pending/${long}/`))).toHaveLength(1);
    expect(before).toContain('ns/_catalog/pending/old/1.op');
    expect(before).toHaveLength(3);
    // A declare that completes leaves no entry of its own, in either form.
    await tables.declare(ctx, ['ns', 'fine'], {});
    await tables.declare(ctx, ['ns', `${long}x`.slice(0, 241)], {});
    expect(await pendingKeys()).toEqual(before);
    // The dead ones are read (the tables whose state says so are listed) and settled by the listing.
    expect((await tables.list(ctx, ['ns'], {})).tables).toEqual(['fine', `${long}x`.slice(0, 241), 'old'].sort(compareNames));
    expect(await pendingKeys()).toEqual([]);
  });

  it('a store that stops half-way through an operation leaves a pending entry: listings read the table, then settle it once it is dead', async () => {
    const deps = withLease(root.store, 60_000);
    const { namespaces } = servicesOver(deps);
    await namespaces.create(ctx, ['ns'], {});
    // The process "dies" right after the table's state changed: no later write lands.
    const dying = (after: (k: string) => boolean) => {
      let dead = false;
      const fail = () => Promise.reject(new Error('the process died'));
      return storeDouble(root.store, {
        put: (k: string, b: Buffer | string, c?: PutCondition, o?: PutOptions) =>
          dead
            ? fail()
            : root.store.put(k, b, c, o).then((r) => {
                dead = after(k);
                return r;
              }),
        delete: (k: string) => (dead ? fail() : root.store.delete(k)),
      });
    };
    const live = servicesOver(deps).tables;
    await live.declare(ctx, ['ns', 'gone'], {});
    // A whole listing keeps the index's snapshot: the operations below must take it with them before they change anything.
    expect((await live.list(ctx, ['ns'], {})).tables).toEqual(['gone']);
    const declaring = servicesOver(
      withLease(
        dying((k) => k.endsWith('.lance-reserved')),
        -1,
      ),
    ).tables;
    // The table is declared before the store stops: the declare is acknowledged, its pending entry stays.
    await declaring.declare(ctx, ['ns', 'kept'], {});
    const dropping = servicesOver(
      withLease(
        dying((k) => k.endsWith('.lance-deregistered')),
        -1,
      ),
    ).tables;
    await dropping.drop(ctx, ['ns', 'gone']).catch(() => undefined);
    const entries = async () => (await listAll(root.store, 'ns/_catalog/')).objects.map((o) => o.key.slice('ns/_catalog/'.length));
    const before = await entries();
    expect(before.filter((e) => e.startsWith('pending/kept.~'))).toHaveLength(1);
    expect(before.filter((e) => e.startsWith('pending/gone.~'))).toHaveLength(1);
    expect(before).toContain('tables/gone/v');
    expect(before).not.toContain('tables/kept/v');
    // The pending entries ran out (written with a lease already over): the listing answers from the tables' state and settles them.
    expect((await live.list(ctx, ['ns'], {})).tables).toEqual(['kept']);
    const after = await entries();
    expect(after.filter((e) => e.startsWith('pending/'))).toEqual([]);
    // (The log of the index's changes keeps its keys until a snapshot reflects them.)
    expect(after.filter((e) => e.includes('/gone/') && !e.startsWith('tables.log/'))).toEqual([]);
    expect(after).toContain('tables/kept/v');
    expect((await live.list(ctx, ['ns'], {})).tables).toEqual(['kept']);
  });

  it('a page of namespaces is a page of the index: its cost does not grow with the tables beside them', async () => {
    const { namespaces, tables } = servicesOver(root.deps(root.store));
    await namespaces.create(ctx, ['ns'], {});
    for (const c of ['a', 'b', 'c', 'd']) await namespaces.create(ctx, ['ns', c], {});
    for (let i = 0; i < 30; i++) await tables.declare(ctx, ['ns', `a${i}`], {});
    const counted = counting(root.store);
    const listing = servicesOver(root.deps(counted.store)).namespaces;
    const first = await listing.list(ctx, ['ns'], { limit: 2 });
    expect(first.namespaces).toEqual(['a', 'b']);
    // The namespace record, the index marker, the pending entries, a page of the index.
    expect(counted.calls).toEqual({ get: 1, head: 1, list: 2 });
    const rest = await listing.list(ctx, ['ns'], { limit: 2, pageToken: first.page_token ?? '' });
    expect(rest.namespaces).toEqual(['c', 'd']);
  });
});

const depsOf = testRootCatalogDeps;

describe.each(backends())('listing index under concurrent changes on $name', (backend: Backend) => {
  it('declares, drops and renames racing paged listings: every table there throughout appears exactly once, none that never was', async () => {
    const root = await backend.newRoot();
    try {
      const { namespaces, tables } = servicesOver(depsOf(root));
      await namespaces.create(ctx, ['ns'], {});
      // Tables there before the listings start and never touched: each listing must show each once.
      const stable = Array.from({ length: 40 }, (_, i) => `s${String(i).padStart(3, '0')}`);
      for (let i = 0; i < stable.length; i += 10) await Promise.all(stable.slice(i, i + 10).map((t) => tables.declare(ctx, ['ns', t], {})));
      const everCreated = new Set(stable);
      const canRename = root.store.renameDir !== undefined;
      let stop = false;
      const churn = async (worker: number) => {
        for (let i = 0; !stop; i++) {
          const t = `c${worker}-${i % 6}`;
          everCreated.add(t);
          await tables.declare(ctx, ['ns', t], {}).catch(() => undefined);
          if (canRename && i % 3 === 0) {
            const moved = `r${worker}-${i % 6}`;
            everCreated.add(moved);
            await tables.rename(ctx, ['ns', t], { new_table_name: moved }).catch(() => undefined);
            await tables.drop(ctx, ['ns', moved]).catch(() => undefined);
          } else {
            await tables.drop(ctx, ['ns', t]).catch(() => undefined);
          }
        }
      };
      // Child namespaces come and go beside stable ones too.
      const stableNs = ['n-a', 'n-m', 'n-z'];
      for (const n of stableNs) await namespaces.create(ctx, ['ns', n], {});
      const nsChurn = async () => {
        for (let i = 0; !stop; i++) {
          const n = `n-c${i % 4}`;
          await namespaces.create(ctx, ['ns', n], {}).catch(() => undefined);
          await namespaces.drop(ctx, ['ns', n], {}).catch(() => undefined);
        }
      };
      const workers = [...[0, 1, 2].map(churn), nsChurn()];
      // Another process lists whole namespaces (building and reading the index's snapshot) and pages after them.
      const elsewhere = servicesOver(depsOf(root));
      for (let round = 0; round < 6; round++) {
        const [paged, whole, wholeElsewhere, pagedElsewhere] = await Promise.all([
          pagesOf(tables, ['ns'], 1 + (round % 4) * 3),
          tables.list(ctx, ['ns'], {}),
          elsewhere.tables.list(ctx, ['ns'], {}),
          pagesOf(elsewhere.tables, ['ns'], 5 + round),
        ]);
        for (const seen of [paged.flat(), whole.tables, wholeElsewhere.tables, pagedElsewhere.flat()]) {
          expect(new Set(seen).size, 'no table twice').toBe(seen.length);
          expect([...seen].sort(compareNames), 'in order').toEqual(seen);
          for (const t of stable) expect(seen, `${t} there throughout`).toContain(t);
          for (const t of seen) expect(everCreated.has(t), `${t} was created`).toBe(true);
        }
        const wholeNs = (await elsewhere.namespaces.list(ctx, ['ns'], {})).namespaces;
        for (const n of stableNs) expect(wholeNs, `${n} there throughout`).toContain(n);
        const seenNs: string[] = [];
        let pageToken: string | undefined;
        do {
          const page = await namespaces.list(ctx, ['ns'], { limit: 1 + round, ...(pageToken ? { pageToken } : {}) });
          seenNs.push(...page.namespaces);
          pageToken = page.page_token ?? undefined;
        } while (pageToken);
        expect(new Set(seenNs).size, 'no namespace twice').toBe(seenNs.length);
        for (const n of stableNs) expect(seenNs, `${n} there throughout`).toContain(n);
        for (const n of seenNs) expect(n, `${n} was created`).toMatch(/^n-(a|m|z|c\d)$/);
      }
      stop = true;
      await Promise.all(workers);
      // Once quiet, the listing is exactly what exists.
      const exists = async (t: string) =>
        tables.exists(ctx, ['ns', t], undefined).then(
          () => true,
          () => false,
        );
      for (const service of [tables, elsewhere.tables]) {
        const listed = (await service.list(ctx, ['ns'], {})).tables;
        for (const t of everCreated) expect(listed.includes(t), t).toBe(await exists(t));
        expect((await pagesOf(service, ['ns'], 4)).flat()).toEqual(listed);
      }
      const namespacesNow = (await elsewhere.namespaces.list(ctx, ['ns'], {})).namespaces;
      expect(namespacesNow).toEqual((await pagesOfNamespaces(namespaces, ['ns'])).flat());
    } finally {
      await root.dispose();
    }
  }, 120_000);
});

describe('listing snapshot of a namespace too large for one', () => {
  const root = useCatalogRoot('memory');

  it('keeps only a marker, and whole listings and pages read the index itself, complete and in order', async () => {
    const { namespaces, tables } = servicesOver(root.deps(root.store));
    await namespaces.create(ctx, ['big'], {});
    // More names than a snapshot holds, written as the index keeps them (declaring 20,000 tables one by one would take minutes).
    const count = SNAPSHOT_MAX_NAMES + 5;
    const all = Array.from({ length: count }, (_, i) => `t${String(i).padStart(6, '0')}`);
    for (const t of all) await root.store.put(`big/_catalog/tables/${t}/v`, '');
    expect((await tables.list(ctx, ['big'], {})).tables).toEqual(all);
    const snapshot = await root.store.get('big/_catalog/tables.snapshot');
    expect(Object.keys(JSON.parse(snapshot?.body.toString('utf8') ?? '{}'))).toEqual(['stamp', 'ready']);
    // Another process meets the marker: the index itself, then from memory it knows to go there at once.
    const counted = counting(root.store);
    const elsewhere = servicesOver(root.deps(counted.store)).tables;
    expect((await elsewhere.list(ctx, ['big'], {})).tables).toEqual(all);
    expect(counted.calls.put ?? 0).toBe(0);
    counted.reset();
    expect((await elsewhere.list(ctx, ['big'], { limit: 3 })).tables).toEqual(all.slice(0, 3));
    expect(counted.calls).toEqual({ get: 1, head: 1, list: 2 });
  });
});
