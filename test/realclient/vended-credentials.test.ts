import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { DeleteObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, createApp } from '../../src/app.js';
import { latestHintKey, manifestKey, versionSidecarKey } from '../../src/service/catalog/layout.js';
import { testConfig } from '../support/app.js';
import { peopleStream } from '../support/arrow-data.js';
import { s3Backends, type TestRoot } from '../support/backends.js';
import { lancedb } from '../support/lancedb-client.js';
import { describeRun, INSTALL_TIMEOUT_MS, installPythonTestDeps, runPytest } from '../support/python.js';

// Pylance with nothing but the service URL and a token writes and reads a
// table on radosgw through vended credentials (STS AssumeRole with a session policy per table),
// which reach only their table's directory, read-only for a reader. radosgw implements STS and
// session policies; scripts/rgw.sh creates the role `vend` the service assumes.

const rgw = s3Backends().find((b) => b.name === 'rgw');
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const PYTEST_TIMEOUT_MS = 5 * 60_000;
const SECRET = (who: string) => `client-secret-of-${who}`;

interface Audit {
  operation: string;
  id: string[] | string | null;
  status: number;
  principal: string | null;
  vends?: Array<{ access: string; outcome: string; reason?: string; expires_at_millis?: number }>;
  /** The one vend of a request about one table. */
  vend?: { access: string; outcome: string; reason?: string; expires_at_millis?: number };
}

