import { spawn } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { peopleStream } from '../support/arrow-data.js';
import { type ServiceProcess, startServiceProcess } from '../support/service-process.js';


type Running = ServiceProcess;

/** Starts the service as `npm start` would (through tsx, without a build), on a free port. */
const startService = (cwd: string, args: string[]): Promise<Running> => startServiceProcess({ cwd, args });

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
    const run = (args: string[]) =>
      new Promise<{ code: number | null; out: string }>((resolve) => {
        let out = '';
        const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), path.join(import.meta.dirname, '../../src/main.ts'), '--port', '0', ...args], {
          cwd,
          env: { ...process.env, NODE_OPTIONS: '' },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
        child.on('exit', (code) => resolve({ code, out }));
      });
    for (const host of ['0.0.0.0', '::', '10.1.2.3']) {
      const { code, out } = await run(['--host', host]);
      expect(code, host).toBe(2);
      expect(out, host).toMatch(/refusing to serve without authentication/);
    }
  });

  it('on SIGTERM lets an in-flight request finish, then exits 0', async () => {
    running = await startService(cwd, ['--root', path.join(cwd, 'root'), '--log-level', 'debug']);
    await fetch(`${running.url}/v1/namespace/ns/create`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    const body = peopleStream([1, 2, 3]);
    const { hostname, port } = new URL(running.url);
    const response = new Promise<number>((resolve, reject) => {
      const req = http.request(
        { hostname, port, method: 'POST', path: '/v1/table/ns%24t/create', headers: { 'content-type': 'application/vnd.apache.arrow.stream', 'content-length': body.length } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      // Half the body now; the rest only after the service has begun shutting down.
      req.write(body.subarray(0, 8));
      void running!.waitForLog((l) => l.msg === 'shutting down: finishing in-flight requests').then(() => req.end(body.subarray(8)));
    });
    await running.waitForLog((l) => l.msg === 'incoming request' && (l.req as { url?: string } | undefined)?.url === '/v1/table/ns%24t/create'); // at debug
    running.child.kill('SIGTERM');
    expect(await response).toBe(200);
    expect((await running.exited).code).toBe(0);
    expect((await stat(path.join(cwd, 'root/ns/t.lance/_versions'))).isDirectory()).toBe(true);
  });
});
