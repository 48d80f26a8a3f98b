import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

// Configuration from command-line options, then environment variables, then defaults. With no
// configuration at all the service serves ./data on 127.0.0.1:2333.

const Config = z.object({
  root: z.string().min(1),
  /** Places outside the root where tables may be registered (paths, file:// or s3://bucket/prefix); none by default. */
  allowedLocations: z.array(z.string().min(1)),
  host: z.string().min(1),
  /** Serve without authentication on a non-loopback address (every caller that reaches the port has full access). */
  insecure: z.boolean(),
  /** Serve the read-only web console at /ui; absent: served when bound to a loopback address. */
  ui: z.boolean().optional(),
  /** Origins whose web pages may call the service (CORS); none by default. */
  corsOrigins: z.array(z.string().regex(/^https?:\/\/[^/\s]+$/, 'an origin is scheme://host[:port]')),
  port: z.coerce.number().int().min(0).max(65535),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  s3: z.object({
    endpoint: z.string().optional(),
    region: z.string().min(1),
    accessKeyId: z.string().optional(),
    secretAccessKey: z.string().optional(),
    sessionToken: z.string().optional(),
    forcePathStyle: z.boolean(),
    createBucket: z.boolean(),
  }),
  pageTokenSecret: z.string().min(1),
  /** Managed versioning for tables and namespaces that do not set the property. */
  managedVersioning: z.boolean(),
  /** Time between checks that the store honours conditional writes, after the one at start-up (0: none; see service/store-check.ts). */
  storeCheckIntervalMs: z.coerce.number().int().min(0),
  /** Serve a store that does not honour conditional writes (with a warning at each check) instead of refusing to. */
  allowUnsafeStore: z.boolean(),
  /** How long an unfinished commit (a reservation, a batch before its commit point) is trusted. */
  transactionLeaseMs: z.coerce.number().int().positive(),
  /** Largest Arrow IPC request body, in bytes. */
  maxArrowBodyBytes: z.coerce.number().int().positive(),
  /** Largest JSON request body, in bytes; parsing it blocks the event loop, so it stays small. */
  maxJsonBodyBytes: z.coerce.number().int().positive(),
  /** Entries of one string map in a request (properties, metadata, storage options, context). */
  maxMapEntries: z.coerce.number().int().positive(),
  /** UTF-8 bytes of the keys and values of one such map. */
  maxMapBytes: z.coerce.number().int().positive(),
  /** Arrow bodies larger than this (or of unknown length) count as large. */
  largeBodyBytes: z.coerce.number().int().min(0),
  /** Large Arrow bodies received at once; one more is a 503 (code 17), before its body is read. */
  maxConcurrentLargeBodies: z.coerce.number().int().positive(),
  /** Operations of one BatchCommitTables and entries of one BatchCreateTableVersions (see the README's Limits). */
  maxBatchOperations: z.coerce.number().int().positive(),
  maxBatchEntries: z.coerce.number().int().positive(),
  /** Datasets the engine keeps open across requests (0: none, every request opens its own). */
  keptDatasets: z.coerce.number().int().min(0),
  /** Bound on the manifest bytes (plus 64 KiB each) of the datasets kept open. */
  keptDatasetBytes: z.coerce.number().int().min(0),
  /** Bounds of Lance's caches, shared by every dataset the engine opens (index data; file and manifest metadata). */
  lanceIndexCacheBytes: z.coerce.number().int().min(0),
  lanceMetadataCacheBytes: z.coerce.number().int().min(0),
  /** Roles (privileges on namespace subtrees) and the principals that hold them (config file only); absent: everyone may do everything. */
  authorization: z
    .object({
      roles: z.record(z.string().min(1), z.array(z.object({ namespace: z.array(z.string().min(1)), privilege: z.enum(['read', 'write', 'manage']) }))),
      principals: z.record(z.string().min(1), z.array(z.string().min(1))),
    })
    .refine((a) => Object.values(a.principals).every((roles) => roles.every((r) => r in a.roles)), 'every role a principal holds must be defined under roles')
    .optional(),
  /** Requests per principal and second, with bursts (config file only); absent: unlimited. */
  rateLimit: z.object({ requestsPerSecond: z.coerce.number().positive(), burst: z.coerce.number().int().min(1) }).optional(),
  /** Scoped credentials for S3 tables through STS AssumeRole (config file only); absent: nothing is vended. */
  credentialVending: z
    .object({
      roleArn: z.string().min(1),
      /** Lifetime of vended credentials (STS allows 900 to 43200, capped by the role's maximum). */
      durationSeconds: z.coerce.number().int().min(900).max(43_200).default(3600),
      /** Cached credentials are handed out until this long before they expire. */
      refreshBeforeSeconds: z.coerce.number().int().min(0).default(300),
      /** The STS endpoint; default: the S3 endpoint when one is set (radosgw serves both), else AWS's regional STS. */
      stsEndpoint: z.url().optional(),
      externalId: z.string().min(1).optional(),
    })
    .refine((v) => v.durationSeconds - v.refreshBeforeSeconds >= 60, 'refresh_before_seconds must leave at least 60 seconds of duration_seconds')
    .optional(),
  /**
   * Running Geneva's Python UDFs (virtual columns with udf_backend DockerUDFSpecV1, their backfills):
   * `off` (default) refuses them with 406; `local` runs them in Python worker processes beside the
   * service; `ray` sends their computation to the Ray cluster at `rayAddress`. A UDF is arbitrary
   * code run by the service, so only principals with the manage privilege may bind or run one.
   */
  udf: z
    .object({
      execution: z.enum(['off', 'local', 'ray']),
      /** The Python the workers run (default: the repository's .venv-udf, see scripts/install-udf-worker.sh). */
      python: z.string().min(1).optional(),
      workers: z.coerce.number().int().min(1).max(64),
      rayAddress: z.string().min(1).optional(),
    })
    .refine((u) => u.execution !== 'ray' || u.rayAddress !== undefined, 'udf_execution ray needs ray_address'),
  /** Authentication (config file only); absent: none (see main.ts for where that is allowed). */
  auth: z
    .object({
      /** API keys accepted in `x-api-key`, each stored as the SHA-256 (hex) of the key. */
      apiKeys: z.array(z.object({ principal: z.string().min(1), sha256: z.string().regex(/^[0-9a-f]{64}$/, 'the SHA-256 of the key, 64 lower-case hex digits') })).min(1).optional(),
      /** Bearer JWTs: verified against the issuer's JWKS URL or the public keys given. */
      jwt: z
        .object({
          issuer: z.string().min(1),
          audience: z.string().min(1),
          jwksUrl: z.url().optional(),
          keys: z.array(z.record(z.string(), z.unknown())).min(1).optional(),
          clockSkewSeconds: z.coerce.number().int().min(0).max(600).default(30),
          principalClaim: z.string().min(1).default('sub'),
        })
        .refine((j) => (j.jwksUrl === undefined) !== (j.keys === undefined), 'give one of jwks_url and keys')
        .optional(),
      /** The built-in OAuth2 client-credentials grant at /oauth/token. */
      oauth2: z
        .object({
          signingSecret: z.string().min(32, 'at least 32 characters'),
          tokenTtlSeconds: z.coerce.number().int().min(60).max(86_400).default(3600),
          clients: z
            .array(
              z.object({
                clientId: z.string().min(1),
                secretSha256: z.string().regex(/^[0-9a-f]{64}$/, 'the SHA-256 of the secret, 64 lower-case hex digits'),
                principal: z.string().min(1),
              }),
            )
            .min(1),
        })
        .optional(),
    })
    .refine((a) => a.apiKeys !== undefined || a.jwt !== undefined || a.oauth2 !== undefined, 'configure api_keys, jwt or oauth2')
    .optional(),
});
export type Config = z.infer<typeof Config>;

