import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { EngineError } from '../../src/engine/lance-engine.js';
import { readManifestSummary } from '../../src/engine/lance-format/manifest.js';
import { manifestFileName, parseManifestFileName } from '../../src/engine/lance-format/manifest-names.js';
import { classify } from '../../src/engine/lancedb/table-access.js';
import { MergeTimedOut } from '../../src/engine/ports/rows.js';
import { isLoopbackAddress } from '../../src/http/browser-guard.js';
import { httpStatusOfCode, messageScrubber, toWireError, wireError } from '../../src/http/errors.js';
import { RateLimiter } from '../../src/http/rate-limit.js';
import { parsePathId } from '../../src/http/route.js';
import { caseInsensitiveEnum } from '../../src/model/common.js';
import { ErrorCode, NamespaceError } from '../../src/model/errors.js';
import { tableRefOf, validateNamespaceId } from '../../src/service/catalog/layout.js';
import { Locations } from '../../src/service/catalog/locations.js';
import { PageTokens, paginate } from '../../src/service/catalog/page-token.js';
import { engineFailure, namespaceErrorOf, onEngine } from '../../src/service/errors/engine-errors.js';
import { LocalObjectStore } from '../../src/store/local-store.js';
import { PreconditionFailedError, StoreUnavailableError } from '../../src/store/object-store.js';
import { parseLocation, storeAt } from '../../src/store/open-store.js';

describe('path ids', () => {
  it('splits by the delimiter and maps the bare delimiter to the root', () => {
    expect(parsePathId('$', '$')).toEqual([]);
    expect(parsePathId('a$b$c', '$')).toEqual(['a', 'b', 'c']);
    expect(parsePathId('a.b', '.')).toEqual(['a', 'b']);
    expect(parsePathId('a$b', '::')).toEqual(['a$b']);
    expect(parsePathId('a::b', '::')).toEqual(['a', 'b']);
    for (const bad of ['', 'a$$b', '$a', 'a$']) expect(() => parsePathId(bad, '$')).toThrow(NamespaceError);
    expect(() => parsePathId('a', '')).toThrow(NamespaceError);
  });
});

describe('names', () => {
  it('accepts ordinary names and refuses the dangerous ones', () => {
    expect(validateNamespaceId(['sales', 'eu-west', 'Q1 2026', 'ünïcode'])).toHaveLength(4);
    expect(tableRefOf(['a', 'b', 't.v2'])).toEqual({ namespace: ['a', 'b'], name: 't.v2' });
    for (const bad of ['', '.', '..', '.x', 'a/b', 'a\\b', 'a\u0000b', 'a\nb', 'x.lance', 'X.LANCE', '_catalog', 'a.~tmp~b', 'n'.repeat(250)]) {
      expect(() => validateNamespaceId([bad]), JSON.stringify(bad)).toThrow(NamespaceError);
    }
    expect(() => tableRefOf([])).toThrow(NamespaceError);
    expect(() => tableRefOf(['ns', '..'])).toThrow(NamespaceError);
    expect(tableRefOf(['x.lance.t']).name).toBe('x.lance.t');
  });
});

describe('case-insensitive enums', () => {
  const Mode = caseInsensitiveEnum(['Create', 'ExistOk', 'Overwrite']);
  it('accepts PascalCase, snake_case and any case, and returns the canonical value', () => {
    for (const v of ['ExistOk', 'exist_ok', 'EXIST_OK', 'existok']) expect(Mode.parse(v)).toBe('ExistOk');
    expect(Mode.safeParse('exists').success).toBe(false);
  });
});

describe('page tokens', () => {
  const tokens = new PageTokens('secret');
  it('round-trips within one listing and refuses forged, foreign or other-secret tokens', () => {
    const token = tokens.encode('namespaces', '["a"]', 'x');
    expect(tokens.decode('namespaces', '["a"]', token)).toBe('x');
    expect(tokens.decode('namespaces', '["a"]', '')).toBeUndefined();
    expect(tokens.decode('namespaces', '["a"]', null)).toBeUndefined();
    expect(() => tokens.decode('namespaces', '["b"]', token)).toThrow(NamespaceError);
    expect(() => tokens.decode('tables', '["a"]', token)).toThrow(NamespaceError);
    expect(() => new PageTokens('other').decode('namespaces', '["a"]', token)).toThrow(NamespaceError);
    const [payload] = token.split('.');
    expect(() => tokens.decode('namespaces', '["a"]', `${payload}.${'A'.repeat(22)}`)).toThrow(NamespaceError);
    expect(() => tokens.decode('namespaces', '["a"]', 'x.y.z')).toThrow(NamespaceError);
  });
  it('paginates with an inclusive limit', () => {
    const next = (last: string) => `after:${last}`;
    expect(paginate(['a', 'b', 'c'], 2, (s) => s, next)).toEqual({ page: ['a', 'b'], pageToken: 'after:b' });
    expect(paginate(['a', 'b'], 2, (s) => s, next)).toEqual({ page: ['a', 'b'], pageToken: null });
    expect(paginate(['a'], undefined, (s) => s, next)).toEqual({ page: ['a'], pageToken: null });
    expect(paginate(['a'], 0, (s) => s, next)).toEqual({ page: [], pageToken: null });
  });
});

