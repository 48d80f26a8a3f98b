import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenTestApp, type TestApp } from '../support/app.js';
import { localBackend, type TestRoot } from '../support/backends.js';

// A real client from Python: pylance's REST namespace (lance_namespace.connect("rest", ...)) and its
// write_dataset / dataset integration, run as pytest against the service on a loopback port.
// scripts/install-python-test-deps.sh sets up <repo>/.venv with the pinned packages (once).

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const INSTALL_SCRIPT = 'scripts/install-python-test-deps.sh';
const PYTHON = `${REPO}.venv/bin/python`;
const PYTEST_FILE = 'test/realclient/pylance_client.py';

const INSTALL_TIMEOUT_MS = 10 * 60_000;
const PYTEST_TIMEOUT_MS = 5 * 60_000;

interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a program to completion and reports its exit without throwing on a non-zero one. */
function run(file: string, args: string[], options: { env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { cwd: REPO, env: options.env ?? process.env, timeout: options.timeoutMs, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' },
      (error, stdout, stderr) => {
        if (!error) {
          resolve({ code: 0, signal: null, stdout, stderr });
          return;
        }
        const code = typeof error.code === 'number' ? error.code : null;
        const signal = error.signal ?? null;
        // A spawn failure (no such file) or a timeout has no exit code: surface its message too.
        resolve({ code, signal, stdout, stderr: code === null ? `${error.message}\n${stderr}` : stderr });
      },
    );
  });
}

function describeRun(what: string, r: RunResult): string {
  return `${what} exited with code ${String(r.code)}${r.signal ? ` (signal ${r.signal})` : ''}\n--- stdout ---\n${r.stdout}\n--- stderr ---\n${r.stderr}`;
}

describe('pylance REST namespace client (pytest)', () => {
  let root: TestRoot | undefined;
  let server: (TestApp & { url: string }) | undefined;

  beforeAll(async () => {
    const install = await run('bash', [INSTALL_SCRIPT], { timeoutMs: INSTALL_TIMEOUT_MS });
    if (install.code !== 0) throw new Error(describeRun(INSTALL_SCRIPT, install));
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
