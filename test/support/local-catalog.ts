import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach } from 'vitest';
import { EngineError, type LanceEngine } from '../../src/engine/lance-engine.js';
import type { CatalogDeps } from '../../src/service/catalog.js';
import { Locations } from '../../src/service/locations.js';
import { PageTokens } from '../../src/service/page-token.js';
import { LocalObjectStore } from '../../src/store/local-store.js';
import type { ObjectStore } from '../../src/store/object-store.js';

// Service-level tests over a catalog in a temporary local directory, without HTTP.

/** For protocols that never reach the engine: any call fails the test. */
export const noEngine = new Proxy({} as LanceEngine, {
  get: () => () => Promise.reject(new EngineError('internal', 'the engine is not used here')),
});

/** A fresh empty local root for each test of the enclosing block; the fields are set before each test. */
export function useLocalRoot(prefix: string): { dir: string; store: LocalObjectStore } {
  const fixture = {} as { dir: string; store: LocalObjectStore };
  beforeEach(async () => {
    fixture.dir = await mkdtemp(path.join(os.tmpdir(), prefix));
    fixture.store = new LocalObjectStore(fixture.dir);
    await fixture.store.init();
  });
  afterEach(() => rm(fixture.dir, { recursive: true, force: true }));
  return fixture;
}

/** What the services run on, over `store` (a double of the local root at `dir`, or that root's own store). */
export function localCatalogDeps(store: ObjectStore, dir: string, engine: LanceEngine = noEngine): CatalogDeps {
  return {
    store,
    engine,
    locations: new Locations(store, { kind: 'local', dir }, { region: 'x', forcePathStyle: true }),
    pageTokens: new PageTokens('k'),
    settings: { managedVersioningDefault: false, leaseMs: 30_000 },
  };
}
