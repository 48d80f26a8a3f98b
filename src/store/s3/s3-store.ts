import { createHash } from 'node:crypto';
import { CopyObjectCommand, DeleteObjectsCommand, S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import {
  compareKeys,
  InvalidKeyError,
  type ListOptions,
  type ListPage,
  type ObjectInfo,
  type ObjectStore,
  PreconditionFailedError,
  type PutCondition,
  type PutOptions,
  type StoredObject,
  StoreUnavailableError,
} from '../object-store.js';
import { parseListObjectsResult } from './list-objects-result.js';
import { S3Requests, type S3Response } from './s3-requests.js';

export interface S3StoreConfig {
  bucket: string;
  /** Key prefix of the root inside the bucket, without leading or trailing '/'. */
  prefix: string;
  endpoint?: string;
  region: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  sessionToken?: string;
  forcePathStyle: boolean;
  /** Attempts per call for retryable failures (503, SlowDown, timeouts, 409 ConditionalRequestConflict). */
  maxAttempts?: number;
  /** Per-request timeout in milliseconds. */
  requestTimeoutMs?: number;
  /** Called before each retry of a failed request (metrics). */
  onRetry?: () => void;
}

const MULTIPART_THRESHOLD = 16 * 1024 * 1024;
/** S3's limit on a key's UTF-8 length; longer keys are refused as KeyTooLongError after a round trip. */
const MAX_KEY_BYTES = 1024;
const RETRYABLE_NAMES = new Set([
  'SlowDown',
  'ServiceUnavailable',
  'InternalError',
  'RequestTimeout',
  'RequestTimeoutException',
  'TimeoutError',
  'ThrottlingException',
  'ConditionalRequestConflict',
  'NetworkingError',
]);
const RETRYABLE_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'ENOTFOUND',
  'ECONNABORTED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
]);

interface SdkError {
  name?: string;
  code?: string;
  $metadata?: { httpStatusCode?: number };
}

function asSdkError(e: unknown): SdkError {
  return typeof e === 'object' && e !== null ? (e as SdkError) : {};
}

/** Failures worth another attempt: throttling, server errors, timeouts, dropped connections, 409 races. */
export function isRetryableS3Error(e: unknown): boolean {
  const err = asSdkError(e);
  const status = err.$metadata?.httpStatusCode;
  if (err.name && RETRYABLE_NAMES.has(err.name)) return true;
  if (err.code && RETRYABLE_CODES.has(err.code)) return true;
  return status === 500 || status === 502 || status === 503 || status === 504 || status === 429;
}

function isNotFound(e: unknown): boolean {
  const err = asSdkError(e);
  return err.name === 'NoSuchKey' || err.name === 'NotFound' || err.$metadata?.httpStatusCode === 404;
}

function isPreconditionFailed(e: unknown): boolean {
  const err = asSdkError(e);
  return err.name === 'PreconditionFailed' || err.$metadata?.httpStatusCode === 412;
}

/** The etag and modification time an answer carries in its headers. */
function versionOf(response: S3Response): { etag: string; lastModified: Date } {
  const modified = response.headers['last-modified'];
  return { etag: response.headers.etag ?? '', lastModified: modified ? new Date(modified) : new Date(0) };
}

const md5Etag = (body: Buffer): string => `"${createHash('md5').update(body).digest('hex')}"`;
const unquote = (etag: string): string => etag.replace(/^"(.*)"$/, '$1');

/**
 * Runs `op` up to `attempts` times with exponential backoff and full jitter while it fails with a
 * retryable error; `attempt` (0-based) tells the operation whether an earlier try may have landed.
 */
export async function withRetries<T>(attempts: number, op: (attempt: number) => Promise<T>, baseDelayMs = 25, onRetry?: () => void): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await op(attempt);
    } catch (e) {
      if (!isRetryableS3Error(e)) throw e;
      if (attempt + 1 >= attempts) {
        // The message reaches clients; the failure (endpoint, bucket, key) is the cause, for the log.
        throw new StoreUnavailableError(`failed after ${attempts} attempts`, { cause: e });
      }
      const cap = Math.min(2000, baseDelayMs * 2 ** attempt);
      onRetry?.();
      await new Promise((r) => setTimeout(r, Math.random() * cap));
    }
  }
}

