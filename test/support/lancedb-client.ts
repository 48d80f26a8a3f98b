import { createRequire } from 'node:module';
import { afterAll, beforeAll } from 'vitest';
import { listenTestApp, type TestApp } from './app.js';
import type { Backend, TestRoot } from './backends.js';
import { useClientCredentials } from './client-credentials.js';

const require = createRequire(import.meta.url);
export const lancedb = require('@lancedb/lancedb') as typeof import('@lancedb/lancedb');
export type Connection = import('@lancedb/lancedb').Connection;

/**
 * For the enclosing describe block: a fresh root on `backend`, the service listening over it, and
 * @lancedb/lancedb's REST namespace client connected to it (with the S3 credentials a client
 * needs until the service vends them). The fields are set before the first test runs.
 */
export function useLancedbRestClient(backend: Backend): { root: TestRoot; app: TestApp & { url: string }; db: Connection } {
  const fixture = {} as { root: TestRoot; app: TestApp & { url: string }; db: Connection };
  let restoreEnv = () => {};
  beforeAll(async () => {
    fixture.root = await backend.newRoot();
    restoreEnv = useClientCredentials(fixture.root);
    fixture.app = await listenTestApp(fixture.root);
    fixture.db = await lancedb.connectNamespace('rest', { uri: fixture.app.url });
  });
  afterAll(async () => {
    fixture.db?.close();
    await fixture.app?.close();
    await fixture.root?.dispose();
    restoreEnv();
  });
  return fixture;
}