/**
 * Items of one batch, by default: the largest batch answers within seconds on a local disk and
 * within a minute on S3 (measured by scripts/bench-batches.ts, see the README's Limits).
 */
const DEFAULT_MAX_BATCH = 500;

export const CONFIG_HELP = `Usage: npm start -- [options]

  --root <path|s3://bucket/prefix>  catalog root            env LANCE_NS_ROOT      default ./data
  --allowed-location <path|s3://bucket/prefix>  a place outside the root where tables may be
                                    registered (repeat for more)  env LANCE_NS_ALLOWED_LOCATIONS (comma-separated)  default none
  --host <addr>                     address to listen on    env LANCE_NS_HOST      default 127.0.0.1
  --insecure                        serve without authentication on a non-loopback address
                                    env LANCE_NS_INSECURE  default false (refuses to start there)
  --ui <true|false>                 serve the read-only web console at /ui  env LANCE_NS_UI
                                    default true on a loopback address, false elsewhere
  --cors-origin <scheme://host[:port]>  an origin whose web pages may call the service (repeat for more)
                                    env LANCE_NS_CORS_ORIGINS (comma-separated)  default none
  --port <n>                        port                    env LANCE_NS_PORT      default 2333
  --log-level <level>               pino level              env LANCE_NS_LOG_LEVEL default info
  --s3-endpoint <url>               S3 endpoint             env LANCE_NS_S3_ENDPOINT, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL
  --s3-region <region>              S3 region               env LANCE_NS_S3_REGION, AWS_REGION   default us-east-1
  --s3-access-key-id <id>           S3 access key           env LANCE_NS_S3_ACCESS_KEY_ID, AWS_ACCESS_KEY_ID
  --s3-secret-access-key <key>      S3 secret key           env LANCE_NS_S3_SECRET_ACCESS_KEY, AWS_SECRET_ACCESS_KEY
  --s3-session-token <token>        S3 session token        env LANCE_NS_S3_SESSION_TOKEN, AWS_SESSION_TOKEN
  --s3-path-style <true|false>      path-style addressing   env LANCE_NS_S3_PATH_STYLE  default true when an endpoint is set
  --s3-create-bucket <true|false>   create a missing bucket env LANCE_NS_S3_CREATE_BUCKET default false
  --page-token-secret <s>           HMAC key of page tokens (same on every replica)  env LANCE_NS_PAGE_TOKEN_SECRET
  --managed-versioning <true|false> default for tables that do not set it   env LANCE_NS_MANAGED_VERSIONING default false
  --transaction-lease-ms <n>        after this an unfinished commit is presumed dead  env LANCE_NS_TRANSACTION_LEASE_MS default 30000
  --store-check-interval-ms <n>     check that the store honours conditional writes this often, after the
                                    check at start-up (0: only then)  env LANCE_NS_STORE_CHECK_INTERVAL_MS default 3600000
  --allow-unsafe-store              serve a store that does not honour conditional writes (loud warnings)
                                    env LANCE_NS_ALLOW_UNSAFE_STORE  default false (refuses to start on one)
  --max-arrow-body-bytes <n>        largest Arrow request   env LANCE_NS_MAX_ARROW_BODY_BYTES default 268435456
  --max-json-body-bytes <n>         largest JSON request    env LANCE_NS_MAX_JSON_BODY_BYTES  default 4194304
  --max-map-entries <n>             entries per properties/metadata/context map  env LANCE_NS_MAX_MAP_ENTRIES  default 1000
  --max-map-bytes <n>               bytes per such map (keys and values)         env LANCE_NS_MAX_MAP_BYTES    default 262144
  --large-body-bytes <n>            Arrow bodies above this are large            env LANCE_NS_LARGE_BODY_BYTES default 16777216
  --max-concurrent-large-bodies <n> large Arrow bodies received at once          env LANCE_NS_MAX_CONCURRENT_LARGE_BODIES default 2
  --max-batch-operations <n>        operations per BatchCommitTables             env LANCE_NS_MAX_BATCH_OPERATIONS default 500
  --max-batch-entries <n>           entries per BatchCreateTableVersions         env LANCE_NS_MAX_BATCH_ENTRIES    default 500
  --kept-datasets <n>               datasets kept open across requests (0: none) env LANCE_NS_KEPT_DATASETS default 256
  --kept-dataset-bytes <n>          their manifest bytes + 64 KiB each, at most  env LANCE_NS_KEPT_DATASET_BYTES default 268435456
  --lance-index-cache-bytes <n>     Lance's index cache, shared by all datasets  env LANCE_NS_LANCE_INDEX_CACHE_BYTES default 1073741824
  --lance-metadata-cache-bytes <n>  Lance's metadata cache, shared likewise      env LANCE_NS_LANCE_METADATA_CACHE_BYTES default 268435456
  --udf-execution <off|local|ray>   run Geneva's Python UDFs (arbitrary code: manage privilege only)
                                    env LANCE_NS_UDF_EXECUTION  default off (406 for them)
  --udf-python <path>               the Python of the UDF workers  env LANCE_NS_UDF_PYTHON
                                    default .venv-udf/bin/python (scripts/install-udf-worker.sh)
  --udf-workers <n>                 UDF worker processes    env LANCE_NS_UDF_WORKERS   default 1
  --ray-address <addr>              the Ray cluster for udf_execution ray  env LANCE_NS_RAY_ADDRESS
  --config <file.yaml|file.json>    a configuration file: every option above under its name with
                                    underscores (lists plural: allowed_locations, cors_origins), and
                                    auth (see the README)   env LANCE_NS_CONFIG
`;

