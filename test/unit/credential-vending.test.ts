import { afterAll, describe, expect, it } from 'vitest';
import { NamespaceError } from '../../src/model/errors.js';
import { latestHintKey } from '../../src/service/catalog/layout.js';
import type { RequestContext, VendRecord } from '../../src/service/context/request-context.js';
import { NO_CREDENTIALS_KEY, protectedKeys, TableCredentials } from '../../src/service/tables/credential-vending.js';
import { versionsOn } from '../../src/service/versions/branch-versions.js';
import { LocalObjectStore } from '../../src/store/local-store.js';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import { S3ObjectStore } from '../../src/store/s3/s3-store.js';
import { CredentialCache, type CredentialScope, type CredentialVendor } from '../../src/vending/credential-vendor.js';
import { locationPattern, sessionPolicy } from '../../src/vending/sts-credential-vendor.js';

// Credential vending without a network: the session policy each vend sends, the cache in front
// of the vendor, and which responses carry credentials, of which access level, or say why not.
// The same rules against radosgw's STS: test/realclient/vended-credentials.test.ts.

/** A vendor that counts its calls and hands out numbered credentials expiring `ttlMs` from `now()`. */
function countingVendor(now: () => number, ttlMs = 3_600_000) {
  const calls: CredentialScope[] = [];
  let fail: Error | null = null;
  let release: (() => void) | null = null;
  const vendor: CredentialVendor = {
    async vend(scope) {
      calls.push(scope);
      if (release === null) await Promise.resolve();
      else await new Promise<void>((r) => (release = r));
      if (fail) throw fail;
      return { accessKeyId: `AK${calls.length}`, secretAccessKey: `SK${calls.length}`, sessionToken: `ST${calls.length}`, expiresAtMillis: now() + ttlMs };
    },
    close() {},
  };
  return {
    vendor,
    calls,
    failWith: (e: Error | null) => (fail = e),
    hold: () => (release = () => undefined),
    releaseAll: () => {
      const r = release;
      release = null;
      r?.();
    },
  };
}

const scope = (prefix: string, access: CredentialScope['access'] = 'read'): CredentialScope => ({
  bucket: 'bkt',
  prefix,
  access,
  protectedKeys: protectedKeys(false),
});