// S3 adapter. Single-object calls and LISTs are signed and sent by `S3Requests` (a fraction of the
// SDK's CPU per request); multipart uploads, batch deletes, copies and bucket set-up use the SDK.
// Create-if-absent is PutObject with `If-None-Match: *`, replace-if-unchanged is
// PutObject with `If-Match: <etag>`; the server settles races. Because a retried put may find its own
// earlier attempt already landed, a 412 after a retry is checked against the body's MD5 before it is
// reported as a lost race.
export class S3ObjectStore implements ObjectStore {
  readonly rootUri: string;
  readonly listsWholeDirectory = false;
  private readonly client: S3Client;
  private readonly requests: S3Requests;
  private readonly attempts: number;
  /** Runs a request with this store's retry policy (withRetries). */
  private retrying<T>(op: (attempt: number) => Promise<T>): Promise<T> {
    return withRetries(this.attempts, op, 25, this.config.onRetry);
  }

  /** Some servers (Ceph RGW 16) compare If-Match literally and only accept the unquoted etag. */
  private ifMatchUnquoted = false;

  constructor(private readonly config: S3StoreConfig) {
    this.rootUri = `s3://${config.bucket}${config.prefix ? `/${config.prefix}` : ''}`;
    this.attempts = config.maxAttempts ?? 5;
    const clientConfig: S3ClientConfig = {
      region: config.region,
      forcePathStyle: config.forcePathStyle,
      maxAttempts: 1, // retries are ours (withRetries), so that conditional puts can be re-checked
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: new NodeHttpHandler({
        connectionTimeout: 5_000,
        requestTimeout: config.requestTimeoutMs ?? 30_000,
        // Without this, @smithy/node-http-handler 4.x only logs a warning when requestTimeout passes
        // and the request hangs on: a stalled server would never surface as a (retryable) TimeoutError.
        throwOnRequestTimeout: true,
      }),
    };
    if (config.endpoint) clientConfig.endpoint = config.endpoint;
    if (config.accessKeyId && config.secretAccessKey) {
      clientConfig.credentials = {
        accessKeyId: config.accessKeyId,
        secretAccessKey: config.secretAccessKey,
        ...(config.sessionToken ? { sessionToken: config.sessionToken } : {}),
      };
    }
    this.client = new S3Client(clientConfig);
    const credentials = this.client.config.credentials;
    this.requests = new S3Requests({
      bucket: config.bucket,
      ...(config.endpoint ? { endpoint: config.endpoint } : {}),
      region: config.region,
      forcePathStyle: config.forcePathStyle,
      // The SDK's provider: the configured keys, or the default chain (environment, profile, instance role), refreshed as they expire.
      credentials: () => credentials(),
      connectionTimeoutMs: 5_000,
      requestTimeoutMs: config.requestTimeoutMs ?? 30_000,
    });
  }

  private fullKey(key: string): string {
    const full = this.config.prefix ? `${this.config.prefix}/${key}` : key;
    if (Buffer.byteLength(full) > MAX_KEY_BYTES)
      throw new InvalidKeyError(`the key ${JSON.stringify(key)} is too long for the store (S3 keys are at most ${MAX_KEY_BYTES} bytes)`);
    return full;
  }

  private storeKey(fullKey: string): string {
    return this.config.prefix ? fullKey.slice(this.config.prefix.length + 1) : fullKey;
  }

  location(key: string): string {
    const k = this.fullKey(key).replace(/\/$/, '');
    return `s3://${this.config.bucket}/${k}`;
  }

  objectPath(key: string): string {
    return this.fullKey(key).replace(/\/$/, '');
  }

  uri(key: string): string {
    return this.location(key);
  }

  engineStorageOptions(): Record<string, string> {
    const options = this.clientStorageOptions();
    if (this.config.accessKeyId && this.config.secretAccessKey) {
      options.aws_access_key_id = this.config.accessKeyId;
      options.aws_secret_access_key = this.config.secretAccessKey;
      if (this.config.sessionToken) options.aws_session_token = this.config.sessionToken;
    }
    return options;
  }

  clientStorageOptions(): Record<string, string> {
    const options: Record<string, string> = { aws_region: this.config.region };
    if (this.config.endpoint) {
      options.aws_endpoint = this.config.endpoint;
      if (this.config.endpoint.startsWith('http://')) options.allow_http = 'true';
    }
    if (this.config.forcePathStyle) options.aws_virtual_hosted_style_request = 'false';
    return options;
  }