/** A comma-separated environment variable as a list (empty entries dropped). */
const list = (v: string | undefined): string[] => (v ?? '').split(',').map((e) => e.trim()).filter((e) => e !== '');

const bool = (v: string | undefined): boolean | undefined =>
  v === undefined ? undefined : ['1', 'true', 'yes', 'on'].includes(v.toLowerCase());

export function loadConfig(argv: string[], env: NodeJS.ProcessEnv): Config {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      root: { type: 'string' },
      'allowed-location': { type: 'string', multiple: true },
      host: { type: 'string' },
      'cors-origin': { type: 'string', multiple: true },
      ui: { type: 'string' },
      insecure: { type: 'boolean' },
      port: { type: 'string' },
      'log-level': { type: 'string' },
      's3-endpoint': { type: 'string' },
      's3-region': { type: 'string' },
      's3-access-key-id': { type: 'string' },
      's3-secret-access-key': { type: 'string' },
      's3-session-token': { type: 'string' },
      's3-path-style': { type: 'string' },
      's3-create-bucket': { type: 'string' },
      'page-token-secret': { type: 'string' },
      'managed-versioning': { type: 'string' },
      'transaction-lease-ms': { type: 'string' },
      'store-check-interval-ms': { type: 'string' },
      'allow-unsafe-store': { type: 'boolean' },
      'max-arrow-body-bytes': { type: 'string' },
      'max-json-body-bytes': { type: 'string' },
      'max-map-entries': { type: 'string' },
      'max-map-bytes': { type: 'string' },
      'large-body-bytes': { type: 'string' },
      'max-concurrent-large-bodies': { type: 'string' },
      'max-batch-operations': { type: 'string' },
      'max-batch-entries': { type: 'string' },
      'kept-datasets': { type: 'string' },
      'kept-dataset-bytes': { type: 'string' },
      'lance-index-cache-bytes': { type: 'string' },
      'lance-metadata-cache-bytes': { type: 'string' },
      'udf-execution': { type: 'string' },
      'udf-python': { type: 'string' },
      'udf-workers': { type: 'string' },
      'ray-address': { type: 'string' },
      config: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    process.stdout.write(CONFIG_HELP);
    process.exit(0);
  }
  const file = readConfigFile(values.config ?? env.LANCE_NS_CONFIG);
  /** An option: the command line, then the environment variables named, then the file (its key: the option's name with underscores). */
  const opt = (name: keyof typeof values & string, ...envNames: string[]): string | undefined => {
    const given = values[name];
    if (typeof given === 'string') return given;
    for (const envName of envNames) if (env[envName] !== undefined) return env[envName];
    return file.scalar(name);
  };
  const listOpt = (name: 'allowed-location' | 'cors-origin', envName: string, fileKey: string): string[] =>
    values[name] ?? (env[envName] !== undefined ? list(env[envName]) : file.list(fileKey));
  const endpoint = opt('s3-endpoint', 'LANCE_NS_S3_ENDPOINT', 'AWS_ENDPOINT_URL_S3', 'AWS_ENDPOINT_URL');
  const parsed = Config.safeParse({
    root: opt('root', 'LANCE_NS_ROOT') ?? './data',
    allowedLocations: listOpt('allowed-location', 'LANCE_NS_ALLOWED_LOCATIONS', 'allowed_locations'),
    host: opt('host', 'LANCE_NS_HOST') ?? '127.0.0.1',
    corsOrigins: listOpt('cors-origin', 'LANCE_NS_CORS_ORIGINS', 'cors_origins'),
    ui: bool(opt('ui', 'LANCE_NS_UI')),
    insecure: values.insecure ?? bool(env.LANCE_NS_INSECURE ?? file.scalar('insecure')) ?? false,
    port: opt('port', 'LANCE_NS_PORT') ?? 2333,
    logLevel: opt('log-level', 'LANCE_NS_LOG_LEVEL') ?? 'info',
    s3: {
      endpoint,
      region: opt('s3-region', 'LANCE_NS_S3_REGION', 'AWS_REGION', 'AWS_DEFAULT_REGION') ?? 'us-east-1',
      accessKeyId: opt('s3-access-key-id', 'LANCE_NS_S3_ACCESS_KEY_ID', 'AWS_ACCESS_KEY_ID'),
      secretAccessKey: opt('s3-secret-access-key', 'LANCE_NS_S3_SECRET_ACCESS_KEY', 'AWS_SECRET_ACCESS_KEY'),
      sessionToken: opt('s3-session-token', 'LANCE_NS_S3_SESSION_TOKEN', 'AWS_SESSION_TOKEN'),
      forcePathStyle: bool(opt('s3-path-style', 'LANCE_NS_S3_PATH_STYLE')) ?? endpoint !== undefined,
      createBucket: bool(opt('s3-create-bucket', 'LANCE_NS_S3_CREATE_BUCKET')) ?? false,
    },
    pageTokenSecret: opt('page-token-secret', 'LANCE_NS_PAGE_TOKEN_SECRET') ?? 'lance-namespace-page-token',
    managedVersioning: bool(opt('managed-versioning', 'LANCE_NS_MANAGED_VERSIONING')) ?? false,
    transactionLeaseMs: opt('transaction-lease-ms', 'LANCE_NS_TRANSACTION_LEASE_MS') ?? 30_000,
    storeCheckIntervalMs: opt('store-check-interval-ms', 'LANCE_NS_STORE_CHECK_INTERVAL_MS') ?? 3_600_000,
    allowUnsafeStore: values['allow-unsafe-store'] ?? bool(env.LANCE_NS_ALLOW_UNSAFE_STORE ?? file.scalar('allow-unsafe-store')) ?? false,
    maxArrowBodyBytes: opt('max-arrow-body-bytes', 'LANCE_NS_MAX_ARROW_BODY_BYTES') ?? 256 * 1024 * 1024,
    maxJsonBodyBytes: opt('max-json-body-bytes', 'LANCE_NS_MAX_JSON_BODY_BYTES') ?? 4 * 1024 * 1024,
    maxMapEntries: opt('max-map-entries', 'LANCE_NS_MAX_MAP_ENTRIES') ?? 1000,
    maxMapBytes: opt('max-map-bytes', 'LANCE_NS_MAX_MAP_BYTES') ?? 256 * 1024,
    largeBodyBytes: opt('large-body-bytes', 'LANCE_NS_LARGE_BODY_BYTES') ?? 16 * 1024 * 1024,
    maxConcurrentLargeBodies: opt('max-concurrent-large-bodies', 'LANCE_NS_MAX_CONCURRENT_LARGE_BODIES') ?? 2,
    maxBatchOperations: opt('max-batch-operations', 'LANCE_NS_MAX_BATCH_OPERATIONS') ?? DEFAULT_MAX_BATCH,
    maxBatchEntries: opt('max-batch-entries', 'LANCE_NS_MAX_BATCH_ENTRIES') ?? DEFAULT_MAX_BATCH,
    keptDatasets: opt('kept-datasets', 'LANCE_NS_KEPT_DATASETS') ?? 256,
    keptDatasetBytes: opt('kept-dataset-bytes', 'LANCE_NS_KEPT_DATASET_BYTES') ?? 256 * 1024 * 1024,
    lanceIndexCacheBytes: opt('lance-index-cache-bytes', 'LANCE_NS_LANCE_INDEX_CACHE_BYTES') ?? 1024 * 1024 * 1024,
    lanceMetadataCacheBytes: opt('lance-metadata-cache-bytes', 'LANCE_NS_LANCE_METADATA_CACHE_BYTES') ?? 256 * 1024 * 1024,
    udf: {
      execution: opt('udf-execution', 'LANCE_NS_UDF_EXECUTION') ?? 'off',
      python: opt('udf-python', 'LANCE_NS_UDF_PYTHON'),
      workers: opt('udf-workers', 'LANCE_NS_UDF_WORKERS') ?? 1,
      rayAddress: opt('ray-address', 'LANCE_NS_RAY_ADDRESS'),
    },
    auth: file.auth(),
    rateLimit: file.rateLimit(),
    authorization: file.section('authorization', ['roles', 'principals']),
    credentialVending: file.credentialVending(),
  });
  if (!parsed.success) {
    throw new Error(`invalid configuration: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  return parsed.data;
}

/** What a configuration file holds, read through the option names (see CONFIG_HELP). */
interface ConfigFile {
  scalar(option: string): string | undefined;
  list(key: string): string[];
  auth(): unknown;
  rateLimit(): unknown;
  credentialVending(): unknown;
  /** A section passed on as it is (its keys checked against `known`; zod checks the rest). */
  section(key: string, known: string[]): unknown;
}

const FILE_LISTS = new Set(['allowed_locations', 'cors_origins']);
const FILE_SCALARS = new Set([
  'root', 'host', 'ui', 'insecure', 'port', 'log_level', 's3_endpoint', 's3_region', 's3_access_key_id', 's3_secret_access_key', 's3_session_token',
  's3_path_style', 's3_create_bucket', 'page_token_secret', 'managed_versioning', 'transaction_lease_ms', 'store_check_interval_ms', 'allow_unsafe_store', 'max_arrow_body_bytes',
  'max_json_body_bytes', 'max_map_entries', 'max_map_bytes', 'large_body_bytes', 'max_concurrent_large_bodies', 'max_batch_operations', 'max_batch_entries',
  'kept_datasets', 'kept_dataset_bytes',
  'lance_index_cache_bytes', 'lance_metadata_cache_bytes',
  'udf_execution', 'udf_python', 'udf_workers', 'ray_address',
]);

/** Reads a YAML or JSON configuration file (JSON is YAML); unknown keys are refused, so that a misspelt one is not silently ignored. */
export function readConfigFile(file: string | undefined): ConfigFile {
  let data: Record<string, unknown> = {};
  if (file !== undefined) {
    let parsed: unknown;
    try {
      parsed = parseYaml(readFileSync(file, 'utf8'));
    } catch (e) {
      throw new Error(`cannot read the configuration file ${file}: ${(e as Error).message}`);
    }
    if (parsed !== null && parsed !== undefined && (typeof parsed !== 'object' || Array.isArray(parsed))) throw new Error(`the configuration file ${file} must hold a mapping of options`);
    data = (parsed ?? {}) as Record<string, unknown>;
  }
  /** Refuses the keys of `value` that are not `known`, naming where they are. */
  const refuseUnknown = (where: string, value: object, known: Iterable<string>): void => {
    const knownKeys = new Set(known);
    const unknown = Object.keys(value).filter((k) => !knownKeys.has(k));
    if (unknown.length > 0) throw new Error(`unknown keys ${where ? `under ${where} ` : ''}in the configuration file ${file ?? ''}: ${unknown.join(', ')} (known: ${[...knownKeys].join(', ')})`);
  };
  refuseUnknown('', data, [...FILE_SCALARS, ...FILE_LISTS, 'auth', 'rate_limit', 'authorization', 'credential_vending']);
  return {
    scalar: (option) => {
      const value = data[option.replace(/-/g, '_')];
      return value === undefined || value === null ? undefined : String(value);
    },
    list: (key) => {
      const value = data[key];
      return value === undefined || value === null ? [] : Array.isArray(value) ? value.map(String) : [String(value)];
    },
    section: (key, known) => {
      const value = data[key] as Record<string, unknown> | undefined | null;
      if (value === undefined || value === null) return undefined;
      refuseUnknown(key, value, known);
      return value;
    },
    rateLimit: () => {
      const limit = data.rate_limit as Record<string, unknown> | undefined | null;
      if (limit === undefined || limit === null) return undefined;
      refuseUnknown('rate_limit', limit, ['requests_per_second', 'burst']);
      return { requestsPerSecond: limit.requests_per_second, burst: limit.burst ?? limit.requests_per_second };
    },
    credentialVending: () => {
      const vending = data.credential_vending as Record<string, unknown> | undefined | null;
      if (vending === undefined || vending === null) return undefined;
      refuseUnknown('credential_vending', vending, ['role_arn', 'duration_seconds', 'refresh_before_seconds', 'sts_endpoint', 'external_id']);
      return {
        roleArn: vending.role_arn,
        durationSeconds: vending.duration_seconds,
        refreshBeforeSeconds: vending.refresh_before_seconds,
        stsEndpoint: vending.sts_endpoint,
        externalId: vending.external_id,
      };
    },
    auth: () => {
      const auth = data.auth as { api_keys?: Array<{ principal?: unknown; sha256?: unknown }>; jwt?: Record<string, unknown>; oauth2?: unknown } | undefined;
      if (auth === undefined || auth === null) return undefined;
      refuseUnknown('auth', auth, ['api_keys', 'jwt', 'oauth2']);
      const oauth2 = auth.oauth2 as Record<string, unknown> | undefined;
      if (oauth2) refuseUnknown('auth.oauth2', oauth2, ['signing_secret', 'token_ttl_seconds', 'clients']);
      const jwt = auth.jwt;
      if (jwt) refuseUnknown('auth.jwt', jwt, ['issuer', 'audience', 'jwks_url', 'keys', 'clock_skew_seconds', 'principal_claim']);
      return {
        ...(auth.api_keys !== undefined ? { apiKeys: auth.api_keys.map((k) => ({ principal: k?.principal, sha256: k?.sha256 })) } : {}),
        ...(jwt
          ? {
              jwt: {
                issuer: jwt.issuer,
                audience: jwt.audience,
                jwksUrl: jwt.jwks_url,
                keys: jwt.keys,
                ...(jwt.clock_skew_seconds !== undefined ? { clockSkewSeconds: jwt.clock_skew_seconds } : {}),
                ...(jwt.principal_claim !== undefined ? { principalClaim: jwt.principal_claim } : {}),
              },
            }
          : {}),
        ...(oauth2
          ? {
              oauth2: {
                signingSecret: oauth2.signing_secret,
                ...(oauth2.token_ttl_seconds !== undefined ? { tokenTtlSeconds: oauth2.token_ttl_seconds } : {}),
                clients: ((oauth2.clients ?? []) as Array<Record<string, unknown>>).map((c) => ({
                  clientId: c?.client_id,
                  secretSha256: c?.secret_sha256,
                  principal: c?.principal ?? c?.client_id,
                })),
              },
            }
          : {}),
      };
    },
  };
}
