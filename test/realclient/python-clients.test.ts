import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenTestApp, type TestApp } from '../support/app.js';
import { type Backend, localBackend, s3Backends, type TestRoot } from '../support/backends.js';
import { describeRun, INSTALL_TIMEOUT_MS, installPythonTestDeps, runPytest } from '../support/python.js';

// The Python clients people use, each a pytest file run against the service on a loopback port:
// pylance through lance_namespace.connect("rest"), LanceDB Python through connect_namespace("rest")
// (client-side and with query pushdown), and Daft through daft-lance. Each runs on a local root
// and on radosgw. On radosgw the service vends credentials (STS, as configured for
// vended-credentials.test.ts) and the clients get no AWS settings and an empty HOME: whatever they
// read or write there, they do with credentials the service handed them for that table.
// scripts/install-python-test-deps.sh sets up <repo>/.venv with the pinned packages (once).

const PYTEST_FILES = ['pylance_client.py', 'lancedb_client.py', 'daft_client.py'];
const PYTEST_TIMEOUT_MS = 5 * 60_000;

// radosgw has the STS role the service assumes (scripts/rgw.sh); MinIO, when present, does not.
const roots: Backend[] = [localBackend, ...s3Backends().filter((b) => b.name === 'rgw')];
const VENDING = { credentialVending: { roleArn: 'arn:aws:iam:::role/vend', durationSeconds: 900, refreshBeforeSeconds: 300 } };

describe.each(roots.map((backend) => ({ name: backend.name, backend })))('Python clients on $name', ({ backend }) => {
  let root: TestRoot | undefined;
  let server: (TestApp & { url: string }) | undefined;
  let home = '';

  beforeAll(async () => {
    await installPythonTestDeps();
    root = await backend.newRoot();
    server = await listenTestApp(root, root.root.startsWith('s3://') ? VENDING : {});
    home = await mkdtemp(path.join(os.tmpdir(), 'lance-ns-python-home-'));
  }, INSTALL_TIMEOUT_MS + 60_000);

  afterAll(async () => {
    await server?.close();
    await root?.dispose();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it.each(PYTEST_FILES)(
    '%s',
    async (file) => {
      if (!server || !root) throw new Error('the service did not start');
      const result = await runPytest(`test/realclient/${file}`, { HOME: home, LANCE_NS_URL: server.url, LANCE_NS_ROOT: root.root }, PYTEST_TIMEOUT_MS, { withoutAws: true });
      expect(result.code, describeRun('pytest', result)).toBe(0);
    },
    PYTEST_TIMEOUT_MS + 30_000,
  );
});