describe('manifest names', () => {
  it('follows Lance: V1 plain, V2 the 20-digit u64::MAX - version', () => {
    expect(manifestFileName(1, 'V2')).toBe('18446744073709551614.manifest');
    expect(manifestFileName(0, 'V2')).toBe('18446744073709551615.manifest');
    expect(manifestFileName(42, 'V1')).toBe('42.manifest');
    expect(parseManifestFileName('18446744073709551573.manifest')).toEqual({ version: 42, scheme: 'V2' });
    expect(parseManifestFileName('7.manifest')).toEqual({ version: 7, scheme: 'V1' });
    for (const other of ['18446744073709551573.manifest-1b2c', 'd5.manifest', '.manifest', 'x.manifest', '7.txn']) {
      expect(parseManifestFileName(other), other).toBeNull();
    }
  });
});

describe('manifest files', () => {
  // Protobuf by hand: a varint, and fields of wire type 0 (varint) and 2 (bytes).
  const varint = (n: number): number[] => {
    const out: number[] = [];
    let v = BigInt(n);
    do {
      const low = Number(v & 0x7fn);
      v >>= 7n;
      out.push(v > 0n ? low | 0x80 : low);
    } while (v > 0n);
    return out;
  };
  const num = (field: number, n: number) => Buffer.from([...varint(field * 8), ...varint(n)]);
  const bytes = (field: number, payload: Buffer) => Buffer.concat([Buffer.from([...varint(field * 8 + 2), ...varint(payload.length)]), payload]);
  const manifestFile = (body: Buffer): Buffer => {
    const footer = Buffer.alloc(16);
    footer.writeBigUInt64LE(3n, 0);
    footer.writeUInt16LE(0, 8);
    footer.writeUInt16LE(1, 10);
    footer.write('LANC', 12, 'latin1');
    const length = Buffer.alloc(4);
    length.writeUInt32LE(body.length);
    return Buffer.concat([Buffer.from('idx'), length, body, footer]);
  };

  it('reads the version past every fragment, and the summary agrees', () => {
    // Fragments (field 2) come before the version (field 3), as Lance writes them; one has a deletion file.
    const fragment = (rows: number, deleted?: number) => bytes(2, Buffer.concat([num(1, 7), num(4, rows), ...(deleted ? [bytes(3, num(4, deleted))] : [])]));
    const fragments = Array.from({ length: 1000 }, (_, i) => fragment(300 + i, i === 10 ? 25 : undefined));
    const version = 2 ** 40 + 3; // beyond 32 bits: exact in a number
    const file = manifestFile(
      Buffer.concat([
        bytes(1, Buffer.from('schema')),
        ...fragments,
        num(3, version),
        bytes(7, Buffer.concat([num(1, 1_700_000_000), num(2, 5_000_000)])),
        bytes(19, Buffer.concat([bytes(1, Buffer.from('k')), bytes(2, Buffer.from('v'))])),
      ]),
    );
    expect(readManifestSummary(file)).toMatchObject({
      version,
      numFragments: 1000,
      physicalRows: 1000 * 300 + (999 * 1000) / 2,
      numDeletedRows: 25,
      timestampMillis: 1_700_000_000_005,
      tableMetadata: { k: 'v' },
    });
  });

  it('refuses what is not a whole Lance manifest', () => {
    const whole = manifestFile(Buffer.concat([bytes(2, num(4, 1)), num(3, 9)]));
    expect(readManifestSummary(whole).version).toBe(9);
    const truncatedField = manifestFile(Buffer.from([...varint(2 * 8 + 2), ...varint(50), 1, 2]));
    const overlongVarint = manifestFile(Buffer.from([3 * 8, ...Array<number>(10).fill(0xff), 1]));
    // A fragment whose own bytes are cut short: the staged manifest of a broken writer.
    const brokenFragment = manifestFile(Buffer.concat([bytes(2, Buffer.from([...varint(4 * 8 + 2), ...varint(9), 1])), num(3, 9)]));
    for (const bad of [Buffer.from('not a manifest at all'), whole.subarray(0, whole.length - 1), truncatedField, overlongVarint, brokenFragment]) {
      expect(() => readManifestSummary(bad)).toThrow();
    }
  });
});

