import { describe, expect, it } from 'vitest';
import { PENDING_OPERATIONS } from '../../src/http/routes/unsupported.js';
import { useTestApp } from '../support/app.js';
import { localBackend } from '../support/backends.js';

describe('wire contract', () => {
  const fx = useTestApp(localBackend, { maxJsonBodyBytes: 64 * 1024 });

  it('answers errors with the spec body: code, error, instance and problem details', async () => {
    const res = await fx.t.call('POST', '/v1/namespace/missing/describe', {});
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toContain('application/json');
    expect(res.json).toEqual({
      code: 1,
      error: expect.stringContaining('missing'),
      instance: '/v1/namespace/missing/describe',
      type: '/errors/not-found-error',
      title: 'Namespace not found',
      status: 404,
    });
  });

  it('names the offending field for wrong types and unknown enum values', async () => {
    const cases: Array<[string, unknown, string]> = [
      ['/v1/namespace/w1/create', { properties: 'x' }, 'properties'],
      ['/v1/namespace/w1/create', { properties: { a: 1 } }, 'properties.a'],
      ['/v1/namespace/w1/create', { mode: 5 }, 'mode'],
      ['/v1/namespace/w1/create', { id: 'w1' }, 'id'],
      ['/v1/namespace/w1/drop', { behavior: 'sideways' }, 'behavior'],
      ['/v1/table/w%24t/register', {}, 'location'],
      ['/v1/table/w%24t/rename', { new_table_name: 3 }, 'new_table_name'],
      ['/v1/table/w%24t/describe', { version: -1 }, 'version'],
    ];
    for (const [url, body, field] of cases) {
      const res = await fx.t.call('POST', url, body);
      expect(res.status, url).toBe(400);
      expect(res.json.code, url).toBe(13);
      expect(String(res.json.error), url).toContain(field);
    }
    expect((await fx.t.call('POST', '/v1/namespace/w1/exists', {})).status).toBe(404);
  });

  it('rejects a body that is not JSON, and treats an empty or null body as an empty request', async () => {
    const broken = await fx.t.call('POST', '/v1/namespace/j/create', Buffer.from('{"properties":'));
    expect(broken.status).toBe(400);
    expect(broken.json.code).toBe(13);
    expect((await fx.t.call('POST', '/v1/namespace/j/create', Buffer.alloc(0))).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/namespace/j/describe', Buffer.from('null'))).status).toBe(200);
    const noType = await fx.t.app.server.inject({ method: 'POST', url: '/v1/namespace/j/exists' });
    expect(noType.statusCode).toBe(200);
  });

  it('answers 413 to an oversized body', async () => {
    const res = await fx.t.call('POST', '/v1/namespace/big/create', { properties: { blob: 'x'.repeat(100 * 1024) } });
    expect(res.status).toBe(413);
    expect(res.json.code).toBe(13);
    expect((await fx.t.call('POST', '/v1/namespace/big/exists', {})).status).toBe(404);
  });

  it('answers a spec-shaped 404 for unknown routes and a 405 for a known route with the wrong method', async () => {
    for (const [method, url] of [
      ['POST', '/v1/namespace/x/frobnicate'],
      ['POST', '/nothing'],
    ] as const) {
      const res = await fx.t.call(method, url);
      expect(res.status).toBe(404);
      expect(res.json).toMatchObject({ code: 0, type: '/errors/not-found-error', instance: url });
    }
    const wrongMethod = await fx.t.call('GET', '/v1/namespace/x/create');
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.allow).toBe('POST');
    expect(wrongMethod.json).toMatchObject({ code: 0, status: 405, instance: '/v1/namespace/x/create' });
  });

  it('routes every spec operation: none is left on the 406 list of unimplemented ones', async () => {
    expect(PENDING_OPERATIONS).toEqual([]);
    // The branch operations, the last to leave it, reach their service: a missing table is a 404.
    for (const url of ['/v1/table/a%24b/branches/list', '/v1/table/a%24b/branches/create', '/v1/table/a%24b/branches/delete']) {
      const res = await fx.t.call('POST', url, { name: 'dev' });
      expect([res.status, res.json.code], url).toEqual([404, 4]);
    }
  });

  it('accepts percent-encoded ids, custom delimiters, trailing slashes and rejects empty id parts', async () => {
    expect((await fx.t.call('POST', '/v1/namespace/enc/create', {})).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/namespace/enc%24in%20ner/create', {})).status).toBe(200);
    expect((await fx.t.call('GET', '/v1/namespace/enc/list')).json.namespaces).toEqual(['in ner']);
    expect((await fx.t.call('POST', '/v1/namespace/enc%7Cin%20ner/exists?delimiter=%7C', {})).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/namespace/enc/exists/', {})).status).toBe(200);
    for (const id of ['enc%24%24x', '%24enc', 'enc%24']) {
      const res = await fx.t.call('POST', `/v1/namespace/${id}/exists`, {});
      expect(res.status, id).toBe(400);
      expect(res.json.code, id).toBe(13);
    }
  });

  it('takes context from x-namespace-ctx-* headers and the body, echoes it and the request id', async () => {
    const res = await fx.t.call(
      'POST',
      '/v1/namespace/ctx/create',
      { context: { team: 'data', trace: 'body' } },
      {
        'x-namespace-ctx-trace': 'header',
        'x-request-id': 'req-123',
      },
    );
    expect(res.status).toBe(200);
    expect(res.headers['x-request-id']).toBe('req-123');
    expect(res.headers['x-namespace-ctx-team']).toBe('data');
    expect(res.headers['x-namespace-ctx-trace']).toBe('header');
    const generated = await fx.t.call('POST', '/v1/namespace/ctx/exists', {});
    expect(String(generated.headers['x-request-id'])).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("answers with the request's context in the spec's `context` field when the client sent one", async () => {
    const context = { trace: 'abc', team: 'data' };
    const created = await fx.t.call('POST', '/v1/namespace/echo/create', { context });
    expect(created.status).toBe(200);
    expect(created.json).toEqual({ properties: {}, context });
    const answers = [
      await fx.t.call('POST', '/v1/namespace/echo/describe', { context }),
      await fx.t.call('POST', '/v1/namespace/echo/list', { context }),
      await fx.t.call('POST', '/v1/table/echo%24t/declare', { context }),
      await fx.t.call('POST', '/v1/table/echo%24t/describe', { context }),
      await fx.t.call('POST', '/v1/namespace/echo/table/list', { context }),
    ];
    for (const res of answers) {
      expect(res.status, res.text).toBe(200);
      expect(res.json.context, res.text).toEqual(context);
    }
    // Headers are context too, and win over the body (as for the request).
    const headed = await fx.t.call('POST', '/v1/namespace/echo/describe', { context }, { 'x-namespace-ctx-trace': 'header' });
    expect(headed.json.context).toEqual({ trace: 'header', team: 'data' });
    // The spec's error body carries it as well.
    const missing = await fx.t.call('POST', '/v1/table/echo%24nothing/describe', { context });
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ code: 4, context });
    // None sent, none answered; a bare answer (a count, an exists) has nowhere to carry it.
    expect((await fx.t.call('POST', '/v1/namespace/echo/describe', {})).json).not.toHaveProperty('context');
    expect((await fx.t.call('POST', '/v1/namespace/echo/describe', { context: {} })).json).not.toHaveProperty('context');
    expect((await fx.t.call('POST', '/v1/table/echo%24nothing/describe', {})).json).not.toHaveProperty('context');
    expect((await fx.t.call('POST', '/v1/namespace/echo/exists', { context })).text).toBe('');
    // Every JSON answer object of the served document declares it.
    const doc = (await fx.t.call('GET', '/openapi.json')).json as {
      paths: Record<string, Record<string, { operationId: string; responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }> }>>;
      components: { schemas: Record<string, { type?: string; properties?: Record<string, unknown> }> };
    };
    const objects = Object.values(doc.paths)
      .flatMap((item) => Object.values(item))
      .flatMap((op) => Object.entries(op.responses).filter(([code]) => code.startsWith('2')))
      .map(([, r]) => r.content?.['application/json']?.schema.$ref?.split('/').pop())
      // Objects with fields: a bare map (UpdateTableSchemaMetadata's) has no room for it.
      .filter((name): name is string => name !== undefined && doc.components.schemas[name]?.properties !== undefined && name !== 'HealthResponse');
    expect(objects.length).toBeGreaterThan(40);
    for (const name of objects) expect(Object.keys(doc.components.schemas[name]?.properties ?? {}), name).toContain('context');
  });

  it('serves health checks and the OpenAPI document generated from the route schemas', async () => {
    expect((await fx.t.call('GET', '/health/live')).json).toEqual({ status: 'ok' });
    expect((await fx.t.call('GET', '/health/ready')).json).toEqual({ status: 'ok' });
    const doc = await fx.t.call('GET', '/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.json.openapi).toBe('3.1.0');
    const paths = doc.json.paths as Record<string, Record<string, { operationId: string; requestBody?: unknown }>>;
    const operationIds = Object.values(paths).flatMap((item) => Object.values(item).map((op) => op.operationId));
    for (const id of [
      'CreateNamespace',
      'ListNamespaces',
      'DescribeNamespace',
      'DropNamespace',
      'NamespaceExists',
      'ListTables',
      'ListAllTables',
      'DeclareTable',
      'CreateTable',
      'RegisterTable',
      'DescribeTable',
      'TableExists',
      'DropTable',
      'DeregisterTable',
      'RenameTable',
      'CreateTableVersion',
      'AlterTransaction',
    ]) {
      expect(operationIds, id).toContain(id);
    }
    expect(new Set(operationIds).size).toBe(operationIds.length);
    const schemas = (doc.json.components as { schemas: Record<string, { properties?: Record<string, unknown> }> }).schemas;
    expect(Object.keys(schemas.CreateNamespaceRequest?.properties ?? {})).toEqual(expect.arrayContaining(['mode', 'properties', 'id']));
    expect(schemas.ErrorResponse).toBeDefined();
    const branchList = paths['/v1/table/{id}/branches/list']?.post as unknown as { responses: Record<string, unknown> };
    expect(Object.keys(branchList.responses)).toContain('200');
    expect(paths['/v1/namespace/{id}/create']?.post?.requestBody).toEqual({
      required: false,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/CreateNamespaceRequest' } } },
    });
    // Every spec endpoint declares `delimiter`, also those without an id in the path (generated clients send it).
    const parameterNames = (op: unknown) => ((op as { parameters?: { name: string }[] }).parameters ?? []).map((p) => p.name);
    for (const path of ['/v1/table/version/batch-create', '/v1/table/batch-commit', '/v1/table']) {
      expect(parameterNames(paths[path]?.post), path).toContain('delimiter');
    }
    expect(parameterNames(paths['/health/live']?.get)).not.toContain('delimiter');
    // The described schema is the spec's JsonArrowSchema (clients parse `fields` as required).
    const described = schemas.DescribeTableResponse as { properties: Record<string, unknown> };
    expect(described.properties.schema).toEqual({ $ref: '#/components/schemas/JsonArrowSchema' });
    expect(schemas.JsonArrowSchema).toMatchObject({ required: ['fields'] });
    expect(schemas.JsonArrowField).toMatchObject({ required: ['name', 'nullable', 'type'] });
  });
});
