// Resilience of the S3 adapter: which failures are retried, that retries are bounded and end in
// StoreUnavailableError, and that a retried conditional put whose first attempt landed reports
// success. No real S3 server: a tiny in-process HTTP server on 127.0.0.1 plays S3.

import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { S3ServiceException } from '@aws-sdk/client-s3';
import { afterEach, describe, expect, it } from 'vitest';
import { PreconditionFailedError, StoreUnavailableError } from '../../src/store/object-store.js';
import { isRetryableS3Error, S3ObjectStore, withRetries } from '../../src/store/s3/s3-store.js';
import { freePort } from '../support/s3-server.js';

function s3Error(name: string, status: number): S3ServiceException {
  return new S3ServiceException({ name, $fault: status >= 500 ? 'server' : 'client', $metadata: { httpStatusCode: status }, message: name });
}

function sysError(code: string, message = code): Error {
  return Object.assign(new Error(message), { code });
}

function timeoutError(): Error {
  return Object.assign(new Error('the request socket timed out'), { name: 'TimeoutError' });
}

const RETRYABLE: Array<[string, () => unknown]> = [
  ['503 SlowDown', () => s3Error('SlowDown', 503)],
  ['503 ServiceUnavailable', () => s3Error('ServiceUnavailable', 503)],
  ['503 with an unknown code', () => s3Error('Unknown', 503)],
  ['500 InternalError', () => s3Error('InternalError', 500)],
  ['502', () => s3Error('BadGateway', 502)],
  ['504', () => s3Error('GatewayTimeout', 504)],
  ['429', () => s3Error('TooManyRequests', 429)],
  ['409 ConditionalRequestConflict', () => s3Error('ConditionalRequestConflict', 409)],
  ['400 RequestTimeout', () => s3Error('RequestTimeout', 400)],
  ['TimeoutError', timeoutError],
  ['ETIMEDOUT', () => sysError('ETIMEDOUT')],
  ['ECONNRESET', () => sysError('ECONNRESET', 'socket hang up')],
  ['ECONNREFUSED', () => sysError('ECONNREFUSED')],
  ['EPIPE', () => sysError('EPIPE')],
];

const NOT_RETRYABLE: Array<[string, () => unknown]> = [
  ['412 PreconditionFailed', () => s3Error('PreconditionFailed', 412)],
  ['404 NoSuchKey', () => s3Error('NoSuchKey', 404)],
  ['404 NotFound', () => s3Error('NotFound', 404)],
  ['403 AccessDenied', () => s3Error('AccessDenied', 403)],
  ['409 BucketAlreadyExists', () => s3Error('BucketAlreadyExists', 409)],
  ['400 InvalidArgument', () => s3Error('InvalidArgument', 400)],
  ['a plain Error', () => new Error('boom')],
  ['a string', () => 'boom'],
  ['null', () => null],
  ['undefined', () => undefined],
];

describe('isRetryableS3Error', () => {
  it.each(RETRYABLE)('retries %s', (_, make) => {
    expect(isRetryableS3Error(make())).toBe(true);
  });
  it.each(NOT_RETRYABLE)('does not retry %s', (_, make) => {
    expect(isRetryableS3Error(make())).toBe(false);
  });
});