describe('error mapping', () => {
  it('maps every spec code 0-23 to its HTTP status', () => {
    const expected = [406, 404, 409, 409, 404, 409, 404, 409, 404, 409, 404, 404, 404, 400, 409, 403, 401, 503, 500, 409, 400, 429, 404, 409];
    expected.forEach((status, code) => {
      expect(httpStatusOfCode(code), `code ${code}`).toBe(status);
      const wire = toWireError(new NamespaceError(code as never, `boom ${code}`), '/v1/x');
      expect(wire.status).toBe(status);
      expect(wire.body).toMatchObject({ code, error: `boom ${code}`, instance: '/v1/x', status });
    });
  });
  it('titles every answer after its code, not its status', () => {
    const titles = [
      'The server does not support this operation',
      'Namespace not found',
      'Namespace already exists',
      'Namespace not empty',
      'Table not found',
      'Table already exists',
      'Table index not found',
      'Table index already exists',
      'Table tag not found',
      'Table tag already exists',
      'Transaction not found',
      'Table version not found',
      'Table column not found',
      'Malformed request',
      'The namespace has been concurrently modified',
      'Not authorized to make this request',
      'No valid authentication credentials for the operation',
      'Service unavailable',
      'Internal Server Error',
      'Invalid table state',
      'Table schema validation failed',
      'Too many requests',
      'Table branch not found',
      'Table branch already exists',
    ];
    titles.forEach((title, code) => {
      expect(toWireError(new NamespaceError(code as never, 'x'), '/x').body.title, `code ${code}`).toBe(title);
    });
    expect(new Set(titles).size).toBe(titles.length);
    // Statuses that are no code's own (the framework's) keep a title of the status.
    expect(wireError(413, ErrorCode.InvalidInput, 'too large', '/x').body.title).toBe('Request body too large');
    expect(wireError(404, ErrorCode.Unsupported, 'no such route', '/x').body).toMatchObject({ title: 'Not found', type: '/errors/not-found-error' });
  });
  it('maps store failures to 503 and lost races to 409 code 14', () => {
    expect(toWireError(new StoreUnavailableError('down'), '/x')).toMatchObject({ status: 503, body: { code: 17 } });
    expect(toWireError(new PreconditionFailedError('k', 'etag changed'), '/x')).toMatchObject({ status: 409, body: { code: 14 } });
    expect(toWireError(new Error('surprise'), '/x')).toMatchObject({ status: 500, body: { code: 18 }, internal: true });
  });
  it('translates engine failures once, where the table is known, and store causes of internal failures at the edge', async () => {
    const mapped = await onEngine(['ns', 't'], () => Promise.reject(new EngineError('version_not_found', 'manifest _versions/9.manifest missing')), {
      version: 9,
    }).catch((e: unknown) => e);
    expect(mapped).toBeInstanceOf(NamespaceError);
    expect(mapped).toMatchObject({ code: 11, message: 'table ["ns","t"] has no version 9' });
    // Mapped once: mapping again changes nothing, and the wire carries it as it is.
    expect(engineFailure(mapped, ['other'])).toBe(mapped);
    expect(toWireError(mapped, '/x')).toMatchObject({ status: 404, body: { code: 11, error: 'table ["ns","t"] has no version 9' } });
    expect(engineFailure(new MergeTimedOut('merge ran out of time'), ['t'])).toMatchObject({ code: 17 });
    // An engine failure nobody mapped is internal; one caused by an unavailable store is a 503.
    expect(namespaceErrorOf(new EngineError('conflict', 'x'))).toMatchObject({ code: 18, message: 'Lance engine error: x' });
    const outage = new NamespaceError(ErrorCode.Internal, 'engine failed', {
      cause: new EngineError('internal', 'io', { cause: new StoreUnavailableError('disk full') }),
    });
    expect(namespaceErrorOf(outage)).toMatchObject({ code: 17, message: 'the object store is unavailable: disk full' });
    // A specific code is kept whatever its cause.
    const notFound = new NamespaceError(ErrorCode.TableNotFound, 'gone', { cause: new StoreUnavailableError('disk full') });
    expect(namespaceErrorOf(notFound)).toBe(notFound);
    expect(namespaceErrorOf(new Error('bug'))).toBeUndefined();
  });
});

/**
 * What @lancedb/lancedb 0.39.0 (Lance 12) said, collected by running the engine against an S3
 * endpoint on 127.0.0.1 that refused, reset, closed or stalled connections or answered 500/503, a
 * name that does not resolve, a loop-mounted ext4 whose device failed (EIO) or whose journal was
 * aborted (EROFS), and a commit coordinator whose store was down (the resolver's 503). Trimmed to
 * the first of their repeated "Caused by" chains.
 */
