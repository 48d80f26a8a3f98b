// This service beside the reference server, workload by workload (issue 9's two tables).
//
//   npm run bench -- [--store local|s3|both] [--quick] [--only <row-substring>] [--page <dir>] [--from-source]
//
// A full run (both stores, no --quick, no --only) also writes the run of record,
// docs/benchmarks/side-by-side.md with SVG charts and results.json (bench-report.ts); --page <dir>
// writes those for any run, into <dir>.
//
// Starts this service as its own Node process (dist/main.js, built from the sources first with
// `npm run build`, as `npm start` runs it; logs at warn) and the
// reference, pylance's `lance.namespace.RestAdapter("dir", ...)` from the test venv
// (scripts/bench_reference.py), each over a root of its own on the same local disk, or in the same
// bucket of a throwaway radosgw started here. The reference cannot declare a table on radosgw
// directly (its upload of `.lance-reserved` omits Content-Length and radosgw answers 411), so both
// servers reach radosgw through a pass-through proxy in this process that buffers each request
// body and sets Content-Length. Everything binds 127.0.0.1; roots, processes, radosgw and proxies
// are removed on every exit path (bench-support.ts).
//
// Both servers get the same fixture: the same namespaces, declared tables and Lance-written
// tables, under the same ids. This service is given its fixture over HTTP (so whatever it keeps
// beside the tables is written by its own code); the reference's big catalogs are appended to its
// `__manifest` table in one Lance write, with the `.lance-reserved` marker each declared table has
// (what it holds after declaring them one at a time, which takes it minutes). Lance-written tables
// are written through each server by pylance's namespace integration, as a client would.
//
// Every row runs its workload with the same load generator against this service, then the
// reference, for a few rounds: node:http from this process, `requests` from a Python process (as
// pylance users call the REST API; both where users use both), or pylance itself. A row labelled
// warm first makes the same untimed calls on each (WARM_UP_CALLS of the row's probe); each label
// names its fixture (what the catalog holds, the tables touched, warm or not, the client). The
// figures printed are the medians over the rounds. The ratio says how many times faster this service is
// (>1: faster). Where the reference lacks an operation or answers differently, the row says so.
// On radosgw the proxy also counts the store calls a request makes on each server's root.

import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { parseArgs } from 'node:util';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import pLimit from 'p-limit';

import { LancedbEngine } from '../src/engine/lancedb/engine.js';
import { lancedb } from '../src/engine/lancedb/table-access.js';
import { freePort, startRgw } from '../test/support/s3-server.js';
import { type Figure, formatRatio, type Outcome, type RowResult, type Scale, type Side, type StoreKind, speedup, writeBenchmarkPage } from './bench-report.js';
import { checkAborted, cleanups, ms, now, openDirect, percentile, runMain, secs } from './bench-support.js';

// The SDK's notice that its 2027 releases need Node 22 is noise while versions are pinned exactly.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const repo = path.resolve(import.meta.dirname, '..');
const PYTHON = path.join(repo, '.venv/bin/python');
const PY_HELPER = path.join(repo, 'scripts/bench_reference.py');
const REQUEST_TIMEOUT_MS = 300_000;
const BUCKET = 'lance-bench';

const SIDES: Side[] = ['ours', 'ref'];

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

const count = (n: number): string => n.toLocaleString('en-US');

// ---------------------------------------------------------------------------------------------
// HTTP: one client for both servers.

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly text: string,
    route: string,
  ) {
    super(`${route} -> ${status}: ${text.slice(0, 200)}`);
  }
}

const benchAgent = new http.Agent({ keepAlive: true, maxSockets: 256 });
cleanups.push(async () => benchAgent.destroy());

/**
 * One request over a keep-alive connection (node:http): the same client for both servers. `fetch`
 * (undici through the Fetch API's layers) tops out near 1,750 requests/s in one process on this
 * machine, which a 64-client row would measure instead of the servers.
 */
async function call(base: string, method: 'GET' | 'POST', route: string, body?: unknown): Promise<Record<string, unknown>> {
  const url = new URL(`${base}${route}`);
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request(
      {
        agent: benchAgent,
        hostname: url.hostname,
        port: url.port,
        method,
        path: `${url.pathname}${url.search}`,
        headers: payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          // An Arrow answer (a query's) is timed, not read: its size stands for it.
          const arrow = /arrow/.test(String(res.headers['content-type'] ?? '')) && (res.statusCode ?? 0) < 300;
          resolve({ status: res.statusCode ?? 0, text: arrow ? JSON.stringify({ arrow_bytes: body.length }) : body.toString('utf8') });
        });
      },
    );
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`${method} ${route}: no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
  if (status < 200 || status >= 300) throw new HttpError(status, text, `${method} ${route}`);
  if (text === '') return {};
  const parsed: unknown = JSON.parse(text);
  return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : { value: parsed };
}

/** An answer a row cannot measure with (a wrong count, a version missing): that side's cell says so. */
class UnusableAnswer extends Error {}

const idPath = (...parts: string[]): string => encodeURIComponent(parts.join('$'));

// ---------------------------------------------------------------------------------------------
// Processes: this service, the reference, and the Python clients.

/** Children still running; cleanup stops them by their own id. */
const live = new Set<ChildProcess>();
cleanups.push(async () => {
  for (const child of live) child.kill('SIGKILL');
});

function track(child: ChildProcess): Promise<number | null> {
  live.add(child);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      live.delete(child);
      resolve(code);
    }),
  );
}

async function stopChild(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

async function waitHealthy(url: string, exited: Promise<number | null>, what: string): Promise<void> {
  let gone: number | null | false = false;
  void exited.then((code) => (gone = code));
  const deadline = now() + 60_000;
  while (now() < deadline) {
    checkAborted();
    if (gone !== false) throw new Error(`${what} exited (${String(gone)}) before it served`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not answer ${url} within 60 s`);
}

/** Connection to the object store both servers use (through the proxy, for radosgw). */
interface StoreAccess {
  kind: StoreKind;
  /** A directory (local) or s3://bucket/prefix under which each server gets a root. */
  base: string;
  s3?: { endpoint: string; region: string; accessKeyId: string; secretAccessKey: string };
}

/** Lance storage options (the object_store keys) for a store, as pylance and the engine take them. */
function lanceStorageOptions(access: StoreAccess): Record<string, string> {
  if (!access.s3) return {};
  return {
    aws_endpoint: access.s3.endpoint,
    aws_region: access.s3.region,
    aws_access_key_id: access.s3.accessKeyId,
    aws_secret_access_key: access.s3.secretAccessKey,
    allow_http: 'true',
  };
}

/** How this service is started: as built (what ships), or from its sources through tsx (--from-source, for smoke runs). */
const service = { fromSource: false };

async function startOurs(access: StoreAccess, root: string): Promise<Started> {
  const port = await freePort();
  const args = ['--root', root, '--host', '127.0.0.1', '--port', String(port), '--log-level', 'warn'];
  if (access.s3) {
    const s3 = access.s3;
    args.push('--s3-endpoint', s3.endpoint, '--s3-region', s3.region, '--s3-access-key-id', s3.accessKeyId, '--s3-secret-access-key', s3.secretAccessKey);
  }
  // Only what the service needs from this environment: no AWS_* or LANCE_NS_* leaks in.
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' };
  // With the flag `npm start` passes (docs/operations.md, Node flags), so that the bench measures what ships.
  const entry = [
    '--no-memory-reducer',
    ...(service.fromSource ? ['--import', import.meta.resolve('tsx'), path.join(repo, 'src/main.ts')] : [path.join(repo, 'dist/main.js')]),
  ];
  const child = spawn(process.execPath, [...entry, ...args], {
    cwd: repo,
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = track(child);
  const stop = () => stopChild(child, exited);
  cleanups.push(stop);
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(`${url}/health/live`, exited, 'this service');
  return { url, stop };
}

/** A running bench_reference.py command: `next()` resolves with the next JSON line it prints. */
interface PythonProcess {
  next: () => Promise<Record<string, unknown>>;
  child: ChildProcess;
  exited: Promise<number | null>;
}

/** Runs bench_reference.py `command` with its configuration; the process may go on after its first answer. */
function startPython(command: string, config: unknown): PythonProcess {
  const child = spawn(PYTHON, [PY_HELPER, command], { cwd: repo, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, RUST_LOG: 'error' } });
  const exited = track(child);
  // The configuration is the first line of its stdin (a catalog of 10,000 tables is too long for argv).
  child.stdin?.write(`${JSON.stringify(config)}\n`);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-4000);
  });
  const answers: Array<Record<string, unknown>> = [];
  const waiting: Array<{ resolve: (answer: Record<string, unknown>) => void; reject: (e: Error) => void }> = [];
  let ended: Error | undefined;
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    let answer: Record<string, unknown>;
    try {
      answer = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return; // not ours
    }
    const waiter = waiting.shift();
    if (waiter) waiter.resolve(answer);
    else answers.push(answer);
  });
  void exited.then((code) => {
    ended = new Error(`bench_reference.py ${command} exited (${code}) without an answer: ${stderr.trim()}`);
    for (const waiter of waiting.splice(0)) waiter.reject(ended);
  });
  const next = (): Promise<Record<string, unknown>> => {
    const answer = answers.shift();
    if (answer) return Promise.resolve(answer);
    if (ended) return Promise.reject(ended);
    return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  };
  return { next, child, exited };
}

async function runPython(command: string, config: unknown): Promise<Record<string, unknown>> {
  checkAborted();
  const { next, child, exited } = startPython(command, config);
  child.stdin?.end();
  const answer = await next();
  const code = await exited;
  if (code !== 0) throw new Error(`bench_reference.py ${command} exited with ${code}`);
  return answer;
}

/** A server this bench started: its URL, and how to stop it before the run ends (cleanup stops it otherwise). */
interface Started {
  url: string;
  stop: () => Promise<void>;
}

/**
 * Starts a server command of bench_reference.py: it prints its port once it listens, and closing
 * its stdin is how it is told to stop.
 */
async function startPythonServer(command: 'serve' | 'null', config: unknown): Promise<Started> {
  const { next, child, exited } = startPython(command, config);
  const stop = async () => {
    child.stdin?.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  cleanups.push(stop);
  const { port } = await next();
  return { url: `http://127.0.0.1:${String(port)}`, stop };
}

/** The null namespace of bench_reference.py on a local directory: the floor of pylance's managed-commit protocol. */
const startNullNamespace = async (root: string, durable: boolean): Promise<string> => (await startPythonServer('null', { root, durable })).url;

function startReference(access: StoreAccess, root: string, extra: Record<string, string> = {}): Promise<Started> {
  const properties: Record<string, string> = { root, ...extra };
  for (const [k, v] of Object.entries(lanceStorageOptions(access))) properties[`storage.${k}`] = v;
  return startPythonServer('serve', { properties });
}

// ---------------------------------------------------------------------------------------------
// Proxies: Content-Length for radosgw, and a stopwatch on the requests a Python client makes.

interface Proxy {
  url: string;
  /** Milliseconds of each finished request whose path matches `timed`, in order. */
  timings: number[];
  /** Every request as `METHOD decoded-url`, while `recording` is set. */
  requests: string[];
  recording: boolean;
}

/**
 * Forwards every request to `target`. With `buffer`, reads the whole body first and sends it with
 * Content-Length (radosgw answers 411 to an upload without one); signed headers pass unchanged.
 */
async function startProxy(target: string, options: { buffer: boolean; timed?: RegExp }): Promise<Proxy> {
  const to = new URL(target);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const proxy: Proxy = { url: '', timings: [], requests: [], recording: false };
  const server = http.createServer((req, res) => {
    const started = now();
    if (proxy.recording) proxy.requests.push(`${req.method ?? ''} ${decodeURIComponent(req.url ?? '')}`);
    const forward = (body?: Buffer) => {
      const headers = { ...req.headers };
      if (body) {
        delete headers['transfer-encoding'];
        headers['content-length'] = String(body.length);
      }
      const upstream = http.request({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers, agent }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        answer.on('end', () => {
          if (options.timed?.test(req.url ?? '')) proxy.timings.push(now() - started);
        });
      });
      upstream.on('error', (e) => {
        if (!res.headersSent) res.writeHead(502);
        res.end(String(e));
      });
      if (body) upstream.end(body);
      else req.pipe(upstream);
    };
    if (!options.buffer) return forward();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => forward(Buffer.concat(chunks)));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    agent.destroy();
  });
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}

