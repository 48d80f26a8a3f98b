import { describe, expect, it } from 'vitest';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import { ctx, pages, servicesOver } from '../support/listing-services.js';
import { memoryCatalogDeps } from '../support/local-catalog.js';

// docs/storage-layout.md (Listing index): "is rebuilt: delete `<ns>/_catalog/index.ready` and the
// next listing rebuilds it". A stale snapshot is now caught up by the log without looking at the
// marker, so a namespace with a stored snapshot is never indexed again by a whole listing.

const ns = ['ns'];

describe('the ready marker and the catch-up', () => {
  it('the ready marker deleted to have the index rebuilt, a table made by Lance since: the next whole list (after a write) shows it', async () => {
    const store = new MemoryObjectStore();
    const service = servicesOver(memoryCatalogDeps(store));
    await service.namespaces.create(ctx, ns, {});
    await service.tables.declare(ctx, [...ns, 'a'], {});
    expect((await service.tables.list(ctx, ns, {})).tables).toEqual(['a']); // a snapshot is stored
    // A table Lance's directory catalog made, which the index never heard of; the operator asks for a rebuild.
    await store.put('ns/b.lance/.lance-reserved', '');
    await store.delete('ns/_catalog/index.ready');
    await service.tables.declare(ctx, [...ns, 'c'], {});
    const fresh = servicesOver(memoryCatalogDeps(store));
    expect((await fresh.tables.list(ctx, ns, {})).tables, 'a new process, whole').toEqual(['a', 'b', 'c']);
    expect(await store.head('ns/_catalog/index.ready'), 'indexed again').not.toBeNull();
    expect(await pages(fresh.tables, ns, 2)).toEqual(['a', 'b', 'c']);
  });
});