const STORE_OUTAGES: Record<string, string> = {
  refused:
    'lance error: LanceError(IO): Generic S3 error: Error performing list request: Error performing GET http://127.0.0.1:33331/relbucket?list-type=2&prefix=cat%2Fns%2Ft.lance%2F_versions%2F in 653.710134ms, after 3 retries, max_retries: 3, retry_timeout: 180s  - HTTP error: error sending request, /usr/local/cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-io-12.0.0/src/object_store.rs:1490:92  Caused by: error sending request                Caused by: client error (Connect)                  Caused by: tcp connect error                    Caused by: Connection refused (os error 111)',
  dns: 'lance error: LanceError(IO): Generic S3 error: Error performing list request: Error performing GET http://no-such-host.invalid:9000/relbucket?list-type=2&prefix=cat%2Fns%2Ft.lance%2F_versions%2F in 473.080612ms, after 3 retries, max_retries: 3, retry_timeout: 180s  - HTTP error: error sending request, /usr/local/cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-io-12.0.0/src/object_store.rs:1490:92  Caused by: client error (Connect)                  Caused by: dns error                    Caused by: failed to lookup address information: Name or service not known',
  reset:
    'lance error: LanceError(IO): Generic S3 error: Error performing list request: Error performing GET http://127.0.0.1:34711/relbucket?list-type=2&prefix=cat%2Fns%2Ft.lance%2F_versions%2F in 548.272227ms, after 3 retries, max_retries: 3, retry_timeout: 180s  - HTTP error: error sending request, /usr/local/cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-io-12.0.0/src/object_store.rs:1490:92  Caused by: client error (SendRequest)                  Caused by: connection error                    Caused by: Connection reset by peer (os error 104)',
  closed:
    'lance error: LanceError(IO): Generic S3 error: Error performing list request: Error performing GET http://127.0.0.1:41617/relbucket?list-type=2&prefix=cat%2Fns%2Ft.lance%2F_versions%2F in 534.782196ms, after 3 retries, max_retries: 3, retry_timeout: 180s  - HTTP error: error sending request  Caused by: client error (SendRequest)                  Caused by: connection closed before message completed',
  stalled:
    'lance error: LanceError(IO): Generic S3 error: Error performing list request: Error performing GET http://127.0.0.1:35281/relbucket?list-type=2&prefix=cat%2Fns%2Ft.lance%2F_versions%2F in 8.400499703s, after 3 retries, max_retries: 3, retry_timeout: 180s  - HTTP error: error sending request  Caused by: operation timed out',
  http500:
    'lance error: LanceError(IO): Generic S3 error: Error performing list request: Error performing GET http://127.0.0.1:40603/relbucket?list-type=2&prefix=cat%2Fns%2Ft.lance%2F_versions%2F in 344.37662ms, after 3 retries, max_retries: 3, retry_timeout: 180s  - Server returned non-2xx status code: 500 Internal Server Error: <?xml version="1.0"?><Error><Code>InternalError</Code><Message>x</Message></Error>, /usr/local/cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-io-12.0.0/src/object_store.rs:1490:92',
  http503:
    'lance error: LanceError(IO): Generic S3 error: Error performing list request: Error performing GET http://127.0.0.1:42399/relbucket?list-type=2&prefix=cat%2Fns%2Ft.lance%2F_versions%2F in 544.504692ms, after 3 retries, max_retries: 3, retry_timeout: 180s  - Server returned non-2xx status code: 503 Service Unavailable: <?xml version="1.0"?><Error><Code>SlowDown</Code><Message>x</Message></Error>, /usr/local/cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-io-12.0.0/src/object_store.rs:1490:92',
  eio: 'lance error: LanceError(IO): Generic N/A error: LanceError(IO): Generic LocalFileSystem error: Unable to read data from file /tmp/i28a/disk/ns/t.lance/_versions/18446744073709551614.manifest: Input/output error (os error 5), /rustc/2d8144b7880597b6e6d3dfd63a9a9efae3f533d3/library/core/src/result.rs:1896:29, /usr/local/cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-12.0.0/src/dataset.rs:763:26',
  erofs:
    'lance error: LanceError(IO): Read-only file system (os error 30) at path "/tmp/i28a/disk/ns/t.lance/data/.tmpzmMEeP", /usr/local/cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-io-12.0.0/src/object_store.rs:990:34',
  coordinator:
    'lance error: Namespace error: Service unavailable: failed after 5 attempts, /usr/local/cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-namespace-impls-12.0.0/src/rest.rs:567:74  Caused by: Service unavailable: failed after 5 attempts',
  unverified:
    'Commit result for version 1 is unknown: the commit may or may not have been applied; check the table state before retrying: dataset creation reported a conflict but the manifest could not be read back for verification',
  // The AWS SDK's words when credentials come from IMDS or STS and those cannot be reached (lance issue 2166).
  credentials:
    'lance error: LanceError(IO): Failed to get AWS credentials: failed to load IMDS session token: dispatch failure: timeout: error trying to connect: HTTP connect timeout occurred after 1s',
};

describe('engine failures of an unreachable store', () => {
  it('are a 503 code 17 that names no endpoint, bucket, path or engine source', () => {
    const scrub = messageScrubber(['s3://relbucket/cat', 'cat']);
    for (const [what, message] of Object.entries(STORE_OUTAGES)) {
      const failure = classify(new Error(message));
      expect(failure.kind, what).toBe('store_unreachable');
      for (const mapped of [engineFailure(failure, ['ns', 't']), new NamespaceError(ErrorCode.Internal, 'engine failed', { cause: failure })]) {
        const wire = toWireError(mapped, '/v1/table/ns%24t/create', scrub);
        expect(wire, what).toMatchObject({ status: 503, body: { code: 17, title: 'Service unavailable' } });
        expect(JSON.stringify(wire.body), what).not.toMatch(/127\.0\.0\.1|no-such-host|relbucket|\/tmp\/|\.rs\b|cargo|LanceError|os error|IMDS|Caused by/);
      }
    }
    const full = classify(
      new Error(
        'lance error: LanceError(IO): No space left on device (os error 28), /usr/local/cargo/registry/src/index.crates.io-1949cf8c6b5b557f/lance-io-12.0.0/src/object_store.rs:984:21',
      ),
    );
    expect(full.kind).toBe('store_full');
    expect(engineFailure(full, ['ns', 't'])).toMatchObject({ code: 17, message: 'table ["ns","t"]: the store is full' });
  });

  it('leave what is not an outage as it was', () => {
    const kinds: Array<[string, string]> = [
      ['Dataset at path ns/t.lance was not found: Not found: cat/ns/t.lance/_versions', 'not_a_dataset'],
      [
        'Retryable commit conflict for version 42: This Project transaction was preempted by concurrent transaction Project at version 42. Please retry.',
        'conflict',
      ],
      ['Generic S3 error: ... 404 Not Found: <Code>NoSuchBucket</Code>', 'not_a_dataset'],
      ['Failed to get AWS credentials: the credential provider was not enabled', 'not_a_dataset'],
      ['Invalid input, the table name must not be empty', 'invalid_input'],
    ];
    for (const [message, kind] of kinds) expect(classify(new Error(message)).kind, message).toBe(kind);
  });
});

