import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, createApp } from '../../src/app.js';
import { testConfig } from '../support/app.js';
import { localBackend, type TestRoot } from '../support/backends.js';

// Credential vending on a local root: there is nothing to vend, and the answers say so when the
// client asked or vending is configured; such requests are audited. (On S3, against radosgw's
// STS: test/realclient/vended-credentials.test.ts.)

describe('credential vending on a local root', () => {
  let root: TestRoot;
  let app: App;
  const lines: string[] = [];

  beforeAll(async () => {
    root = await localBackend.newRoot();
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        lines.push(
          ...chunk
            .toString('utf8')
            .split('\n')
            .filter((l) => l !== ''),
        );
        callback();
      },
    });
    // The STS endpoint is never called for a local table.
    const config = testConfig(root, {
      logLevel: 'info',
      credentialVending: { roleArn: 'arn:aws:iam:::role/vend', durationSeconds: 900, refreshBeforeSeconds: 300, stsEndpoint: 'http://127.0.0.1:9' },
    });
    app = await createApp(config, pino({ level: 'info' }, sink));
  });
  afterAll(async () => {
    await app?.close();
    await root?.dispose();
  });

  const post = async (url: string, body: unknown = {}) => {
    const res = await app.server.inject({ method: 'POST', url, payload: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    return { status: res.statusCode, json: JSON.parse(res.body) as { storage_options?: Record<string, string> } };
  };

  it('answers without credentials, saying why, unless declined; and audits each request that may vend', async () => {
    const declared = await post('/v1/table/t/declare', {});
    expect(declared.status).toBe(200);
    expect(declared.json.storage_options?.vended_credentials).toMatch(/^none: the table is not in an S3 bucket/);
    lines.length = 0;
    const asked = await post('/v1/table/t/describe', { vend_credentials: true });
    const unasked = await post('/v1/table/t/describe', {});
    const declined = await post('/v1/table/t/describe', { vend_credentials: false });
    expect([asked.status, unasked.status, declined.status]).toEqual([200, 200, 200]);
    expect(asked.json.storage_options?.vended_credentials).toMatch(/^none: /);
    expect(unasked.json.storage_options?.vended_credentials).toMatch(/^none: /);
    expect(declined.json.storage_options).toEqual({});
    for (const r of [asked, unasked]) expect(Object.keys(r.json.storage_options ?? {})).toEqual(['vended_credentials']);
    const audits = lines
      .map((l) => JSON.parse(l) as { audit?: { operation: string; vends?: Array<{ outcome: string }> } })
      .flatMap((l) => (l.audit ? [l.audit] : []));
    expect(audits.map((a) => [a.operation, a.vends?.map((v) => v.outcome)])).toEqual([
      ['DescribeTable', ['none']],
      ['DescribeTable', ['none']],
    ]);
  });
});
