import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildHttpServer, type Services } from '../../src/http/server.js';
import type { RequestContext } from '../../src/service/context/request-context.js';

// The request pipeline of the HTTP layer over stub services: what the hooks and the zod
// compilers do on their own, without a catalog behind them.

interface Call {
  operation: string;
  ctx: RequestContext;
  args: unknown[];
}

const calls: Call[] = [];
const logLines: Array<Record<string, unknown>> = [];
/** What the stub describe answers: a test sets a wrong shape to play a buggy handler. */
let describeAnswer: unknown = { properties: { a: 'b' } };

const record =
  (operation: string, answer: (...args: unknown[]) => unknown) =>
  async (ctx: RequestContext, ...args: unknown[]) => {
    calls.push({ operation, ctx, args });
    return answer(...args);
  };

function stubServices(): Services {
  const services = {
    namespaces: {
      create: record('CreateNamespace', () => ({ properties: {} })),
      describe: record('DescribeNamespace', () => describeAnswer),
    },
    rows: { count: record('CountTableRows', () => 7) },
    columns: { updateSchemaMetadata: record('UpdateTableSchemaMetadata', (_id, metadata) => metadata) },
    transactions: { describe: record('DescribeTransaction', () => ({ status: 'Committed', properties: {} })) },
    health: { ready: async () => ({ ok: true }) },
  };
  return services as unknown as Services;
}

describe('the HTTP request pipeline', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString('utf8').split('\n')) if (line.trim() !== '') logLines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    app = buildHttpServer(stubServices(), {
      logger: pino({ level: 'info' }, sink),
      jsonBodyLimit: 64 * 1024,
      arrowBodyLimit: 1024 * 1024,
      limits: {
        maxMapEntries: 100,
        maxMapBytes: 64 * 1024,
        largeBodyBytes: 512 * 1024,
        maxConcurrentLargeBodies: 2,
        maxBatchOperations: 1000,
        maxBatchEntries: 1000,
      },
      rootForms: ['/nowhere'],
      version: 'test',
      browser: { corsOrigins: [], loopbackOnly: true },
    });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
  });
  beforeEach(() => {
    calls.length = 0;
    logLines.length = 0;
    describeAnswer = { properties: { a: 'b' } };
  });

  const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
    app.inject({ method: 'POST', url, payload: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });

  it('serializes an answer through its response schema', async () => {
    const res = await post('/v1/namespace/a/describe', {});
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ properties: { a: 'b' } });
  });

  it('answers 500 with the spec error body, and logs, when a handler answers what its response schema does not allow', async () => {
    describeAnswer = { properties: 5 };
    const res = await post('/v1/namespace/a/describe', {}, { 'x-request-id': 'bad-shape' });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toMatchObject({ code: 18, status: 500, type: '/errors/server-error', instance: '/v1/namespace/a/describe' });
    expect(res.body).not.toContain('"properties"');
    const logged = logLines.find((l) => l.msg === 'request failed' && l.reqId === 'bad-shape');
    expect(logged?.level).toBe(50);
    expect(JSON.stringify(logged?.err)).toContain('does not match its schema');
    // A missing answer is no more allowed than a wrong one.
    describeAnswer = undefined;
    expect((await post('/v1/namespace/a/describe', {})).statusCode).toBe(500);
  });

  it('serializes a bare JSON value (a count) through its schema too', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/table/ns%24t/count_rows?predicate=x' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('7');
    expect(calls[0]?.args[1]).toEqual({ predicate: 'x', version: undefined });
  });

  it('writes one audit line per mutating request, failed or not, and none for reads', async () => {
    expect((await post('/v1/namespace/a%24b/create', {}, { 'x-request-id': 'audit-1' })).statusCode).toBe(200);
    expect((await post('/v1/namespace/a%24b/create', { mode: 'sideways' }, { 'x-request-id': 'audit-2' })).statusCode).toBe(400);
    expect((await post('/v1/namespace/a/describe', {}, { 'x-request-id': 'audit-3' })).statusCode).toBe(200);
    const audits = logLines.filter((l) => l.msg === 'audit').map((l) => l.audit as Record<string, unknown>);
    expect(audits).toHaveLength(2);
    expect(audits[0]).toEqual({
      operation: 'CreateNamespace',
      id: ['a', 'b'],
      status: 200,
      duration_ms: expect.any(Number),
      request_id: 'audit-1',
      principal: 'anonymous',
      context: {},
    });
    expect(audits[1]).toMatchObject({ operation: 'CreateNamespace', status: 400, request_id: 'audit-2' });
  });

  it('gives the handler the anonymous principal and the context from body and headers', async () => {
    await post('/v1/namespace/a/create', { context: { k: 'body', j: 'body' } }, { 'x-namespace-ctx-k': 'header' });
    expect(calls[0]?.ctx).toMatchObject({ principal: { id: 'anonymous' }, context: { k: 'header', j: 'body' } });
  });

  it('refuses a body id that differs from the path id before the handler runs, except where the body id names something else', async () => {
    const res = await post('/v1/namespace/a/create', { id: ['b'] });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 13, error: expect.stringContaining('does not match the id in the path') });
    expect(calls).toHaveLength(0);
    expect((await post('/v1/namespace/a%24b/create', { id: ['a', 'b'] })).statusCode).toBe(200);
    expect((await post('/v1/namespace/a.b/create?delimiter=.', { id: ['a', 'b'] })).statusCode).toBe(200);
    // A transaction's path id is the transaction; the body id is its table.
    expect((await post('/v1/transaction/tx-1/describe', { id: ['ns', 't'] })).statusCode).toBe(200);
  });

  it('hands the branch a route declares to its service; a bare-map body\'s key "branch" is the map\'s', async () => {
    // No route refuses a branch before its handler any more: each service resolves the branch it is given.
    expect((await post('/v1/table/ns%24t/count_rows', { branch: 'dev' })).statusCode).toBe(200);
    expect(calls.at(-1)?.args).toContainEqual(expect.objectContaining({ branch: 'dev' }));
    const map = await post('/v1/table/ns%24t/schema_metadata/update?branch=dev', { branch: 'x' });
    expect(map.statusCode).toBe(200);
    expect(map.json()).toEqual({ branch: 'x' });
    expect(calls.at(-1)?.args).toEqual([['ns', 't'], { branch: 'x' }, 'dev']);
    expect((await post('/v1/table/ns%24t/schema_metadata/update', { branch: 'dev' })).statusCode).toBe(200);
    expect(calls.at(-1)?.args).toEqual([['ns', 't'], { branch: 'dev' }, undefined]);
  });
});