describe('message scrubbing', () => {
  /** The forms app.ts gives for a root: its URI, its location and its object path. */
  const scrubberOf = (root: string) => {
    const store = storeAt(parseLocation(root) ?? { kind: 'local', dir: root }, { region: 'r', forcePathStyle: true });
    return messageScrubber([store.rootUri, store.location(''), store.objectPath('')]);
  };

  it('cuts an S3 root whose prefix is a word only as a whole location prefix', () => {
    const scrub = scrubberOf('s3://relbucket/cat');
    // What the client sent is echoed as it was: `cat` inside words, names and other locations stays.
    for (const message of [
      'Absolute URIs are not allowed outside the catalog root and every allowed location: location "s3://relbucket/catalog/x.lance"',
      'namespace ["cat"] not found',
      'table ["cat","category"] already exists',
      'Path traversal is not allowed: location "cat/../t.lance" has a ".." segment',
      'Absolute URIs are not allowed outside the catalog root and every allowed location: location "s3://relbucket/cats/t.lance"',
      'Absolute URIs are not allowed outside the catalog root and every allowed location: location "s3://other/cat/t.lance"',
      'a concatenated word, a scattered cat, duplicate/cat/x',
    ]) {
      expect(scrub(message), message).toBe(message);
    }
    // The root itself goes, whole.
    expect(scrub('Dataset at path s3://relbucket/cat/ns/t.lance was not found')).toBe('Dataset at path ns/t.lance was not found');
    expect(scrub('location "s3://relbucket/cat/ns/t.lance" is in use')).toBe('location "ns/t.lance" is in use');
    expect(scrub('rename is not supported on s3://relbucket/cat: an object store')).toBe('rename is not supported on .: an object store');
    expect(scrub('the root is s3://relbucket/cat')).toBe('the root is .');
    expect(scrub('Object at location cat/ns/t.lance/_versions/1.manifest not found')).toBe('Object at location ns/t.lance/_versions/1.manifest not found');
  });

  it('cuts a one-letter prefix and a local root only at path boundaries', () => {
    const scrub = scrubberOf('s3://b/a');
    expect(scrub('a table named "a" at "a/b" in s3://b/ab and s3://b/a/ns/t.lance')).toBe('a table named "a" at "a/b" in s3://b/ab and ns/t.lance');
    const local = scrubberOf('/tmp/x');
    expect(local('open /tmp/x/ns/t.lance/data/f.lance (os error 5), /tmp/xy/z, /var/tmp/x/q, tmp/x/ns/u.lance')).toBe(
      'open ns/t.lance/data/f.lance (os error 5), /tmp/xy/z, /var/tmp/x/q, ns/u.lance',
    );
    expect(local('at path "/tmp/x/ns/t.lance/data/.tmpzm" in file:///tmp/x/ns and file:///tmp/x.')).toBe('at path "ns/t.lance/data/.tmpzm" in ns and ..');
    expect(local('user sent "tmp/x/y" and ./tmp/x')).toBe('user sent "tmp/x/y" and ./tmp/x');
    // Roots with characters that mean something in a pattern are taken literally.
    expect(scrubberOf('/tmp/a+b (1)')('open /tmp/a+b (1)/ns and /tmp/aab (1)/ns')).toBe('open ns and /tmp/aab (1)/ns');
  });
});

describe('locations', () => {
  it('parses roots and keeps registered locations inside the root as keys', () => {
    expect(parseLocation('s3://bucket/a/b/')).toEqual({ kind: 's3', bucket: 'bucket', prefix: 'a/b' });
    expect(parseLocation('s3://bucket')).toEqual({ kind: 's3', bucket: 'bucket', prefix: '' });
    expect(parseLocation('file:///tmp/x')).toEqual({ kind: 'local', dir: '/tmp/x' });
    expect(parseLocation('gs://b/x')).toBeNull();
    expect(parseLocation('s3://b/../x')).toBeNull();
    const store = new LocalObjectStore('/data/root');
    const locations = new Locations(store, { kind: 'local', dir: '/data/root' }, (location) => storeAt(location, { region: 'r', forcePathStyle: true }));
    expect(locations.resolve('ns/t.lance')).toMatchObject({ key: 'ns/t.lance/', owned: true });
    expect(locations.resolve('/data/root/ns/t.lance')).toMatchObject({ key: 'ns/t.lance/', owned: true });
    expect(locations.resolve('file:///data/root/ns/t.lance/')).toMatchObject({ key: 'ns/t.lance/', owned: true });
    // Outside the root only under an allowed location (same kind, same bucket, below its path or prefix).
    expect(() => locations.resolve('/elsewhere/t.lance')).toThrow(/^Absolute paths are not allowed outside the catalog root/);
    const allowing = new Locations(store, { kind: 'local', dir: '/data/root' }, (location) => storeAt(location, { region: 'r', forcePathStyle: true }), [
      { kind: 'local', dir: '/elsewhere' },
      { kind: 's3', bucket: 'b', prefix: 'p' },
    ]);
    expect(allowing.resolve('/elsewhere/t.lance')).toMatchObject({ key: '', owned: false });
    expect(allowing.resolve('s3://b/p/t.lance')).toMatchObject({ key: '', owned: false });
    for (const outside of ['/elsewhere-not/t.lance', 's3://b/pq/t.lance', 's3://c/p/t.lance', '/elsewhere/../x']) {
      expect(() => allowing.resolve(outside), outside).toThrow(/outside the catalog root/);
    }
    for (const bad of ['../x', 'a/../../x', './x', '', 'ftp://x/y']) expect(() => locations.resolve(bad), bad).toThrow(NamespaceError);
  });
});

