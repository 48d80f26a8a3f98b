import { spawn } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { peopleStream } from '../support/arrow-data.js';
import { type CarelessS3, startCarelessS3 } from '../support/careless-s3.js';
import { type LogLine, type ServiceProcess, startServiceProcess } from '../support/service-process.js';

type Running = ServiceProcess;

/** Starts the service as `npm start` would (through tsx, without a build), on a free port. */
const startService = (cwd: string, args: string[]): Promise<Running> => startServiceProcess({ cwd, args });

/** Runs the service on a free port until it exits by itself: its exit code and standard output. */
const runToExit = (cwd: string, args: string[]) =>
  new Promise<{ code: number | null; out: string }>((resolve) => {
    let out = '';
    const child = spawn(
      process.execPath,
      ['--import', import.meta.resolve('tsx'), path.join(import.meta.dirname, '../../src/main.ts'), '--port', '0', ...args],
      {
        cwd,
        env: { ...process.env, NODE_OPTIONS: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.on('exit', (code) => resolve({ code, out }));
  });

const logLines = (out: string): LogLine[] => out.split('\n').flatMap((l) => (l.startsWith('{') ? [JSON.parse(l) as LogLine] : []));

describe('the service process', () => {
  let cwd: string;
  let running: Running | undefined;
  beforeEach(async () => {
    cwd = await mkdtemp(path.join(os.tmpdir(), 'lance-ns-proc-'));
  });
  afterEach(async () => {
    running?.child.kill('SIGKILL');
    running = undefined;
    await rm(cwd, { recursive: true, force: true });
  });

  it('serves ./data with no configuration and is ready', async () => {
    running = await startService(cwd, []);
    const ready = await fetch(`${running.url}/health/ready`);
    expect(ready.status).toBe(200);
    expect((await stat(path.join(cwd, 'data'))).isDirectory()).toBe(true);
    const created = await fetch(`${running.url}/v1/namespace/hello/create`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(created.status).toBe(200);
    expect((await stat(path.join(cwd, 'data/hello/.lance-namespace'))).isFile()).toBe(true);
  });

  it('refuses to start without authentication on a non-loopback address (--insecure allows it; not bound here: tests use loopback only)', async () => {
    // It exits before it binds anything, so the address is never opened.
    for (const host of ['0.0.0.0', '::', '10.1.2.3']) {
      const { code, out } = await runToExit(cwd, ['--host', host]);
      expect(code, host).toBe(2);
      expect(out, host).toMatch(/refusing to serve without authentication/);
    }
  });

  it('on SIGTERM lets an in-flight request finish, then exits 0', async () => {
    running = await startService(cwd, ['--root', path.join(cwd, 'root'), '--log-level', 'debug']);
    await fetch(`${running.url}/v1/namespace/ns/create`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    const body = peopleStream([1, 2, 3]);
    const { hostname, port } = new URL(running.url);
    const shuttingDown = running.waitForLog((l) => l.msg === 'shutting down: finishing in-flight requests');
    const response = new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          hostname,
          port,
          method: 'POST',
          path: '/v1/table/ns%24t/create',
          headers: { 'content-type': 'application/vnd.apache.arrow.stream', 'content-length': body.length },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      // Half the body now; the rest only after the service has begun shutting down.
      req.write(body.subarray(0, 8));
      void shuttingDown.then(() => req.end(body.subarray(8)));
    });
    await running.waitForLog((l) => l.msg === 'incoming request' && (l.req as { url?: string } | undefined)?.url === '/v1/table/ns%24t/create'); // at debug
    running.child.kill('SIGTERM');
    expect(await response).toBe(200);
    expect((await running.exited).code).toBe(0);
    expect((await stat(path.join(cwd, 'root/ns/t.lance/_versions'))).isDirectory()).toBe(true);
  });
});

// On a store that ignores If-None-Match and If-Match, every race the service
// settles would silently lose acknowledged writes, so it does not start there unless told to.
describe('the service process on a store that does not honour conditional writes', () => {
  const SECRET = 'careless-secret-key';
  let s3: CarelessS3;
  let cwd: string;
  let running: Running | undefined;
  beforeAll(async () => {
    s3 = await startCarelessS3();
    cwd = await mkdtemp(path.join(os.tmpdir(), 'lance-ns-proc-'));
  });
  afterAll(async () => {
    running?.child.kill('SIGKILL');
    await s3?.close();
    await rm(cwd, { recursive: true, force: true });
  });
  const onS3 = (prefix: string) => [
    '--root',
    `s3://${s3.bucket}/${prefix}`,
    '--s3-endpoint',
    s3.endpoint,
    '--s3-access-key-id',
    'careless',
    '--s3-secret-access-key',
    SECRET,
  ];

  it('refuses to start, naming the store (no credentials) and what it did not honour, and leaves no key behind', async () => {
    const { code, out } = await runToExit(cwd, onS3('cat'));
    expect(code, out).toBe(2);
    const fatal = logLines(out).filter((l) => l.level === 60);
    expect(fatal).toHaveLength(1);
    expect(fatal[0]?.msg).toBe(
      `refusing to serve the store s3://${s3.bucket}/cat: it does not honour conditional writes (` +
        'a create-if-absent (If-None-Match: *) of an existing key replaced it; a replace-if-unchanged (If-Match) with a stale etag replaced the object), ' +
        'so concurrent writers would silently lose acknowledged writes; use a store that honours If-None-Match and If-Match, ' +
        'or pass --allow-unsafe-store (LANCE_NS_ALLOW_UNSAFE_STORE=true) to serve it anyway',
    );
    expect(fatal[0]).toMatchObject({ root: `s3://${s3.bucket}/cat`, endpoint: s3.endpoint });
    expect(out).not.toContain(SECRET);
    expect(await s3.keys()).toEqual([]);
  });

  it('with --allow-unsafe-store it serves it, warning at start and at the probe', async () => {
    running = await startService(cwd, [...onS3('allowed'), '--allow-unsafe-store']);
    const warnings = running.lines.filter((l) => l.level === 40).map((l) => String(l.msg));
    expect(warnings[0]).toMatch(/^--allow-unsafe-store is set: a store that does not honour conditional writes will be served/);
    expect(warnings[1]).toMatch(
      new RegExp(`^the store s3://${s3.bucket}/allowed does not honour conditional writes \\(.*\\).*serving it anyway \\(--allow-unsafe-store\\)$`),
    );
    expect((await running.call('GET', '/health/ready')).status).toBe(200);
    expect((await running.call('POST', '/v1/namespace/n/create', {})).status).toBe(200);
    expect(running.lines.some((l) => JSON.stringify(l).includes(SECRET))).toBe(false);
  });
});