// ---------------------------------------------------------------------------------------------
// Load generation.

interface Load {
  /** Operations per second over the whole run. */
  rate: number;
  p50: number;
  p99: number;
}

/**
 * `clients` concurrent callers, each taking the next of `total` operations until none is left. An
 * operation that returns a number has taken that many milliseconds of what is measured (the rest
 * of it is set-up, such as the write before a list after a write).
 */
async function closedLoop(clients: number, total: number, op: (i: number) => Promise<number | undefined>): Promise<Load> {
  const samples: number[] = [];
  let next = 0;
  const started = now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < total) {
        checkAborted();
        const i = next++;
        const t = now();
        const measured = await op(i);
        samples.push(measured ?? now() - t);
      }
    }),
  );
  const elapsed = now() - started;
  samples.sort((a, b) => a - b);
  return { rate: total / (elapsed / 1000), p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

/** The clients a row is measured from: users call the service from Node (LanceDB) and from Python (pylance). */
type Client = 'Node' | 'Python';

/**
 * One request of an iteration, made alike by the Node and the Python client. "{i}" in the path or
 * in a string of the body becomes the iteration's number; an untimed step is set-up.
 */
interface Step {
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  timed?: boolean;
}

const numbered = (text: string, n: number): string => text.replaceAll('{i}', String(n));

/**
 * `count` iterations of `steps` on `base`, one after another, numbered from `first`, from one
 * client: Node (keep-alive node:http from this process) or Python (`requests` in a process of its
 * own, one keep-alive session, as pylance users call the REST API: bench_reference.py calls).
 */
async function clientLoop(client: Client, base: string, steps: Step[], count: number, first = 0): Promise<Load> {
  if (client === 'Python') {
    const answer = await runPython('calls', { url: base, steps, count, first });
    if (typeof answer.error === 'string') throw new UnusableAnswer(`Python client: ${answer.error}`);
    const samples = (Array.isArray(answer.ms) ? answer.ms.filter((x): x is number => typeof x === 'number') : []).sort((a, b) => a - b);
    const total = samples.reduce((sum, x) => sum + x, 0);
    return { rate: samples.length / (total / 1000), p50: percentile(samples, 50), p99: percentile(samples, 99) };
  }
  return closedLoop(1, count, async (i) => {
    let spent = 0;
    for (const step of steps) {
      const body = step.body === undefined ? undefined : (JSON.parse(numbered(JSON.stringify(step.body), first + i)) as unknown);
      const t = now();
      await call(base, step.method, numbered(step.path, first + i), body);
      if (step.timed !== false) spent += now() - t;
    }
    return spent;
  });
}

// ---------------------------------------------------------------------------------------------
// Rows: what each measures and how a figure is shown.

interface Servers {
  /** Base URL per side. */
  url: Record<Side, string>;
  /** Base URL per side for managed-versioning tables (the reference needs an adapter of its own). */
  managedUrl: Record<Side, string>;
  /** The object store both servers use. */
  access: StoreAccess;
}

interface RowSpec {
  label: string;
  /** Sub-figures of the row (e.g. "count rows", "describe detailed"); one per element. */
  parts: string[];
  /** One round for one side: a figure per part. */
  run: (side: Side, round: number) => Promise<Figure[]>;
  /** Printed beside the row (a floor, a difference in what the reference returns). */
  note?: () => string;
  /**
   * The row's request, made once per side before the rounds: where the answers differ in shape,
   * the row says so. It is then made WARM_UP_CALLS more times per side, untimed (see runRow).
   */
  probe?: (side: Side) => Promise<Record<string, unknown>>;
  /** The warm-up of a row without a probe (or whose probe is not its workload), once per side before the rounds. */
  warm?: (side: Side) => Promise<void>;
  /** Print each part as a row of its own, with these labels (the note goes with the last). */
  split?: string[];
  /** The row measures a workload also measured at other catalog sizes (charted together). */
  scale?: Scale;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? Number.NaN) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

function failureText(e: unknown): string {
  if (e instanceof HttpError) {
    let message = e.text;
    try {
      const body = JSON.parse(e.text) as { error?: string; message?: string };
      message = body.error ?? body.message ?? e.text;
    } catch {
      // plain text
    }
    return `HTTP ${e.status}: ${message.replace(/\s+/g, ' ').slice(0, 90)}`;
  }
  return e instanceof Error ? (e.message.split('\n')[0]?.slice(0, 120) ?? '') : String(e);
}

/** Field paths of an answer with a value, two levels deep (`version.manifest_path`); arrays by their first element. */
function fieldPaths(value: unknown, prefix = '', depth = 0): string[] {
  const item = Array.isArray(value) ? value[0] : value;
  if (typeof item !== 'object' || item === null || depth === 2) return [];
  return (
    Object.entries(item as Record<string, unknown>)
      // An empty map or list says as little as a missing field.
      .filter(([, v]) => v !== null && v !== undefined && !(typeof v === 'object' && Object.keys(v).length === 0))
      .flatMap(([k, v]) => [`${prefix}${k}`, ...fieldPaths(v, `${prefix}${k}.`, depth + 1)])
  );
}

/** What the reference's answer to the row's request lacks or adds, field by field. */
async function shapeDifference(spec: RowSpec): Promise<string> {
  if (!spec.probe) return '';
  const [ours, ref] = await Promise.all(SIDES.map((side) => spec.probe?.(side).then(fieldPaths, (e: unknown) => `fails: ${failureText(e)}`)));
  if (typeof ref === 'string') return `reference ${ref}`;
  if (typeof ours === 'string' || !ours || !ref) return '';
  // A field missing whole is named once, not with each of its children.
  const topmost = (fields: string[]) => fields.filter((f) => !fields.some((g) => f.startsWith(`${g}.`)));
  const lacks = topmost(ours.filter((f) => !ref.includes(f)));
  const adds = topmost(ref.filter((f) => !ours.includes(f)));
  const parts = [lacks.length > 0 ? `reference answers without ${lacks.join(', ')}` : '', adds.length > 0 ? `reference adds ${adds.join(', ')}` : ''];
  return parts.filter((p) => p !== '').join('; ');
}

/**
 * Untimed probes per side before a row's rounds: both servers are measured warm, as servers that
 * have been running are (this service's JIT needs a few hundred calls of a route: count_rows
 * answered in 2.7 ms after none, 1.5 ms after 300 and 1.0 ms after 2,000).
 */
const WARM_UP_CALLS = 200;

/**
 * Appends per block in the appends row, where this service, plain Lance and the null namespaces
 * take turns (bench_reference.py interleave). 150 appends per side run one after the other gave
 * plain Lance at 1.4x to 2.4x of this service's rate for one build. In blocks of 30 (0.1-0.3 s
 * each) what the machine does meanwhile slows every target alike; whole runs still differ with
 * its phase (docs/benchmarks/side-by-side-notes-2026-11-24.md lists the runs of one build).
 */
const APPEND_BLOCK = 30;

/** Runs a row's rounds, interleaved: ours, ref, ours, ref, ...; one result, or one per part when the row is split. */
async function runRow(spec: RowSpec, rounds: number): Promise<RowResult[]> {
  const shape = await shapeDifference(spec);
  // Untimed, so a failure here is the rounds' to report.
  for (const side of SIDES) {
    if (spec.warm) await spec.warm(side).catch(() => undefined);
    else
      for (let i = 0; spec.probe && i < WARM_UP_CALLS; i++) {
        checkAborted();
        if (
          !(await spec.probe(side).then(
            () => true,
            () => false,
          ))
        )
          break;
      }
  }
  const figures: Record<Side, Figure[][]> = { ours: [], ref: [] };
  const failed: Partial<Record<Side, string>> = {};
  for (let round = 0; round < rounds; round++) {
    for (const side of SIDES) {
      if (failed[side]) continue;
      checkAborted();
      try {
        figures[side].push(await spec.run(side, round));
      } catch (e) {
        // An answer the row cannot use makes that side's cell say so; anything else stops the run.
        if (!(e instanceof HttpError || e instanceof UnusableAnswer)) throw e;
        failed[side] = failureText(e);
        log(`  ${spec.label}: ${side === 'ours' ? 'this service' : 'the reference'} failed: ${failed[side]}`);
      }
    }
  }
  const outcome = (side: Side): Outcome => {
    const reason = failed[side];
    if (reason) return { unavailable: reason };
    return spec.parts.map((_, p) => {
      const perRound = figures[side].map((f) => f[p]).filter((f): f is Figure => f !== undefined);
      const first = perRound[0];
      const details = perRound.map((f) => f.detail).filter((d) => d !== undefined);
      const detail = details[0] ? { detail: { name: details[0].name, ms: median(details.map((d) => d.ms)) } } : {};
      return { value: median(perRound.map((f) => f.value)), unit: first?.unit ?? 'ms', ...detail };
    });
  };
  const whole: RowResult = {
    label: spec.label,
    parts: spec.parts,
    outcome: { ours: outcome('ours'), ref: outcome('ref') },
    note: [spec.note?.() ?? '', shape].filter((n) => n !== '').join('; '),
    scale: spec.scale,
  };
  const split = spec.split;
  if (!split) return [whole];
  const part = (o: Outcome, p: number): Outcome => ('unavailable' in o ? o : o.slice(p, p + 1));
  return split.map((label, p) => ({
    label,
    parts: [spec.parts[p] ?? label],
    outcome: { ours: part(whole.outcome.ours, p), ref: part(whole.outcome.ref, p) },
    note: p === split.length - 1 ? whole.note : '',
  }));
}

const rate = (load: Load, detail?: Figure['detail']): Figure => ({ value: load.rate, unit: '/s', ...(detail ? { detail } : {}) });
const latency = (load: Load): Figure => ({ value: load.p50, unit: 'ms' });

// ---------------------------------------------------------------------------------------------
// Fixtures.

interface Sizes {
  rounds: number;
  /** Tables in the big namespace (local: the 10k rows). */
  bigTables: number;
  /** Tables in the 1k namespace. */
  midTables: number;
  /** Versions of the Lance-written table whose latest version is asked for. */
  historyVersions: number;
  /** Versions of the table described with detailed metadata. */
  deepVersions: number;
  /** Rows of the data table. */
  dataRows: number;
  creates: number;
  declares: number;
  describes: number;
  listCalls: number;
  /**
   * Appends per side and round of the appends row. On a local disk an append takes a few
   * milliseconds: 30 of them (0.2 s) swung with whatever else the machine did in that moment, and
   * the row with them (1.4-2.4x of plain Lance for one build), so it takes 150 there.
   */
  appends: number;
  lookups: number;
  dataCalls: number;
  /** Page size of the paged listing (radosgw). */
  pageSize: number;
  /** Branches of the table whose branches are listed. */
  branches: number;
  /** Lance-written tables described in turn (0: no such row). */
  manyTables: number;
  /** Namespaces created, then tables declared, per client in a fresh root. */
  freshWrites: number;
  /** Appends per writer in the concurrent-writers row. */
  writerAppends: number;
  /** Small appends (10 rows each) building the table the maintenance row maintains. */
  maintenanceAppends: number;
}

function sizesFor(store: StoreKind, quick: boolean): Sizes {
  if (store === 'local') {
    return quick
      ? {
          rounds: 2,
          bigTables: 1_000,
          midTables: 200,
          historyVersions: 20,
          deepVersions: 500,
          dataRows: 10_000,
          creates: 40,
          declares: 10,
          describes: 300,
          listCalls: 3,
          appends: 5,
          lookups: 20,
          dataCalls: 10,
          pageSize: 100,
          branches: 100,
          manyTables: 50,
          freshWrites: 10,
          writerAppends: 5,
          maintenanceAppends: 50,
        }
      : {
          rounds: 3,
          bigTables: 10_000,
          midTables: 1_000,
          historyVersions: 100,
          deepVersions: 10_000,
          dataRows: 100_000,
          creates: 200,
          declares: 50,
          describes: 2_000,
          listCalls: 10,
          appends: 150,
          lookups: 100,
          dataCalls: 30,
          pageSize: 100,
          branches: 1000,
          manyTables: 1_000,
          freshWrites: 50,
          writerAppends: 50,
          maintenanceAppends: 1_000,
        };
  }
  return quick
    ? {
        rounds: 2,
        bigTables: 0,
        midTables: 100,
        historyVersions: 20,
        deepVersions: 0,
        dataRows: 10_000,
        creates: 16,
        declares: 16,
        describes: 100,
        listCalls: 2,
        appends: 4,
        lookups: 16,
        dataCalls: 5,
        pageSize: 25,
        branches: 25,
        manyTables: 0,
        freshWrites: 5,
        writerAppends: 3,
        maintenanceAppends: 20,
      }
    : {
        rounds: 3,
        bigTables: 0,
        midTables: 1_000,
        historyVersions: 200,
        deepVersions: 0,
        dataRows: 100_000,
        creates: 80,
        declares: 80,
        describes: 500,
        listCalls: 40,
        appends: 15,
        lookups: 50,
        dataCalls: 15,
        pageSize: 100,
        branches: 200,
        manyTables: 0,
        freshWrites: 20,
        writerAppends: 10,
        maintenanceAppends: 1_000,
      };
}

const tableName = (i: number): string => `t${String(i).padStart(6, '0')}`;

/** Roots of both servers under the store's base; made empty. */
async function makeRoots(access: StoreAccess): Promise<Record<Side, string>> {
  if (access.kind === 'local') {
    const dir = await mkdtemp(path.join(access.base, 'lance-ns-bench-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 }));
    const roots = { ours: path.join(dir, 'ours'), ref: path.join(dir, 'ref') };
    await mkdir(roots.ours);
    await mkdir(roots.ref);
    return roots;
  }
  const run = randomBytes(4).toString('hex');
  return { ours: `${access.base}/ours-${run}`, ref: `${access.base}/ref-${run}` };
}

/** Writes a small object under a root, straight to the store. */
async function putObject(access: StoreAccess, root: string, key: string, body: string, s3: S3Client | undefined): Promise<void> {
  if (access.kind === 'local') {
    const file = path.join(root, key);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, body);
    return;
  }
  if (!s3) throw new Error('putObject on S3 without a client');
  const { bucket, prefix } = splitS3(root);
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}/${key}`, Body: body, ContentLength: Buffer.byteLength(body) }));
}

function splitS3(uri: string): { bucket: string; prefix: string } {
  const rest = uri.replace(/^s3:\/\//, '');
  const slash = rest.indexOf('/');
  return { bucket: rest.slice(0, slash), prefix: rest.slice(slash + 1) };
}

/** `names.length` declared tables in `namespace` on both servers. */
async function declareMany(servers: Servers, roots: Record<Side, string>, namespace: string, names: string[], s3: S3Client | undefined): Promise<void> {
  const started = now();
  const limit = pLimit(16);
  await Promise.all(names.map((name) => limit(() => call(servers.url.ours, 'POST', `/v1/table/${idPath(namespace, name)}/declare`, {}))));
  log(`  this service: ${count(names.length)} tables declared in ${namespace} over HTTP in ${secs(now() - started)}`);
  const refStarted = now();
  const rows = names.map((name) => ({
    object_id: `${namespace}$${name}`,
    object_type: 'table',
    location: `${randomBytes(4).toString('hex')}_${namespace}$${name}`,
    metadata: null,
  }));
  await runPython('fill', { root: roots.ref, storage_options: lanceStorageOptions(servers.access), rows });
  const markers = pLimit(servers.access.kind === 'local' ? 64 : 32);
  await Promise.all(rows.map((r) => markers(() => putObject(servers.access, roots.ref, `${r.location}/.lance-reserved`, 'reserved', s3))));
  log(`  reference: the same ${count(names.length)} tables written to its __manifest, with markers, in ${secs(now() - refStarted)}`);
}

interface Written {
  uri: Record<Side, string>;
}

/** A table written through each server by pylance: `rows` rows, then `appends` appends of one row each. */
async function writeThrough(servers: Servers, table: string[], rows: number, appends: number, managed = false): Promise<Written> {
  const uri = { ours: '', ref: '' };
  for (const side of SIDES) {
    const started = now();
    const answer = await runPython('write', {
      url: managed ? servers.managedUrl[side] : servers.url[side],
      table_id: table,
      rows,
      create: true,
      appends,
      storage_options: lanceStorageOptions(servers.access),
    });
    uri[side] = String(answer.uri);
    log(
      `  ${side === 'ours' ? 'this service' : 'reference'}: ${table.join('$')} written by pylance (${count(rows)} rows, ${appends + 1} versions) in ${secs(now() - started)}`,
    );
  }
  return { uri };
}

// ---------------------------------------------------------------------------------------------
// The rows of each table.

interface Bench {
  servers: Servers;
  sizes: Sizes;
  roots: Record<Side, string>;
  s3: S3Client | undefined;
  only: string | undefined;
  /** Proxy in front of each server's managed URL, timing version/create. */
  commitTimer: Record<Side, Proxy>;
  /** The Content-Length proxy in front of radosgw, which also counts the store calls a request makes. */
  s3Proxy: Proxy | undefined;
}

/**
 * The object-store calls one `op` makes on `side`'s root, averaged over `times` runs, as
 * "LIST 1, GET 2" (radosgw only: every call passes the proxy, which sees whose root it is for).
 */
async function storeCalls(bench: Bench, side: Side, times: number, op: () => Promise<unknown>): Promise<string> {
  const proxy = bench.s3Proxy;
  if (!proxy) return '';
  const root = splitS3(bench.roots[side]).prefix;
  proxy.requests.length = 0;
  proxy.recording = true;
  try {
    for (let i = 0; i < times; i++) await op();
  } finally {
    proxy.recording = false;
  }
  const kinds = new Map<string, number>();
  for (const line of proxy.requests) {
    if (!line.includes(`/${root}/`) && !line.includes(`prefix=${root}/`)) continue;
    const kind = /[?&]list-type=2|[?&]prefix=/.test(line) ? 'LIST' : (line.split(' ')[0] ?? '?');
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
  return [...kinds.entries()].map(([kind, n]) => `${kind} ${+(n / times).toFixed(1)}`).join(', ') || 'none';
}

const wants = (bench: Bench, label: string): boolean => bench.only === undefined || label.toLowerCase().includes(bench.only.toLowerCase());

async function listAll(base: string, namespace: string, pageSize?: number): Promise<number> {
  let total = 0;
  let token: string | undefined;
  for (;;) {
    const query = new URLSearchParams();
    if (pageSize !== undefined) query.set('limit', String(pageSize));
    if (token) query.set('page_token', token);
    const q = query.toString();
    const answer = await call(base, 'GET', `/v1/namespace/${idPath(namespace)}/table/list${q ? `?${q}` : ''}`);
    total += Array.isArray(answer.tables) ? answer.tables.length : 0;
    token = typeof answer.page_token === 'string' && answer.page_token !== '' ? answer.page_token : undefined;
    if (!token || pageSize === undefined) return total;
  }
}

/** A list row: `calls` listings of `namespace` (one call, or pages of `pageSize`), p50. */
function listRow(bench: Bench, namespace: string, tables: number, calls: number, pageSize?: number): (side: Side) => Promise<Figure[]> {
  return async (side) => {
    const seen = await listAll(bench.servers.url[side], namespace, pageSize); // warm-up and check
    if (seen !== tables) throw new UnusableAnswer(`listed ${seen} of ${tables} tables`);
    return [latency(await closedLoop(1, calls, () => listAll(bench.servers.url[side], namespace, pageSize).then(() => undefined)))];
  };
}

/** Lance-written table bench$history, as many versions as the sizes say. */
async function historyFixture(bench: Bench): Promise<void> {
  log(`fixture: bench$history, ${bench.sizes.historyVersions} versions written by pylance`);
  await writeThrough(bench.servers, ['bench', 'history'], 100, bench.sizes.historyVersions - 1);
}

/** DescribeTable on bench$history, `clients` callers in parallel: rate, with the p99. */
function describeRow(bench: Bench, label: string, clients: number): RowSpec {
  const describe = (side: Side) => call(bench.servers.url[side], 'POST', `/v1/table/${idPath('bench', 'history')}/describe`, {});
  const calls: Record<Side, string> = { ours: '?', ref: '?' };
  return {
    label,
    parts: ['describe'],
    run: async (side, round) => {
      const load = await closedLoop(clients, bench.sizes.describes, () => describe(side).then(() => undefined));
      if (round === 0) calls[side] = await storeCalls(bench, side, 5, () => describe(side));
      return [rate(load, { name: 'p99', ms: load.p99 })];
    },
    probe: describe,
    ...(bench.s3Proxy ? { note: () => `store calls per describe: this service ${calls.ours}; reference ${calls.ref}` } : {}),
  };
}

/**
 * Managed appends through pylance (one writer) on each side, to managed$writes (made here); also
 * times version/create at the proxy, and plain Lance appends to `floorUri` (made here) as the floor.
 * With `nullRoot` (a local directory) the same appends also go through the null namespace of
 * bench_reference.py, which does nothing but link the staged manifest: what the protocol itself
 * costs pylance, whatever the server; and through a second one that also fsyncs the staged file
 * and the directory it links it into: what keeping each commit costs on this disk.
 */
async function appendsRow(bench: Bench, label: string, floorUri: string, nullRoot?: string): Promise<RowSpec> {
  const { servers, sizes } = bench;
  const table = ['managed', 'writes'];
  // The version/create calls are timed on a table of their own: Lance's client reads and rewrites
  // every fragment of the manifest at each append (about 2 µs a fragment on this machine), so
  // managed$writes must have as many appends behind it as plain Lance's and the null namespaces'
  // tables, which only the interleaved appends and the warm-up reach.
  const timedTable = ['managed', 'timed'];
  log('fixture: managed$writes and managed$timed, created by pylance through each server with managed versioning');
  await writeThrough(servers, table, 10, 0, true);
  await writeThrough(servers, timedTable, 10, 0, true);
  await runPython('write', { uri: floorUri, rows: 10, create: true, appends: 0, storage_options: lanceStorageOptions(servers.access) });
  // The null namespace twice: as it is, and fsyncing what it links (what keeping commits costs).
  const nullUrls = nullRoot === undefined ? [] : [await startNullNamespace(nullRoot, false), await startNullNamespace(`${nullRoot}-durable`, true)];
  for (const url of nullUrls) await runPython('write', { url, table_id: ['writes'], rows: 10, create: true, appends: 0 });
  const floor: number[] = [];
  const protocolFloor: number[][] = nullUrls.map(() => []);
  /** Plain Lance's rate over this service's, block by block (see below). */
  const paired: number[] = [];
  const perSecond = (ms: number[]) => ms.length / (ms.reduce((sum, x) => sum + x, 0) / 1000);
  let firstId = 1_000_000;
  /** Moves the id counter on by `count` and returns it: each write's rows start past the previous write's. */
  const nextIds = (count: number): number => {
    firstId += count;
    return firstId;
  };
  const numbers = (value: unknown): number[] => (Array.isArray(value) ? value.filter((x): x is number => typeof x === 'number') : []);
  const appendsOf = (answer: Record<string, unknown>): number[] => numbers(answer.append_ms);
  const byTarget = (answer: Record<string, unknown>, field: string, name: string): number[] => {
    const all = answer[field];
    return typeof all === 'object' && all !== null ? numbers((all as Record<string, unknown>)[name]) : [];
  };
  const storage_options = lanceStorageOptions(servers.access);
  const appendThrough = (url: string, appends = sizes.appends, table_id = table) =>
    runPython('write', { url, table_id, rows: 0, first_id: nextIds(10_000), appends, storage_options });
  const plainAppends = (appends = sizes.appends) => runPython('write', { uri: floorUri, rows: 0, first_id: nextIds(10_000), appends, storage_options });
  const nullAppends = (url: string, appends = sizes.appends) => runPython('write', { url, table_id: ['writes'], rows: 0, first_id: nextIds(10_000), appends });
  // This service's appends and the floors' in one process, in blocks taken in turn: run one after
  // the other, 150 appends each, the ratio to plain Lance swung from 1.4x to 2.4x with whatever else
  // the machine did meanwhile (see APPEND_BLOCK).
  const targets = [
    { name: 'ours', url: servers.managedUrl.ours, table_id: table, storage_options },
    { name: 'plain', uri: floorUri, storage_options },
    ...nullUrls.map((url, i) => ({ name: `null${i}`, url, table_id: ['writes'] })),
  ];
  return {
    label,
    parts: ['raw create_table_version p50', 'appends'],
    split: [`raw create_table_version (p50; the version/create calls of appends like those below, timed at a proxy)`, label],
    // As many untimed appends as other rows make warm-up calls, through each server and each floor.
    warm: async (side) => {
      await appendThrough(servers.managedUrl[side], WARM_UP_CALLS);
      if (side !== 'ours') return;
      await plainAppends(WARM_UP_CALLS);
      for (const url of nullUrls) await nullAppends(url, WARM_UP_CALLS);
    },
    run: async (side) => {
      // The appends talk to the server directly, as the null namespace's and plain Lance's do: the
      // timing proxy's hop costs each of an append's three requests about a millisecond. The
      // version/create calls are timed in a second run, through the proxy, on managed$timed.
      let appends: number[];
      if (side === 'ours') {
        const block = Math.min(APPEND_BLOCK, sizes.appends);
        const answer = await runPython('interleave', { targets, appends: sizes.appends, block, first_id: nextIds(100_000) });
        appends = byTarget(answer, 'append_ms', 'ours');
        floor.push(perSecond(byTarget(answer, 'append_ms', 'plain')));
        for (const [i, rates] of protocolFloor.entries()) rates.push(perSecond(byTarget(answer, 'append_ms', `null${i}`)));
        // Blocks of as many appends each: plain Lance's rate over this service's is the inverse ratio of their times.
        const plainBlocks = byTarget(answer, 'block_ms', 'plain');
        for (const [b, ms] of byTarget(answer, 'block_ms', 'ours').entries()) {
          const plainMs = plainBlocks[b];
          if (plainMs !== undefined && plainMs > 0) paired.push(ms / plainMs);
        }
      } else {
        appends = appendsOf(await appendThrough(servers.managedUrl[side]));
      }
      const total = appends.reduce((s, x) => s + x, 0);
      const timer = bench.commitTimer[side];
      timer.timings.length = 0;
      await appendThrough(timer.url, sizes.appends, timedTable);
      if (timer.timings.length === 0) throw new UnusableAnswer('pylance made no create_table_version call: the table is not managed');
      const commits = [...timer.timings].sort((a, b) => a - b);
      const appendSorted = [...appends].sort((a, b) => a - b);
      return [
        { value: percentile(commits, 50), unit: 'ms' },
        { value: appends.length / (total / 1000), unit: '/s', detail: { name: 'p50', ms: percentile(appendSorted, 50) } },
      ];
    },
    note: () =>
      `plain Lance (no namespace): ${median(floor).toFixed(0)}/s, ${median(paired).toFixed(2)}× this service's rate (median of ${paired.length} blocks of ${Math.min(APPEND_BLOCK, sizes.appends)} appends each, taken in turn)` +
      (protocolFloor.length > 0
        ? `; through a namespace that does nothing but link the staged manifest (no checks): ${median(protocolFloor[0] ?? []).toFixed(0)}/s without fsync, ${median(protocolFloor[1] ?? []).toFixed(0)}/s fsyncing the file and its directory`
        : ''),
  };
}

