import { z } from 'zod';

// The one table of the service's options. Each option is declared here once, with its flag,
// environment variables, file key, default, zod type and help; the argument parser, `--help`, the
// configuration file's keys and docs/configuration.md (`npm run docs`) are all made from it.
// The file-only sections (auth, authorization, ...) are in sections.ts.

/** How an option's value is given. */
export type OptionKind =
  /** `--flag <value>`: text that the schema parses (numbers are coerced). */
  | 'value'
  /** `--flag <true|false>`: 1, true, yes and on (any case) are true, anything else false. */
  | 'boolean'
  /** `--flag` alone; in the environment and the file as a boolean. */
  | 'switch'
  /** `--flag <value>` repeated; a comma-separated environment variable; a list in the file. */
  | 'list';

export interface Option<S extends z.ZodType = z.ZodType> {
  /** The command-line flag, without its dashes. */
  flag: string;
  /** What the flag takes, as --help shows it (a switch takes nothing). */
  arg?: string;
  kind: OptionKind;
  /** Environment variables, in order: the first one set is taken. */
  env: readonly string[];
  /** Its key in the configuration file. */
  file: string;
  schema: S;
  /** The value when none is given: a constant, or one derived from the values of its group (given, or defaulted before it). */
  default?: z.input<S> | ((given: Readonly<Record<string, unknown>>) => z.input<S>);
  /** The default in words, where the value alone would not say it (derived, or decided where it is used). */
  defaultText?: string;
  /** One line of --help. */
  help: string;
  /** What docs/configuration.md adds to the help (Markdown). */
  details?: string;
}

export interface OptionGroup<O extends Record<string, Option> = Record<string, Option>> {
  title: string;
  /** The group's introduction in docs/configuration.md (Markdown). */
  intro: string;
  /** The Config property the group's options are nested under; absent: they are at its top. */
  at?: string;
  /** The options, under their Config property names. */
  options: O;
}

const option = <S extends z.ZodType>(o: Option<S>): Option<S> => o;
const group = <O extends Record<string, Option>>(g: OptionGroup<O>): OptionGroup<O> => g;

/** The zod shape of a group's options, for the Config schema. */
export function shapeOf<O extends Record<string, Option>>(g: OptionGroup<O>): { [K in keyof O]: O[K]['schema'] } {
  return Object.fromEntries(Object.entries(g.options).map(([key, o]) => [key, o.schema])) as { [K in keyof O]: O[K]['schema'] };
}

const nonNegativeInt = (): z.ZodCoercedNumber => z.coerce.number().int().min(0);
const positiveInt = (): z.ZodCoercedNumber => z.coerce.number().int().positive();
const MiB = 1024 * 1024;
/** A location outside the root, or the root: a path, file:// or s3:// URI. */
const LOCATION = '<path|s3://bucket/prefix>';

// biome-ignore format: the option table, one option's spellings per line (flag, env, file key), then its schema and default
export const SERVER = group({
  title: 'Server',
  intro: 'Where the service listens and who may reach it. With no options at all it serves `./data` on `127.0.0.1:2333`.',
  options: {
    host: option({
      flag: 'host', arg: '<addr>', kind: 'value', env: ['LANCE_NS_HOST'], file: 'host',
      schema: z.string().min(1), default: '127.0.0.1',
      help: 'address to listen on',
      details: 'On a loopback address only requests addressed to a loopback name are answered (see [Browsers](security.md#browsers-and-cors)).',
    }),
    port: option({
      flag: 'port', arg: '<n>', kind: 'value', env: ['LANCE_NS_PORT'], file: 'port',
      schema: z.coerce.number().int().min(0).max(65535), default: 2333,
      help: 'port to listen on (0: any free port)',
    }),
    insecure: option({
      flag: 'insecure', kind: 'switch', env: ['LANCE_NS_INSECURE'], file: 'insecure',
      schema: z.boolean(), default: false,
      help: 'serve without authentication on a non-loopback address',
      details:
        'Every caller that reaches the port then has full access. Without it the service refuses to start on a non-loopback address when `auth` is not configured; on a loopback address it runs open and says so at start-up.',
    }),
    ui: option({
      flag: 'ui', arg: '<true|false>', kind: 'boolean', env: ['LANCE_NS_UI'], file: 'ui',
      // Absent: app.ts serves it when bound to a loopback address.
      schema: z.boolean().optional(), defaultText: 'true on a loopback address, false elsewhere',
      help: 'serve the read-only web console at /ui',
      details: 'See [Web console](console.md).',
    }),
    corsOrigins: option({
      flag: 'cors-origin', arg: '<scheme://host[:port]>', kind: 'list', env: ['LANCE_NS_CORS_ORIGINS'], file: 'cors_origins',
      schema: z.array(z.string().regex(/^https?:\/\/[^/\s]+$/, 'an origin is scheme://host[:port]')), default: [],
      help: 'an origin whose web pages may call the service (CORS)',
      details: 'Requests from any other origin are refused (see [Browsers](security.md#browsers-and-cors)).',
    }),
    logLevel: option({
      flag: 'log-level', arg: '<level>', kind: 'value', env: ['LANCE_NS_LOG_LEVEL'], file: 'log_level',
      schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']), default: 'info',
      help: 'pino log level',
      details: "Every request's `incoming request` / `request completed` lines come at `debug`, mutations' `audit` lines at `info`.",
    }),
  },
});

