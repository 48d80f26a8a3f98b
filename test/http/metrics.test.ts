import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricSamples as samples, startTestApp, type TestApp } from '../support/app.js';
import { localBackend, type TestRoot } from '../support/backends.js';
import { numbersStream, waitForJob } from '../support/jobs.js';
import { manifestBytes } from '../support/manifests.js';

// GET /metrics (Prometheus text format): after a workload, the counters of requests, store calls,
// commits and their conflicts, kept engine handles, jobs and vends moved as the workload says.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

describe('metrics', () => {
  let root: TestRoot;
  let t: TestApp;
  beforeAll(async () => {
    root = await localBackend.newRoot();
    t = await startTestApp(root);
  });
  afterAll(async () => {
    await t?.close();
    await root?.dispose();
  });

  const scrape = async () => {
    const res = await t.app.server.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    return samples(res.body);
  };

  it('counts requests, store calls, commits and conflicts, kept handles, jobs and vends', async () => {
    const before = await scrape();
    const value = (m: Map<string, number>, key: string) => m.get(key) ?? 0;

    expect((await t.call('POST', '/v1/namespace/m/create', {})).status).toBe(200);
    expect((await t.call('POST', '/v1/namespace/m/create', {})).status).toBe(409);
    // A table with data, counted three times (the engine keeps its dataset open after the first).
    expect((await t.call('POST', '/v1/table/m%24rows/create', numbersStream(100), ARROW)).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await t.call('POST', '/v1/table/m%24rows/count_rows', {})).json).toEqual({ value: 100 });
    // Two commits of version 1 of a declared table: one wins, one is a conflict.
    expect((await t.call('POST', '/v1/table/m%24v/declare', {})).status).toBe(200);
    const stage = async () => {
      const rel = `_versions/1.manifest-${randomUUID()}`;
      await root.store.put(`m/v.lance/${rel}`, manifestBytes(1));
      return rel;
    };
    expect((await t.call('POST', '/v1/table/m%24v/version/create', { version: 1, manifest_path: await stage() })).status).toBe(200);
    expect((await t.call('POST', '/v1/table/m%24v/version/create', { version: 1, manifest_path: await stage() })).status).toBe(409);
    // A backfill job, worked to its end.
    expect((await t.call('POST', '/v1/table/m%24rows/add_columns', { new_columns: [{ name: 'v', expression: 'CAST(NULL AS BIGINT)' }] })).status).toBe(200);
    const bound = await t.call('POST', '/v1/table/m%24rows/alter_columns', {
      alterations: [{ path: 'v', virtual_column: { udf_backend: 'sql', udf: 'id * 2', input_columns: ['id'] } }],
    });
    expect(bound.status, bound.text).toBe(200);
    const job = await t.call('POST', '/v1/table/m%24rows/backfill_column', { column: 'v' });
    expect(job.status, job.text).toBe(202);
    expect((await waitForJob(t, String(job.json.job_id))).status).toBe('Succeeded');
    // A table with managed versioning: the engine's commits go through the commit path.
    expect((await t.call('POST', '/v1/namespace/mm/create', { properties: { managed_versioning: 'true' } })).status).toBe(200);
    expect((await t.call('POST', '/v1/table/mm%24t/create', numbersStream(10), ARROW)).status).toBe(200);
    expect((await t.call('POST', '/v1/table/mm%24t/insert', numbersStream(10, 10), ARROW)).status).toBe(200);
    // A describe asking for credentials on a local root: a vend with nothing to vend.
    expect((await t.call('POST', '/v1/table/m%24rows/describe', { vend_credentials: true })).status).toBe(200);

    const after = await scrape();
    const grew = (key: string) => value(after, key) - value(before, key);
    expect(grew('lance_ns_http_requests_total{operation="CreateNamespace",status="200"}')).toBe(2);
    expect(grew('lance_ns_http_requests_total{operation="CreateNamespace",status="409"}')).toBe(1);
    expect(grew('lance_ns_http_requests_total{operation="CountTableRows",status="200"}')).toBe(3);
    expect(grew('lance_ns_http_request_duration_seconds_count{operation="CountTableRows",status_class="2xx"}')).toBe(3);
    expect(grew('lance_ns_http_request_duration_seconds_bucket{le="+Inf",operation="CreateTableVersion",status_class="4xx"}')).toBe(1);
    expect(grew('lance_ns_commits_total{path="single",outcome="committed"}')).toBe(1);
    expect(grew('lance_ns_commits_total{path="single",outcome="conflict"}')).toBe(1);
    expect(grew('lance_ns_commits_total{path="engine",outcome="committed"}')).toBe(2);
    expect(grew('lance_ns_store_requests_total{operation="put",outcome="ok"}')).toBeGreaterThan(5);
    expect(grew('lance_ns_store_requests_total{operation="put",outcome="precondition_failed"}')).toBeGreaterThanOrEqual(1);
    expect(grew('lance_ns_store_requests_total{operation="get",outcome="not_found"}')).toBeGreaterThan(0);
    expect(grew('lance_ns_store_request_duration_seconds_count{operation="list"}')).toBeGreaterThan(0);
    expect(grew('lance_ns_engine_handle_hits_total')).toBeGreaterThanOrEqual(2);
    expect(value(after, 'lance_ns_engine_handles')).toBeGreaterThan(0);
    // Lance's caches hold the file metadata of what the reads above opened.
    expect(value(after, 'lance_ns_engine_lance_cache_bytes')).toBeGreaterThan(0);
    expect(grew('lance_ns_jobs_finished_total{status="Succeeded"}')).toBe(1);
    expect(value(after, 'lance_ns_jobs_running')).toBe(0);
    expect(grew('lance_ns_credential_vends_total{access="read-write",outcome="none"}')).toBe(1);
    // The process's own figures come along.
    expect(value(after, 'lance_ns_process_resident_memory_bytes')).toBeGreaterThan(0);
  });
});