  async close(): Promise<void> {
    this.client.destroy();
    this.requests.destroy();
  }

  /** Creates the bucket if it does not exist (used by tests and first start against a fresh server). */
  async ensureBucket(): Promise<void> {
    const { CreateBucketCommand, HeadBucketCommand } = await import('@aws-sdk/client-s3');
    try {
      await this.retrying(() => this.client.send(new HeadBucketCommand({ Bucket: this.config.bucket })));
    } catch (e) {
      if (!isNotFound(e)) throw e;
      try {
        await this.client.send(new CreateBucketCommand({ Bucket: this.config.bucket }));
      } catch (ce) {
        const name = asSdkError(ce).name;
        if (name !== 'BucketAlreadyOwnedByYou' && name !== 'BucketAlreadyExists') throw ce;
      }
    }
  }

  async head(key: string): Promise<ObjectInfo | null> {
    try {
      const out = await this.retrying(() => this.requests.send('HEAD', this.fullKey(key)));
      return { key, size: Number(out.headers['content-length'] ?? 0), ...versionOf(out) };
    } catch (e) {
      if (isNotFound(e)) return null;
      throw e;
    }
  }

  async get(key: string): Promise<StoredObject | null> {
    try {
      const out = await this.retrying(() => this.requests.send('GET', this.fullKey(key)));
      return { key, body: out.body, size: out.body.length, ...versionOf(out) };
    } catch (e) {
      if (isNotFound(e)) return null;
      throw e;
    }
  }

  async put(key: string, body: Buffer | string, condition?: PutCondition, options?: PutOptions): Promise<ObjectInfo> {
    const bytes = typeof body === 'string' ? Buffer.from(body) : body;
    // A PUT places the object at once: nothing can be sent before it may be placed.
    if (options?.placeAfter) await options.placeAfter;
    const Key = this.fullKey(key);
    if (!condition && bytes.length > MULTIPART_THRESHOLD) {
      // The uploader does not retry failed parts; retry the whole upload instead.
      await this.retrying(() => new Upload({ client: this.client, params: { Bucket: this.config.bucket, Key, Body: bytes } }).done());
      const info = await this.head(key);
      if (!info) throw new StoreUnavailableError(`multipart upload of ${key} finished but the object is missing`);
      return info;
    }
    const ourEtag = md5Etag(bytes);
    const send = (ifMatch?: string) =>
      this.retrying(async (attempt) => {
        try {
          const out = await this.requests.send('PUT', Key, {
            body: bytes,
            headers: {
              ...(condition && 'ifNoneMatch' in condition ? { 'if-none-match': '*' } : {}),
              ...(ifMatch !== undefined ? { 'if-match': ifMatch } : {}),
            },
          });
          return { key, size: bytes.length, etag: out.headers.etag ?? ourEtag, lastModified: new Date() };
        } catch (e) {
          if (isPreconditionFailed(e) && attempt > 0) {
            // An earlier attempt may have landed and its response been lost.
            const current = await this.head(key);
            if (current && unquote(current.etag) === unquote(ourEtag)) return current;
          }
          throw e;
        }
      });
    try {
      if (condition && 'ifMatch' in condition) {
        // The form sent decides, not the one known by the answer: another put may learn the
        // quoting meanwhile, and this one, sent quoted, must then be sent again like it.
        const unquoted = this.ifMatchUnquoted;
        const tag = unquoted ? unquote(condition.ifMatch) : condition.ifMatch;
        try {
          return await send(tag);
        } catch (e) {
          if (!isPreconditionFailed(e) || unquoted) throw e;
          const current = await this.head(key);
          if (!current || current.etag !== condition.ifMatch) throw e;
          // The etag still matches, so the server rejected the quoting: learn it and resend.
          this.ifMatchUnquoted = true;
          return await send(unquote(condition.ifMatch));
        }
      }
      return await send();
    } catch (e) {
      if (isPreconditionFailed(e)) {
        throw new PreconditionFailedError(key, condition && 'ifMatch' in condition ? 'etag changed' : 'object exists');
      }
      if (isNotFound(e) && condition && 'ifMatch' in condition) throw new PreconditionFailedError(key, 'object does not exist');
      throw e;
    }
  }