describe('withRetries', () => {
  it('returns the first success without retrying', async () => {
    const attempts: number[] = [];
    const succeed = async (attempt: number) => {
      attempts.push(attempt);
      return 'ok';
    };
    await expect(withRetries(5, succeed, 0)).resolves.toBe('ok');
    expect(attempts).toEqual([0]);
  });

  it.each(RETRYABLE)('retries %s and succeeds once it stops, reporting each retry', async (_, make) => {
    const attempts: number[] = [];
    let retries = 0;
    const result = await withRetries(
      5,
      async (attempt) => {
        attempts.push(attempt);
        if (attempt < 2) throw make();
        return attempt;
      },
      0,
      () => retries++,
    );
    expect(result).toBe(2);
    expect(attempts).toEqual([0, 1, 2]);
    expect(retries).toBe(2);
  });

  it.each(RETRYABLE)('gives up on %s after the bounded attempts with StoreUnavailableError', async (_, make) => {
    const errors: unknown[] = [];
    const err = await withRetries(
      4,
      async () => {
        const e = make();
        errors.push(e);
        throw e;
      },
      0,
    ).catch((e: unknown) => e);
    expect(errors).toHaveLength(4);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as StoreUnavailableError).cause).toBe(errors[3]);
    expect((err as Error).message).toMatch(/after 4 attempts/);
  });

  it.each(NOT_RETRYABLE)('throws %s at once, unchanged', async (_, make) => {
    let calls = 0;
    const thrown = make();
    const err = await withRetries(
      5,
      async () => {
        calls++;
        throw thrown;
      },
      0,
    ).then(
      () => 'resolved',
      (e: unknown) => e,
    );
    expect(err).toBe(thrown);
    expect(calls).toBe(1);
  });

  it('makes one attempt when asked for one', async () => {
    let calls = 0;
    const err = await withRetries(1, async () => {
      calls++;
      throw s3Error('SlowDown', 503);
    }).catch((e: unknown) => e);
    expect(calls).toBe(1);
    expect(err).toBeInstanceOf(StoreUnavailableError);
  });
});

// ---------------------------------------------------------------------------------------------
// A fake S3 endpoint on 127.0.0.1.

const BUCKET = 'fake-bucket';
const PREFIX = 'root';

