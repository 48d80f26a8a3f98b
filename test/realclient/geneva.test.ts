import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenTestApp } from '../support/app.js';
import { type Backend, localBackend, s3Backends, type TestRoot } from '../support/backends.js';
import { describeRun, INSTALL_TIMEOUT_MS, installPythonTestDeps, runPytest, UDF_INSTALL_SCRIPT, UDF_VENV_BIN } from '../support/python.js';
import { rootArgs, type ServiceProcess, startServiceProcess, stopService } from '../support/service-process.js';

// Geneva 0.17 (LanceDB's feature-engineering client) in remote mode against the service, as its
// users run it: Python UDF columns added and backfilled (blocking and async, with `where`), a
// failing UDF, a backfill whose service is SIGKILLed half-way and finished by the next one, query
// materialized views with UDF columns, chunker and udtf views created and refreshed, and the 406 a service without
// udf_execution answers. The Python side is geneva_client.py, run with
// the UDF worker's venv (scripts/install-udf-worker.sh), which has geneva.

const CLIENT = 'test/realclient/geneva_client.py';
// radosgw has the STS role the service assumes (scripts/rgw.sh): there Geneva reads and writes with vended credentials only.
const BACKENDS: Backend[] = [localBackend, ...s3Backends().filter((b) => b.name === 'rgw')];
const VENDING = { credentialVending: { roleArn: 'arn:aws:iam:::role/vend', durationSeconds: 900, refreshBeforeSeconds: 300 } };
const LEASE_MS = 1000;
const PYTEST_TIMEOUT_MS = 10 * 60_000;

const live = new Set<ChildProcess>();
const roots: TestRoot[] = [];
let stateDir = '';

beforeAll(async () => {
  await installPythonTestDeps(UDF_INSTALL_SCRIPT);
  stateDir = await mkdtemp(path.join(tmpdir(), 'geneva-state-'));
}, INSTALL_TIMEOUT_MS);

afterAll(async () => {
  for (const child of live) child.kill('SIGKILL');
  for (const root of roots) await root.dispose();
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
});

async function newRoot(backend: Backend = localBackend): Promise<TestRoot> {
  const root = await backend.newRoot();
  roots.push(root);
  return root;
}

const startService = (root: TestRoot, options: { udfs: boolean; faultPoint?: string }): Promise<ServiceProcess> =>
  startServiceProcess({
    args: [...rootArgs(root, LEASE_MS), ...(options.udfs ? ['--udf-execution', 'local'] : [])],
    live,
    ...(options.faultPoint ? { faultPoint: options.faultPoint } : {}),
  });

async function geneva(service: { url: string }, phase: string): Promise<void> {
  const r = await runPytest(CLIENT, { GENEVA_URL: service.url, GENEVA_PHASE: phase, GENEVA_STATE: path.join(stateDir, 'killed.json') }, PYTEST_TIMEOUT_MS, {
    venvBin: UDF_VENV_BIN,
    withoutAws: true,
  });
  expect(r.code, describeRun(`geneva ${phase}`, r)).toBe(0);
  // Every test the client marks for this phase ran and passed (the others are skipped).
  const marked = (await readFile(CLIENT, 'utf8')).split(`@pytest.mark.skipif(PHASE != "${phase}"`).length - 1;
  expect(marked, `tests of phase ${phase} in ${CLIENT}`).toBeGreaterThan(0);
  expect(r.stdout, describeRun(`geneva ${phase}`, r)).toMatch(new RegExp(`\\b${marked} passed\\b`));
}

describe('Geneva 0.17 in remote mode', () => {
  it.each(BACKENDS.map((b) => ({ name: b.name, backend: b })))(
    'backfills Python UDF columns (blocking, async, with where, rebound by alter_columns) and shows a failing UDF its error, on $name',
    async ({ backend }) => {
      const root = await newRoot(backend);
      const service = await listenTestApp(root, { udf: { execution: 'local', workers: 1 }, ...(root.root.startsWith('s3://') ? VENDING : {}) });
      try {
        await geneva(service, 'backfill');
      } finally {
        await service.close();
      }
    },
    PYTEST_TIMEOUT_MS,
  );

  it(
    'creates and refreshes query materialized views with UDF columns, chunker and udtf views (blocking, async, with data at create, output_limit, partition_by) and shows a failing UDF, chunker or UDTF its error',
    async () => {
      const service = await startService(await newRoot(), { udfs: true });
      await geneva(service, 'matview');
      await stopService(service);
    },
    PYTEST_TIMEOUT_MS,
  );

  it(
    'finishes a backfill whose service was SIGKILLed half-way once the service runs again',
    async () => {
      const root = await newRoot();
      const doomed = await startService(root, { udfs: true, faultPoint: 'backfill:after-commit-3' });
      await geneva(doomed, 'kill-start');
      expect(await doomed.exited).toEqual({ code: null, signal: 'SIGKILL' });
      const restarted = await startService(root, { udfs: true });
      await geneva(restarted, 'kill-finish');
      await stopService(restarted);
    },
    PYTEST_TIMEOUT_MS,
  );

  it(
    'answers 406 saying how to enable Python UDFs when udf_execution is off',
    async () => {
      const service = await startService(await newRoot(), { udfs: false });
      await geneva(service, 'off');
      await stopService(service);
    },
    PYTEST_TIMEOUT_MS,
  );
});
