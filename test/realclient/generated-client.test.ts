import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenTestApp, type TestApp } from '../support/app.js';
import { localBackend, type TestRoot } from '../support/backends.js';
import { describeRun, runPytest, usePythonTestServer } from '../support/python.js';

// The generated Python client of the Lance Namespace spec (lance_namespace_urllib3_client, pinned
// by scripts/install-python-test-deps.sh) calling every operation of the service, as pytest
// (generated_client.py). Beside the open service on a local root, two more on their own roots give
// the errors every operation may answer that need configuration: a guarded one (API keys, OAuth2
// client credentials and authorization: 401, 403) and a throttled one (rate limit: 429).

const PYTEST_FILE = 'test/realclient/generated_client.py';
const PYTEST_TIMEOUT_MS = 3 * 60_000;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** Keys and OAuth2 client of the guarded service, shared with the Python side through the environment. */
const GUARDED = {
  adminKey: 'generated-client-admin-key',
  readerKey: 'generated-client-reader-key',
  clientId: 'generated-client',
  clientSecret: 'generated-client-secret',
};

describe('the generated Python client (lance_namespace_urllib3_client, pytest)', () => {
  const python = usePythonTestServer();
  const roots: TestRoot[] = [];
  let guarded: (TestApp & { url: string }) | undefined;
  let throttled: (TestApp & { url: string }) | undefined;

  beforeAll(async () => {
    const [guardedRoot, throttledRoot] = await Promise.all([localBackend.newRoot(), localBackend.newRoot()]);
    roots.push(guardedRoot, throttledRoot);
    guarded = await listenTestApp(guardedRoot, {
      auth: {
        apiKeys: [
          { principal: 'admin', sha256: sha256(GUARDED.adminKey) },
          { principal: 'reader', sha256: sha256(GUARDED.readerKey) },
        ],
        oauth2: {
          signingSecret: 'generated-client-signing-secret-0123456789',
          tokenTtlSeconds: 600,
          clients: [{ clientId: GUARDED.clientId, secretSha256: sha256(GUARDED.clientSecret), principal: 'admin' }],
        },
      },
      authorization: {
        roles: { everything: [{ namespace: [], privilege: 'manage' }], 'read-all': [{ namespace: [], privilege: 'read' }] },
        principals: { admin: ['everything'], reader: ['read-all'] },
      },
    });
    // Callers without a principal are counted per address: the tests' own client spends the burst.
    throttled = await listenTestApp(throttledRoot, { rateLimit: { requestsPerSecond: 0.01, burst: 3 } });
  });
  afterAll(async () => {
    await Promise.all([guarded?.close(), throttled?.close()]);
    await Promise.all(roots.map((r) => r.dispose()));
  });

  it(
    'calls every operation, parses every answer into the client models and raises the typed exception of every error',
    async () => {
      if (!guarded || !throttled) throw new Error('the guarded and throttled services did not start');
      const result = await runPytest(
        PYTEST_FILE,
        {
          LANCE_NS_URL: python.server.url,
          LANCE_NS_GUARDED_URL: guarded.url,
          LANCE_NS_GUARDED_ADMIN_KEY: GUARDED.adminKey,
          LANCE_NS_GUARDED_READER_KEY: GUARDED.readerKey,
          LANCE_NS_GUARDED_CLIENT_ID: GUARDED.clientId,
          LANCE_NS_GUARDED_CLIENT_SECRET: GUARDED.clientSecret,
          LANCE_NS_THROTTLED_URL: throttled.url,
        },
        PYTEST_TIMEOUT_MS,
      );
      expect(result.code, describeRun('pytest', result)).toBe(0);
    },
    PYTEST_TIMEOUT_MS + 30_000,
  );
});