/**
 * The branch rows, on Lance-written tables forked through each server's CreateTableBranch:
 * ListTableBranches of bench$branched, forked `sizes.branches` times (the reference's forks run
 * one at a time: Lance's create_branch of concurrent callers on one dataset may conflict), in one
 * call; and CreateTableBranch of bench$forks, one client, its branches growing by the round.
 */
async function branchRows(bench: Bench, needs: (label: string) => boolean): Promise<RowSpec[]> {
  const { servers, sizes } = bench;
  const rows: RowSpec[] = [];
  const n = sizes.branches;
  const routeOf = (table: string) => `/v1/table/${idPath('bench', table)}/branches`;
  const listLabel = `list branches, ${count(n)} branches, one call (Node), warm`;
  if (needs(listLabel)) {
    log(`fixture: bench$branched, forked ${count(n)} times on each side`);
    await writeThrough(servers, ['bench', 'branched'], 100, 0);
    for (const side of SIDES) {
      const started = now();
      const parallel = side === 'ours' ? 4 : 1;
      for (let i = 0; i < n; i += parallel) {
        await Promise.all(
          Array.from({ length: Math.min(parallel, n - i) }, (_, j) =>
            call(servers.url[side], 'POST', `${routeOf('branched')}/create`, { name: `b${String(i + j).padStart(5, '0')}` }),
          ),
        );
      }
      log(`  ${side === 'ours' ? 'this service' : 'reference'}: ${count(n)} branches forked in ${secs(now() - started)}`);
    }
    const list = (side: Side) => call(servers.url[side], 'POST', `${routeOf('branched')}/list`, { limit: n });
    rows.push({
      label: listLabel,
      parts: ['list'],
      run: async (side) => {
        const listed = Object.keys(((await list(side)).branches as Record<string, unknown> | undefined) ?? {}).length;
        if (listed !== n) throw new UnusableAnswer(`listed ${listed} of ${n} branches`);
        return [latency(await closedLoop(1, sizes.listCalls, () => list(side).then(() => undefined)))];
      },
      probe: list,
    });
  }
  const createLabel = 'create branch of a Lance-written table, 1 client (Node), no warm-up';
  if (needs(createLabel)) {
    log('fixture: bench$forks');
    await writeThrough(servers, ['bench', 'forks'], 100, 0);
    let round = 0;
    rows.push({
      label: createLabel,
      parts: ['create'],
      run: async (side) => {
        const prefix = `r${round++}`;
        const fork = (i: number) => call(servers.url[side], 'POST', `${routeOf('forks')}/create`, { name: `${prefix}_${i}` }).then(() => undefined);
        return [rate(await closedLoop(1, sizes.declares, fork))];
      },
    });
  }
  return rows;
}