describe('session policy', () => {
  it('reads the directory and lists only under it, for a reader', () => {
    const policy = JSON.parse(sessionPolicy(scope('root/ns/t.lance/'))) as { Statement: Array<Record<string, unknown>> };
    expect(policy.Statement).toEqual([
      { Effect: 'Allow', Action: ['s3:GetObject'], Resource: ['arn:aws:s3:::bkt/root/ns/t.lance/*'] },
      {
        Effect: 'Allow',
        Action: ['s3:ListBucket'],
        Resource: ['arn:aws:s3:::bkt'],
        Condition: { StringLike: { 's3:prefix': ['root/ns/t.lance/*'] } },
      },
    ]);
  });

  it("writes the directory but never the service's records, for a writer; with managed versioning not the committed manifests of main or of a branch either", () => {
    const policy = JSON.parse(sessionPolicy({ ...scope('ns/t.lance/', 'read-write'), protectedKeys: protectedKeys(true) })) as {
      Statement: Array<Record<string, unknown>>;
    };
    expect(policy.Statement[0]?.Action).toEqual(['s3:GetObject', 's3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload', 's3:ListMultipartUploadParts']);
    // The Deny names the directory `bkt/ns/t.lance/` as "up to the first 'e', then '/'" (locationPattern).
    expect(policy.Statement[2]).toEqual({
      Effect: 'Deny',
      Action: ['s3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload', 's3:ListMultipartUploadParts'],
      Resource: [
        '.lance-*',
        '_catalog/*',
        '_versions/*.manifest',
        '_versions/latest_version_hint.json',
        ...['tree/*/', 'tree/*/*/', 'tree/*/*/*/'].flatMap((branch) => [
          `${branch}_catalog/*`,
          `${branch}_versions/*.manifest`,
          `${branch}_versions/latest_version_hint.json`,
        ]),
      ].map((k) => `arn:aws:s3:::*e/${k}`),
    });
    expect(protectedKeys(false)).toEqual(['.lance-*', '_catalog/*', 'tree/*/_catalog/*', 'tree/*/*/_catalog/*', 'tree/*/*/*/_catalog/*']);
  });

  // Whether a Resource pattern matches `bucket/key`, as AWS (and MinIO) match: `*` any characters, '/' too.
  const awsMatch = (pattern: string, resource: string) =>
    new RegExp(
      `^${pattern
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*/g, '.*')
        .replace(/\?/g, '.')}$`,
      's',
    ).test(resource);
  // As radosgw matches (Ceph's match_wildcards, src/rgw/rgw_string.cc), byte by byte: `*` never backtracks,
  // it ends where the input first holds the pattern's next byte; a trailing `*` takes the rest.
  const rgwMatch = (pattern: string, resource: string) => {
    const [p, s] = [Buffer.from(pattern), Buffer.from(resource)];
    let [i, j] = [0, 0];
    const star = '*'.charCodeAt(0);
    for (;;) {
      if (i === p.length) return j === s.length;
      if (p[i] === star) {
        if (i + 1 === p.length) return true;
        if (j === s.length || p[i + 1] === s[j]) i++;
        else j++;
      } else if (j < s.length && (p[i] === '?'.charCodeAt(0) || p[i] === s[j])) [i, j] = [i + 1, j + 1];
      else return false;
    }
  };
  const denyPatterns = (prefix: string, managed: boolean) => {
    const policy = JSON.parse(sessionPolicy({ ...scope(prefix, 'read-write'), protectedKeys: protectedKeys(managed) })) as {
      Statement: Array<{ Resource: string[] }>;
    };
    return (policy.Statement[2]?.Resource ?? []).map((r) => r.slice('arn:aws:s3:::'.length));
  };

  it("matches the Deny as radosgw does (its `*` stops at the next character's first occurrence) and as AWS does: the service's records and a managed table's committed manifests of main and of branches of up to three segments, and nothing Lance writes", () => {
    // Locations holding the characters the patterns stop at ('.', '_', '/', 'e'), a multi-byte character, and names like the protected ones.
    const prefixes = [
      'ns/t.lance/',
      'root_1/a.b_c/my_table.lance/',
      'r/ns/.lance-table-0b7e1c2a/',
      'r/ünï/tëst.lance/',
      'r/_catalog/tree/_versions/t.lance/',
      'e/ee/e.lance/',
    ];
    const branches = [null, 'dev', 'a_b', 'feature/x_y.z', 'a-1/b_2/c.3', 'ü/ß/é'];
    const deeper = ['a/b/c/d', 'a_b/c.d/e-f/g_h/i'];
    const lanceWrites = (dir: string) => [
      `${dir}data/0b7e1c2a-9f3d-4e5a-8b6c-1d2e3f4a5b6c.lance`,
      `${dir}_indices/0b7e1c2a-9f3d-4e5a-8b6c-1d2e3f4a5b6c/index.idx`,
      `${dir}_deletions/3-7-1234567890.arrow`,
      `${dir}_transactions/7-0b7e1c2a-9f3d-4e5a-8b6c-1d2e3f4a5b6c.txn`,
      `${dir}_versions/18446744073709551608.manifest-0b7e1c2a-9f3d-4e5a-8b6c-1d2e3f4a5b6c`,
      `${dir}_versions/7.manifest-0b7e1c2a-9f3d-4e5a-8b6c-1d2e3f4a5b6c`,
      `${dir}_refs/branches/feature%2Fx.json`,
      `${dir}_refs/tags/v1.json`,
    ];
    for (const prefix of prefixes)
      for (const managed of [false, true]) {
        const dataDir = { store: new MemoryObjectStore(), key: prefix, owned: true };
        const patterns = denyPatterns(prefix, managed);
        const denied = (match: (p: string, r: string) => boolean, key: string) => patterns.some((p) => match(p, `bkt/${key}`));
        const protectedOn = (branch: string | null) => {
          const versions = versionsOn(dataDir, branch);
          const records = [versions.sidecarKey(7), `${versions.dir.key}_catalog/writers/planted.json`];
          const history = [versions.finalKey(7, 'V1'), versions.finalKey(7, 'V2'), latestHintKey(versions.dir.key)];
          return managed ? [...records, ...history] : records;
        };
        const lanceOn = (branch: string | null) => [
          ...lanceWrites(versionsOn(dataDir, branch).dir.key),
          ...(managed ? [] : [versionsOn(dataDir, branch).finalKey(7, 'V2'), latestHintKey(versionsOn(dataDir, branch).dir.key)]),
        ];
        const where = `prefix ${prefix}, managed ${managed}`;
        for (const key of [`${prefix}.lance-table.json`, `${prefix}.lance-reserved`, ...branches.flatMap(protectedOn)]) {
          expect(denied(rgwMatch, key), `radosgw: ${key} (${where})`).toBe(true);
          expect(denied(awsMatch, key), `AWS: ${key} (${where})`).toBe(true);
        }
        // Deeper branch names: covered where `*` spans '/' only.
        for (const key of deeper.flatMap(protectedOn)) expect(denied(awsMatch, key), `AWS: ${key} (${where})`).toBe(true);
        // What Lance writes stays writable: exactly so on radosgw; on AWS too, unless the location itself holds
        // a protected name (its Deny is wider than the directory: fail closed).
        for (const key of [...branches, ...deeper].flatMap(lanceOn)) {
          expect(denied(rgwMatch, key), `radosgw: ${key} (${where})`).toBe(false);
          if (!prefix.includes('/_catalog/')) expect(denied(awsMatch, key), `AWS: ${key} (${where})`).toBe(false);
        }
      }
  });

  it('names a location in a few characters by a pattern that matches exactly it on radosgw, and it on AWS', () => {
    const locations = ['bkt/ns/t.lance/', 'b/r/ünï/tëst.lance/', 'bucket-1/a/a/a/a/', 'bkt/x.y_z-w/.lance-table-ab/', 'bkt/€€/€/', 'bkt/₤₤₤₤₤€€€€/€/'] as const;
    for (const location of locations) {
      const pattern = locationPattern(location);
      expect(rgwMatch(`${pattern}k`, `${location}k`), `${pattern} for ${location}`).toBe(true);
      expect(awsMatch(pattern, location), `${pattern} for ${location}`).toBe(true);
      expect(pattern.length).toBeLessThanOrEqual(location.length);
      // On radosgw it ends exactly where the location does: a key under a longer location is not under this one.
      expect(rgwMatch(`${pattern}k`, `${location}x/k`)).toBe(false);
    }
    expect(locationPattern('bkt/ns/t.lance/')).toBe('*e/');
    // A multi-byte character is spelled, never a place `*` stops at: radosgw would stop at the first byte of '€', which begins '₤' too.
    expect(locationPattern('b/€€€€€€/₤/')).not.toContain('*€');
  });

  it('stays well under the 2,048 characters STS takes for a 200-character location, and fails closed beyond', () => {
    const bucket = 'b'.repeat(63); // S3's longest bucket name
    const prefix =
      'lakehouse/warehouse_prod/analytics_team/customer_events/archive_2024/tables/region_eu_west_1/team_growth/experiments/daily_rollups/session_level/feature_store_v2/events_per_customer_and_day_v03.lance/';
    expect(prefix.length).toBe(200);
    const lengths = [false, true].map((managed) => sessionPolicy({ bucket, prefix, access: 'read-write', protectedKeys: protectedKeys(managed) }).length);
    expect(lengths[0]).toBeLessThan(1_300);
    expect(lengths[1]).toBeLessThan(1_700);
    // A location no short pattern names (a hundred one-letter segments) is refused rather than sent to be refused.
    const spelled = 'a/'.repeat(100);
    expect(() => sessionPolicy({ bucket, prefix: spelled, access: 'read-write', protectedKeys: protectedKeys(true) })).toThrow(
      /session policy for .* would be \d+ bytes, more than STS takes \(2048\)/,
    );
    expect(sessionPolicy({ bucket, prefix: spelled, access: 'read', protectedKeys: protectedKeys(true) }).length).toBeLessThan(2_048);
  });
});

