import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import { LocalObjectStore } from '../../src/store/local-store.js';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import type { ObjectStore } from '../../src/store/object-store.js';
import type { S3Connection } from '../../src/store/open-store.js';
import { S3ObjectStore } from '../../src/store/s3/s3-store.js';
import type { S3TestServer } from './s3-server.js';

/**
 * How a test's local root is removed: a commit's work after its answer (Lance's hint, the slot's
 * release; src/service/versions/after-answer.ts) may still be landing in it, so a directory
 * found not empty is tried again.
 */
export const REMOVE_ROOT = { recursive: true, force: true, maxRetries: 10, retryDelay: 20 } as const;

/** A fresh, empty catalog root on one backend. */
export interface TestRoot {
  /** The root as the service's --root takes it. */
  root: string;
  s3: S3Connection;
  /** A store over the root, for looking behind the service's back. */
  store: ObjectStore;
  dispose(): Promise<void>;
}

export interface Backend {
  name: string;
  /** A fresh root; `leaf` names its last path segment or prefix (random by default). */
  newRoot(options?: { leaf?: string }): Promise<TestRoot>;
}

const NO_S3: S3Connection = { region: 'us-east-1', forcePathStyle: true };

export const localBackend: Backend = {
  name: 'local',
  async newRoot(options) {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'lance-ns-test-'));
    const root = options?.leaf ? path.join(dir, options.leaf) : dir;
    const store = new LocalObjectStore(root);
    await store.init();
    return { root, s3: NO_S3, store, dispose: () => rm(dir, REMOVE_ROOT) };
  },
};

/** A store in memory: for store-level suites only, as the service (and its engine) cannot open it. */
export const memoryBackend: Backend = {
  name: 'memory',
  async newRoot() {
    const store = new MemoryObjectStore();
    return { root: store.rootUri, s3: NO_S3, store, dispose: () => store.close() };
  },
};

const BUCKET = 'lance-ns-test';

function s3Backend(server: S3TestServer): Backend {
  const s3: S3Connection = {
    endpoint: server.endpoint,
    region: server.region,
    accessKeyId: server.accessKeyId,
    secretAccessKey: server.secretAccessKey,
    forcePathStyle: true,
  };
  let bucketReady: Promise<void> | undefined;
  return {
    name: server.name,
    async newRoot(options) {
      const prefix = options?.leaf ?? `t-${randomBytes(6).toString('hex')}`;
      const store = new S3ObjectStore({ ...s3, bucket: BUCKET, prefix });
      bucketReady ??= store.ensureBucket();
      await bucketReady;
      return {
        root: `s3://${BUCKET}/${prefix}`,
        s3,
        store,
        dispose: async () => {
          await store.deletePrefix('').catch(() => undefined);
          await store.close();
        },
      };
    },
  };
}

/** Every backend of this run: local always, then each S3 server the global setup started. */
export function backends(): Backend[] {
  return [localBackend, ...inject('s3Servers').map(s3Backend)];
}

/** Every store of this run, the memory store too: for suites that use only the ObjectStore port. */
export function storeBackends(): Backend[] {
  return [localBackend, memoryBackend, ...inject('s3Servers').map(s3Backend)];
}

/** S3 backends only (empty when the S3 tier is off, which CI never allows). */
export function s3Backends(): Backend[] {
  return inject('s3Servers').map(s3Backend);
}