const CLIENTS: Client[] = ['Node', 'Python'];
/** `$`, the separator of a multi-level id, as it appears in a path ("{i}" must stay unencoded for the clients to fill in). */
const SEP = encodeURIComponent('$');

/** A root of its own for one measurement, empty; removed with the run's roots. */
let freshRoots = 0;
async function freshRoot(bench: Bench, side: Side): Promise<string> {
  const name = `fresh-${freshRoots++}-${side}`;
  if (bench.servers.access.kind === 'local') {
    const dir = path.join(path.dirname(bench.roots.ours), name);
    await mkdir(dir);
    return dir;
  }
  return `${path.posix.dirname(bench.roots.ours)}/${name}-${randomBytes(3).toString('hex')}`;
}

/**
 * Single-client writes into an empty catalog: per round, side and client, a fresh root with a server
 * started on it (this service or the reference, no warm-up: what the first writes of a new catalog
 * meet), `n` root-level namespaces created one after another, then `n` tables declared in the first.
 * With `warm`, the server first takes WARM_UP_CALLS untimed writes of the same kinds (half
 * namespaces `w<i>`, half tables in `w0`, from Node), so that the row tells a cold server's first
 * writes (JIT, first store calls) from the writes themselves.
 */
function emptyCatalogRow(bench: Bench, label: string, warm = false): RowSpec {
  const n = bench.sizes.freshWrites;
  return {
    label,
    parts: CLIENTS.flatMap((client) => [`create namespace, ${client}`, `declare table, ${client}`]),
    run: async (side) => {
      const figures: Figure[] = [];
      for (const client of CLIENTS) {
        const root = await freshRoot(bench, side);
        const server = side === 'ours' ? await startOurs(bench.servers.access, root) : await startReference(bench.servers.access, root);
        try {
          if (warm) {
            await clientLoop('Node', server.url, [{ method: 'POST', path: '/v1/namespace/w{i}/create', body: {} }], WARM_UP_CALLS / 2);
            await clientLoop('Node', server.url, [{ method: 'POST', path: `/v1/table/w0${SEP}t{i}/declare`, body: {} }], WARM_UP_CALLS / 2);
          }
          const creates = await clientLoop(client, server.url, [{ method: 'POST', path: '/v1/namespace/n{i}/create', body: {} }], n);
          const declares = await clientLoop(client, server.url, [{ method: 'POST', path: `/v1/table/n0${SEP}t{i}/declare`, body: {} }], n);
          figures.push(rate(creates), rate(declares));
        } finally {
          await server.stop();
        }
      }
      return figures;
    },
  };
}

