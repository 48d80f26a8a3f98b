import { describe, expect, it } from 'vitest';
import { describeRun, run, usePythonTestServer, VENV_BIN } from '../support/python.js';

// A real client from Python: pylance's REST namespace (lance_namespace.connect("rest", ...)) and its
// write_dataset / dataset integration, run as pytest against the service on a loopback port.
// scripts/install-python-test-deps.sh sets up <repo>/.venv with the pinned packages (once).

const PYTHON = `${VENV_BIN}python`;
const PYTEST_FILE = 'test/realclient/pylance_client.py';

const PYTEST_TIMEOUT_MS = 5 * 60_000;

describe('pylance REST namespace client (pytest)', () => {
  const python = usePythonTestServer();

  it(
    'passes the pylance client contract tests',
    async () => {
      const { server } = python;
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
