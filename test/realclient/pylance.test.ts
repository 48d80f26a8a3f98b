import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenTestApp, type TestApp } from '../support/app.js';
import { localBackend, type TestRoot } from '../support/backends.js';
import { describeRun, INSTALL_TIMEOUT_MS, installPythonTestDeps, run, VENV_BIN } from '../support/python.js';

// A real client from Python: pylance's REST namespace (lance_namespace.connect("rest", ...)) and its
// write_dataset / dataset integration, run as pytest against the service on a loopback port.
// scripts/install-python-test-deps.sh sets up <repo>/.venv with the pinned packages (once).

const PYTHON = `${VENV_BIN}python`;
const PYTEST_FILE = 'test/realclient/pylance_client.py';

const PYTEST_TIMEOUT_MS = 5 * 60_000;

describe('pylance REST namespace client (pytest)', () => {
  let root: TestRoot | undefined;
  let server: (TestApp & { url: string }) | undefined;

  beforeAll(async () => {
    await installPythonTestDeps();
    root = await localBackend.newRoot();
    server = await listenTestApp(root);
  }, INSTALL_TIMEOUT_MS + 60_000);

  afterAll(async () => {
    await server?.close();
    await root?.dispose();
  });

  it(
    'passes the pylance client contract tests',
    async () => {
      if (!server) throw new Error('server did not start');
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        LANCE_NS_URL: server.url,
        // Never route loopback traffic through a proxy; keep caches out of the work tree.
        NO_PROXY: '127.0.0.1,localhost',
        no_proxy: '127.0.0.1,localhost',
        PYTHONDONTWRITEBYTECODE: '1',
      };
      const result = await run(PYTHON, ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-rfE', PYTEST_FILE], { env, timeoutMs: PYTEST_TIMEOUT_MS });
      expect(result.code, describeRun('pytest', result)).toBe(0);
    },
    PYTEST_TIMEOUT_MS + 30_000,
  );
});