/** The single-client rows of a new catalog: on a cold server, and on a server warmed by writes of the same kinds. */
function emptyCatalogRows(bench: Bench): RowSpec[] {
  const n = count(bench.sizes.freshWrites);
  return [
    emptyCatalogRow(
      bench,
      `single-client writes into an empty catalog (a fresh root and server per round and client, no warm-up; ${n} root namespaces, then ${n} tables in one)`,
    ),
    emptyCatalogRow(
      bench,
      `single-client writes into a new catalog on a warm server (a fresh root and server per round and client, ${WARM_UP_CALLS} untimed writes first: ${WARM_UP_CALLS / 2} namespaces, ${WARM_UP_CALLS / 2} tables in one; then ${n} root namespaces, then ${n} tables in one)`,
      true,
    ),
  ];
}

/** Catalog writes from `clients` Node callers in `namespace`: child namespaces created, then tables declared. */
function catalogWritesRow(bench: Bench, label: string, namespace: string, clients: number, creates: number, declares: number): RowSpec {
  const writes = async (base: string, batch: string, creates: number, declares: number): Promise<[Load, Load]> => [
    await closedLoop(clients, creates, (i) => call(base, 'POST', `/v1/namespace/${idPath(namespace, `n${batch}_${i}`)}/create`, {}).then(() => undefined)),
    await closedLoop(clients, declares, (i) => call(base, 'POST', `/v1/table/${idPath(namespace, `d${batch}_${i}`)}/declare`, {}).then(() => undefined)),
  ];
  let batch = 0;
  return {
    label,
    parts: ['create namespace', 'declare table'],
    warm: async (side) => void (await writes(bench.servers.url[side], 'warm', WARM_UP_CALLS / 2, WARM_UP_CALLS / 2)),
    run: async (side) => (await writes(bench.servers.url[side], String(batch++), creates, declares)).map((load) => rate(load)),
  };
}

/** ListTables of `namespace` (`tables` tables) in one call, p50 from each client; the count is checked first. */
function listTablesRow(bench: Bench, label: string, namespace: string, tables: number, calls: number): RowSpec {
  const route = `/v1/namespace/${idPath(namespace)}/table/list`;
  return {
    label,
    parts: CLIENTS,
    run: async (side) => {
      const base = bench.servers.url[side];
      const seen = await listAll(base, namespace);
      if (seen !== tables) throw new UnusableAnswer(`listed ${seen} of ${tables} tables`);
      const figures: Figure[] = [];
      for (const client of CLIENTS) figures.push(latency(await clientLoop(client, base, [{ method: 'GET', path: route }], calls)));
      return figures;
    },
    probe: (side) => call(bench.servers.url[side], 'GET', route),
    scale: { series: 'list tables, one call', n: tables },
  };
}

/**
 * ListTables right after a write: each call follows a declare in the same namespace (untimed), as
 * a Spark `CREATE TABLE` is followed by lookups; one call from each client, and the first page of
 * `pageSize` from Node.
 */
function listAfterWriteRow(bench: Bench, label: string, namespace: string, calls: number, pageSize: number): RowSpec {
  const route = `/v1/namespace/${idPath(namespace)}/table/list`;
  let batch = 0;
  const afterDeclare = (prefix: string, list: string): Step[] => [
    { method: 'POST', path: `/v1/table/${idPath(namespace)}${SEP}${prefix}_{i}/declare`, body: {}, timed: false },
    { method: 'GET', path: list },
  ];
  // radosgw: the store calls of one list right after a declare (the declare itself not counted; the third such pair's list).
  const listCalls: Record<Side, string> = { ours: '?', ref: '?' };
  const countCalls = async (side: Side) => {
    const base = bench.servers.url[side];
    const b = batch++;
    let counted = '?';
    for (let i = 0; i < 3; i++) {
      await call(base, 'POST', `/v1/table/${idPath(namespace, `wc${b}_${i}`)}/declare`, {});
      counted = await storeCalls(bench, side, 1, () => call(base, 'GET', route));
    }
    return counted;
  };
  return {
    label,
    parts: ['one call, Node', 'one call, Python', `first page of ${pageSize}, Node`],
    probe: (side) => call(bench.servers.url[side], 'GET', route),
    run: async (side, round) => {
      const base = bench.servers.url[side];
      const b = batch++;
      const figures = [
        latency(await clientLoop('Node', base, afterDeclare(`wn${b}`, route), calls)),
        latency(await clientLoop('Python', base, afterDeclare(`wp${b}`, route), calls)),
        latency(await clientLoop('Node', base, afterDeclare(`wq${b}`, `${route}?limit=${pageSize}`), calls)),
      ];
      if (round === 0 && bench.s3Proxy) listCalls[side] = await countCalls(side);
      return figures;
    },
    ...(bench.s3Proxy ? { note: () => `store calls per list after a declare: this service ${listCalls.ours}; reference ${listCalls.ref}` } : {}),
  };
}

/** Lance-written tables `namespace$t000000`...: `n` of them on each side, written by pylance through each server. */
async function manyTablesFixture(bench: Bench, namespace: string, n: number): Promise<void> {
  log(`fixture: ${count(n)} Lance-written tables in ${namespace}, 100 rows each`);
  for (const side of SIDES) {
    const started = now();
    await call(bench.servers.url[side], 'POST', `/v1/namespace/${idPath(namespace)}/create`, {});
    const table_ids = Array.from({ length: n }, (_, i) => [namespace, tableName(i)]);
    await runPython('tables', { url: bench.servers.url[side], table_ids, rows: 100, threads: 4, storage_options: lanceStorageOptions(bench.servers.access) });
    log(`  ${side === 'ours' ? 'this service' : 'reference'}: ${count(n)} tables written in ${secs(now() - started)}`);
  }
}

/** DescribeTable from `clients` Node callers across the `n` tables of manyTablesFixture, in turn, with no warm-up calls. */
function describeManyRow(bench: Bench, label: string, namespace: string, n: number, clients: number): RowSpec {
  return {
    label,
    parts: ['describe'],
    run: async (side) => {
      const base = bench.servers.url[side];
      const load = await closedLoop(clients, bench.sizes.describes, (i) =>
        call(base, 'POST', `/v1/table/${idPath(namespace, tableName(i % n))}/describe`, {}).then(() => undefined),
      );
      return [rate(load, { name: 'p99', ms: load.p99 })];
    },
    // No warm-up: a describe across many tables is mostly of a table not described lately.
    warm: async () => undefined,
  };
}

/** The latest version of `table` (a Lance-written table of `versions` versions): describe_table_version and list_table_versions, from each client. */
function latestVersionRow(bench: Bench, label: string, table: string[], versions: number, clients: Client[]): RowSpec {
  const route = `/v1/table/${idPath(...table)}/version`;
  const describe: Step = { method: 'POST', path: `${route}/describe`, body: {} };
  const list: Step = { method: 'POST', path: `${route}/list`, body: { descending: true, limit: 1 } };
  return {
    label,
    parts: [...clients.map((c) => `describe_table_version (latest), ${c}`), ...clients.map((c) => `list_table_versions (descending, limit 1), ${c}`)],
    run: async (side) => {
      const base = bench.servers.url[side];
      const described = ((await call(base, 'POST', `${route}/describe`, {})).version as { version?: unknown } | undefined)?.version;
      if (described !== versions) throw new UnusableAnswer(`describe_table_version without a version answered ${String(described)}`);
      const figures: Figure[] = [];
      for (const step of [describe, list]) for (const client of clients) figures.push(latency(await clientLoop(client, base, [step], bench.sizes.lookups)));
      return figures;
    },
    probe: async (side) => ({
      describe: await call(bench.servers.url[side], 'POST', `${route}/describe`, {}),
      list: await call(bench.servers.url[side], 'POST', `${route}/list`, { descending: true, limit: 1 }),
    }),
  };
}

/** Why a Python writer failed: the last line it wrote to stderr (the exception), not the whole traceback. */
function writerFailure(e: unknown): UnusableAnswer {
  const lines = (e instanceof Error ? e.message : String(e)).split('\n').filter((l) => l.trim() !== '');
  return new UnusableAnswer(`pylance writer: ${(lines.at(-1) ?? '').trim().slice(0, 160)}`);
}

/**
 * A pylance process per target appending `appends` one-row batches to it (through a namespace when
 * the target has `url`, else straight to its `uri`), started together once all are connected:
 * appends/s over the span from the start to the last one's end.
 */
async function concurrentAppends(appends: number, targets: Array<Record<string, unknown>>, firstId: number): Promise<number> {
  const procs = targets.map((target, w) => startPython('write', { ...target, rows: 0, first_id: firstId + w * appends, appends, barrier: true }));
  try {
    await Promise.all(procs.map((p) => p.next()));
    for (const p of procs) p.child.stdin?.end('go\n');
    const answers = await Promise.all(procs.map((p) => p.next()));
    const started = Math.min(...answers.map((a) => Number(a.started)));
    const ended = Math.max(...answers.map((a) => Number(a.ended)));
    return (targets.length * appends) / (ended - started);
  } catch (e) {
    throw writerFailure(e);
  } finally {
    for (const p of procs) p.child.stdin?.end();
    await Promise.all(procs.map((p) => p.exited));
  }
}

/**
 * Managed appends from `writers` pylance processes at once, each to a managed-versioning table of
 * its own, on each side; and (in this service's rounds, just before it) as many processes appending
 * to plain Lance datasets of their own under `floorDir` (a directory or an s3:// prefix), without
 * any namespace: the floor.
 */
async function concurrentAppendsRow(bench: Bench, label: string, writers: number, floorDir: string): Promise<RowSpec> {
  const { servers, sizes } = bench;
  const storage_options = lanceStorageOptions(servers.access);
  const tables = Array.from({ length: writers }, (_, w) => ['managed', `writer${w}`]);
  const floorUris = tables.map((_, w) => `${floorDir}/writer${w}.lance`);
  log(
    `fixture: ${writers} tables managed$writer<n>, created by pylance through each server with managed versioning, and ${writers} plain Lance datasets in ${floorDir}`,
  );
  for (const table of tables) await writeThrough(servers, table, 10, 0, true);
  for (const uri of floorUris) await runPython('write', { uri, rows: 10, create: true, appends: 0, storage_options });
  const managed = (side: Side) => tables.map((table_id) => ({ url: servers.managedUrl[side], table_id, storage_options }));
  const plain = floorUris.map((uri) => ({ uri, storage_options }));
  const floor: number[] = [];
  const ours: number[] = [];
  let firstId = 2_000_000;
  const next = () => {
    firstId += 100_000;
    return firstId;
  };
  return {
    label,
    parts: ['appends'],
    // As many untimed appends in all as other rows make warm-up calls.
    warm: async (side) => {
      await concurrentAppends(Math.ceil(WARM_UP_CALLS / writers), managed(side), next()).catch(() => undefined);
      if (side === 'ours') await concurrentAppends(Math.ceil(WARM_UP_CALLS / writers), plain, next()).catch(() => undefined);
    },
    run: async (side) => {
      if (side === 'ours') floor.push(await concurrentAppends(sizes.writerAppends, plain, next()));
      const rate = await concurrentAppends(sizes.writerAppends, managed(side), next());
      if (side === 'ours') ours.push(rate);
      return [{ value: rate, unit: '/s' }];
    },
    note: () =>
      `plain Lance (${writers} pylance processes appending to a directory each, no namespace): ${median(floor).toFixed(0)}/s, ` +
      `${(median(floor) / median(ours)).toFixed(2)}× this service's rate (medians over the rounds; plain Lance just before this service in each)`,
  };
}