// biome-ignore format: the option table (see SERVER)
export const STORAGE = group({
  title: 'Storage',
  intro: 'The catalog root, the other places tables may be, and how far the store is trusted.',
  options: {
    root: option({
      flag: 'root', arg: LOCATION, kind: 'value', env: ['LANCE_NS_ROOT'], file: 'root',
      schema: z.string().min(1), default: './data',
      help: 'catalog root: a path, file:///..., or s3://bucket/prefix',
    }),
    allowedLocations: option({
      flag: 'allowed-location', arg: LOCATION, kind: 'list', env: ['LANCE_NS_ALLOWED_LOCATIONS'], file: 'allowed_locations',
      schema: z.array(z.string().min(1)), default: [],
      help: 'a place outside the root where tables may be registered',
      details: 'A path, `file:///...` or `s3://bucket/prefix` (see [Allowed locations](security.md#allowed-locations)).',
    }),
    storeCheckIntervalMs: option({
      flag: 'store-check-interval-ms', arg: '<ms>', kind: 'value', env: ['LANCE_NS_STORE_CHECK_INTERVAL_MS'], file: 'store_check_interval_ms',
      schema: z.coerce.number().int().min(0), default: 3_600_000,
      help: 'how often to check again that the store honours conditional writes (0: only at start-up)',
      details: "The first check is at start-up (see [The store's word](storage-layout.md#the-stores-word) and `src/service/health/store-check.ts`).",
    }),
    allowUnsafeStore: option({
      flag: 'allow-unsafe-store', kind: 'switch', env: ['LANCE_NS_ALLOW_UNSAFE_STORE'], file: 'allow_unsafe_store',
      schema: z.boolean(), default: false,
      help: 'serve a store that does not honour conditional writes, with warnings',
      details: 'It warns at start-up and at each check that finds the store so; without it the service refuses to start on one.',
    }),
  },
});

// biome-ignore format: the option table (see SERVER)
export const S3 = group({
  title: 'S3',
  intro: 'How the service reaches an S3-compatible store (AWS, MinIO, Ceph RGW, ...) for an `s3://` root or allowed location.',
  at: 's3',
  options: {
    endpoint: option({
      flag: 's3-endpoint', arg: '<url>', kind: 'value', env: ['LANCE_NS_S3_ENDPOINT', 'AWS_ENDPOINT_URL_S3', 'AWS_ENDPOINT_URL'], file: 's3_endpoint',
      schema: z.string().optional(), defaultText: 'AWS',
      help: 'S3 endpoint (MinIO, Ceph RGW, ...)',
    }),
    region: option({
      flag: 's3-region', arg: '<region>', kind: 'value', env: ['LANCE_NS_S3_REGION', 'AWS_REGION', 'AWS_DEFAULT_REGION'], file: 's3_region',
      schema: z.string().min(1), default: 'us-east-1',
      help: 'S3 region',
    }),
    accessKeyId: option({
      flag: 's3-access-key-id', arg: '<id>', kind: 'value', env: ['LANCE_NS_S3_ACCESS_KEY_ID', 'AWS_ACCESS_KEY_ID'], file: 's3_access_key_id',
      schema: z.string().optional(), defaultText: "from the AWS SDK's credential chain",
      help: 'S3 access key id',
    }),
    secretAccessKey: option({
      flag: 's3-secret-access-key', arg: '<key>', kind: 'value', env: ['LANCE_NS_S3_SECRET_ACCESS_KEY', 'AWS_SECRET_ACCESS_KEY'], file: 's3_secret_access_key',
      schema: z.string().optional(), defaultText: "from the AWS SDK's credential chain",
      help: 'S3 secret access key',
    }),
    sessionToken: option({
      flag: 's3-session-token', arg: '<token>', kind: 'value', env: ['LANCE_NS_S3_SESSION_TOKEN', 'AWS_SESSION_TOKEN'], file: 's3_session_token',
      schema: z.string().optional(), defaultText: "from the AWS SDK's credential chain",
      help: 'S3 session token',
    }),
    forcePathStyle: option({
      flag: 's3-path-style', arg: '<true|false>', kind: 'boolean', env: ['LANCE_NS_S3_PATH_STYLE'], file: 's3_path_style',
      schema: z.boolean(), default: (s3) => s3.endpoint !== undefined, defaultText: 'true when an endpoint is set',
      help: 'path-style addressing (http://endpoint/bucket/key)',
    }),
    createBucket: option({
      flag: 's3-create-bucket', arg: '<true|false>', kind: 'boolean', env: ['LANCE_NS_S3_CREATE_BUCKET'], file: 's3_create_bucket',
      schema: z.boolean(), default: false,
      help: "create the root's bucket if it is missing",
    }),
  },
});

