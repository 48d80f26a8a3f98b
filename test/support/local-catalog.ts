import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach } from 'vitest';
import { EngineError, type LanceEngine } from '../../src/engine/lance-engine.js';
import { NO_METRICS } from '../../src/metrics/metrics.js';
import { type CatalogDeps, catalogDeps as withSharedHelpers } from '../../src/service/catalog/catalog-deps.js';
import { Locations } from '../../src/service/catalog/locations.js';
import { PageTokens } from '../../src/service/catalog/page-token.js';
import { TableCredentials } from '../../src/service/tables/credential-vending.js';
import { LocalObjectStore } from '../../src/store/local-store.js';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import type { ObjectStore } from '../../src/store/object-store.js';
import { parseLocation, type S3Connection, type StoreLocation, storeAt } from '../../src/store/open-store.js';
import { REMOVE_ROOT, type TestRoot } from './backends.js';

// Service-level tests over a catalog in a temporary local directory or in memory, without HTTP.

/** For protocols that never reach the engine: any call fails the test. */
export const noEngine = new Proxy({} as LanceEngine, {
  // Forgetting a dropped table's dataset is no use of the engine.
  get: (_target, name) => (name === 'forget' ? () => undefined : () => Promise.reject(new EngineError('internal', 'the engine is not used here'))),
});

/** A fresh empty local root for each test of the enclosing block; the fields are set before each test. */
export function useLocalRoot(prefix: string): { dir: string; store: LocalObjectStore } {
  const fixture = {} as { dir: string; store: LocalObjectStore };
  beforeEach(async () => {
    fixture.dir = await mkdtemp(path.join(os.tmpdir(), prefix));
    fixture.store = new LocalObjectStore(fixture.dir);
    await fixture.store.init();
  });
  afterEach(() => rm(fixture.dir, REMOVE_ROOT));
  return fixture;
}

/** The deps of one process over `store`: services built on the same deps share its fences and listing index, as in app.ts. */
function catalogDeps(
  store: ObjectStore,
  rootLocation: StoreLocation,
  engine: LanceEngine,
  s3: S3Connection = { region: 'x', forcePathStyle: true },
): CatalogDeps {
  return withSharedHelpers({
    store,
    engine,
    locations: new Locations(store, rootLocation, (location) => storeAt(location, s3)),
    pageTokens: new PageTokens('k'),
    settings: { managedVersioningDefault: false, leaseMs: 30_000 },
    credentials: new TableCredentials(null),
    metrics: NO_METRICS,
  });
}

/** `deps` with other settings, its shared helpers built again for them (as a process started with those settings has). */
export function withSettings(deps: CatalogDeps, settings: Partial<CatalogDeps['settings']>): CatalogDeps {
  return withSharedHelpers({ ...deps, settings: { ...deps.settings, ...settings } });
}

/** What the services run on over a test root of any backend (local or S3), through `store` (a double of its store, or its own). */
export function testRootCatalogDeps(root: TestRoot, store: ObjectStore = root.store, engine: LanceEngine = noEngine): CatalogDeps {
  const location = parseLocation(root.root);
  if (!location) throw new Error(`not a root: ${root.root}`);
  return catalogDeps(store, location, engine, root.s3);
}

/** What the services run on, over `store` (a double of the local root at `dir`, or that root's own store). */
export function localCatalogDeps(store: ObjectStore, dir: string, engine: LanceEngine = noEngine): CatalogDeps {
  return catalogDeps(store, { kind: 'local', dir }, engine);
}

/**
 * A root in memory has no path or bucket, so no location a client gives can lie inside it: an
 * S3 location with an empty bucket, which parseLocation never returns, stands for it. Protocols
 * that resolve stored locations (registered tables, deleted versions) stay on a local root.
 */
const MEMORY_ROOT: StoreLocation = { kind: 's3', bucket: '', prefix: '' };

/** What the services run on, over `store` (a memory store or a double of one); no engine can open such a store. */
export function memoryCatalogDeps(store: ObjectStore): CatalogDeps {
  return catalogDeps(store, MEMORY_ROOT, noEngine);
}

/** A catalog root for each test of the enclosing block, and the services' deps over (a double of) its store. */
export interface CatalogRoot {
  readonly store: ObjectStore;
  deps(store: ObjectStore): CatalogDeps;
}

/** Protocol tests run on both: in memory in milliseconds, and on the local disk, whose directories race too. */
export const catalogRootKinds = ['memory', 'local'] as const;

/** A fresh empty root of `kind` for each test of the enclosing block; `store` is set before each test. */
export function useCatalogRoot(kind: (typeof catalogRootKinds)[number]): CatalogRoot {
  if (kind === 'local') {
    const local = useLocalRoot('lance-ns-catalog-');
    return {
      get store() {
        return local.store;
      },
      deps: (store) => localCatalogDeps(store, local.dir),
    };
  }
  const memory = {} as { store: MemoryObjectStore };
  beforeEach(() => {
    memory.store = new MemoryObjectStore();
  });
  return {
    get store() {
      return memory.store;
    },
    deps: memoryCatalogDeps,
  };
}
