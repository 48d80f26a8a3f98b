import { execFile } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const repoRoot = path.resolve(import.meta.dirname, '../..');

/** How tests reach an S3-compatible server; buckets are made per test file. */
export interface S3TestServer {
  name: 'rgw' | 'minio';
  endpoint: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function hasCommand(cmd: string): Promise<boolean> {
  try {
    await run('sh', ['-c', `command -v ${cmd}`]);
    return true;
  } catch {
    return false;
  }
}

/** Installs (Debian packages) and starts a one-node Ceph radosgw on 127.0.0.1. */
export async function startRgw(): Promise<{ server: S3TestServer; stop: () => Promise<void> }> {
  if (!(await hasCommand('radosgw')) || !(await hasCommand('ceph-mon'))) {
    await run('bash', [path.join(repoRoot, 'scripts/install-s3-test-deps.sh')], { timeout: 600_000 });
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lance-ns-rgw-'));
  const port = await freePort();
  const monPort = await freePort();
  const script = path.join(repoRoot, 'scripts/rgw.sh');
  await run('bash', [script, 'start', dir, String(port), String(monPort)], { timeout: 120_000 });
  return {
    server: { name: 'rgw', endpoint: `http://127.0.0.1:${port}`, region: 'us-east-1', accessKeyId: 'TESTERACCESSKEY', secretAccessKey: 'TESTERSECRETKEY123' },
    stop: async () => {
      await run('bash', [script, 'stop', dir]);
    },
  };
}

/** Starts MinIO through testcontainers when a Docker daemon answers; null (with the reason) otherwise. */
export async function startMinio(): Promise<{ server: S3TestServer; stop: () => Promise<void> } | { skipped: string }> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
  } catch (e) {
    return { skipped: `MinIO tier skipped: no Docker daemon (${(e as Error).message.split('\n')[0]})` };
  }
  const { MinioContainer } = await import('@testcontainers/minio');
  const container = await new MinioContainer('minio/minio:RELEASE.2025-04-22T22-12-26Z').withUsername('minioadmin').withPassword('minioadmin').start();
  return {
    server: {
      name: 'minio',
      endpoint: container.getConnectionUrl(),
      region: 'us-east-1',
      accessKeyId: 'minioadmin',
      secretAccessKey: 'minioadmin',
    },
    stop: async () => {
      await container.stop();
    },
  };
}