describe('configuration file', () => {
  const write = (name: string, text: string): string => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lance-ns-config-'));
    const file = path.join(dir, name);
    writeFileSync(file, text);
    return file;
  };
  const key = 'a'.repeat(64);

  it("reads YAML and JSON under the options' names, below the command line and the environment", () => {
    const yaml = write(
      'c.yaml',
      `root: s3://b/p\nport: 9100\ns3_endpoint: http://127.0.0.1:9\nmanaged_versioning: true\nallowed_locations: [/srv/a, s3://x/y]\ncors_origins: https://c.example\nauth:\n  api_keys:\n    - principal: etl\n      sha256: ${key}\n`,
    );
    const c = loadConfig(['--config', yaml], {});
    expect(c).toMatchObject({
      root: 's3://b/p',
      port: 9100,
      managedVersioning: true,
      allowedLocations: ['/srv/a', 's3://x/y'],
      corsOrigins: ['https://c.example'],
    });
    expect(c.s3).toMatchObject({ endpoint: 'http://127.0.0.1:9', forcePathStyle: true });
    expect(c.auth).toEqual({ apiKeys: [{ principal: 'etl', sha256: key }] });
    expect(loadConfig(['--config', yaml, '--port', '1'], { LANCE_NS_PORT: '2' }).port).toBe(1);
    expect(loadConfig([], { LANCE_NS_CONFIG: yaml, LANCE_NS_PORT: '2' }).port).toBe(2);
    const json = write('c.json', JSON.stringify({ host: '127.0.0.2', kept_datasets: 3 }));
    expect(loadConfig(['--config', json], {})).toMatchObject({ host: '127.0.0.2', keptDatasets: 3, auth: undefined });
  });

  it('checks the store every hour by default and refuses an unsafe one unless allowed (flag, environment or file)', () => {
    expect(loadConfig([], {})).toMatchObject({ storeCheckIntervalMs: 3_600_000, allowUnsafeStore: false });
    expect(loadConfig(['--store-check-interval-ms', '0', '--allow-unsafe-store'], {})).toMatchObject({ storeCheckIntervalMs: 0, allowUnsafeStore: true });
    expect(loadConfig([], { LANCE_NS_STORE_CHECK_INTERVAL_MS: '60000', LANCE_NS_ALLOW_UNSAFE_STORE: 'true' })).toMatchObject({
      storeCheckIntervalMs: 60_000,
      allowUnsafeStore: true,
    });
    const file = write('s.yaml', 'store_check_interval_ms: 5000\nallow_unsafe_store: true\n');
    expect(loadConfig(['--config', file], {})).toMatchObject({ storeCheckIntervalMs: 5000, allowUnsafeStore: true });
    expect(() => loadConfig(['--store-check-interval-ms=-1'], {})).toThrow(/storeCheckIntervalMs/);
  });

  it('refuses unknown keys, malformed files and keys that are not hashes', () => {
    expect(() => loadConfig(['--config', write('u.yaml', 'rooot: x\n')], {})).toThrow(/unknown keys.*rooot/);
    expect(() => loadConfig(['--config', write('a.yaml', 'auth:\n  oauth: {}\n')], {})).toThrow(/unknown keys under auth/);
    expect(() => loadConfig(['--config', write('j.yaml', 'auth:\n  jwt:\n    issuer: i\n    audience: a\n')], {})).toThrow(/jwks_url and keys/);
    expect(() =>
      loadConfig(['--config', write('j2.yaml', 'auth:\n  jwt:\n    issuer: i\n    audience: a\n    jwks_url: https://i/k\n    secret: x\n')], {}),
    ).toThrow(/unknown keys under auth.jwt/);
    const jwt = loadConfig(
      ['--config', write('j3.yaml', 'auth:\n  jwt:\n    issuer: i\n    audience: a\n    jwks_url: https://i/jwks\n    clock_skew_seconds: 5\n')],
      {},
    ).auth?.jwt;
    expect(jwt).toMatchObject({ issuer: 'i', audience: 'a', jwksUrl: 'https://i/jwks', clockSkewSeconds: 5, principalClaim: 'sub' });
    const oauth2 = loadConfig(
      [
        '--config',
        write('o.yaml', `auth:\n  oauth2:\n    signing_secret: ${'s'.repeat(32)}\n    clients:\n      - client_id: etl\n        secret_sha256: ${key}\n`),
      ],
      {},
    ).auth?.oauth2;
    expect(oauth2).toEqual({ signingSecret: 's'.repeat(32), tokenTtlSeconds: 3600, clients: [{ clientId: 'etl', secretSha256: key, principal: 'etl' }] });
    const authz = loadConfig(
      ['--config', write('z.yaml', 'authorization:\n  roles:\n    r: [{ namespace: [a], privilege: read }]\n  principals:\n    p: [r]\n')],
      {},
    ).authorization;
    expect(authz).toEqual({ roles: { r: [{ namespace: ['a'], privilege: 'read' }] }, principals: { p: ['r'] } });
    expect(() => loadConfig(['--config', write('z2.yaml', 'authorization:\n  roles: {}\n  principals:\n    p: [missing]\n')], {})).toThrow(
      /defined under roles/,
    );
    expect(() =>
      loadConfig(['--config', write('z3.yaml', 'authorization:\n  roles:\n    r: [{ namespace: [a], privilege: own }]\n  principals: {}\n')], {}),
    ).toThrow(/privilege/);
    expect(loadConfig(['--config', write('r.yaml', 'rate_limit:\n  requests_per_second: 20\n  burst: 40\n')], {}).rateLimit).toEqual({
      requestsPerSecond: 20,
      burst: 40,
    });
    expect(loadConfig(['--config', write('r2.yaml', 'rate_limit:\n  requests_per_second: 5\n')], {}).rateLimit).toEqual({ requestsPerSecond: 5, burst: 5 });
    expect(() => loadConfig(['--config', write('r3.yaml', 'rate_limit:\n  rps: 5\n')], {})).toThrow(/unknown keys under rate_limit/);
    expect(loadConfig(['--config', write('v.yaml', 'credential_vending:\n  role_arn: arn:aws:iam::1:role/r\n')], {}).credentialVending).toEqual({
      roleArn: 'arn:aws:iam::1:role/r',
      durationSeconds: 3600,
      refreshBeforeSeconds: 300,
      stsEndpoint: undefined,
      externalId: undefined,
    });
    const vending = loadConfig(
      [
        '--config',
        write(
          'v2.yaml',
          'credential_vending:\n  role_arn: r\n  duration_seconds: 900\n  refresh_before_seconds: 60\n  sts_endpoint: http://127.0.0.1:7480\n  external_id: x\n',
        ),
      ],
      {},
    ).credentialVending;
    expect(vending).toEqual({ roleArn: 'r', durationSeconds: 900, refreshBeforeSeconds: 60, stsEndpoint: 'http://127.0.0.1:7480', externalId: 'x' });
    expect(() => loadConfig(['--config', write('v3.yaml', 'credential_vending:\n  role: r\n')], {})).toThrow(/unknown keys under credential_vending/);
    expect(() => loadConfig(['--config', write('v4.yaml', 'credential_vending:\n  role_arn: r\n  duration_seconds: 60\n')], {})).toThrow(/durationSeconds/);
    expect(() =>
      loadConfig(['--config', write('v5.yaml', 'credential_vending:\n  role_arn: r\n  duration_seconds: 900\n  refresh_before_seconds: 900\n')], {}),
    ).toThrow(/leave at least 60 seconds/);
    expect(() =>
      loadConfig(
        ['--config', write('o2.yaml', `auth:\n  oauth2:\n    signing_secret: short\n    clients:\n      - client_id: etl\n        secret_sha256: ${key}\n`)],
        {},
      ),
    ).toThrow(/32/);
    expect(() => loadConfig(['--config', write('l.yaml', '- a\n- b\n')], {})).toThrow(/mapping/);
    expect(() => loadConfig(['--config', write('b.yaml', 'root: [\n')], {})).toThrow(/cannot read/);
    expect(() => loadConfig(['--config', '/nonexistent/c.yaml'], {})).toThrow(/cannot read/);
    expect(() => loadConfig(['--config', write('k.yaml', 'auth:\n  api_keys:\n    - principal: etl\n      sha256: plain-key\n')], {})).toThrow(/sha256/);
  });
});

