import type { TestRoot } from './backends.js';

/**
 * The environment a real Lance client (lancedb, pylance) needs to reach an S3 root: the test S3
 * server's keys through the AWS default chain. Empty for local roots.
 *
 * Without credential vending configured (these tests do not configure it; vended-credentials.test.ts
 * does) the service's storage_options carry only endpoint, region, allow_http and path style, so
 * the client must bring its own. @lancedb/lancedb 0.39.0 takes them only from
 * the AWS default chain: once the service answers storage_options, the client attaches a namespace
 * storage-options provider that re-describes the table with `vend_credentials: true` and uses only
 * that answer, ignoring both `connectNamespace(..., { storageOptions })` and per-table
 * `storageOptions` (createTable fails with "Failed to get AWS credentials").
 */
export function clientCredentialEnv(root: TestRoot): Record<string, string | undefined> {
  if (!root.root.startsWith('s3://')) return {};
  return {
    AWS_ACCESS_KEY_ID: root.s3.accessKeyId,
    AWS_SECRET_ACCESS_KEY: root.s3.secretAccessKey,
    // Skip the EC2 metadata lookups of the default chain (seconds per table on a machine without IMDS).
    AWS_EC2_METADATA_DISABLED: 'true',
  };
}

/**
 * Puts the client credentials for `root` into this worker's environment (S3 roots only; the
 * service itself always uses its own configured credentials) and returns the undo.
 */
export function useClientCredentials(root: TestRoot): () => void {
  const env = clientCredentialEnv(root);
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  return () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
}
