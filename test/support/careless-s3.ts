import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import { PreconditionFailedError } from '../../src/store/object-store.js';

// An S3-compatible server that does not keep its word: while `careless`, it answers every PUT
// with 200 and writes the object, If-None-Match and If-Match notwithstanding, as some
// S3-compatible stores have done (else it honours them). Path-style requests on 127.0.0.1;
// signatures are not checked. It serves what the service needs to start and answer a few
// requests (objects, ListObjectsV2, HeadBucket), backed by a memory store.

export interface CarelessS3 {
  endpoint: string;
  bucket: string;
  /** Whether it ignores conditions now (from the start: true). */
  careless: boolean;
  /** Keys the server holds now, whatever their prefix. */
  keys(): Promise<string[]>;
  close(): Promise<void>;
}

const xmlText = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function reply(res: http.ServerResponse, status: number, headers: Record<string, string> = {}, body = ''): void {
  res.writeHead(status, { 'content-length': String(Buffer.byteLength(body)), ...headers });
  res.end(body);
}

const noSuchKey = (res: http.ServerResponse, head: boolean) =>
  reply(
    res,
    404,
    { 'content-type': 'application/xml' },
    head ? '' : '<?xml version="1.0"?><Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>',
  );

export async function startCarelessS3(bucket = 'careless'): Promise<CarelessS3> {
  const objects = new MemoryObjectStore(bucket);
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void answer(req, res, Buffer.concat(chunks)).catch((e: unknown) => reply(res, 500, {}, String(e)));
    });
  });
  async function answer(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const [, bucketName, ...rest] = url.pathname.split('/');
    if (bucketName !== bucket) return reply(res, 404, {}, '<Error><Code>NoSuchBucket</Code></Error>');
    const key = rest.map(decodeURIComponent).join('/');
    if (key === '') {
      if (req.method === 'HEAD') return reply(res, 200);
      if (req.method === 'GET' && url.searchParams.get('list-type') === '2')
        return reply(res, 200, { 'content-type': 'application/xml' }, await listXml(objects, url.searchParams));
      return reply(res, 501, {}, '<Error><Code>NotImplemented</Code></Error>');
    }
    if (req.method === 'PUT') {
      const ifMatch = req.headers['if-match'];
      const condition = req.headers['if-none-match'] === '*' ? { ifNoneMatch: '*' as const } : typeof ifMatch === 'string' ? { ifMatch } : undefined;
      // The carelessness: conditions neither checked nor refused.
      const info = await objects.put(key, body, careless.careless ? undefined : condition).catch((e: unknown) => {
        if (e instanceof PreconditionFailedError) return null;
        throw e;
      });
      if (!info) return reply(res, 412, { 'content-type': 'application/xml' }, '<Error><Code>PreconditionFailed</Code></Error>');
      return reply(res, 200, { etag: info.etag });
    }
    if (req.method === 'GET' || req.method === 'HEAD') {
      const got = await objects.get(key);
      if (!got) return noSuchKey(res, req.method === 'HEAD');
      res.writeHead(200, { etag: got.etag, 'last-modified': got.lastModified.toUTCString(), 'content-length': String(got.size) });
      res.end(req.method === 'GET' ? got.body : undefined);
      return;
    }
    if (req.method === 'DELETE') {
      await objects.delete(key);
      return reply(res, 204);
    }
    return reply(res, 501, {}, '<Error><Code>NotImplemented</Code></Error>');
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const careless: CarelessS3 = {
    endpoint: `http://127.0.0.1:${port}`,
    bucket,
    careless: true,
    keys: async () => (await objects.list('', { maxKeys: 100_000 })).objects.map((o) => o.key),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return careless;
}

/** A ListObjectsV2 answer from the memory store's listing (a continuation token is the last key of the page before). */
async function listXml(objects: MemoryObjectStore, query: URLSearchParams): Promise<string> {
  const startAfter = query.get('continuation-token') ?? query.get('start-after') ?? undefined;
  const page = await objects.list(query.get('prefix') ?? '', {
    details: true,
    ...(query.get('delimiter') === '/' ? { delimiter: '/' as const } : {}),
    ...(startAfter !== undefined ? { startAfter } : {}),
    maxKeys: Number(query.get('max-keys') ?? 1000),
  });
  const contents = page.objects.map(
    (o) =>
      `<Contents><Key>${xmlText(o.key)}</Key><Size>${o.size}</Size><ETag>${xmlText(o.etag)}</ETag><LastModified>${o.lastModified.toISOString()}</LastModified></Contents>`,
  );
  const prefixes = page.commonPrefixes.map((p) => `<CommonPrefixes><Prefix>${xmlText(p)}</Prefix></CommonPrefixes>`);
  const more =
    page.nextStartAfter !== undefined
      ? `<IsTruncated>true</IsTruncated><NextContinuationToken>${xmlText(page.nextStartAfter)}</NextContinuationToken>`
      : '<IsTruncated>false</IsTruncated>';
  return `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>${more}${contents.join('')}${prefixes.join('')}</ListBucketResult>`;
}