interface FakeRequest {
  method: string;
  /** Key relative to the store root. */
  key: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** What the fake does with one request: answer it, or drop the connection without answering. */
// biome-ignore lint/suspicious/noConfusingVoidType: a handler that answers returns what its answering call does, void
type Handler = (req: FakeRequest, res: http.ServerResponse) => 'drop' | 'hang' | void;

interface FakeServer {
  endpoint: string;
  requests: FakeRequest[];
  close(): Promise<void>;
}

async function startFakeS3(handler: Handler): Promise<FakeServer> {
  const requests: FakeRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const full = decodeURIComponent(url.pathname).replace(new RegExp(`^/${BUCKET}/?`), '');
      const key = full.startsWith(`${PREFIX}/`) ? full.slice(PREFIX.length + 1) : full;
      const fake: FakeRequest = { method: req.method ?? '', key, query: url.searchParams, headers: req.headers, body: Buffer.concat(chunks) };
      requests.push(fake);
      const action = handler(fake, res);
      if (action === 'drop') req.socket.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function sendError(req: FakeRequest, res: http.ServerResponse, status: number, code: string): void {
  if (req.method === 'HEAD') {
    res.writeHead(status).end();
    return;
  }
  const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${code} from the fake</Message><RequestId>fake-1</RequestId></Error>`;
  res.writeHead(status, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(xml) }).end(xml);
}

const md5Etag = (body: Buffer): string => `"${createHash('md5').update(body).digest('hex')}"`;
const unquote = (etag: string): string => etag.replace(/^"(.*)"$/, '$1');

/** Just enough S3 for objects: PUT (with If-None-Match: * / If-Match), GET, HEAD, DELETE. */
class MiniS3 {
  readonly objects = new Map<string, { body: Buffer; etag: string }>();

  /** Applies a PUT (honouring its conditions) and returns the status it earns. */
  applyPut(req: FakeRequest): { status: 200; etag: string } | { status: 412 | 404 } {
    const current = this.objects.get(req.key);
    if (req.headers['if-none-match'] === '*' && current) return { status: 412 };
    const ifMatch = req.headers['if-match'];
    if (typeof ifMatch === 'string') {
      if (!current) return { status: 404 };
      if (unquote(ifMatch) !== unquote(current.etag)) return { status: 412 };
    }
    const etag = md5Etag(req.body);
    this.objects.set(req.key, { body: req.body, etag });
    return { status: 200, etag };
  }

  readonly handle: Handler = (req, res) => {
    if (req.method === 'PUT') {
      const result = this.applyPut(req);
      if (result.status === 200) res.writeHead(200, { etag: result.etag, 'content-length': 0 }).end();
      else sendError(req, res, result.status, result.status === 412 ? 'PreconditionFailed' : 'NoSuchKey');
      return;
    }
    const current = this.objects.get(req.key);
    if (req.method === 'DELETE') {
      this.objects.delete(req.key);
      res.writeHead(204).end();
      return;
    }
    if (req.method === 'GET' || req.method === 'HEAD') {
      if (!current) {
        sendError(req, res, 404, 'NoSuchKey');
        return;
      }
      res.writeHead(200, {
        etag: current.etag,
        'content-length': current.body.length,
        'last-modified': new Date().toUTCString(),
        'content-type': 'application/octet-stream',
      });
      res.end(req.method === 'GET' ? current.body : undefined);
      return;
    }
    sendError(req, res, 501, 'NotImplemented');
  };
}

const servers: FakeServer[] = [];
const stores: S3ObjectStore[] = [];

afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  for (const server of servers.splice(0)) await server.close();
});

async function fake(handler: Handler): Promise<FakeServer> {
  const server = await startFakeS3(handler);
  servers.push(server);
  return server;
}

function storeAt(endpoint: string, options: { maxAttempts?: number; requestTimeoutMs?: number } = {}): S3ObjectStore {
  const store = new S3ObjectStore({
    bucket: BUCKET,
    prefix: PREFIX,
    endpoint,
    region: 'us-east-1',
    accessKeyId: 'FAKEKEY',
    secretAccessKey: 'FAKESECRET',
    forcePathStyle: true,
    maxAttempts: options.maxAttempts ?? 3,
    ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
  });
  stores.push(store);
  return store;
}

/** Fails the first `n` requests with `fail`, then hands the rest to `next`. */
function failingFirst(n: number, fail: Handler, next: Handler): Handler {
  let seen = 0;
  return (req, res) => (seen++ < n ? fail(req, res) : next(req, res));
}

const slowDown: Handler = (req, res) => sendError(req, res, 503, 'SlowDown');
const methods = (server: FakeServer): string[] => server.requests.map((r) => r.method);

describe('S3ObjectStore against a failing endpoint', () => {
  it('raises StoreUnavailableError when nothing listens', async () => {
    const store = storeAt(`http://127.0.0.1:${await freePort()}`, { maxAttempts: 2 });
    const err = await store.head('k').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as StoreUnavailableError).cause).toMatchObject({ code: 'ECONNREFUSED' });
    await expect(store.put('k', 'x', { ifNoneMatch: '*' })).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.list('', { delimiter: '/' })).rejects.toBeInstanceOf(StoreUnavailableError);
  });

  it('raises StoreUnavailableError when every connection is dropped, after maxAttempts tries', async () => {
    const server = await fake(() => 'drop');
    const store = storeAt(server.endpoint, { maxAttempts: 3 });
    const err = await store.get('k').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect(methods(server)).toEqual(['GET', 'GET', 'GET']);
  });

  it('raises StoreUnavailableError when every answer is 503 SlowDown, after maxAttempts tries', async () => {
    const server = await fake(slowDown);
    const store = storeAt(server.endpoint, { maxAttempts: 3 });
    const err = await store.get('k').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as StoreUnavailableError).cause).toMatchObject({ name: 'SlowDown', $metadata: { httpStatusCode: 503 } });
    expect(methods(server)).toEqual(['GET', 'GET', 'GET']);

    server.requests.length = 0;
    await expect(store.put('k', 'body', { ifNoneMatch: '*' })).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.head('k')).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.list('a/', { delimiter: '/' })).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.delete('k')).rejects.toBeInstanceOf(StoreUnavailableError);
    // Every call made exactly maxAttempts requests (a put whose attempts all failed with 503 never
    // got a 412, so it never looked at the key).
    expect(methods(server)).toEqual(['PUT', 'PUT', 'PUT', 'HEAD', 'HEAD', 'HEAD', 'GET', 'GET', 'GET', 'DELETE', 'DELETE', 'DELETE']);
  });

  // The 5 s limit turns a regression (a request that never times out) into a quick failure.
  it('raises StoreUnavailableError when requests time out', { timeout: 5_000 }, async () => {
    const server = await fake(() => 'hang');
    const store = storeAt(server.endpoint, { maxAttempts: 2, requestTimeoutMs: 100 });
    const err = await store.get('k').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as StoreUnavailableError).cause).toMatchObject({ name: 'TimeoutError' });
    expect(methods(server)).toEqual(['GET', 'GET']);
  });

  it('succeeds when the server answers 503 twice and then 200', async () => {
    const s3 = new MiniS3();
    s3.objects.set('k', { body: Buffer.from('hello'), etag: md5Etag(Buffer.from('hello')) });
    const server = await fake(failingFirst(2, slowDown, s3.handle));
    const store = storeAt(server.endpoint, { maxAttempts: 3 });
    const got = await store.get('k');
    expect(got?.body.toString()).toBe('hello');
    expect(got?.etag).toBe(md5Etag(Buffer.from('hello')));
    expect(methods(server)).toEqual(['GET', 'GET', 'GET']);
  });

  it('retries a conditional put through 503s and a 409 ConditionalRequestConflict', async () => {
    const s3 = new MiniS3();
    let n = 0;
    const server = await fake((req, res) => {
      n++;
      if (n === 1) return slowDown(req, res);
      if (n === 2) return sendError(req, res, 409, 'ConditionalRequestConflict');
      return s3.handle(req, res);
    });
    const store = storeAt(server.endpoint, { maxAttempts: 3 });
    const info = await store.put('m/1.manifest', 'manifest', { ifNoneMatch: '*' });
    expect(info.etag).toBe(md5Etag(Buffer.from('manifest')));
    expect(methods(server)).toEqual(['PUT', 'PUT', 'PUT']);
    for (const r of server.requests) expect(r.headers['if-none-match']).toBe('*');
    expect(s3.objects.get('m/1.manifest')?.body.toString()).toBe('manifest');
  });

  it('does not retry 403, 404 or 412', async () => {
    const denied = await fake((req, res) => sendError(req, res, 403, 'AccessDenied'));
    const deniedErr = await storeAt(denied.endpoint)
      .get('k')
      .catch((e: unknown) => e);
    expect(deniedErr).not.toBeInstanceOf(StoreUnavailableError);
    expect(deniedErr).toMatchObject({ name: 'AccessDenied', $metadata: { httpStatusCode: 403 } });
    expect(methods(denied)).toEqual(['GET']);

    const s3 = new MiniS3();
    const missing = await fake(s3.handle);
    const store = storeAt(missing.endpoint);
    expect(await store.get('absent')).toBeNull();
    expect(await store.head('absent')).toBeNull();
    expect(methods(missing)).toEqual(['GET', 'HEAD']);

    s3.objects.set('taken', { body: Buffer.from('first'), etag: md5Etag(Buffer.from('first')) });
    missing.requests.length = 0;
    await expect(store.put('taken', 'second', { ifNoneMatch: '*' })).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(methods(missing)).toEqual(['PUT']); // a first-attempt 412 is a lost race: no HEAD, no retry
    expect(s3.objects.get('taken')?.body.toString()).toBe('first');
  });
});

