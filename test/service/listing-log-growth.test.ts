import { describe, expect, it } from 'vitest';
import { COMPACT_AT } from '../../src/service/catalog/listing-catch-up.js';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import { counting, ctx, keysUnder, pages, servicesOver } from '../support/listing-services.js';
import { memoryCatalogDeps } from '../support/local-catalog.js';

// Cost: a namespace that is only ever listed by pages (a client that always sends a limit).

const ns = ['ns'];

describe('the log of a namespace listed only by pages', () => {
  it('stays compacted (at most COMPACT_AT keys), and a whole list after many writes costs no more than a few calls per change since the last list', async () => {
    const store = new MemoryObjectStore();
    const writerDeps = memoryCatalogDeps(store);
    const writer = servicesOver(writerDeps);
    await writer.namespaces.create(ctx, ns, {});
    for (const t of ['a', 'b', 'c']) await writer.tables.declare(ctx, [...ns, t], {});
    const pager = servicesOver(memoryCatalogDeps(store));
    const WRITES = 300;
    for (let i = 0; i < WRITES; i++) {
      await writer.tables.declare(ctx, [...ns, 'x'], {});
      await writer.tables.drop(ctx, [...ns, 'x']);
      // A memory store never leaves the event loop's turn: what the writes left for after their answers runs here.
      await writerDeps.listingIndex.settled();
      // Every write is followed by a paged listing, as a client that always sends a limit makes.
      expect(await pages(pager.tables, ns, 2)).toEqual(['a', 'b', 'c']);
    }
    const logKeys = (await keysUnder(store, 'ns/_catalog/tables.log/')).length;
    expect(logKeys, `log keys after ${2 * WRITES} changes, each followed by a paged list`).toBeLessThanOrEqual(COMPACT_AT);
  });

  it('the first whole list after 2,000 paged-only writes costs a few calls, not a delete per change ever made', async () => {
    const store = new MemoryObjectStore();
    const writerDeps = memoryCatalogDeps(store);
    const writer = servicesOver(writerDeps);
    await writer.namespaces.create(ctx, ns, {});
    for (const t of ['a', 'b', 'c']) await writer.tables.declare(ctx, [...ns, t], {});
    const pager = servicesOver(memoryCatalogDeps(store));
    for (let i = 0; i < 1_000; i++) {
      await writer.tables.declare(ctx, [...ns, 'x'], {});
      await writer.tables.drop(ctx, [...ns, 'x']);
      await writerDeps.listingIndex.settled();
      if (i % 50 === 0) await pages(pager.tables, ns, 2);
    }
    await writer.tables.declare(ctx, [...ns, 'y'], {});
    await writerDeps.listingIndex.settled();
    const counted = counting(store);
    const whole = servicesOver(memoryCatalogDeps(counted.store));
    expect((await whole.tables.list(ctx, ns, {})).tables).toEqual(['a', 'b', 'c', 'y']);
    const total = Object.values(counted.calls).reduce((a, b) => a + b, 0);
    expect(total, `store calls of one whole list: ${JSON.stringify(counted.calls)}`).toBeLessThan(50);
  });

  it('stays short in a namespace no listing has indexed yet (the root), and the first list there sees every change', async () => {
    const store = new MemoryObjectStore();
    const deps = memoryCatalogDeps(store);
    const writer = servicesOver(deps);
    for (let i = 0; i < 4 * COMPACT_AT; i++) {
      await writer.tables.declare(ctx, [`t${i}`], {});
      if (i % 2 === 1) await writer.tables.drop(ctx, [`t${i}`]);
      await deps.listingIndex.settled();
    }
    const logKeys = (await keysUnder(store, '_catalog/tables.log/')).length;
    expect(logKeys, 'log keys of the root after its writes').toBeLessThanOrEqual(COMPACT_AT);
    const listed = (await servicesOver(memoryCatalogDeps(store)).tables.list(ctx, [], {})).tables;
    expect(listed).toEqual(Array.from({ length: 2 * COMPACT_AT }, (_, i) => `t${2 * i}`).sort());
  });
});
