import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import { listenTestApp, type TestApp } from './app.js';
import { type Backend, localBackend, s3Backends, type TestRoot } from './backends.js';

// Running the Python side of the tests: the pinned venv (scripts/install-python-test-deps.sh, set up
// once) and a program run to completion.

export const REPO = fileURLToPath(new URL('../..', import.meta.url));
export const INSTALL_SCRIPT = 'scripts/install-python-test-deps.sh';
export const VENV_BIN = `${REPO}.venv/bin/`;
export const INSTALL_TIMEOUT_MS = 10 * 60_000;

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a program to completion and reports its exit without throwing on a non-zero one. */
export function run(file: string, args: string[], options: { env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<RunResult> {
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

export function describeRun(what: string, r: RunResult): string {
  return `${what} exited with code ${String(r.code)}${r.signal ? ` (signal ${r.signal})` : ''}\n--- stdout ---\n${r.stdout}\n--- stderr ---\n${r.stderr}`;
}

/**
 * The environment of a Python client: this process's with `env` added (loopback traffic never
 * through a proxy, no bytecode caches in the work tree). `withoutAws`: none of this process's AWS_*
 * settings reach the client, so that whatever it reads or writes on S3 goes through credentials
 * the service vended.
 */
function clientEnv(env: NodeJS.ProcessEnv, withoutAws = false): NodeJS.ProcessEnv {
  const inherited = withoutAws ? Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_'))) : process.env;
  return { ...inherited, ...env, NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost', PYTHONDONTWRITEBYTECODE: '1' };
}

/** Runs a pytest file of the repository with the venv's Python in a client's environment (see clientEnv). */
export function runPytest(
  file: string,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
  options: { withoutAws?: boolean; venvBin?: string } = {},
): Promise<RunResult> {
  return run(`${options.venvBin ?? VENV_BIN}python`, ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-rfE', file], {
    env: clientEnv(env, options.withoutAws),
    timeoutMs,
  });
}

/** Runs a Python program of the repository with `venvBin`'s Python in a client's environment (see clientEnv). */
export function runPythonScript(
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
  options: { withoutAws?: boolean; venvBin: string },
): Promise<RunResult> {
  return run(`${options.venvBin}python`, [file, ...args], { env: clientEnv(env, options.withoutAws), timeoutMs });
}

/** Sets up the venv once (a no-op when its pins are installed); throws with the output otherwise. */
export async function installPythonTestDeps(script = INSTALL_SCRIPT): Promise<void> {
  const install = await run('bash', [script], { timeoutMs: INSTALL_TIMEOUT_MS });
  if (install.code !== 0) throw new Error(describeRun(script, install));
}

/** PySpark and lance-spark's jars (scripts/install-spark-test-deps.sh), for the Spark client test. */
export const SPARK_INSTALL_SCRIPT = 'scripts/install-spark-test-deps.sh';
export const SPARK_VENV = `${REPO}.venv-spark/`;

/** The Python of the UDF workers, with geneva (scripts/install-udf-worker.sh): Geneva's client tests run with it too. */
export const UDF_INSTALL_SCRIPT = 'scripts/install-udf-worker.sh';
export const UDF_VENV_BIN = `${REPO}.venv-udf/bin/`;

/**
 * For the enclosing block: the Python test venv, then the service on a fresh local root listening
 * on a loopback port (`prepare` may put something in it first); closed after the block.
 */
export function usePythonTestServer(prepare?: (server: TestApp & { url: string }) => Promise<void>): { readonly server: TestApp & { url: string } } {
  let root: TestRoot | undefined;
  let server: (TestApp & { url: string }) | undefined;
  beforeAll(async () => {
    await installPythonTestDeps();
    root = await localBackend.newRoot();
    server = await listenTestApp(root);
    await prepare?.(server);
  }, INSTALL_TIMEOUT_MS + 60_000);
  afterAll(async () => {
    await server?.close();
    await root?.dispose();
  });
  return {
    get server() {
      if (!server) throw new Error('the service did not start');
      return server;
    },
  };
}

/** Where real clients run: a local root, and radosgw (which has the STS role the service assumes, scripts/rgw.sh; MinIO, when present, does not). */
export const clientRoots = (): Backend[] => [localBackend, ...s3Backends().filter((b) => b.name === 'rgw')];

/** Credential vending as radosgw's STS serves it (scripts/rgw.sh). */
export const VENDING = { credentialVending: { roleArn: 'arn:aws:iam:::role/vend', durationSeconds: 900, refreshBeforeSeconds: 300 } };

/**
 * For the enclosing block: the clients' venv (`installScript`), then the service on a fresh root
 * of `backend` listening on a loopback port (vending credentials on S3, so that clients there
 * read and write only with what it vends) and an empty HOME for the clients; gone after the block.
 */
export function useClientServer(
  backend: Backend,
  installScript = INSTALL_SCRIPT,
): { readonly root: TestRoot; readonly server: TestApp & { url: string }; readonly home: string } {
  let root: TestRoot | undefined;
  let server: (TestApp & { url: string }) | undefined;
  let home = '';
  beforeAll(async () => {
    await installPythonTestDeps(installScript);
    root = await backend.newRoot();
    server = await listenTestApp(root, root.root.startsWith('s3://') ? VENDING : {});
    home = await mkdtemp(path.join(os.tmpdir(), 'lance-ns-client-home-'));
  }, INSTALL_TIMEOUT_MS + 60_000);
  afterAll(async () => {
    await server?.close();
    await root?.dispose();
    if (home) await rm(home, { recursive: true, force: true });
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the service did not start');
    return value;
  };
  return {
    get root() {
      return started(root);
    },
    get server() {
      return started(server);
    },
    get home() {
      return started(home || undefined);
    },
  };
}