describe('credential cache', () => {
  it('hands out one vend per scope until shortly before it expires, shares a vend in flight, and forgets failures', async () => {
    let now = 1_000_000;
    const v = countingVendor(() => now);
    const cache = new CredentialCache(v.vendor, { refreshBeforeMs: 300_000, now: () => now });
    const a = await cache.get(scope('a/'));
    expect(a).toMatchObject({ fromCache: false, credentials: { accessKeyId: 'AK1' } });
    expect(await cache.get(scope('a/'))).toMatchObject({ fromCache: true, credentials: { accessKeyId: 'AK1' } });
    // Another table, or another access level, is another scope.
    expect((await cache.get(scope('b/'))).credentials.accessKeyId).toBe('AK2');
    expect((await cache.get(scope('a/', 'read-write'))).credentials.accessKeyId).toBe('AK3');
    expect((await cache.get({ ...scope('a/'), protectedKeys: protectedKeys(true) })).credentials.accessKeyId).toBe('AK4');
    // Within the refresh margin: vended again.
    now += 3_600_000 - 300_000;
    expect(await cache.get(scope('a/'))).toMatchObject({ fromCache: false, credentials: { accessKeyId: 'AK5' } });

    v.hold();
    const together = [cache.get(scope('c/')), cache.get(scope('c/'))];
    v.releaseAll();
    const [first, second] = await Promise.all(together);
    expect(first?.credentials).toBe(second?.credentials);
    expect(v.calls.filter((c) => c.prefix === 'c/')).toHaveLength(1);

    v.failWith(new Error('sts is down'));
    await expect(cache.get(scope('d/'))).rejects.toThrow('sts is down');
    v.failWith(null);
    expect((await cache.get(scope('d/'))).fromCache).toBe(false);
  });

  it('keeps at most maxEntries scopes, dropping the least recently used', async () => {
    const v = countingVendor(() => 0);
    const cache = new CredentialCache(v.vendor, { refreshBeforeMs: 0, maxEntries: 2, now: () => 0 });
    await cache.get(scope('a/'));
    await cache.get(scope('b/'));
    await cache.get(scope('a/'));
    await cache.get(scope('c/'));
    expect((await cache.get(scope('a/'))).fromCache).toBe(true);
    expect((await cache.get(scope('b/'))).fromCache).toBe(false);
  });
});