/**
 * An update and a delete of one row by id on `table` (the data table), from each client, each call on
 * a row of its own; the note has the same calls on a warm `@lancedb/lancedb` handle of a plain Lance
 * dataset of as many rows (no HTTP, no catalog), and this service's (Node) distance from it.
 */
async function updateDeleteRow(bench: Bench, label: string, table: string[], floorUri: string): Promise<RowSpec> {
  const { servers, sizes } = bench;
  const storage_options = lanceStorageOptions(servers.access);
  log(`fixture: ${floorUri}, ${count(sizes.dataRows)} rows written by pylance without a namespace (the warm engine handle's table)`);
  await runPython('write', { uri: floorUri, rows: sizes.dataRows, create: true, appends: 0, storage_options });
  const direct = await openDirect(floorUri, storage_options);
  const route = `/v1/table/${idPath(...table)}`;
  const update: Step = { method: 'POST', path: `${route}/update`, body: { predicate: 'id = {i}', updates: [['value', 'value * 2 + 1']] } };
  const remove: Step = { method: 'POST', path: `${route}/delete`, body: { predicate: 'id = {i}' } };
  // Each call's row is one no call has touched: updates count up from 0, deletes from half the table.
  const next = { update: 0, delete: Math.floor(sizes.dataRows / 2) };
  const take = (kind: 'update' | 'delete', calls: number) => {
    const first = next[kind];
    next[kind] += calls;
    return first;
  };
  const floors = { update: [] as number[], delete: [] as number[] };
  // Every one-row write leaves the table a fragment or a deletion file more, and the next write
  // slower (no compaction here): the handle's table gets exactly the writes this service's gets, in
  // the same order, so that each timed loop meets a table of the same age as the one it is set
  // against (the Node client's); the Python client's loops are matched untimed.
  const engine = async (kind: 'update' | 'delete', calls: number, timed: boolean) => {
    const first = take(kind, calls);
    const t = direct.table;
    const load = await closedLoop(1, calls, (i) =>
      (kind === 'update' ? t.update({ where: `id = ${first + i}`, valuesSql: { value: 'value * 2 + 1' } }) : t.delete(`id = ${first + i}`)).then(
        () => undefined,
      ),
    );
    if (timed) floors[kind].push(load.p50);
  };
  const ours: Record<'update' | 'delete', number[]> = { update: [], delete: [] };
  return {
    label,
    parts: [...CLIENTS.map((c) => `update, ${c}`), ...CLIENTS.map((c) => `delete, ${c}`)],
    warm: async (side) => {
      await clientLoop('Node', servers.url[side], [update], WARM_UP_CALLS / 4, take('update', WARM_UP_CALLS / 4));
      await clientLoop('Node', servers.url[side], [remove], WARM_UP_CALLS / 4, take('delete', WARM_UP_CALLS / 4));
      if (side === 'ours') for (const kind of ['update', 'delete'] as const) await engine(kind, WARM_UP_CALLS / 4, false);
    },
    run: async (side) => {
      const base = servers.url[side];
      const figures: Figure[] = [];
      for (const [kind, step] of [
        ['update', update],
        ['delete', remove],
      ] as const) {
        for (const client of CLIENTS) {
          const load = await clientLoop(client, base, [step], sizes.dataCalls, take(kind, sizes.dataCalls));
          figures.push(latency(load));
          if (side === 'ours' && client === 'Node') ours[kind].push(load.p50);
          if (side === 'ours') await engine(kind, sizes.dataCalls, client === 'Node');
        }
      }
      return figures;
    },
    note: () => {
      const gap = (kind: 'update' | 'delete') => median(ours[kind]) - median(floors[kind]);
      const sign = (x: number) => `${x >= 0 ? '+' : ''}${ms(x)}`;
      return (
        `warm engine handle (no HTTP, no catalog): update ${ms(median(floors.update))} ms, delete ${ms(median(floors.delete))} ms; ` +
        `this service (Node) minus the handle: update ${sign(gap('update'))} ms, delete ${sign(gap('delete'))} ms`
      );
    },
  };
}

async function localRows(bench: Bench): Promise<RowSpec[]> {
  const { servers, sizes, roots, s3 } = bench;
  const rows: RowSpec[] = [];
  const big = sizes.bigTables;
  const mid = sizes.midTables;
  const many = sizes.manyTables;
  const needs = (label: string) => wants(bench, label);
  const floorDir = path.dirname(roots.ours);

  rows.push(...emptyCatalogRows(bench));

  const listMid = `list tables, ${count(mid)} declared tables present, one call, warm`;
  const listBig = `list tables, ${count(big)} declared tables present, one call, warm`;
  const afterWrite = `list tables right after a declare (untimed) in the same namespace, ${count(big)}+ declared tables present, warm`;
  const writes8 = `catalog writes, 8 clients (Node), in a namespace of ${count(big)}+ declared tables, warm`;
  if (needs(listBig) || needs(afterWrite) || needs(writes8)) {
    log(`fixture: namespace big with ${count(big)} declared tables`);
    for (const side of SIDES) await call(servers.url[side], 'POST', `/v1/namespace/big/create`, {});
    await declareMany(
      servers,
      roots,
      'big',
      Array.from({ length: big }, (_, i) => tableName(i)),
      s3,
    );
  }
  if (needs(listMid)) {
    log(`fixture: namespace mid with ${count(mid)} declared tables`);
    for (const side of SIDES) await call(servers.url[side], 'POST', `/v1/namespace/mid/create`, {});
    await declareMany(
      servers,
      roots,
      'mid',
      Array.from({ length: mid }, (_, i) => tableName(i)),
      s3,
    );
  }
  // The lists of big first: the rows after them declare more tables in it.
  rows.push(listTablesRow(bench, listMid, 'mid', mid, sizes.listCalls));
  rows.push(listTablesRow(bench, listBig, 'big', big, Math.max(2, Math.ceil(sizes.listCalls / 2))));
  rows.push(listAfterWriteRow(bench, afterWrite, 'big', sizes.listCalls, sizes.pageSize));
  rows.push(catalogWritesRow(bench, writes8, 'big', 8, sizes.creates, sizes.declares * 4));

  const describeMany = `describe table, 64 clients (Node), across ${count(many)} Lance-written tables in turn, no warm-up`;
  if (needs(describeMany)) await manyTablesFixture(bench, 'many', many);
  rows.push(describeManyRow(bench, describeMany, 'many', many, 64));

  const describeLabel = `describe table, 64 clients (Node), one Lance-written table, warm (${WARM_UP_CALLS} calls before)`;
  const historyLabel = `latest version of a Lance-written table in a child namespace, ${count(sizes.historyVersions)} versions, warm`;
  const rootHistoryLabel = `latest version of a root-level Lance-written table, ${count(sizes.historyVersions)} versions, warm`;
  if (needs(describeLabel) || needs(historyLabel)) await historyFixture(bench);
  rows.push(describeRow(bench, describeLabel, 64));
  rows.push(latestVersionRow(bench, historyLabel, ['bench', 'history'], sizes.historyVersions, ['Node']));
  if (needs(rootHistoryLabel)) {
    log(`fixture: history (root level), ${sizes.historyVersions} versions written by pylance`);
    await writeThrough(servers, ['history'], 100, sizes.historyVersions - 1);
  }
  rows.push(latestVersionRow(bench, rootHistoryLabel, ['history'], sizes.historyVersions, CLIENTS));

  const appendsLabel = `managed appends through pylance, 1 writer, warm (${WARM_UP_CALLS} appends before)`;
  if (needs(appendsLabel) || needs('create_table_version')) {
    rows.push(await appendsRow(bench, appendsLabel, path.join(floorDir, 'plain-lance', 'writes.lance'), path.join(floorDir, 'null-namespace')));
  }
  const appends4Label = `managed appends through pylance, 4 writers at once, a table each (${count(sizes.writerAppends)} appends each), warm`;
  if (needs(appends4Label)) rows.push(await concurrentAppendsRow(bench, appends4Label, 4, path.join(floorDir, 'plain-lance-4')));

  const deepLabel = `describe with detailed metadata, ${count(sizes.deepVersions)} versions, warm`;
  if (needs(deepLabel)) {
    log(`fixture: bench$deep, ${count(sizes.deepVersions)} versions (pylance create, then Lance config commits)`);
    const { uri } = await writeThrough(servers, ['bench', 'deep'], 1_000, 0);
    for (const side of SIDES)
      await runPython('commits', { uri: uri[side], count: sizes.deepVersions - 1, storage_options: lanceStorageOptions(servers.access) });
  }
  rows.push({
    label: deepLabel,
    parts: ['describe detailed'],
    run: async (side) => [
      latency(
        await closedLoop(1, sizes.lookups, () =>
          call(servers.url[side], 'POST', `/v1/table/${idPath('bench', 'deep')}/describe`, { load_detailed_metadata: true }).then(() => undefined),
        ),
      ),
    ],
    probe: (side) => call(servers.url[side], 'POST', `/v1/table/${idPath('bench', 'deep')}/describe`, { load_detailed_metadata: true }),
  });

  const dataLabel = `count rows / describe detailed / stats, ${count(sizes.dataRows)} rows, warm`;
  const updateLabel = `update / delete 1 row by id, ${count(sizes.dataRows)} rows, warm (${WARM_UP_CALLS / 4} of each before)`;
  const floors: number[][] = [[], [], []];
  if (needs(dataLabel) || needs(updateLabel)) {
    log(`fixture: bench$data, ${count(sizes.dataRows)} rows written by pylance`);
    const { uri } = await writeThrough(servers, ['bench', 'data'], sizes.dataRows, 0);
    const direct = await openDirect(uri.ours, lanceStorageOptions(servers.access));
    const table = `/v1/table/${idPath('bench', 'data')}`;
    const countRows: Step = { method: 'POST', path: `${table}/count_rows`, body: {} };
    rows.push({
      label: dataLabel,
      parts: ['count rows, Node', 'count rows, Python', 'describe detailed, Node', 'stats, Node'],
      run: async (side) => {
        const base = servers.url[side];
        const counted = await call(base, 'POST', `${table}/count_rows`, {});
        const n = typeof counted.value === 'number' ? counted.value : counted.count;
        if (n !== sizes.dataRows) throw new UnusableAnswer(`count_rows answered ${JSON.stringify(counted)}`);
        const figures = [
          latency(await clientLoop('Node', base, [countRows], sizes.dataCalls)),
          latency(await clientLoop('Python', base, [countRows], sizes.dataCalls)),
          latency(await clientLoop('Node', base, [{ method: 'POST', path: `${table}/describe`, body: { load_detailed_metadata: true } }], sizes.dataCalls)),
          latency(await clientLoop('Node', base, [{ method: 'POST', path: `${table}/stats`, body: {} }], sizes.dataCalls)),
        ];
        if (side === 'ours') {
          // The warm-engine floor, in the same round: one handle kept open, no HTTP, no catalog.
          const t = direct.table;
          floors[0]?.push((await closedLoop(1, sizes.dataCalls, () => t.countRows().then(() => undefined))).p50);
          floors[1]?.push((await closedLoop(1, sizes.dataCalls, async () => void (await Promise.all([t.schema(), t.version(), t.countRows()])))).p50);
          floors[2]?.push((await closedLoop(1, sizes.dataCalls, () => t.stats().then(() => undefined))).p50);
        }
        return figures;
      },
      note: () =>
        `warm engine handle: count ${ms(median(floors[0] ?? []))} / describe ${ms(median(floors[1] ?? []))} / stats ${ms(median(floors[2] ?? []))} ms`,
      probe: async (side) => {
        const base = servers.url[side];
        return {
          count_rows: await call(base, 'POST', `${table}/count_rows`, {}),
          describe: await call(base, 'POST', `${table}/describe`, { load_detailed_metadata: true }),
          stats: await call(base, 'POST', `${table}/stats`, {}),
        };
      },
    });
    // After the counts: its deletes change the count.
    rows.push(await updateDeleteRow(bench, updateLabel, ['bench', 'data'], path.join(floorDir, 'engine-floor', 'data.lance')));
  }
  const maintenanceLabel = `table of ${count(sizes.maintenanceAppends)} small appends`;
  if (needs(maintenanceLabel)) rows.push(await maintenanceRow(bench, maintenanceLabel));
  rows.push(...(await branchRows(bench, needs)));
  return rows;
}