describe('S3ObjectStore retried conditional puts', () => {
  // The first PUT is applied to the fake's state but its answer is lost (500, or the connection is
  // dropped); the retry then meets its own write and gets 412. The adapter must HEAD, recognise its
  // body's MD5 and report success.
  const lostAnswers: Array<[string, Handler]> = [
    ['a 500 InternalError', (req, res) => sendError(req, res, 500, 'InternalError')],
    ['a dropped connection', () => 'drop'],
  ];

  function landsThenLosesAnswer(s3: MiniS3, lose: Handler): Handler {
    let first = true;
    return (req, res) => {
      if (req.method === 'PUT' && first) {
        first = false;
        expect(s3.applyPut(req).status).toBe(200);
        return lose(req, res);
      }
      return s3.handle(req, res);
    };
  }

  it.each(lostAnswers)('create-if-absent whose first attempt landed but got %s reports success', async (_, lose) => {
    const s3 = new MiniS3();
    const server = await fake(landsThenLosesAnswer(s3, lose));
    const store = storeAt(server.endpoint, { maxAttempts: 3 });
    const info = await store.put('m/7.manifest', 'our manifest', { ifNoneMatch: '*' });
    expect(info.etag).toBe(md5Etag(Buffer.from('our manifest')));
    expect(info.size).toBe(12);
    expect(methods(server)).toEqual(['PUT', 'PUT', 'HEAD']);
    expect(s3.objects.get('m/7.manifest')?.body.toString()).toBe('our manifest');
  });

  it.each(lostAnswers)('replace-if-unchanged whose first attempt landed but got %s reports success', async (_, lose) => {
    const s3 = new MiniS3();
    const old = Buffer.from('v1');
    s3.objects.set('state.json', { body: old, etag: md5Etag(old) });
    const server = await fake(landsThenLosesAnswer(s3, lose));
    const store = storeAt(server.endpoint, { maxAttempts: 3 });
    const info = await store.put('state.json', 'v2', { ifMatch: md5Etag(old) });
    expect(info.etag).toBe(md5Etag(Buffer.from('v2')));
    expect(methods(server)).toEqual(['PUT', 'PUT', 'HEAD']);
    expect(server.requests[1]?.headers['if-match']).toBe(md5Etag(old));
    expect(s3.objects.get('state.json')?.body.toString()).toBe('v2');
  });

  it('a replace-if-unchanged sent quoted while another put learns that the server wants it unquoted still succeeds', async () => {
    const s3 = new MiniS3();
    for (const key of ['a', 'b']) s3.objects.set(key, { body: Buffer.from(key), etag: md5Etag(Buffer.from(key)) });
    // Like Ceph RGW 16: a quoted If-Match never matches. The one for `b` is answered only once the
    // adapter has learned that (from `a`) and sent `a` again unquoted, so `b` left quoted before.
    let answerB: (() => void) | undefined;
    const server = await fake((req, res) => {
      const ifMatch = req.headers['if-match'];
      if (req.method === 'PUT' && typeof ifMatch === 'string' && ifMatch.startsWith('"')) {
        if (req.key === 'b') answerB = () => sendError(req, res, 412, 'PreconditionFailed');
        else sendError(req, res, 412, 'PreconditionFailed');
        return;
      }
      s3.handle(req, res);
      // Once: the held answer goes out with the first unquoted put after it (later ones find it sent).
      const held = req.method === 'PUT' ? answerB : undefined;
      answerB = req.method === 'PUT' ? undefined : answerB;
      held?.();
    });
    const store = storeAt(server.endpoint);
    const [a, b] = await Promise.all(['a', 'b'].map((key) => store.put(key, `${key}2`, { ifMatch: md5Etag(Buffer.from(key)) })));
    expect([a?.etag, b?.etag]).toEqual([md5Etag(Buffer.from('a2')), md5Etag(Buffer.from('b2'))]);
    expect(s3.objects.get('b')?.body.toString()).toBe('b2');
  });

  it('a retried create-if-absent that meets someone else’s object still fails', async () => {
    const s3 = new MiniS3();
    // The first attempt did not land (503); meanwhile another writer created the key.
    let first = true;
    const server = await fake((req, res) => {
      if (req.method === 'PUT' && first) {
        first = false;
        s3.objects.set(req.key, { body: Buffer.from('theirs'), etag: md5Etag(Buffer.from('theirs')) });
        return slowDown(req, res);
      }
      return s3.handle(req, res);
    });
    const store = storeAt(server.endpoint, { maxAttempts: 3 });
    await expect(store.put('m/7.manifest', 'ours', { ifNoneMatch: '*' })).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(methods(server)).toEqual(['PUT', 'PUT', 'HEAD']);
    expect(s3.objects.get('m/7.manifest')?.body.toString()).toBe('theirs');
  });
});