describe('which responses carry credentials', () => {
  const s3 = new S3ObjectStore({
    bucket: 'bkt',
    prefix: 'root',
    region: 'us-east-1',
    endpoint: 'http://127.0.0.1:1',
    accessKeyId: 'SERVICE-KEY',
    secretAccessKey: 'SERVICE-SECRET',
    forcePathStyle: true,
  });
  const local = new LocalObjectStore('/tmp/lance-ns-vending-unit');
  afterAll(() => s3.close());
  const table = (key = 'ns/t.lance/', store: S3ObjectStore | LocalObjectStore = s3) => ({
    id: ['ns', 't'],
    dir: { store, key, owned: true },
    managedVersioning: false,
  });
  const context = (mayWrite: boolean) => {
    const records: VendRecord[] = [];
    const ctx: RequestContext = {
      requestId: 'r',
      principal: { id: 'p' },
      context: {},
      may: (privilege) => privilege === 'read' || mayWrite,
      onVend: (r) => records.push(r),
    };
    return { ctx, records };
  };
  const setup = () => {
    const v = countingVendor(() => Date.now());
    return { v, vending: new TableCredentials(new CredentialCache(v.vendor, { refreshBeforeMs: 0 })) };
  };

  it('vends read-write to a writer and read to a reader, scoped to the directory, over the client options and never the service keys', async () => {
    const { v, vending } = setup();
    const writer = context(true);
    const options = await vending.storageOptions(writer.ctx, table(), undefined);
    expect(options).toEqual({
      aws_region: 'us-east-1',
      aws_endpoint: 'http://127.0.0.1:1',
      allow_http: 'true',
      aws_virtual_hosted_style_request: 'false',
      aws_access_key_id: 'AK1',
      aws_secret_access_key: 'SK1',
      aws_session_token: 'ST1',
      expires_at_millis: expect.stringMatching(/^\d+$/) as unknown as string,
    });
    expect(v.calls[0]).toEqual({ bucket: 'bkt', prefix: 'root/ns/t.lance/', access: 'read-write', protectedKeys: protectedKeys(false) });
    expect(writer.records).toEqual([{ access: 'read-write', outcome: 'vended', expires_at_millis: Number(options.expires_at_millis) }]);
    const reader = context(false);
    await vending.storageOptions(reader.ctx, table(), true);
    expect(v.calls[1]?.access).toBe('read');
    // The service's own work (no `may`) is never vended write access.
    await vending.storageOptions({ requestId: 'job', principal: null, context: {} }, { ...table(), managedVersioning: true }, true);
    expect(v.calls[2]).toMatchObject({ access: 'read', protectedKeys: protectedKeys(true) });
  });

  it('vends nothing when declined; says why when asked but nothing can be vended', async () => {
    const { v, vending } = setup();
    const c = context(true);
    expect(await vending.storageOptions(c.ctx, table(), false)).not.toHaveProperty('aws_session_token');
    expect(c.records).toEqual([]);
    const onDisk = await vending.storageOptions(c.ctx, table('ns/t.lance/', local), true);
    expect(onDisk[NO_CREDENTIALS_KEY]).toMatch(/^none: the table is not in an S3 bucket/);
    const wildcard = await vending.storageOptions(c.ctx, table('ns/t*.lance/'), true);
    expect(wildcard[NO_CREDENTIALS_KEY]).toMatch(/cannot scope exactly/);
    expect(v.calls).toEqual([]);
    const unconfigured = new TableCredentials(null);
    expect(await unconfigured.storageOptions(c.ctx, table(), undefined)).toEqual(s3.clientStorageOptions());
    expect((await unconfigured.storageOptions(c.ctx, table(), true))[NO_CREDENTIALS_KEY]).toMatch(/not configured/);
    expect(c.records.map((r) => r.outcome)).toEqual(['none', 'none', 'none']);
  });

  it('fails with 503 code 17 when asked and the vendor fails; answers without credentials, saying why, when not asked', async () => {
    const { v, vending } = setup();
    v.failWith(Object.assign(new Error('User arn:aws:iam::1:user/svc is not authorized to assume role'), { name: 'AccessDenied' }));
    const c = context(true);
    const asked = await vending.storageOptions(c.ctx, table(), true).catch((e: unknown) => e);
    expect(asked).toBeInstanceOf(NamespaceError);
    expect(asked).toMatchObject({ code: 17 });
    const unasked = await vending.storageOptions(c.ctx, table(), undefined);
    expect(unasked[NO_CREDENTIALS_KEY]).toMatch(/^none: could not vend credentials for table \["ns","t"\]: the credential vendor failed \(AccessDenied\)/);
    // The service's identity stays in the audit record, out of the answers.
    expect(`${(asked as Error).message} ${unasked[NO_CREDENTIALS_KEY]}`).not.toContain('arn:aws');
    expect(c.records).toEqual([
      { access: 'read-write', outcome: 'failed', reason: 'AccessDenied: User arn:aws:iam::1:user/svc is not authorized to assume role' },
      { access: 'read-write', outcome: 'failed', reason: 'AccessDenied: User arn:aws:iam::1:user/svc is not authorized to assume role' },
    ]);
  });
});
