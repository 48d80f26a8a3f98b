// Authorization: roles grant read / write / manage on namespace subtrees; every
// operation needs one privilege (src/http/authorization.ts); 403 code 15 otherwise, before the
// handler runs (so nothing changes, and nothing is told about what the caller may not see);
// listings show only what the caller may see.

import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATIONS } from '../../src/http/authorization.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { peopleStream } from '../support/arrow-data.js';
import { localBackend, type TestRoot } from '../support/backends.js';
import { expectSpecBody } from '../support/spec-body.js';

const sha256 = (key: string) => createHash('sha256').update(key).digest('hex');
const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
const as = (who: string) => ({ 'x-api-key': `${who}-key` });

describe('authorization', () => {
  let root: TestRoot;
  let app: TestApp;

  beforeAll(async () => {
    root = await localBackend.newRoot();
    const principals = ['admin', 'reader', 'writer', 'nobody', 'sales-admin'];
    app = await startTestApp(root, {
      auth: { apiKeys: principals.map((p) => ({ principal: p, sha256: sha256(`${p}-key`) })) },
      authorization: {
        roles: {
          everything: [{ namespace: [], privilege: 'manage' }],
          'sales-reader': [{ namespace: ['sales'], privilege: 'read' }],
          'sales-writer': [{ namespace: ['sales'], privilege: 'write' }],
          'sales-manager': [{ namespace: ['sales'], privilege: 'manage' }],
        },
        principals: { admin: ['everything'], reader: ['sales-reader'], writer: ['sales-writer'], nobody: [], 'sales-admin': ['sales-manager'] },
      },
    });
    for (const ns of ['sales', 'sales%24eu', 'hr']) expect((await app.call('POST', `/v1/namespace/${ns}/create`, {}, as('admin'))).status).toBe(200);
    for (const t of ['sales%24t', 'hr%24secret'])
      expect((await app.call('POST', `/v1/table/${t}/create`, peopleStream([1]), { ...ARROW, ...as('admin') })).status).toBe(200);
  });
  afterAll(async () => {
    await app?.close();
    await root?.dispose();
  });

  const denied = async (who: string, method: 'GET' | 'POST', url: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await app.call(method, url, body, { ...headers, ...as(who) });
    expect(res.status, `${who} ${url}: ${res.text}`).toBe(403);
    expectSpecBody(res.json, 403, 15, root);
  };

  it('lets readers read their subtree only, and refuses them every write', async () => {
    expect((await app.call('POST', '/v1/table/sales%24t/describe', {}, as('reader'))).status).toBe(200);
    expect((await app.call('POST', '/v1/table/sales%24t/count_rows', {}, as('reader'))).json).toEqual({ value: 1 });
    await denied('reader', 'POST', '/v1/table/sales%24t/insert', peopleStream([2]), ARROW);
    await denied('reader', 'POST', '/v1/table/sales%24new/declare', {});
    await denied('reader', 'POST', '/v1/table/hr%24secret/describe', {});
    // What it may not see is not told apart from what does not exist.
    await denied('reader', 'POST', '/v1/table/hr%24nothing/describe', {});
    await denied('reader', 'GET', '/v1/namespace/hr/table/list');
    expect((await app.call('POST', '/v1/table/sales%24t/count_rows', {}, as('admin'))).json).toEqual({ value: 1 });
  });

  it('lets a reader list and read branches, and only a writer fork and delete them', async () => {
    await denied('reader', 'POST', '/v1/table/sales%24t/branches/create', { name: 'dev' });
    const forked = await app.call('POST', '/v1/table/sales%24t/branches/create', { name: 'dev' }, as('writer'));
    expect(forked.status, forked.text).toBe(200);
    expect(Object.keys((await app.call('GET', '/v1/table/sales%24t/branches/list', undefined, as('reader'))).json.branches as object)).toEqual(['dev']);
    expect((await app.call('POST', '/v1/table/sales%24t/count_rows', { branch: 'dev' }, as('reader'))).json).toEqual({ value: 1 });
    await denied('reader', 'POST', '/v1/table/sales%24t/insert?branch=dev', peopleStream([2]), ARROW);
    await denied('reader', 'POST', '/v1/table/sales%24t/branches/delete', { name: 'dev' });
    await denied('reader', 'GET', '/v1/table/hr%24secret/branches/list');
    await denied('writer', 'POST', '/v1/table/hr%24secret/branches/create', { name: 'dev' });
    expect((await app.call('POST', '/v1/table/sales%24t/branches/delete', { name: 'dev' }, as('writer'))).status).toBe(200);
  });

  it('refuses before reading the body: a reader announcing a 100 MB insert is answered 403 without sending it', async () => {
    await app.app.server.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.app.server.server.address() as AddressInfo;
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.write(
          'POST /v1/table/sales%24t/insert HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: reader-key\r\n' +
            'content-type: application/vnd.apache.arrow.stream\r\ncontent-length: 100000000\r\n\r\n',
        );
      });
      let received = '';
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString('latin1');
        if (received.includes('\r\n\r\n')) {
          socket.destroy();
          resolve(received);
        }
      });
      socket.on('error', reject);
    });
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 403 Forbidden');
  });

  it('lets writers write and create tables in their subtree, not change its structure', async () => {
    expect((await app.call('POST', '/v1/table/sales%24t/insert', peopleStream([2]), { ...ARROW, ...as('writer') })).status).toBe(200);
    expect((await app.call('POST', '/v1/table/sales%24eu%24w/declare', {}, as('writer'))).status).toBe(200);
    await denied('writer', 'POST', '/v1/table/sales%24t/drop');
    await denied('writer', 'POST', '/v1/namespace/sales%24more/create', {});
    await denied('writer', 'POST', '/v1/table/hr%24secret/insert', peopleStream([3]), ARROW);
    // A batch needs each operation's privilege on each table's namespace: a writer declares in its
    // subtree, not elsewhere, and may not delete versions or deregister (manage).
    await denied('writer', 'POST', '/v1/table/batch-commit', {
      operations: [{ declare_table: { id: ['sales', 'x'] } }, { declare_table: { id: ['hr', 'x'] } }],
    });
    await denied('writer', 'POST', '/v1/table/batch-commit', { operations: [{ deregister_table: { id: ['sales', 't'] } }] });
    await denied('writer', 'POST', '/v1/table/batch-commit', {
      operations: [{ delete_table_versions: { id: ['sales', 't'], ranges: [{ start_version: 1, end_version: 2 }] } }],
    });
    await denied('writer', 'POST', '/v1/table/version/batch-create', {
      entries: [{ id: ['hr', 'secret'], version: 2, manifest_path: '_versions/2.manifest-x' }],
    });
    expect((await app.call('POST', '/v1/table/hr%24x/exists', {}, as('admin'))).status).toBe(404);
    const declared = await app.call('POST', '/v1/table/batch-commit', { operations: [{ declare_table: { id: ['sales', 'batched'] } }] }, as('writer'));
    expect(declared.status, declared.text).toBe(200);
    // Its refusal names where the privilege is missing.
    const refused = await app.call('POST', '/v1/table/batch-commit', { operations: [{ declare_table: { id: ['hr', 'y'] } }] }, as('sales-admin'));
    expect(refused.status).toBe(403);
    expect(String(refused.json.error)).toMatch(/"hr"/);
    // A rename needs manage where the table goes as well as where it is.
    await denied('writer', 'POST', '/v1/table/sales%24t/rename', { new_table_name: 't2', new_namespace_id: ['sales'] });
    expect((await app.call('POST', '/v1/table/sales%24t/count_rows', {}, as('admin'))).json).toEqual({ value: 2 });
    expect((await app.call('POST', '/v1/table/hr%24secret/count_rows', {}, as('admin'))).json).toEqual({ value: 1 });
  });

  it('lets a rename out of a subtree only to a namespace the caller also manages', async () => {
    const res = await app.call('POST', '/v1/table/sales%24t/rename', { new_table_name: 'moved', new_namespace_id: ['hr'] }, as('sales-admin'));
    expect(res.status, res.text).toBe(403);
    expectSpecBody(res.json, 403, 15, root);
    expect(String(res.json.error)).toMatch(/"hr"/);
    expect((await app.call('POST', '/v1/table/sales%24t/exists', {}, as('admin'))).status).toBe(200);
  });

  it('lets a register take a place inside the root only in a namespace the caller manages', async () => {
    // hr's table, reached through sales by an absolute location or a relative one that climbs: refused.
    const hrTable = `${root.root}/hr/secret.lance`;
    const res = await app.call('POST', '/v1/table/sales%24stolen/register', { location: hrTable }, as('sales-admin'));
    expect(res.status, res.text).toBe(403);
    expectSpecBody(res.json, 403, 15, root);
    expect(String(res.json.error)).toMatch(/"hr"/);
    await denied('sales-admin', 'POST', '/v1/table/sales%24stolen/register', { location: `file://${hrTable}` });
    expect((await app.call('POST', '/v1/table/sales%24stolen/exists', {}, as('admin'))).status).toBe(404);
    // Its own namespace's table, under another name: allowed; and the admin may register hr's.
    expect((await app.call('POST', '/v1/table/sales%24alias/register', { location: `${root.root}/sales/t.lance` }, as('sales-admin'))).status).toBe(200);
    expect((await app.call('POST', '/v1/table/sales%24adopted/register', { location: hrTable }, as('admin'))).status).toBe(200);
  });

  it('shows in listings only what the caller may see', async () => {
    const rootList = (who: string) => app.call('GET', '/v1/namespace/%24/list', undefined, as(who));
    expect((await rootList('admin')).json.namespaces).toEqual(['hr', 'sales']);
    expect((await rootList('reader')).json.namespaces).toEqual(['sales']);
    expect((await app.call('GET', '/v1/namespace/sales/list', undefined, as('reader'))).json.namespaces).toEqual(['eu']);
    await denied('nobody', 'GET', '/v1/namespace/%24/list');
    const all = await app.call('GET', '/v1/table', undefined, as('reader'));
    expect(all.status, all.text).toBe(200);
    expect((all.json.tables as string[]).every((t) => t.startsWith('sales$'))).toBe(true);
    expect(all.json.tables).toContain('sales$t');
    expect((await app.call('GET', '/v1/table', undefined, as('admin'))).json.tables as string[]).toContain('hr$secret');
    await denied('nobody', 'POST', '/v1/table/sales%24t/describe', {});
    expect((await app.call('GET', '/health/ready')).status).toBe(200);
  });

  it('maps every operation the service serves to a privilege, but the open ones, which authentication lets through by their path', async () => {
    const openapi = (await app.call('GET', '/openapi.json')).json as { paths: Record<string, Record<string, { operationId?: string; security?: unknown[] }>> };
    const served = Object.entries(openapi.paths).flatMap(([path, methods]) =>
      Object.values(methods).map((m) => ({ path, operationId: m.operationId, open: m.security?.length === 0 })),
    );
    expect(served.length).toBeGreaterThan(50);
    const open = served.filter((s) => s.open);
    expect(open.map((s) => s.operationId).sort()).toEqual(['Live', 'Ready']);
    for (const { path } of open) expect((await app.call('GET', path)).status, path).toBe(200);
    // The document names a route's second method and its alias paths after it (ListNamespacesGet, DeclareTableAlias1).
    for (const { operationId: served_ = '' } of served.filter((s) => !s.open)) {
      const operation = served_ in OPERATIONS ? served_ : served_.replace(/(Get|Post|Alias\d+)$/, '');
      expect(operation in OPERATIONS, served_).toBe(true);
    }
  });
});