// biome-ignore format: the option table (see SERVER)
export const CATALOG = group({
  title: 'Catalog behaviour',
  intro: 'Settings every replica serving one root should share.',
  options: {
    managedVersioning: option({
      flag: 'managed-versioning', arg: '<true|false>', kind: 'boolean', env: ['LANCE_NS_MANAGED_VERSIONING'], file: 'managed_versioning',
      schema: z.boolean(), default: false,
      help: 'managed versioning for tables and namespaces that do not set the property',
    }),
    transactionLeaseMs: option({
      flag: 'transaction-lease-ms', arg: '<ms>', kind: 'value', env: ['LANCE_NS_TRANSACTION_LEASE_MS'], file: 'transaction_lease_ms',
      schema: positiveInt(), default: 30_000,
      help: 'after this an unfinished commit (a reservation, a batch before its commit point) is presumed dead',
    }),
    maintenanceIntervalMs: option({
      flag: 'maintenance-interval-ms', arg: '<ms>', kind: 'value', env: ['LANCE_NS_MAINTENANCE_INTERVAL_MS'], file: 'maintenance_interval_ms',
      schema: nonNegativeInt(), default: 60_000,
      help: 'how often this replica looks at the tables with a maintenance policy (0: never)',
      details: 'Each look is one LIST of the policy markers, whatever the catalog holds; see [Table maintenance](maintenance.md). With `0` this replica starts no runs, but still finishes runs other replicas started and left.',
    }),
    pageTokenSecret: option({
      flag: 'page-token-secret', arg: '<secret>', kind: 'value', env: ['LANCE_NS_PAGE_TOKEN_SECRET'], file: 'page_token_secret',
      schema: z.string().min(1), default: 'lance-namespace-page-token', defaultText: 'built in',
      help: 'HMAC key of page tokens; give every replica the same',
    }),
  },
});

/**
 * Items of one batch, by default: the largest batch answers within seconds on a local disk and
 * within a minute on S3 (measured by scripts/bench-batches.ts, see docs/compatibility.md's Limits).
 */
const DEFAULT_MAX_BATCH = 500;

