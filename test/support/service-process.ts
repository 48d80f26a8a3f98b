import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { afterAll, beforeAll, type ExpectStatic, expect } from 'vitest';
import type { Backend, TestRoot } from './backends.js';

const repo = path.resolve(import.meta.dirname, '../..');

export type LogLine = Record<string, unknown>;

/** The service running as its own OS process (so that tests can SIGKILL it). */
export interface ServiceProcess {
  child: ChildProcess;
  url: string;
  /** Every JSON log line so far. */
  lines: LogLine[];
  /** Everything written to stderr so far. */
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves at the first log line (from now on) that matches. */
  waitForLog(match: (line: LogLine) => boolean): Promise<void>;
  call(
    method: 'GET' | 'POST',
    pathAndQuery: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; text: string; json: Record<string, unknown> }>;
}

/** One request to a service at `url`: a JSON body (or a Buffer as is); the answer's text, and its JSON object when it is one. */
export async function callUrl(
  url: string,
  method: 'GET' | 'POST',
  pathAndQuery: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; json: Record<string, unknown>; headers: Headers }> {
  const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body);
  const res = await fetch(`${url}${pathAndQuery}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(payload !== undefined ? { body: payload } : {}),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null) json = parsed as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return { status: res.status, text, json, headers: res.headers };
}

/** Command-line options that serve a test root (its S3 connection included) with a short lease. */
export function rootArgs(root: TestRoot, leaseMs: number): string[] {
  const args = ['--root', root.root, '--transaction-lease-ms', String(leaseMs)];
  const { s3 } = root;
  if (s3.endpoint) {
    args.push('--s3-endpoint', s3.endpoint, '--s3-region', s3.region, '--s3-path-style', String(s3.forcePathStyle));
    if (s3.accessKeyId) args.push('--s3-access-key-id', s3.accessKeyId);
    if (s3.secretAccessKey) args.push('--s3-secret-access-key', s3.secretAccessKey);
  }
  return args;
}

/** Pause points of src/service/coordination/fault-points.ts, and how long the process waits, alive, at each. */
export interface PausePoints {
  points: string[];
  ms: number;
}

/**
 * Starts src/main.ts through tsx (as `npm run dev` does) on a loopback port, resolving once it
 * listens. `faultPoint` arms LANCE_NS_FAULT_POINT, `pause` LANCE_NS_PAUSE_POINTS and
 * LANCE_NS_PAUSE_MS (src/service/coordination/fault-points.ts); `live` tracks the child until it exits, so a
 * test can kill whatever is left.
 */
export function startServiceProcess(options: {
  args: string[];
  cwd?: string;
  faultPoint?: string;
  pause?: PausePoints;
  live?: Set<ChildProcess>;
}): Promise<ServiceProcess> {
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '' };
  delete env.LANCE_NS_FAULT_POINT;
  delete env.LANCE_NS_PAUSE_POINTS;
  delete env.LANCE_NS_PAUSE_MS;
  if (options.faultPoint) env.LANCE_NS_FAULT_POINT = options.faultPoint;
  if (options.pause) {
    env.LANCE_NS_PAUSE_POINTS = options.pause.points.join(',');
    env.LANCE_NS_PAUSE_MS = String(options.pause.ms);
  }
  const child = spawn(
    process.execPath,
    ['--import', import.meta.resolve('tsx'), path.join(repo, 'src/main.ts'), '--host', '127.0.0.1', '--port', '0', ...options.args],
    {
      cwd: options.cwd ?? repo,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  options.live?.add(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      options.live?.delete(child);
      resolve({ code, signal });
    }),
  );
  const lines: LogLine[] = [];
  const waiters: Array<{ match: (line: LogLine) => boolean; resolve: () => void }> = [];
  const waitForLog = (match: (line: LogLine) => boolean) => new Promise<void>((resolve) => waiters.push({ match, resolve }));
  return new Promise((resolve, reject) => {
    const listening = /^Server listening at (http:\/\/127\.0\.0\.1:\d+)$/;
    readline.createInterface({ input: child.stdout }).on('line', (text) => {
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        return;
      }
      lines.push(line);
      for (const w of waiters.filter((w) => w.match(line))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
      const url = typeof line.msg === 'string' ? listening.exec(line.msg)?.[1] : undefined;
      if (!url) return;
      const call: ServiceProcess['call'] = async (method, pathAndQuery, body, headers) => {
        const { status, text, json } = await callUrl(url, method, pathAndQuery, body, headers);
        return { status, text, json };
      };
      resolve({ child, url, lines, stderr: () => stderr, exited, waitForLog, call });
    });
    void exited.then(({ code, signal }) => reject(new Error(`service exited early (${code ?? signal}): ${stderr}`)));
  });
}

/**
 * Stops the service gracefully (SIGTERM) and checks that it exits 0; when it does not, the failure
 * shows why (its 'shutdown failed' log line, the end of its stderr). `check`: the test's own
 * `expect` in concurrent tests.
 */
export async function stopService(running: ServiceProcess, check: ExpectStatic = expect): Promise<void> {
  running.child.kill('SIGTERM');
  const exited = await running.exited;
  const why = `${JSON.stringify(running.lines.filter((l) => l.msg === 'shutdown failed'))}\n${running.stderr().slice(-4000)}`;
  check(exited, why).toEqual({ code: 0, signal: null });
}

/**
 * For the crash tests of one describe block: a fresh root of `backend` with namespace `ns`, and a
 * replica on it (the watcher) that lives through the block; `start` starts more replicas (one
 * that dies at `faultPoint`, or pauses at `pause`, when given). Every process started is
 * SIGKILLed at the end.
 */
export function useCrashRoot(
  backend: Backend,
  leaseMs: number,
): { root: () => TestRoot; watcher: () => ServiceProcess; start: (faultPoint?: string, pause?: PausePoints) => Promise<ServiceProcess> } {
  const live = new Set<ChildProcess>();
  let root: TestRoot | undefined;
  let watcher: ServiceProcess | undefined;
  const start = (faultPoint?: string, pause?: PausePoints) => {
    if (!root) throw new Error('no root yet');
    return startServiceProcess({ args: rootArgs(root, leaseMs), live, ...(faultPoint !== undefined ? { faultPoint } : {}), ...(pause ? { pause } : {}) });
  };
  beforeAll(async () => {
    root = await backend.newRoot();
    watcher = await start();
    expect((await watcher.call('POST', '/v1/namespace/ns/create', {})).status).toBe(200);
  });
  afterAll(async () => {
    for (const child of live) child.kill('SIGKILL');
    await root?.dispose();
  });
  const made = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`no ${what} before the block's beforeAll`);
    return value;
  };
  return { root: () => made(root, 'root'), watcher: () => made(watcher, 'watcher'), start };
}

/**
 * The service processes of tests that run at once, each on a root of its own: `liveOn(root)` is the
 * set to hand startServiceProcess, and `dispose(root)` removes the root once every process started
 * on it has exited (killing what is left: a failed expectation leaves them writing into it, and the
 * removal would then fail in the expectation's place). `killAll` is for afterAll.
 */
export function processesByRoot() {
  const liveByRoot = new Map<TestRoot, Set<ChildProcess>>();
  const liveOn = (root: TestRoot): Set<ChildProcess> => {
    let live = liveByRoot.get(root);
    if (!live) {
      live = new Set();
      liveByRoot.set(root, live);
    }
    return live;
  };
  const dispose = async (root: TestRoot): Promise<void> => {
    await Promise.all(
      [...liveOn(root)].map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGKILL');
          }),
      ),
    );
    liveByRoot.delete(root);
    await root.dispose();
  };
  const killAll = (): void => {
    for (const live of liveByRoot.values()) for (const child of live) child.kill('SIGKILL');
  };
  return { liveOn, dispose, killAll };
}
