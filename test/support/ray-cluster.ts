import { createServer } from 'node:net';
import path from 'node:path';
import { describeRun, run } from './python.js';

// A one-node Ray cluster on 127.0.0.1 for the tests of udf_execution ray, started with the `ray`
// of the UDF worker's venv (it comes with geneva) and stopped after.

/** A free loopback port. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

export interface RayCluster {
  address: string;
  stop(): Promise<void>;
}

/** Starts a Ray head with one CPU (no dashboard) with the `ray` beside `python`; resolves with its address. */
export async function startRayCluster(python: string): Promise<RayCluster> {
  const ray = path.join(path.dirname(python), 'ray');
  const port = await freePort();
  const env = { ...process.env, RAY_USAGE_STATS_ENABLED: '0' };
  const started = await run(
    ray,
    ['start', '--head', '--node-ip-address=127.0.0.1', `--port=${port}`, '--num-cpus=1', '--include-dashboard=false', '--disable-usage-stats'],
    { env, timeoutMs: 120_000 },
  );
  if (started.code !== 0) throw new Error(describeRun('ray start', started));
  return {
    address: `127.0.0.1:${port}`,
    stop: async () => {
      const stopped = await run(ray, ['stop', '--force'], { env, timeoutMs: 60_000 });
      if (stopped.code !== 0) throw new Error(describeRun('ray stop', stopped));
    },
  };
}
