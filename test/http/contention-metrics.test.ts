import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { metricSamples, useTestApp } from '../support/app.js';
import { backends } from '../support/backends.js';
import { numbersStream } from '../support/jobs.js';
import { manifestBytes } from '../support/manifests.js';

// A lost race is contention, not a failure: N writers committing the same version through the
// HTTP API leave the store's `put` calls with outcome `error` untouched, and at least one
// `precondition_failed` per writer that lost. An operator alerts on `error`.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const ROUNDS = 4;
const WRITERS = 8;

describe.each(backends())('store call outcomes under contention on $name', (backend) => {
  const fx = useTestApp(backend);

  const puts = async () => {
    const res = await fx.t.app.server.inject({ method: 'GET', url: '/metrics' });
    const samples = metricSamples(res.body);
    const of = (outcome: string) => samples.get(`lance_ns_store_requests_total{operation="put",outcome="${outcome}"}`) ?? 0;
    return {
      error: of('error'),
      preconditionFailed: of('precondition_failed'),
      conflicts: samples.get('lance_ns_commits_total{path="single",outcome="conflict"}') ?? 0,
      engineConflicts: samples.get('lance_ns_commits_total{path="engine",outcome="conflict"}') ?? 0,
    };
  };

  it(`${WRITERS} writers committing each version: lost races are precondition_failed, never error`, async () => {
    expect((await fx.t.call('POST', '/v1/namespace/c/create', {})).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/c%24t/declare', {})).status).toBe(200);
    const before = await puts();
    let lost = 0;
    for (let version = 1; version <= ROUNDS; version++) {
      const staged = await Promise.all(
        Array.from({ length: WRITERS }, async () => {
          const rel = `_versions/${version}.manifest-${randomUUID()}`;
          await fx.root.store.put(`c/t.lance/${rel}`, manifestBytes(version));
          return rel;
        }),
      );
      const answers = await Promise.all(
        staged.map((manifest_path) => fx.t.call('POST', '/v1/table/c%24t/version/create', { version, manifest_path, naming_scheme: 'V2' })),
      );
      expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
      expect(answers.filter((a) => a.status === 409).every((a) => a.json.code === 14)).toBe(true);
      lost += answers.filter((a) => a.status === 409).length;
    }
    await fx.t.app.settled();
    const after = await puts();
    expect(lost).toBe(ROUNDS * (WRITERS - 1));
    expect(after.conflicts - before.conflicts).toBe(lost);
    expect(after.error - before.error).toBe(0);
    expect(after.preconditionFailed - before.preconditionFailed).toBeGreaterThanOrEqual(lost);
  });

  it(`${WRITERS} inserts at once into a table with managed versioning: the engine's lost commits are no errors either`, async () => {
    expect((await fx.t.call('POST', '/v1/namespace/m/create', { properties: { managed_versioning: 'true' } })).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/m%24t/create', numbersStream(10), ARROW)).status).toBe(200);
    const before = await puts();
    const answers = await Promise.all(
      Array.from({ length: WRITERS }, (_, i) => fx.t.call('POST', '/v1/table/m%24t/insert', numbersStream(10, 10 * (i + 1)), ARROW)),
    );
    expect(answers.map((a) => a.status)).toEqual(Array.from({ length: WRITERS }, () => 200));
    await fx.t.app.settled();
    const after = await puts();
    // Lance rebases a commit that lost its version and tries the next one: each such loss is a conflict.
    expect(after.engineConflicts - before.engineConflicts).toBeGreaterThan(0);
    expect(after.error - before.error).toBe(0);
    expect(after.preconditionFailed - before.preconditionFailed).toBeGreaterThanOrEqual(after.engineConflicts - before.engineConflicts);
  });
});