async function s3Rows(bench: Bench): Promise<RowSpec[]> {
  const { servers, sizes, roots, s3 } = bench;
  const rows: RowSpec[] = [];
  const mid = sizes.midTables;
  const needs = (label: string) => wants(bench, label);

  rows.push(...emptyCatalogRows(bench));

  const createLabel = `catalog writes, 8 clients (Node), in a namespace of ${count(mid)}+ declared tables, warm`;
  const listLabel = `list tables, ${count(mid)} declared tables present, warm`;
  const afterWriteLabel = `list tables right after a declare (untimed) in the same namespace, ${count(mid)}+ declared tables present, warm`;
  if (needs(createLabel) || needs(listLabel) || needs(afterWriteLabel)) {
    log(`fixture: namespaces mid and decl with ${count(mid)} declared tables each`);
    for (const ns of ['mid', 'decl']) {
      for (const side of SIDES) await call(servers.url[side], 'POST', `/v1/namespace/${ns}/create`, {});
      await declareMany(
        servers,
        roots,
        ns,
        Array.from({ length: mid }, (_, i) => tableName(i)),
        s3,
      );
    }
  }
  rows.push(catalogWritesRow(bench, createLabel, 'decl', 8, sizes.creates, sizes.declares));
  rows.push(listAfterWriteRow(bench, afterWriteLabel, 'decl', sizes.listCalls, sizes.pageSize));

  const describeLabel = `describe table, 16 clients (Node), one Lance-written table, warm (${WARM_UP_CALLS} calls before)`;
  const latestLabel = `latest version of a Lance-written table in a child namespace, ${count(sizes.historyVersions)} versions, warm`;
  const rootLatestLabel = `latest version of a root-level Lance-written table, ${count(sizes.historyVersions)} versions, warm`;
  if (needs(describeLabel) || needs(latestLabel)) await historyFixture(bench);
  rows.push(describeRow(bench, describeLabel, 16));

  const listRoute = '/v1/namespace/mid/table/list';
  rows.push({
    label: listLabel,
    parts: ['one call, Node', 'one call, Python', `all pages of ${sizes.pageSize}, Node`],
    run: async (side) => [
      ...(await listRow(bench, 'mid', mid, sizes.listCalls)(side)),
      latency(await clientLoop('Python', servers.url[side], [{ method: 'GET', path: listRoute }], sizes.listCalls)),
      ...(await listRow(bench, 'mid', mid, sizes.listCalls, sizes.pageSize)(side)),
    ],
    probe: (side) => call(servers.url[side], 'GET', `/v1/namespace/mid/table/list?limit=${sizes.pageSize}`),
  });

  if (needs(rootLatestLabel)) {
    log(`fixture: history (root level), ${sizes.historyVersions} versions written by pylance`);
    await writeThrough(servers, ['history'], 100, sizes.historyVersions - 1);
  }
  rows.push(latestVersionRow(bench, rootLatestLabel, ['history'], sizes.historyVersions, CLIENTS));

  const appendsLabel = `managed appends through pylance, 1 writer, warm (${WARM_UP_CALLS} appends before)`;
  if (needs(appendsLabel) || needs('create_table_version')) {
    rows.push(await appendsRow(bench, appendsLabel, `${path.posix.dirname(roots.ours)}/plain-lance-${randomBytes(3).toString('hex')}/writes.lance`));
  }
  const appends4Label = `managed appends through pylance, 4 writers at once, a table each (${count(sizes.writerAppends)} appends each), warm`;
  if (needs(appends4Label)) {
    rows.push(await concurrentAppendsRow(bench, appends4Label, 4, `${path.posix.dirname(roots.ours)}/plain-lance-4-${randomBytes(3).toString('hex')}`));
  }

  const lookupCalls: Record<Side, string> = { ours: '?', ref: '?' };
  rows.push({
    label: latestLabel,
    parts: ['describe_table_version (latest), 1 client p50', '8 clients p50'],
    run: async (side, round) => {
      const base = servers.url[side];
      const route = `/v1/table/${idPath('bench', 'history')}/version/describe`;
      const described = (await call(base, 'POST', route, {})).version as { version?: unknown } | undefined;
      if (described?.version !== sizes.historyVersions)
        throw new UnusableAnswer(`describe_table_version without a version answered ${String(described?.version)}`);
      const one = await closedLoop(1, sizes.lookups, () => call(base, 'POST', route, {}).then(() => undefined));
      const eight = await closedLoop(8, sizes.lookups * 4, () => call(base, 'POST', route, {}).then(() => undefined));
      if (round === 0) lookupCalls[side] = await storeCalls(bench, side, 5, () => call(base, 'POST', route, {}));
      return [latency(one), latency(eight)];
    },
    note: () => `store calls per lookup: this service ${lookupCalls.ours}; reference ${lookupCalls.ref}`,
    probe: (side) => call(servers.url[side], 'POST', `/v1/table/${idPath('bench', 'history')}/version/describe`, {}),
  });

  const dataLabel = `count rows / update 1 row by id, ${count(sizes.dataRows)} rows, warm`;
  if (needs(dataLabel)) {
    log(`fixture: bench$data, ${count(sizes.dataRows)} rows written by pylance`);
    await writeThrough(servers, ['bench', 'data'], sizes.dataRows, 0);
    let updated = 0;
    const updateCalls: Record<Side, string> = { ours: '?', ref: '?' };
    rows.push({
      label: dataLabel,
      parts: ['count rows, Node', 'count rows, Python', 'update, Node', 'update, Python'],
      run: async (side, round) => {
        const base = servers.url[side];
        const table = `/v1/table/${idPath('bench', 'data')}`;
        const countRows: Step = { method: 'POST', path: `${table}/count_rows`, body: {} };
        const update: Step = { method: 'POST', path: `${table}/update`, body: { predicate: 'id = {i}', updates: [['value', 'value * 2 + 1']] } };
        const figures: Figure[] = [];
        for (const client of CLIENTS) figures.push(latency(await clientLoop(client, base, [countRows], sizes.dataCalls)));
        for (const client of CLIENTS) {
          figures.push(latency(await clientLoop(client, base, [update], sizes.dataCalls, updated)));
          updated += sizes.dataCalls;
        }
        if (round === 0) {
          updateCalls[side] = await storeCalls(bench, side, 3, () =>
            call(base, 'POST', `${table}/update`, { predicate: `id = ${updated++}`, updates: [['value', 'value * 2 + 1']] }),
          );
        }
        return figures;
      },
      ...(bench.s3Proxy ? { note: () => `store calls per update: this service ${updateCalls.ours}; reference ${updateCalls.ref}` } : {}),
      probe: (side) => call(servers.url[side], 'POST', `/v1/table/${idPath('bench', 'data')}/count_rows`, {}),
    });
  }
  const maintenanceLabel = `table of ${count(sizes.maintenanceAppends)} small appends`;
  if (needs(maintenanceLabel)) rows.push(await maintenanceRow(bench, maintenanceLabel));
  rows.push(...(await branchRows(bench, needs)));
  return rows;
}

/**
 * Table maintenance (issue 33): bench$frag on each side, 1,000 rows with an IVF_PQ index on `vec`
 * and a BTREE on `id` (built directly with @lancedb/lancedb, the same on both sides), then
 * `maintenanceAppends` appends of 10 rows through the server (pylance): small fragments and rows
 * outside the indices. A filter query, a vector query (the index's) and CountTableRows through the
 * server, before and after maintenance; maintenance on this side is the engine's (compact, then
 * optimizeIndices: pylance's worker, as the service runs it), on the reference's @lancedb/lancedb
 * optimize() run directly on its table (compaction, index optimize and a prune of nothing: the
 * floor). Maintenance changes the table, so the row is measured once per side (the first round)
 * and later rounds repeat that figure.
 */
