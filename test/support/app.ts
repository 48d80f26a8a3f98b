import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, expect } from 'vitest';
import { type App, createApp } from '../../src/app.js';
import { type Config, loadConfig } from '../../src/config.js';
import { peopleStream } from './arrow-data.js';
import type { Backend, TestRoot } from './backends.js';

export interface TestApp {
  app: App;
  /** Sends a request through Fastify's inject (no socket). */
  call(method: 'GET' | 'POST', url: string, body?: unknown, headers?: Record<string, string>): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface TestResponse {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  text: string;
  /** The body parsed as JSON (an empty object when empty or not JSON). */
  json: Record<string, unknown>;
}

export function testConfig(root: TestRoot, overrides: Partial<Config> = {}): Config {
  const base = loadConfig(['--root', root.root, '--port', '0', '--log-level', process.env.LANCE_NS_TEST_LOG ?? 'silent'], {});
  return { ...base, s3: { ...base.s3, ...root.s3, createBucket: false }, ...overrides };
}

export async function startTestApp(root: TestRoot, overrides: Partial<Config> = {}): Promise<TestApp> {
  const config = testConfig(root, overrides);
  const app = await createApp(config, pino({ level: config.logLevel }));
  await app.server.ready();
  return {
    app,
    async call(method, url, body, headers = {}) {
      const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body);
      const res = await app.server.inject({ method, url, payload, headers: { 'content-type': 'application/json', ...headers } });
      return { status: res.statusCode, headers: res.headers, text: res.body, json: safeJson(res.body) };
    },
    close: () => app.close(),
  };
}

/**
 * How many versions the app has committed, on every path (lance_ns_commits_total, outcome
 * committed): the proof that writes went through its version path, where a version leaves no
 * other trace of the service (a Lance client's commit on a local disk has no sidecar).
 */
export async function committedVersions(t: TestApp): Promise<number> {
  const scraped = await t.app.server.inject({ method: 'GET', url: '/metrics' });
  let committed = 0;
  for (const [sample, value] of metricSamples(scraped.body)) {
    if (sample.startsWith('lance_ns_commits_total{') && sample.includes('outcome="committed"')) committed += value;
  }
  return committed;
}

/** The samples of a Prometheus text exposition: `name{labels}` -> value. */
export function metricSamples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** Starts the app listening on a loopback port, for real clients. */
export async function listenTestApp(root: TestRoot, overrides: Partial<Config> = {}): Promise<TestApp & { url: string }> {
  const test = await startTestApp(root, overrides);
  await test.app.server.listen({ host: '127.0.0.1', port: 0 });
  const { port } = test.app.server.server.address() as AddressInfo;
  return { ...test, url: `http://127.0.0.1:${port}` };
}

function safeJson(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : { value };
  } catch {
    return {};
  }
}

/**
 * A fresh root on `backend` and the app over it for the enclosing describe block; the fields are
 * set before the first test runs.
 */
export function useTestApp(backend: Backend, overrides: Partial<Config> = {}): { root: TestRoot; t: TestApp } {
  const fixture = {} as { root: TestRoot; t: TestApp };
  beforeAll(async () => {
    fixture.root = await backend.newRoot();
    fixture.t = await startTestApp(fixture.root, overrides);
  });
  afterAll(async () => {
    await fixture.t?.close();
    await fixture.root?.dispose();
  });
  return fixture;
}

/**
 * useTestApp plus a namespace `ns` created before the first test, and helpers addressing tables
 * in it: `path('t', 'update')` is `/v1/table/ns%24t/update`.
 */
export function useNamespaceFixture(backend: Backend, overrides: Partial<Config> = {}) {
  const fx = useTestApp(backend, overrides);
  beforeAll(async () => {
    const res = await fx.t.call('POST', '/v1/namespace/ns/create', {});
    if (res.status !== 200) throw new Error(`could not create the test namespace: ${res.text}`);
  });
  const path = (table: string, op: string, query = '') => `/v1/table/ns%24${table}/${op}${query}`;
  const post = (table: string, op: string, body?: unknown, query = '') => fx.t.call('POST', path(table, op, query), body);
  return {
    fx,
    /** Options to open the root's datasets directly with the engine. */
    engineOptions: () => fx.root.store.engineStorageOptions(),
    path,
    post,
    /** Creates ns$<table> with `versions` versions (the first with rows 1..5, then one delete each); returns its location. */
    async createTable(table: string, versions: number): Promise<string> {
      const res = await fx.t.call('POST', path(table, 'create'), peopleStream([1, 2, 3, 4, 5]), { 'content-type': 'application/vnd.apache.arrow.stream' });
      expect(res.status, res.text).toBe(200);
      for (let v = 2; v <= versions; v++) expect((await post(table, 'delete', { predicate: `id = ${v}` })).json.version).toBe(v);
      return String(res.json.location);
    },
  };
}

/** How many times each value occurs in `values`. */
export function tally(values: readonly (string | number)[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const v of values) counts[v] = (counts[v] ?? 0) + 1;
  return counts;
}