// biome-ignore format: the option table (see SERVER)
export const LIMITS = group({
  title: 'Limits',
  intro:
    'Bounds on every input that can grow without bound, checked before anything is validated in depth or written (see [Limits](compatibility.md#limits) for what a request past each gets, and why).',
  options: {
    maxArrowBodyBytes: option({
      flag: 'max-arrow-body-bytes', arg: '<n>', kind: 'value', env: ['LANCE_NS_MAX_ARROW_BODY_BYTES'], file: 'max_arrow_body_bytes',
      schema: positiveInt(), default: 256 * MiB,
      help: 'largest Arrow IPC request body, in bytes (larger: 413)',
    }),
    maxJsonBodyBytes: option({
      flag: 'max-json-body-bytes', arg: '<n>', kind: 'value', env: ['LANCE_NS_MAX_JSON_BODY_BYTES'], file: 'max_json_body_bytes',
      schema: positiveInt(), default: 4 * MiB,
      help: 'largest JSON request body, in bytes (larger: 413)',
      details: 'Parsing JSON blocks the event loop in proportion to its size, so this stays small.',
    }),
    maxMapEntries: option({
      flag: 'max-map-entries', arg: '<n>', kind: 'value', env: ['LANCE_NS_MAX_MAP_ENTRIES'], file: 'max_map_entries',
      schema: positiveInt(), default: 1000,
      help: 'entries of one string map in a request (properties, metadata, storage options, context)',
    }),
    maxMapBytes: option({
      flag: 'max-map-bytes', arg: '<n>', kind: 'value', env: ['LANCE_NS_MAX_MAP_BYTES'], file: 'max_map_bytes',
      schema: positiveInt(), default: 256 * 1024,
      help: 'UTF-8 bytes of the keys and values of one such map',
    }),
    largeBodyBytes: option({
      flag: 'large-body-bytes', arg: '<n>', kind: 'value', env: ['LANCE_NS_LARGE_BODY_BYTES'], file: 'large_body_bytes',
      schema: nonNegativeInt(), default: 16 * MiB,
      help: 'Arrow bodies larger than this (or of unknown length) count as large',
    }),
    maxConcurrentLargeBodies: option({
      flag: 'max-concurrent-large-bodies', arg: '<n>', kind: 'value', env: ['LANCE_NS_MAX_CONCURRENT_LARGE_BODIES'], file: 'max_concurrent_large_bodies',
      schema: positiveInt(), default: 2,
      help: 'large Arrow bodies received at once; one more is a 503 (code 17) before its body is read',
      details: 'Every large body in flight is held in memory whole.',
    }),
    maxBatchOperations: option({
      flag: 'max-batch-operations', arg: '<n>', kind: 'value', env: ['LANCE_NS_MAX_BATCH_OPERATIONS'], file: 'max_batch_operations',
      schema: positiveInt(), default: DEFAULT_MAX_BATCH,
      help: 'operations of one BatchCommitTables',
      details: 'The default answers within seconds on a local disk and within a minute on S3 (see [Limits](compatibility.md#limits)).',
    }),
    maxBatchEntries: option({
      flag: 'max-batch-entries', arg: '<n>', kind: 'value', env: ['LANCE_NS_MAX_BATCH_ENTRIES'], file: 'max_batch_entries',
      schema: positiveInt(), default: DEFAULT_MAX_BATCH,
      help: 'entries of one BatchCreateTableVersions',
      details: 'Sized like `--max-batch-operations`.',
    }),
    maxBatchDeletedVersions: option({
      flag: 'max-batch-deleted-versions', arg: '<n>', kind: 'value', env: ['LANCE_NS_MAX_BATCH_DELETED_VERSIONS'], file: 'max_batch_deleted_versions',
      schema: positiveInt(), default: DEFAULT_MAX_BATCH,
      help: 'versions one BatchCommitTables deletes, its `delete_table_versions` operations together',
      details: 'Its transaction record holds each, and it deletes each within its one request. Sized like `--max-batch-operations`.',
    }),
  },
});

// biome-ignore format: the option table (see SERVER)
export const ENGINE = group({
  title: 'Engine caches',
  intro: 'What the Lance engine keeps in memory across requests.',
  options: {
    keptDatasets: option({
      flag: 'kept-datasets', arg: '<n>', kind: 'value', env: ['LANCE_NS_KEPT_DATASETS'], file: 'kept_datasets',
      schema: nonNegativeInt(), default: 256,
      help: 'datasets kept open across requests (0: none, every request opens its own)',
      details: 'The least recently used is closed first.',
    }),
    keptDatasetBytes: option({
      flag: 'kept-dataset-bytes', arg: '<n>', kind: 'value', env: ['LANCE_NS_KEPT_DATASET_BYTES'], file: 'kept_dataset_bytes',
      schema: nonNegativeInt(), default: 256 * MiB,
      help: "bound on the kept datasets: each counts its latest manifest's bytes plus 64 KiB",
      details: "Lance's caches are bounded by the next two options.",
    }),
    lanceIndexCacheBytes: option({
      flag: 'lance-index-cache-bytes', arg: '<n>', kind: 'value', env: ['LANCE_NS_LANCE_INDEX_CACHE_BYTES'], file: 'lance_index_cache_bytes',
      schema: nonNegativeInt(), default: 1024 * MiB,
      help: "Lance's index cache, one shared by every dataset the service opens",
    }),
    lanceMetadataCacheBytes: option({
      flag: 'lance-metadata-cache-bytes', arg: '<n>', kind: 'value', env: ['LANCE_NS_LANCE_METADATA_CACHE_BYTES'], file: 'lance_metadata_cache_bytes',
      schema: nonNegativeInt(), default: 256 * MiB,
      help: "Lance's metadata cache (file footers, manifests), shared likewise",
    }),
  },
});