describe.skipIf(!rgw)('credential vending on radosgw', () => {
  let root: TestRoot;
  let app: App;
  let url = '';
  const lines: string[] = [];
  const tokens: Record<string, string> = {};

  const call = async (who: string, pathAndQuery: string, body: unknown = {}, headers: Record<string, string> = {}) => {
    const res = await app.server.inject({
      method: 'POST',
      url: pathAndQuery,
      payload: Buffer.isBuffer(body) ? body : JSON.stringify(body),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens[who] ?? ''}`, ...headers },
    });
    return { status: res.statusCode, json: JSON.parse(res.body || '{}') as Record<string, unknown>, text: res.body };
  };
  const audits = (): Audit[] =>
    lines.map((l) => JSON.parse(l) as { audit?: Audit }).flatMap((l) => (l.audit ? [{ ...l.audit, vend: l.audit.vends?.[0] }] : []));

  beforeAll(async () => {
    await installPythonTestDeps();
    root = await (rgw?.newRoot() ?? Promise.reject(new Error('no radosgw')));
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
    const clients = ['admin', 'writer', 'reader', 'outsider'];
    const config = testConfig(root, {
      logLevel: 'info',
      auth: {
        oauth2: {
          signingSecret: 'vending-test-signing-secret'.padEnd(40, '-'),
          tokenTtlSeconds: 3600,
          clients: clients.map((c) => ({ clientId: c, secretSha256: sha256(SECRET(c)), principal: c })),
        },
      },
      authorization: {
        roles: {
          admin: [{ namespace: [], privilege: 'manage' }],
          writer: [
            { namespace: ['vend'], privilege: 'write' },
            { namespace: ['vendm'], privilege: 'write' },
          ],
          reader: [
            { namespace: ['vend'], privilege: 'read' },
            { namespace: ['vendm'], privilege: 'read' },
          ],
          outsider: [{ namespace: ['elsewhere'], privilege: 'manage' }],
        },
        principals: { admin: ['admin'], writer: ['writer'], reader: ['reader'], outsider: ['outsider'] },
      },
      credentialVending: { roleArn: 'arn:aws:iam:::role/vend', durationSeconds: 900, refreshBeforeSeconds: 300 },
    });
    app = await createApp(config, pino({ level: 'info' }, sink));
    await app.server.listen({ host: '127.0.0.1', port: 0 });
    url = `http://127.0.0.1:${(app.server.server.address() as AddressInfo).port}`;
    for (const c of clients) {
      const res = await app.server.inject({
        method: 'POST',
        url: '/oauth/token',
        payload: `grant_type=client_credentials&client_id=${c}&client_secret=${SECRET(c)}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      tokens[c] = String((JSON.parse(res.body) as { access_token: string }).access_token);
    }
    expect((await call('admin', '/v1/namespace/vend/create')).status).toBe(200);
    expect((await call('admin', '/v1/namespace/vendm/create', { properties: { managed_versioning: 'true' } })).status).toBe(200);
    const sibling = await call('admin', '/v1/table/vend$sibling/create', peopleStream([1, 2]), { 'content-type': 'application/vnd.apache.arrow.stream' });
    expect(sibling.status, sibling.text).toBe(200);
  }, INSTALL_TIMEOUT_MS + 120_000);

  afterAll(async () => {
    await app?.close();
    await root?.dispose();
  });

  const vended = async (who: string, id: string) => {
    const res = await call(who, `/v1/table/${id}/describe`, { vend_credentials: true });
    expect(res.status, res.text).toBe(200);
    const o = res.json.storage_options as Record<string, string>;
    const client = new S3Client({
      endpoint: o.aws_endpoint,
      region: o.aws_region,
      forcePathStyle: true,
      maxAttempts: 1,
      credentials: { accessKeyId: o.aws_access_key_id ?? '', secretAccessKey: o.aws_secret_access_key ?? '', sessionToken: o.aws_session_token ?? '' },
    });
    const [, bucket = '', key = ''] = /^s3:\/\/([^/]+)\/(.*)$/.exec(String(res.json.location)) ?? [];
    return { client, bucket, dir: `${key}/` };
  };
  const status = async (send: () => Promise<unknown>): Promise<number> => {
    try {
      await send();
      return 200;
    } catch (e) {
      return (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode ?? -1;
    }
  };
  const put = (v: Vended, key: string) => status(() => v.client.send(new PutObjectCommand({ Bucket: v.bucket, Key: key, Body: 'x' })));
  const del = (v: Vended, key: string) => status(() => v.client.send(new DeleteObjectCommand({ Bucket: v.bucket, Key: key })));
  const list = (v: Vended, prefix: string) => status(() => v.client.send(new ListObjectsV2Command({ Bucket: v.bucket, Prefix: prefix })));
  type Vended = Awaited<ReturnType<typeof vended>>;

  it(
    'pylance writes and reads with vended credentials only, each reaching its own table, read-only for a reader',
    async () => {
      const sibling = await call('admin', '/v1/table/vend$sibling/describe', { vend_credentials: false });
      const home = await mkdtemp(path.join(os.tmpdir(), 'lance-ns-vend-home-'));
      try {
        // No AWS keys, profiles or endpoints: whatever reaches S3 came from the service.
        const result = await runPytest(
          'test/realclient/vended_credentials.py',
          { HOME: home, LANCE_NS_URL: url, WRITER_TOKEN: tokens.writer, READER_TOKEN: tokens.reader, SIBLING_URI: String(sibling.json.location) },
          PYTEST_TIMEOUT_MS,
          { withoutAws: true },
        );
        expect(result.code, describeRun('pytest', result)).toBe(0);
      } finally {
        await rm(home, { recursive: true, force: true });
      }
      // Every vend was audited, with the access it granted; a burst of describes cost few STS calls.
      const vends = audits().filter((a) => a.vend);
      expect(
        vends.some((a) => a.operation === 'DeclareTable' && a.principal === 'writer' && a.vend?.access === 'read-write' && a.vend.outcome === 'vended'),
      ).toBe(true);
      expect(vends.some((a) => a.operation === 'DescribeTable' && a.principal === 'reader' && a.vend?.access === 'read')).toBe(true);
      expect(vends.filter((a) => a.vend?.outcome === 'cached').length).toBeGreaterThan(0);
    },
    PYTEST_TIMEOUT_MS + 30_000,
  );

  it('LanceDB (Node) with only a token creates, appends and reads a table through vended credentials', async () => {
    // The engine in this process finds no AWS settings of its own either.
    const saved = Object.entries(process.env).filter(([k]) => k.startsWith('AWS_') && k !== 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED');
    for (const [k] of saved) delete process.env[k];
    const db = await lancedb.connectNamespace('rest', { uri: url, headers: { authorization: `Bearer ${tokens.writer}` } });
    try {
      const table = await db.createTable('from_node', [{ id: 1, name: 'a' }], ['vend']);
      await table.add([{ id: 2, name: 'b' }]);
      expect(await table.countRows()).toBe(2);
      expect(await (await db.openTable('from_node', ['vend'])).countRows()).toBe(2);
    } finally {
      db.close();
      for (const [k, v] of saved) process.env[k] = v;
    }
    expect(
      audits().some((a) => a.principal === 'writer' && JSON.stringify(a.id) === JSON.stringify(['vend', 'from_node']) && a.vend?.outcome === 'vended'),
    ).toBe(true);
  });

  it('vends per table and access level from a cache, never the service keys, and audits refused and declined requests', async () => {
    // A table nobody was vended credentials for yet (a declare that declines them).
    expect((await call('admin', '/v1/table/vend$fresh/declare', { vend_credentials: false })).status).toBe(200);
    lines.length = 0;
    const first = await call('writer', '/v1/table/vend$fresh/describe', { vend_credentials: true });
    const again = await call('writer', '/v1/table/vend$fresh/describe', {});
    const asReader = await call('reader', '/v1/table/vend$fresh/describe', { vend_credentials: true });
    expect([first.status, again.status, asReader.status]).toEqual([200, 200, 200]);
    const options = (r: { json: Record<string, unknown> }) => r.json.storage_options as Record<string, string>;
    expect(options(again).aws_session_token).toBe(options(first).aws_session_token);
    expect(options(asReader).aws_session_token).not.toBe(options(first).aws_session_token);
    expect(Number(options(first).expires_at_millis)).toBeGreaterThan(Date.now() + 5 * 60_000);
    expect(JSON.stringify(first.json)).not.toContain(root.s3.secretAccessKey);
    expect(options(first).aws_access_key_id).not.toBe(root.s3.accessKeyId);
    // Declined: no credentials, no vend (and no audit line: a describe is a read).
    const declined = await call('writer', '/v1/table/vend$fresh/describe', { vend_credentials: false });
    expect(options(declined).aws_session_token).toBeUndefined();
    // Refused: the outsider may not read vend.
    expect((await call('outsider', '/v1/table/vend$fresh/describe', { vend_credentials: true })).status).toBe(403);

    const described = audits().filter((a) => a.operation === 'DescribeTable');
    expect(described.map((a) => [a.principal, a.status, a.vend?.access ?? null, a.vend?.outcome ?? null])).toEqual([
      ['writer', 200, 'read-write', 'vended'],
      ['writer', 200, 'read-write', 'cached'],
      ['reader', 200, 'read', 'vended'],
      ['outsider', 403, null, null],
    ]);
    // No vended secret reaches a log line.
    const logged = lines.join('\n');
    for (const r of [first, asReader]) {
      expect(logged).not.toContain(options(r).aws_secret_access_key);
      expect(logged).not.toContain(options(r).aws_session_token);
    }
  });

  it('vends for each table a batch commit declares, when its operation asks', async () => {
    lines.length = 0;
    const res = await call('admin', '/v1/table/batch-commit', {
      operations: [
        { declare_table: { id: ['vend', 'b1'], vend_credentials: true } },
        { declare_table: { id: ['vend', 'b2'] } },
        { declare_table: { id: ['vend', 'b3'], vend_credentials: false } },
      ],
    });
    expect(res.status, res.text).toBe(200);
    const results = res.json.results as Array<{ declare_table: { storage_options: Record<string, string> } }>;
    expect(results.map((r) => r.declare_table.storage_options.aws_session_token !== undefined)).toEqual([true, true, false]);
    expect(results[0]?.declare_table.storage_options.aws_session_token).not.toBe(results[1]?.declare_table.storage_options.aws_session_token);
    const batch = audits().find((a) => a.operation === 'BatchCommitTables');
    expect(batch?.vends?.map((v) => [v.access, v.outcome])).toEqual([
      ['read-write', 'vended'],
      ['read-write', 'vended'],
    ]);
  });

  it("a writer's credentials write its table's data, but not the service's records, a managed table's committed manifests (of main and of its branches) or a sibling; a reader's write nothing", async () => {
    expect((await call('admin', '/v1/table/vendm$m/create', peopleStream([1]), { 'content-type': 'application/vnd.apache.arrow.stream' })).status).toBe(200);
    const writer = await vended('writer', 'vend$fresh');
    const sibling = await vended('admin', 'vend$sibling');
    const managed = await vended('writer', 'vendm$m');
    const reader = await vended('reader', 'vend$fresh');
    try {
      expect(await put(writer, `${writer.dir}data/extra.bin`)).toBe(200);
      expect(await del(writer, `${writer.dir}data/extra.bin`)).toBe(200);
      expect(await list(writer, writer.dir)).toBe(200);
      // The service's own records in the table's directory.
      for (const key of ['.lance-table.json', '.lance-reserved', '_catalog/writers/planted.json', '_catalog/versions/00000000000000000001.json']) {
        expect([key, await put(writer, `${writer.dir}${key}`), await del(writer, `${writer.dir}${key}`)]).toEqual([key, 403, 403]);
      }
      // A sibling table, and a name that only starts like this one.
      expect(await list(writer, sibling.dir)).toBe(403);
      expect(await list(writer, writer.dir.replace(/\/$/, ''))).toBe(403);
      expect(await put(writer, `${sibling.dir}data/planted.bin`)).toBe(403);
      expect(await put(writer, `${writer.dir.replace(/\/$/, '')}2/data/planted.bin`)).toBe(403);
      // Committed manifests of a managed table are the service's to write; staging one is the client's.
      expect(await put(managed, `${managed.dir}_versions/2.manifest`)).toBe(403);
      expect(await put(managed, `${managed.dir}_versions/latest_version_hint.json`)).toBe(403);
      expect(await put(managed, `${managed.dir}_versions/2.manifest-0b7e1c2a-staged`)).toBe(200);
      expect(await put(managed, `${managed.dir}data/new.lance`)).toBe(200);
      // So are those of each of its branches (a name with '/' too); the rest of a branch's tree is the client's.
      expect(await put(managed, `${managed.dir}tree/dev/_versions/2.manifest`)).toBe(403);
      expect(await put(managed, `${managed.dir}tree/dev/_versions/latest_version_hint.json`)).toBe(403);
      expect(await put(managed, `${managed.dir}tree/a/b/_versions/18446744073709551613.manifest`)).toBe(403);
      expect(await put(managed, `${managed.dir}tree/dev/_versions/2.manifest-0b7e1c2a-staged`)).toBe(200);
      expect(await put(managed, `${managed.dir}tree/dev/data/new.lance`)).toBe(200);
      // Without managed versioning a branch's manifests are the client's to write, as main's are.
      expect(await put(writer, `${writer.dir}tree/dev/_versions/2.manifest`)).toBe(200);
      // A reader's credentials read and list, and write nothing.
      expect(await list(reader, reader.dir)).toBe(200);
      expect(await put(reader, `${reader.dir}data/planted.bin`)).toBe(403);
      expect(await del(reader, `${reader.dir}.lance-table.json`)).toBe(403);
    } finally {
      for (const v of [writer, sibling, managed, reader]) v.client.destroy();
    }
  });

  it("a writer's credentials never write the service's records, nor a managed table's committed manifests and Lance's hint, at the top or on a branch of one to three segments, and write all Lance writes there", async () => {
    // Names holding the characters radosgw's `*` stops at in the Deny ('.', '_', '-', '/', and 'e'), and multi-byte ones.
    const name = 'x_y.e-deep';
    const branches = [null, 'dev', 'a_b/c.d', 'x-1/y_2/z.3', 'ü_1/ß.2/é'];
    const tree = (branch: string | null) => (branch === null ? '' : `tree/${branch}/`);
    const uuid = '0b7e1c2a-9f3d-4e5a-8b6c-1d2e3f4a5b6c';
    const lanceWrites = (dir: string) => [
      `${dir}data/${uuid}.lance`,
      `${dir}_indices/${uuid}/index.idx`,
      `${dir}_deletions/3-7-1234567890.arrow`,
      `${dir}_transactions/7-${uuid}.txn`,
      `${dir}_versions/18446744073709551608.manifest-${uuid}`,
    ];
    const history = (dir: string) => [manifestKey(dir, 7, 'V1'), manifestKey(dir, 7, 'V2'), latestHintKey(dir)];
    for (const managed of [false, true]) {
      const id = `${managed ? 'vendm' : 'vend'}$${name}`;
      const created = await call('admin', `/v1/table/${id}/create`, peopleStream([1]), { 'content-type': 'application/vnd.apache.arrow.stream' });
      expect(created.status, created.text).toBe(200);
      const writer = await vended('writer', id);
      try {
        const denied = [
          '.lance-table.json',
          '.lance-reserved',
          ...branches.flatMap((b) => [versionSidecarKey(tree(b), 7), `${tree(b)}_catalog/writers/planted.json`, ...(managed ? history(tree(b)) : [])]),
        ];
        const allowed = branches.flatMap((b) => [...lanceWrites(tree(b)), ...(managed ? [] : history(tree(b)))]);
        const outcomes = async (keys: string[]) =>
          Promise.all(keys.map(async (k) => [k, await put(writer, `${writer.dir}${k}`), await del(writer, `${writer.dir}${k}`)]));
        expect(await outcomes(denied), `managed ${managed}`).toEqual(denied.map((k) => [k, 403, 403]));
        expect(await outcomes(allowed), `managed ${managed}`).toEqual(allowed.map((k) => [k, 200, 200]));
      } finally {
        writer.client.destroy();
      }
    }
  });
});
