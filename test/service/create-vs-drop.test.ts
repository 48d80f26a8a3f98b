import { describe, expect, it } from 'vitest';
import { ErrorCode, NamespaceError } from '../../src/model/errors.js';
import { NamespaceService } from '../../src/service/catalog/namespace-service.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import { TableService } from '../../src/service/tables/table-service.js';
import type { ObjectStore, PutCondition, PutOptions } from '../../src/store/object-store.js';
import { catalogRootKinds, useCatalogRoot } from '../support/local-catalog.js';
import { storeDouble } from '../support/store-double.js';

// Forces the worst interleavings of the create-in-namespace protocol (src/service/catalog/catalog.ts) by running a
// whole drop at a chosen step of a creator, which no timing-based race can do reliably.

const ctx: RequestContext = { requestId: 'test', principal: null, context: {} };

/** A store that runs `hook` just before the first put of `key`. */
function pausingStore(inner: ObjectStore, key: string, hook: () => Promise<void>): ObjectStore {
  let fired = false;
  return storeDouble(inner, {
    put: async (k: string, body: Buffer | string, condition?: PutCondition, options?: PutOptions) => {
      if (k === key && !fired) {
        fired = true;
        // Right before it is placed: a put to be placed after another write waits for that write first.
        await options?.placeAfter?.catch(() => undefined);
        await hook();
      }
      return inner.put(k, body, condition, options);
    },
  });
}

describe.each(catalogRootKinds)('create in a namespace vs. a Restrict drop (%s)', (kind) => {
  const root = useCatalogRoot(kind);

  const services = (store: ObjectStore) => {
    const deps = root.deps(store);
    return {
      namespaces: new NamespaceService(deps),
      tables: new TableService(deps, () => {
        throw new Error('no managed tables here');
      }),
    };
  };

  it('a drop that completes between the creator’s parent check and its create makes the creator undo itself', async () => {
    await services(root.store).namespaces.create(ctx, ['ns'], {});
    let dropResult: unknown;
    const store = pausingStore(root.store, 'ns/t.lance/.lance-table.json', async () => {
      dropResult = await services(root.store).namespaces.drop(ctx, ['ns'], {});
    });
    await expect(services(store).tables.declare(ctx, ['ns', 't'], {})).rejects.toSatisfy(
      (e: unknown) => e instanceof NamespaceError && e.code === ErrorCode.NamespaceNotFound,
    );
    expect(dropResult).toEqual({ properties: {} });
    expect(await leftovers(root.store)).toEqual([]);
  });

  it('a drop that lists after the child landed fails as not empty, and the child stays', async () => {
    await services(root.store).namespaces.create(ctx, ['ns'], {});
    let dropError: unknown;
    // The drop runs right before the reserved marker is written: the table record already exists.
    const store = pausingStore(root.store, 'ns/t.lance/.lance-reserved', async () => {
      dropError = await services(root.store)
        .namespaces.drop(ctx, ['ns'], {})
        .catch((e: unknown) => e);
    });
    await services(store).tables.declare(ctx, ['ns', 't'], {});
    expect(dropError).toBeInstanceOf(NamespaceError);
    expect((dropError as NamespaceError).code).toBe(ErrorCode.NamespaceNotEmpty);
    await services(root.store).tables.exists(ctx, ['ns', 't'], undefined);
    await services(root.store).namespaces.exists(ctx, ['ns']);
  });

  it('a nested namespace created during a Cascade drop of its grandparent does not survive it', async () => {
    const { namespaces } = services(root.store);
    await namespaces.create(ctx, ['a'], {});
    await namespaces.create(ctx, ['a', 'b'], {});
    const store = pausingStore(root.store, 'a/b/c/.lance-namespace', async () => {
      await services(root.store).namespaces.drop(ctx, ['a'], { behavior: 'Cascade' });
    });
    await expect(services(store).namespaces.create(ctx, ['a', 'b', 'c'], {})).rejects.toBeInstanceOf(NamespaceError);
    expect(await leftovers(root.store)).toEqual([]);
  });
});

/**
 * What is left under the root but the root's listing log (listing-snapshot.ts), where the create
 * and the drop of a child namespace are logged until a compaction: nothing of the dropped namespace.
 */
async function leftovers(store: ObjectStore): Promise<string[]> {
  return (await store.list('', {})).objects.map((o) => o.key).filter((key) => !key.startsWith('_catalog/namespaces.log/'));
}