async function maintenanceRow(bench: Bench, label: string): Promise<RowSpec> {
  const { servers, sizes } = bench;
  const table = ['bench', 'frag'];
  const route = `/v1/table/${idPath(...table)}`;
  const storageOptions = lanceStorageOptions(servers.access);
  log(`fixture: bench$frag, 1,000 rows, IVF_PQ and BTREE indices, then ${count(sizes.maintenanceAppends)} appends of 10 rows through each server`);
  const { uri } = await writeThrough(servers, table, 1_000, 0);
  // @lancedb/lancedb through a namespace takes S3 keys from the AWS default chain only (see
  // test/support/client-credentials.ts): this process's environment, as a client's.
  const s3 = servers.access.s3;
  if (s3)
    Object.assign(process.env, {
      AWS_ACCESS_KEY_ID: s3.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
      AWS_REGION: s3.region,
      AWS_ENDPOINT: s3.endpoint,
      AWS_ALLOW_HTTP: 'true',
      AWS_EC2_METADATA_DISABLED: 'true',
    });
  /** The table opened by @lancedb/lancedb through the side's server (the reference's directory name is not one lancedb.connect opens). */
  const open = async (side: Side) => {
    const db = await lancedb().connectNamespace('rest', { uri: servers.url[side] });
    cleanups.push(async () => db.close());
    const opened = await db.openTable('frag', ['bench']);
    cleanups.push(async () => opened.close());
    return opened;
  };
  for (const side of SIDES) {
    const direct = await open(side);
    const { Index } = lancedb();
    await direct.createIndex('vec', { config: Index.ivfPq({ numPartitions: 4, numSubVectors: 4 }) });
    await direct.createIndex('id', { config: Index.btree() });
    await runPython('write', {
      url: servers.url[side],
      table_id: table,
      rows: 0,
      first_id: 1_000,
      append_rows: 10,
      appends: sizes.maintenanceAppends,
      storage_options: storageOptions,
    });
  }
  const rows = 1_000 + 10 * sizes.maintenanceAppends;
  const vector = Array.from({ length: 16 }, (_, i) => (i % 4) / 4);
  const queries = async (side: Side): Promise<Figure[]> => {
    const base = servers.url[side];
    const counted = await call(base, 'POST', `${route}/count_rows`, {});
    const n = typeof counted.value === 'number' ? counted.value : counted.count;
    if (n !== rows) throw new UnusableAnswer(`count_rows answered ${JSON.stringify(counted)}`);
    let i = 0;
    return [
      latency(
        await closedLoop(1, sizes.lookups, () =>
          call(base, 'POST', `${route}/query`, { vector: {}, filter: `id = ${(i++ * 7919) % rows}`, k: 10, columns: { column_names: ['id', 'value'] } }).then(
            () => undefined,
          ),
        ),
      ),
      latency(
        await closedLoop(1, sizes.lookups, () =>
          call(base, 'POST', `${route}/query`, { vector: { single_vector: vector }, vector_column: 'vec', k: 10, columns: { column_names: ['id'] } }).then(
            () => undefined,
          ),
        ),
      ),
      latency(await closedLoop(1, sizes.lookups, () => call(base, 'POST', `${route}/count_rows`, {}).then(() => undefined))),
    ];
  };
  const measured: Partial<Record<Side, Figure[]>> = {};
  const fragments: Partial<Record<Side, string>> = {};
  let engine: LancedbEngine | undefined;
  return {
    label,
    parts: ['filter before', 'vector before', 'count before', 'maintenance', 'filter after', 'vector after', 'count after'],
    split: [
      `${label}: filter query (id = k), before maintenance`,
      `${label}: vector query (IVF_PQ), before maintenance`,
      `${label}: CountTableRows, before maintenance`,
      `${label}: maintenance (this service: its engine's compact, optimizeIndices, compact; reference: @lancedb/lancedb optimize() directly, the floor)`,
      `${label}: filter query (id = k), after maintenance`,
      `${label}: vector query (IVF_PQ), after maintenance`,
      `${label}: CountTableRows, after maintenance`,
    ],
    // The queries, and this side's pylance worker started (the service's runs for as long as it does).
    warm: async (side) => {
      await queries(side);
      if (side === 'ours') {
        engine = await LancedbEngine.start();
        cleanups.push(async () => engine?.close());
        await engine.maintenance.inspect({ location: uri.ours, storageOptions });
      }
    },
    run: async (side) => {
      const done = measured[side];
      if (done) return done;
      const before = await queries(side);
      const started = now();
      if (side === 'ours') {
        if (!engine) throw new UnusableAnswer('the engine did not start');
        const at = { location: uri.ours, storageOptions };
        const compacted = await engine.maintenance.compact(at, {});
        const indexed = await engine.maintenance.optimizeIndices(at);
        // Compaction leaves fragments the indices covered apart from those they did not: once they are indexed, once more.
        const again = await engine.maintenance.compact(at, {});
        fragments.ours = `this service: fragments ${compacted.fragmentsBefore} -> ${again.fragmentsAfter}, ${indexed.rowsIndexed} rows indexed`;
      } else {
        const stats = await (await open('ref')).optimize();
        fragments.ref = `optimize(): ${stats.compaction.fragmentsRemoved} fragments removed, ${stats.compaction.fragmentsAdded} added`;
      }
      const took: Figure = { value: now() - started, unit: 'ms' };
      const after = await queries(side);
      measured[side] = [...before, took, ...after];
      return measured[side];
    },
    note: () => [fragments.ours, fragments.ref].filter((n) => n !== undefined).join('; '),
  };
}

// ---------------------------------------------------------------------------------------------
// One store: servers, fixtures, rows.

async function runStore(kind: StoreKind, quick: boolean, only: string | undefined): Promise<RowResult[]> {
  const undoDepth = cleanups.length;
  try {
    const sizes = sizesFor(kind, quick);
    let access: StoreAccess;
    let s3: S3Client | undefined;
    let s3Proxy: Proxy | undefined;
    if (kind === 'local') {
      access = { kind, base: os.tmpdir() };
    } else {
      log('starting radosgw (first run installs Debian packages)');
      const rgw = await startRgw();
      cleanups.push(rgw.stop);
      checkAborted();
      const proxy = await startProxy(rgw.server.endpoint, { buffer: true });
      s3Proxy = proxy;
      log(`radosgw at ${rgw.server.endpoint}, Content-Length proxy at ${proxy.url}`);
      const credentials = { accessKeyId: rgw.server.accessKeyId, secretAccessKey: rgw.server.secretAccessKey };
      access = { kind, base: `s3://${BUCKET}`, s3: { endpoint: proxy.url, region: rgw.server.region, ...credentials } };
      s3 = new S3Client({ endpoint: rgw.server.endpoint, region: rgw.server.region, forcePathStyle: true, credentials });
      cleanups.push(async () => s3?.destroy());
      await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    }
    const roots = await makeRoots(access);
    const url = { ours: (await startOurs(access, roots.ours)).url, ref: (await startReference(access, roots.ref)).url };
    const managedUrl = { ours: url.ours, ref: (await startReference(access, roots.ref, { table_version_tracking_enabled: 'true' })).url };
    log(`this service at ${url.ours}, reference at ${url.ref} (managed versioning: ${managedUrl.ref}), roots ${roots.ours} and ${roots.ref}`);
    const servers: Servers = { url, managedUrl, access };
    const commitTimer = {
      ours: await startProxy(managedUrl.ours, { buffer: false, timed: /\/version\/create/ }),
      ref: await startProxy(managedUrl.ref, { buffer: false, timed: /\/version\/create/ }),
    };
    // The namespaces every store's rows use; `managed` turns managed versioning on for this service.
    for (const side of SIDES) {
      await call(url[side], 'POST', '/v1/namespace/bench/create', {});
      await call(managedUrl[side], 'POST', '/v1/namespace/managed/create', side === 'ours' ? { properties: { managed_versioning: 'true' } } : {});
    }
    const bench: Bench = { servers, sizes, roots, s3, only, commitTimer, s3Proxy };
    const started = now();
    const specs = (kind === 'local' ? await localRows(bench) : await s3Rows(bench)).filter((r) => [r.label, ...r.parts].some((name) => wants(bench, name)));
    log(`fixtures ready in ${secs(now() - started)}; ${specs.length} rows, ${sizes.rounds} interleaved rounds each`);
    const results: RowResult[] = [];
    for (const spec of specs) {
      const rowStarted = now();
      results.push(...(await runRow(spec, sizes.rounds)));
      log(`${spec.label}: ${secs(now() - rowStarted)}`);
    }
    return results;
  } finally {
    for (const undo of cleanups.splice(undoDepth).reverse()) await undo().catch((e: unknown) => log(`cleanup failed: ${String(e)}`));
  }
}

// ---------------------------------------------------------------------------------------------
// Output.

function show(f: Figure): string {
  const value = f.unit === '/s' ? `${f.value >= 100 ? f.value.toFixed(0) : f.value.toFixed(1)}/s` : `${ms(f.value)} ms`;
  return f.detail ? `${value} (${f.detail.name} ${ms(f.detail.ms)} ms)` : value;
}

/** The results of one store as a markdown table. */
function resultTable(kind: StoreKind, results: RowResult[], quick: boolean): string {
  const lines: string[] = [];
  const out = (line: string) => lines.push(line);
  out('');
  out(
    `| workload (${kind === 'local' ? 'local disk' : 'radosgw'}${quick ? ', --quick sizes' : ''}) | this service | reference | ratio (>1: this service faster) | note |`,
  );
  out('|---|---|---|---|---|');
  for (const r of results) {
    const ours = r.outcome.ours;
    const ref = r.outcome.ref;
    const single = r.parts.length === 1;
    const cells = (o: Outcome) => ('unavailable' in o ? [] : o);
    const label = single || r.label.includes(r.parts[0] ?? '') ? r.label : `${r.label} (${r.parts.join(' / ')})`;
    const oursText = 'unavailable' in ours ? `n/a: ${ours.unavailable}` : cells(ours).map(show).join(' / ');
    const refText = 'unavailable' in ref ? `n/a: ${ref.unavailable}` : cells(ref).map(show).join(' / ');
    const ratios =
      'unavailable' in ours || 'unavailable' in ref
        ? '—'
        : cells(ours)
            .map((f, i) => {
              const g = cells(ref)[i];
              return g ? formatRatio(speedup(f, g)) : '—';
            })
            .join(' / ');
    out(`| ${label} | ${oursText} | ${refText} | ${ratios} | ${r.note} |`);
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    strict: true,
    options: {
      store: { type: 'string', default: 'both' },
      quick: { type: 'boolean', default: false },
      only: { type: 'string' },
      page: { type: 'string' },
      'from-source': { type: 'boolean', default: false },
    },
  });
  const which = values.store;
  if (which !== 'local' && which !== 's3' && which !== 'both') throw new Error(`--store must be local, s3 or both, not ${JSON.stringify(which)}`);
  const stores: StoreKind[] = which === 'both' ? ['local', 's3'] : [which];
  const quick = values.quick === true;
  // What ships: through tsx, esbuild's keepNames wraps every function made per request (0.02-0.14 ms
  // more per pylance append in paired runs), so only a smoke run (--from-source) skips the build.
  service.fromSource = values['from-source'] === true;
  if (!service.fromSource) {
    log('building the service (npm run build)');
    const build = spawnSync('npm', ['run', 'build', '--silent'], { cwd: repo, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
    if (build.status !== 0) throw new Error(`npm run build failed (exit ${String(build.status ?? build.signal)}): ${build.stderr}`);
  }
  const load = () =>
    os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' ');
  const loadBefore = load();
  log(
    `${os.cpus().length} cores, load ${loadBefore}, node ${process.version}, stores ${stores.join(', ')}${quick ? ', quick' : ''}${values.only ? `, only "${values.only}"` : ''}`,
  );
  const results: Array<[StoreKind, RowResult[]]> = [];
  const started = now();
  for (const store of stores) {
    const storeStarted = now();
    results.push([store, await runStore(store, quick, values.only)]);
    log(`${store} done in ${secs(now() - storeStarted)}`);
  }
  const tables = results.map(([store, rows]) => resultTable(store, rows, quick)).join('\n\n');
  const loadAfter = load();
  const machine = `${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'})`;
  const elapsed = secs(now() - started);
  process.stdout.write(`\n${tables}\n`);
  process.stdout.write(
    `\nmachine: ${machine}, load average (1/5/15 min) ${loadBefore} at the start, ${loadAfter} at the end; ` +
      `${elapsed} in all; figures are medians of interleaved rounds (this service, then the reference)\n`,
  );
  // The page shows a whole run: written after a full run of both stores, or wherever --page says.
  const pageDir = values.page ?? (which === 'both' && !quick && !values.only ? path.join(repo, 'docs', 'benchmarks') : undefined);
  if (pageDir) {
    const info = {
      date: `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC`,
      machine,
      node: process.version,
      loadBefore,
      loadAfter,
      elapsed,
      quick,
    };
    log(`wrote ${await writeBenchmarkPage(pageDir, results, info, tables)}`);
  }
}

runMain(main);
