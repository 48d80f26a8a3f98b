import { createHash } from 'node:crypto';
import type { AssumeRoleCommandOutput, STSClient } from '@aws-sdk/client-sts';
import type { CredentialScope, CredentialVendor, VendedCredentials } from './credential-vendor.js';

// Credential vending through STS AssumeRole (AWS, or an S3 server with STS such as Ceph's radosgw).
// The role grants access to the buckets the catalog uses; each vend narrows it with an inline
// session policy to one table's directory, so the credentials can do no more than both allow.

export interface StsVendorOptions {
  roleArn: string;
  durationSeconds: number;
  /** The STS endpoint (e.g. radosgw's own address); undefined: the SDK's regional default. */
  endpoint?: string | undefined;
  region: string;
  externalId?: string | undefined;
  /** The service's own credentials, which may assume the role; undefined: the SDK's default chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string | undefined } | undefined;
}

const READ_ACTIONS = ['s3:GetObject'];
const WRITE_ACTIONS = ['s3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload', 's3:ListMultipartUploadParts'];

/** STS refuses a longer session policy (AWS: 2,048 characters; radosgw the same, in bytes). */
export const MAX_SESSION_POLICY_BYTES = 2048;

/**
 * The session policy of a vend: read (and for read-write, write) the objects under the prefix,
 * list only keys under it, and never write the protected keys. The prefix must hold no IAM
 * wildcard (POLICY_WILDCARDS); the caller checks that, since a wildcard would widen the scope.
 * Throws when the policy would be longer than STS takes (the vend fails closed: no credentials).
 *
 * The Allow names the directory exactly; the Deny need not, as nothing outside the directory is
 * allowed: it names the directory by locationPattern, which matches exactly it where `*` stops at
 * the first occurrence of the character after it (radosgw) and it and more where `*` spans any
 * characters (AWS, MinIO), in a few characters instead of the whole location once per key.
 */
export function sessionPolicy(scope: CredentialScope): string {
  const objects = `arn:aws:s3:::${scope.bucket}/${scope.prefix}`;
  const statements: object[] = [
    { Effect: 'Allow', Action: scope.access === 'read-write' ? [...READ_ACTIONS, ...WRITE_ACTIONS] : READ_ACTIONS, Resource: [`${objects}*`] },
    // Listing with a prefix ending in '/' only: a bare "t.lance" prefix would list a sibling "t.lance2".
    // (`*` matches no character too, so this takes the directory itself.)
    {
      Effect: 'Allow',
      Action: ['s3:ListBucket'],
      Resource: [`arn:aws:s3:::${scope.bucket}`],
      Condition: { StringLike: { 's3:prefix': [`${scope.prefix}*`] } },
    },
  ];
  if (scope.access === 'read-write' && scope.protectedKeys.length > 0) {
    const location = `arn:aws:s3:::${locationPattern(`${scope.bucket}/${scope.prefix}`)}`;
    statements.push({ Effect: 'Deny', Action: WRITE_ACTIONS, Resource: scope.protectedKeys.map((k) => `${location}${k}`) });
  }
  const policy = JSON.stringify({ Version: '2012-10-17', Statement: statements });
  const bytes = Buffer.byteLength(policy);
  if (bytes > MAX_SESSION_POLICY_BYTES) {
    throw Object.assign(
      new Error(`the session policy for s3://${scope.bucket}/${scope.prefix} would be ${bytes} bytes, more than STS takes (${MAX_SESSION_POLICY_BYTES})`),
      { name: 'SessionPolicyTooLong' },
    );
  }
  return policy;
}

/**
 * The shortest resource pattern (of literal characters and `*c`, "up to and including the first
 * `c`") that matches exactly `path` on radosgw, whose `*` does not backtrack: it stops at the first
 * occurrence of the character after it (Ceph's `match_wildcards`, src/rgw/rgw_string.cc, which
 * rgw_iam_policy.cc's ARN::match applies to a Resource). Where `*` spans any characters (AWS,
 * MinIO) it matches `path` too, and more: a Deny ending in it is then wider than the directory.
 * `*` stops only at ASCII characters, since radosgw compares bytes: a multi-byte character's first
 * byte may begin another one. Example: `bkt/ns/t.lance/` becomes `*e/`.
 */
export function locationPattern(path: string): string {
  // From the end: the shortest pattern for path[i..] starts with path[i] or with `*c` for the next c.
  const length = new Array<number>(path.length + 1).fill(0);
  const first: string[] = [];
  const after: number[] = [];
  const next = new Map<string, number>();
  for (let i = path.length - 1; i >= 0; i--) {
    const char = path.charAt(i);
    if (char.charCodeAt(0) < 0x80) next.set(char, i);
    length[i] = 1 + (length[i + 1] ?? 0);
    first[i] = char;
    after[i] = i + 1;
    for (const [c, at] of next) {
      const viaStar = 2 + (length[at + 1] ?? 0);
      if (viaStar < (length[i] ?? 0)) [length[i], first[i], after[i]] = [viaStar, `*${c}`, at + 1];
    }
  }
  let pattern = '';
  for (let i = 0; i < path.length; i = after[i] ?? path.length) pattern += first[i];
  return pattern;
}

/** A session name per scope (2-64 of [\w+=,.@-]): the store's request logs then tell tables apart. */
const sessionName = (scope: CredentialScope): string =>
  `lance-ns-${scope.access === 'read' ? 'r' : 'rw'}-${createHash('sha256').update(`${scope.bucket}/${scope.prefix}`).digest('hex').slice(0, 32)}`;

export class StsCredentialVendor implements CredentialVendor {
  private constructor(
    private readonly client: STSClient,
    private readonly send: (scope: CredentialScope) => Promise<AssumeRoleCommandOutput>,
  ) {}

  /** Loads the STS client only when vending is configured. */
  static async create(options: StsVendorOptions): Promise<StsCredentialVendor> {
    const { STSClient, AssumeRoleCommand } = await import('@aws-sdk/client-sts');
    const client = new STSClient({
      region: options.region,
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      ...(options.credentials ? { credentials: options.credentials } : {}),
      maxAttempts: 3,
    });
    return new StsCredentialVendor(client, (scope) =>
      client.send(
        new AssumeRoleCommand({
          RoleArn: options.roleArn,
          RoleSessionName: sessionName(scope),
          DurationSeconds: options.durationSeconds,
          Policy: sessionPolicy(scope),
          ...(options.externalId ? { ExternalId: options.externalId } : {}),
        }),
      ),
    );
  }

  async vend(scope: CredentialScope): Promise<VendedCredentials> {
    const { Credentials: c } = await this.send(scope);
    if (!c?.AccessKeyId || !c.SecretAccessKey || !c.SessionToken || !c.Expiration) throw new Error('STS AssumeRole answered without complete credentials');
    return { accessKeyId: c.AccessKeyId, secretAccessKey: c.SecretAccessKey, sessionToken: c.SessionToken, expiresAtMillis: c.Expiration.getTime() };
  }

  close(): void {
    this.client.destroy();
  }
}