  async copy(fromKey: string, toKey: string, condition?: { ifNoneMatch: '*' }): Promise<ObjectInfo> {
    if (condition) {
      // Not every S3 server honours conditions on CopyObject (RGW ignores them), so copy by put.
      const source = await this.get(fromKey);
      if (!source) throw Object.assign(new Error(`no such object: ${fromKey}`), { code: 'ENOENT' });
      return this.put(toKey, source.body, condition);
    }
    await this.retrying(() =>
      this.client.send(
        new CopyObjectCommand({
          Bucket: this.config.bucket,
          Key: this.fullKey(toKey),
          CopySource: encodeURIComponent(`${this.config.bucket}/${this.fullKey(fromKey)}`).replace(/%2F/g, '/'),
        }),
      ),
    );
    const info = await this.head(toKey);
    if (!info) throw new StoreUnavailableError(`copy to ${toKey} finished but the object is missing`);
    return info;
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListPage<ObjectInfo>> {
    const after = options.startAfter;
    // Skipping "everything under after/" needs an exclusive bound above every key under it yet below
    // `${base}0` (which must still be listed, so replacing '/' by '0' would lose it): append U+10FFFF,
    // the largest code point, whose UTF-8 (F4 8F BF BF) no key under it can exceed in practice.
    const startAfter = after === undefined ? undefined : after.endsWith('/') ? `${after}\u{10FFFF}` : after;
    const send = async (continuationToken?: string) => {
      const query: Record<string, string> = { 'list-type': '2', prefix: this.fullKey(prefix), 'max-keys': String(options.maxKeys ?? 1000) };
      if (options.delimiter) query.delimiter = options.delimiter;
      if (continuationToken) query['continuation-token'] = continuationToken;
      else if (startAfter !== undefined) query['start-after'] = this.fullKey(startAfter);
      const out = await this.retrying(() => this.requests.send('GET', null, { query }));
      return parseListObjectsResult(out.body.toString('utf8'));
    };
    let out = await send();
    const objects: ObjectInfo[] = [];
    let commonPrefixes: string[] = [];
    for (;;) {
      for (const o of out.objects) objects.push({ ...o, key: this.storeKey(o.key) });
      commonPrefixes = out.commonPrefixes.map((p) => this.storeKey(p)).filter((p) => after === undefined || compareKeys(p, after) > 0);
      // A truncated page can be empty once filtered (the rest of a rolled-up prefix): follow the
      // server's own cursor until there is something to return, so that paging always advances.
      if (objects.length + commonPrefixes.length > 0 || !out.isTruncated || !out.nextContinuationToken) break;
      out = await send(out.nextContinuationToken);
    }
    if (!out.isTruncated) return { objects, commonPrefixes };
    const candidates = [...objects.map((o) => o.key), ...commonPrefixes].sort(compareKeys);
    const last = candidates[candidates.length - 1] ?? after;
    return last === undefined ? { objects, commonPrefixes } : { objects, commonPrefixes, nextStartAfter: last };
  }

  async delete(key: string): Promise<void> {
    try {
      await this.retrying(() => this.requests.send('DELETE', this.fullKey(key)));
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }

  async deletePrefix(prefix: string, options: { keep?: string[] } = {}): Promise<number> {
    if (prefix !== '' && !prefix.endsWith('/')) throw new Error(`deletePrefix needs '' or a prefix ending in '/': ${prefix}`);
    const keep = new Set(options.keep ?? []);
    let count = 0;
    let startAfter: string | undefined;
    for (;;) {
      const page = await this.list(prefix, { maxKeys: 1000, ...(startAfter ? { startAfter } : {}) });
      const doomed = page.objects.filter((o) => !keep.has(o.key));
      if (doomed.length > 0) {
        const out = await this.retrying(() =>
          this.client.send(
            new DeleteObjectsCommand({
              Bucket: this.config.bucket,
              Delete: { Objects: doomed.map((o) => ({ Key: this.fullKey(o.key) })), Quiet: true },
            }),
          ),
        );
        if (out.Errors && out.Errors.length > 0) {
          throw new StoreUnavailableError(`could not delete ${out.Errors.length} objects under ${prefix}: ${out.Errors[0]?.Message ?? ''}`);
        }
        count += doomed.length;
      }
      if (!page.nextStartAfter) return count;
      startAfter = page.nextStartAfter;
    }
  }
}