describe('configuration', () => {
  it('serves ./data on 127.0.0.1:2333 with no configuration; options beat environment', () => {
    expect(loadConfig([], {})).toMatchObject({ root: './data', host: '127.0.0.1', port: 2333, s3: { region: 'us-east-1', forcePathStyle: false } });
    const c = loadConfig(['--root', 's3://b/p', '--port', '9000'], { LANCE_NS_PORT: '1', LANCE_NS_S3_ENDPOINT: 'http://127.0.0.1:9', AWS_ACCESS_KEY_ID: 'ak' });
    expect(c).toMatchObject({ root: 's3://b/p', port: 9000, s3: { endpoint: 'http://127.0.0.1:9', accessKeyId: 'ak', forcePathStyle: true } });
    expect(() => loadConfig(['--port', 'x'], {})).toThrow(/port/);
    expect(() => loadConfig(['--bogus'], {})).toThrow();
    expect(loadConfig([], {}).allowedLocations).toEqual([]);
    expect(loadConfig(['--allowed-location', '/a', '--allowed-location', 's3://b/p'], { LANCE_NS_ALLOWED_LOCATIONS: '/x' }).allowedLocations).toEqual([
      '/a',
      's3://b/p',
    ]);
    expect(loadConfig([], { LANCE_NS_ALLOWED_LOCATIONS: ' /x , s3://y/z ,' }).allowedLocations).toEqual(['/x', 's3://y/z']);
    expect(loadConfig([], {}).insecure).toBe(false);
    expect(loadConfig(['--insecure'], {}).insecure).toBe(true);
    expect(loadConfig([], { LANCE_NS_INSECURE: 'true' }).insecure).toBe(true);
    expect(loadConfig([], {}).corsOrigins).toEqual([]);
    expect(loadConfig(['--cors-origin', 'https://a.example'], { LANCE_NS_CORS_ORIGINS: 'http://b' }).corsOrigins).toEqual(['https://a.example']);
    expect(loadConfig([], { LANCE_NS_CORS_ORIGINS: 'http://b:8080, https://c' }).corsOrigins).toEqual(['http://b:8080', 'https://c']);
    expect(() => loadConfig(['--cors-origin', 'https://a.example/path'], {})).toThrow(/corsOrigins/);
    for (const host of ['127.0.0.1', '127.9.9.9', 'localhost', '::1']) expect(isLoopbackAddress(host), host).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', 'example.com']) expect(isLoopbackAddress(host), host).toBe(false);
  });

  it('keeps 256 datasets open (256 MiB of manifests) by default; 0 keeps none; negative counts are refused', () => {
    expect(loadConfig([], {})).toMatchObject({
      keptDatasets: 256,
      keptDatasetBytes: 256 * 1024 * 1024,
      lanceIndexCacheBytes: 1024 ** 3,
      lanceMetadataCacheBytes: 256 * 1024 * 1024,
    });
    expect(loadConfig(['--lance-index-cache-bytes', '5'], { LANCE_NS_LANCE_METADATA_CACHE_BYTES: '7' })).toMatchObject({
      lanceIndexCacheBytes: 5,
      lanceMetadataCacheBytes: 7,
    });
    expect(loadConfig(['--kept-datasets', '0'], { LANCE_NS_KEPT_DATASETS: '9', LANCE_NS_KEPT_DATASET_BYTES: '1024' })).toMatchObject({
      keptDatasets: 0,
      keptDatasetBytes: 1024,
    });
    expect(() => loadConfig([], { LANCE_NS_KEPT_DATASETS: '-1' })).toThrow(/keptDatasets/);
  });

  it('runs no Python UDFs unless asked; ray needs an address; options, environment and file as for the rest', () => {
    expect(loadConfig([], {}).udf).toEqual({ execution: 'off', workers: 1 });
    expect(loadConfig(['--udf-execution', 'local', '--udf-workers', '3'], { LANCE_NS_UDF_PYTHON: '/opt/py' }).udf).toEqual({
      execution: 'local',
      workers: 3,
      python: '/opt/py',
    });
    expect(loadConfig([], { LANCE_NS_UDF_EXECUTION: 'ray', LANCE_NS_RAY_ADDRESS: '10.0.0.5:6379' }).udf).toMatchObject({
      execution: 'ray',
      rayAddress: '10.0.0.5:6379',
    });
    expect(() => loadConfig(['--udf-execution', 'ray'], {})).toThrow(/udf_execution ray needs ray_address/);
    expect(() => loadConfig(['--udf-execution', 'docker'], {})).toThrow(/udf/);
    expect(() => loadConfig(['--udf-workers', '0'], {})).toThrow(/udf/);
  });
});

