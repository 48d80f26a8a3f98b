import http from 'node:http';
import https from 'node:https';
import { canonicalQuery, EMPTY_BODY_SHA256, encodeKeyPath, type SigningCredentials, sha256Hex, signRequest } from './sigv4.js';

// One signed S3 request over a keep-alive connection: the adapter's single-object calls and LISTs go
// through here (the SDK stays for multipart uploads, batch deletes and bucket set-up). Failures are
// thrown in the shape the adapter's classifiers read: `name` (the S3 error code), `$metadata.httpStatusCode`,
// or a socket error's `code`, or `name: 'TimeoutError'`.

export interface S3Response {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A non-2xx answer: `name` is S3's error code (`NoSuchKey`, `PreconditionFailed`, `SlowDown`, ...). */
export class S3ResponseError extends Error {
  readonly $metadata: { httpStatusCode: number };
  constructor(name: string, status: number, message: string) {
    super(message);
    this.name = name;
    this.$metadata = { httpStatusCode: status };
  }
}

export interface S3RequestsConfig {
  bucket: string;
  /** `http(s)://host[:port]`; without it, AWS's regional endpoint. */
  endpoint?: string;
  region: string;
  forcePathStyle: boolean;
  credentials: () => Promise<SigningCredentials>;
  connectionTimeoutMs: number;
  requestTimeoutMs: number;
}

export interface S3RequestOptions {
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: Buffer;
}

const timeoutError = (message: string): Error => Object.assign(new Error(message), { name: 'TimeoutError' });

/** Reads `<Code>` and `<Message>` of an S3 error document (absent for HEAD, which has no body). */
function errorFrom(status: number, body: Buffer, method: string): S3ResponseError {
  const xml = body.toString('utf8');
  const code = /<Code>([^<]*)<\/Code>/.exec(xml)?.[1];
  const message = /<Message>([^<]*)<\/Message>/.exec(xml)?.[1];
  const name = code ?? (status === 404 ? 'NotFound' : status === 412 ? 'PreconditionFailed' : `Http${status}`);
  return new S3ResponseError(name, status, `${method} answered ${status} ${name}${message ? `: ${message}` : ''}`);
}

export class S3Requests {
  private readonly transport: typeof http | typeof https;
  private readonly agent: http.Agent;
  private readonly hostname: string;
  private readonly port: string;
  /** `host` header value (with the bucket in it for virtual-hosted style). */
  private readonly host: string;
  /** Path prefix before the key: `/<bucket>` (path style) or '' (virtual-hosted), after any endpoint path. */
  private readonly basePath: string;

  constructor(private readonly config: S3RequestsConfig) {
    const endpoint = new URL(config.endpoint ?? `https://s3.${config.region}.amazonaws.com`);
    this.transport = endpoint.protocol === 'https:' ? https : http;
    this.agent = new this.transport.Agent({ keepAlive: true, maxSockets: 64 });
    // Bucket names with dots break TLS wildcard certificates under virtual-hosted style.
    const virtualHosted = !config.forcePathStyle && !config.bucket.includes('.');
    this.hostname = virtualHosted ? `${config.bucket}.${endpoint.hostname}` : endpoint.hostname;
    this.port = endpoint.port;
    this.host = endpoint.port ? `${this.hostname}:${endpoint.port}` : this.hostname;
    const endpointPath = endpoint.pathname.replace(/\/$/, '');
    this.basePath = virtualHosted ? endpointPath : `${endpointPath}/${encodeKeyPath(config.bucket)}`;
  }

  /** Sends one request for `key` (a full key in the bucket), or for the bucket itself when `key` is null. */
  async send(method: 'GET' | 'HEAD' | 'PUT' | 'DELETE', key: string | null, options: S3RequestOptions = {}): Promise<S3Response> {
    const body = options.body ?? Buffer.alloc(0);
    const path = key === null ? this.basePath || '/' : `${this.basePath}/${encodeKeyPath(key)}`;
    const query = options.query ? canonicalQuery(options.query) : '';
    const headers: Record<string, string> = { ...options.headers };
    if (method === 'PUT') headers['content-length'] = String(body.length);
    signRequest(
      { method, host: this.host, path, query, headers, payloadSha256: method === 'PUT' ? sha256Hex(body) : EMPTY_BODY_SHA256 },
      await this.config.credentials(),
      this.config.region,
    );
    const response = await this.exchange(method, query ? `${path}?${query}` : path, headers, body);
    if (response.status >= 300) throw errorFrom(response.status, response.body, method);
    return response;
  }

  private exchange(method: string, path: string, headers: Record<string, string>, body: Buffer): Promise<S3Response> {
    return new Promise((resolve, reject) => {
      const req = this.transport.request({ agent: this.agent, hostname: this.hostname, port: this.port, method, path, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          // A body cut short (the connection closed early) is a dropped connection, not an answer.
          if (!res.complete) reject(Object.assign(new Error(`${method} ${path}: the response was cut short`), { code: 'ECONNRESET' }));
          else resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
        });
      });
      req.on('error', reject);
      req.setTimeout(this.config.requestTimeoutMs, () => req.destroy(timeoutError(`${method} ${path}: no answer within ${this.config.requestTimeoutMs} ms`)));
      req.on('socket', (socket) => {
        if (!socket.connecting) return;
        const timer = setTimeout(
          () => req.destroy(timeoutError(`${method} ${path}: no connection within ${this.config.connectionTimeoutMs} ms`)),
          this.config.connectionTimeoutMs,
        );
        socket.once('connect', () => clearTimeout(timer));
        socket.once('close', () => clearTimeout(timer));
      });
      req.end(body.length > 0 ? body : undefined);
    });
  }

  destroy(): void {
    this.agent.destroy();
  }
}
