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

/**
 * The session policy of a vend: read (and for read-write, write) the objects under the prefix,
 * list only keys under it, and never write the protected keys. The prefix must hold no IAM
 * wildcard (POLICY_WILDCARDS); the caller checks that, since a wildcard would widen the scope.
 */
export function sessionPolicy(scope: CredentialScope): string {
  const objects = `arn:aws:s3:::${scope.bucket}/${scope.prefix}`;
  const statements: object[] = [
    { Effect: 'Allow', Action: scope.access === 'read-write' ? [...READ_ACTIONS, ...WRITE_ACTIONS] : READ_ACTIONS, Resource: [`${objects}*`] },
    // Listing with a prefix ending in '/' only: a bare "t.lance" prefix would list a sibling "t.lance2".
    {
      Effect: 'Allow',
      Action: ['s3:ListBucket'],
      Resource: [`arn:aws:s3:::${scope.bucket}`],
      Condition: { StringLike: { 's3:prefix': [scope.prefix, `${scope.prefix}*`] } },
    },
  ];
  if (scope.access === 'read-write' && scope.protectedKeys.length > 0) {
    statements.push({ Effect: 'Deny', Action: WRITE_ACTIONS, Resource: scope.protectedKeys.map((k) => `${objects}${k}`) });
  }
  return JSON.stringify({ Version: '2012-10-17', Statement: statements });
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