describe('RateLimiter', () => {
  it('lets a burst through, then one request per 1/rate seconds, and says when to retry', () => {
    let now = 0;
    const limiter = new RateLimiter({ requestsPerSecond: 2, burst: 3 }, () => now);
    const headers: Record<string, string> = {};
    const reply = {
      header: (k: string, v: string) => {
        headers[k] = v;
        return reply;
      },
    } as unknown as Parameters<RateLimiter['take']>[1];
    for (let i = 0; i < 3; i++) limiter.take('p', reply);
    expect(() => limiter.take('p', reply)).toThrow(/too many requests/);
    expect(headers['retry-after']).toBe('1');
    limiter.take('q', reply); // another caller has its own bucket
    now += 500; // half a second: one token back
    limiter.take('p', reply);
    expect(() => limiter.take('p', reply)).toThrow();
    now += 10_000; // refilled to the burst, not beyond
    for (let i = 0; i < 3; i++) limiter.take('p', reply);
    expect(() => limiter.take('p', reply)).toThrow();
  });
});

describe('runtime', () => {
  it('runs on Node 22 or newer, and on the Node 24 that npm install brings when run by the test command', () => {
    const major = Number(process.versions.node.split('.')[0]);
    expect(major).toBeGreaterThanOrEqual(22);
    // scripts/test.sh puts node_modules/.bin (the devDependency `node`, 24 LTS) first on PATH; CI runs it.
    if (process.env.CI) expect(major).toBe(24);
  });
});