// biome-ignore format: the option table (see SERVER)
export const UDF = group({
  title: 'Python UDFs',
  intro:
    "Running Geneva's Python UDFs (virtual columns with `udf_backend` DockerUDFSpecV1, and their backfills). **A UDF is arbitrary code run by the service**, so only principals with the manage privilege may bind or run one (see [Python UDFs and Geneva](udfs.md)).",
  at: 'udf',
  options: {
    execution: option({
      flag: 'udf-execution', arg: '<off|local|ray>', kind: 'value', env: ['LANCE_NS_UDF_EXECUTION'], file: 'udf_execution',
      schema: z.enum(['off', 'local', 'ray']), default: 'off',
      help: "run Geneva's Python UDFs: off (406 for them), local workers, or on a Ray cluster",
      details: '`local` runs them in Python worker processes beside the service; `ray` sends their computation to the Ray cluster at `--ray-address`.',
    }),
    python: option({
      flag: 'udf-python', arg: '<path>', kind: 'value', env: ['LANCE_NS_UDF_PYTHON'], file: 'udf_python',
      // Absent: the engine's DEFAULT_UDF_PYTHON.
      schema: z.string().min(1).optional(), defaultText: '.venv-udf/bin/python',
      help: 'the Python of the UDF workers',
      details: '`scripts/install-udf-worker.sh` makes `.venv-udf` with the pinned geneva, pylance and pyarrow.',
    }),
    workers: option({
      flag: 'udf-workers', arg: '<n>', kind: 'value', env: ['LANCE_NS_UDF_WORKERS'], file: 'udf_workers',
      schema: z.coerce.number().int().min(1).max(64), default: 1,
      help: 'UDF worker processes (each runs one chunk at a time)',
    }),
    rayAddress: option({
      flag: 'ray-address', arg: '<host:port>', kind: 'value', env: ['LANCE_NS_RAY_ADDRESS'], file: 'ray_address',
      schema: z.string().min(1).optional(),
      help: 'the Ray cluster of --udf-execution ray, and of large compactions (their rewrites as Ray tasks)',
    }),
  },
});

// biome-ignore format: the option table (see SERVER)
export const INDEX_WORKERS = group({
  title: 'Index workers',
  intro:
    'pylance, in worker processes beside the service, builds the index types `@lancedb/lancedb` cannot: IVF_SQ, IVF_HNSW_FLAT, NGRAM, ZONEMAP, BLOOMFILTER and RTREE. The workers run no user code and start with the first such build; without their Python those types answer 406.',
  options: {
    indexPython: option({
      flag: 'index-python', arg: '<path>', kind: 'value', env: ['LANCE_NS_INDEX_PYTHON'], file: 'index_python',
      // Absent: the engine's DEFAULT_INDEX_PYTHON.
      schema: z.string().min(1).optional(), defaultText: '.venv-index/bin/python',
      help: 'the Python of the index workers',
      details: '`scripts/install-index-worker.sh` makes `.venv-index` with the pinned pylance and pyarrow; `npm install` runs it when Python 3.10 or newer is on the PATH.',
    }),
    indexWorkers: option({
      flag: 'index-workers', arg: '<n>', kind: 'value', env: ['LANCE_NS_INDEX_WORKERS'], file: 'index_workers',
      schema: z.coerce.number().int().min(1).max(64), default: 1,
      help: 'index worker processes (each builds one index at a time)',
    }),
  },
});

/** Every group, in the order --help and docs/configuration.md show them. */
export const OPTION_GROUPS: readonly OptionGroup[] = [SERVER, STORAGE, S3, CATALOG, LIMITS, ENGINE, INDEX_WORKERS, UDF];

/** The option that names the configuration file (not itself a key of the file). */
export const CONFIG_FILE_OPTION = {
  flag: 'config',
  arg: '<file.yaml|file.json>',
  env: ['LANCE_NS_CONFIG'],
  help: 'a YAML or JSON configuration file',
} as const;
