import { fileURLToPath } from 'node:url';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Config } from './config.js';
import { LancedbEngine } from './engine/lancedb/engine.js';
import type { PythonUdfOptions } from './engine/python-udf/python-udfs.js';
import { isLoopbackAddress } from './http/browser-guard.js';
import { buildHttpServer } from './http/server.js';
import { PrometheusMetrics } from './metrics/prometheus-metrics.js';
import { BranchService } from './service/branches/branch-service.js';
import { catalogDeps } from './service/catalog/catalog-deps.js';
import { Locations } from './service/catalog/locations.js';
import { NamespaceService } from './service/catalog/namespace-service.js';
import { PageTokens } from './service/catalog/page-token.js';
import { ColumnService } from './service/data/columns.js';
import { DataTables } from './service/data/data-tables.js';
import { IndexService } from './service/data/indices.js';
import { QueryService } from './service/data/queries.js';
import { RowService } from './service/data/rows.js';
import { TagService } from './service/data/tags.js';
import { HealthService } from './service/health/health-service.js';
import { StoreCheck } from './service/health/store-check.js';
import { JobService } from './service/jobs/job-service.js';
import { MaintenanceRuns } from './service/maintenance/maintenance-run.js';
import { PolicyMarkers, RunSlots } from './service/maintenance/policy-markers.js';
import { MaintenanceScheduler } from './service/maintenance/scheduler.js';
import { readTablePolicy } from './service/maintenance/table-policy.js';
import { TableCredentials } from './service/tables/credential-vending.js';
import { TableService } from './service/tables/table-service.js';
import { TransactionLog } from './service/transactions/transaction-log.js';
import { TransactionService } from './service/transactions/transaction-service.js';
import { TableVersionService } from './service/versions/table-version-service.js';
import { MaterializedViewService } from './service/views/view-service.js';
import { InstrumentedStore } from './store/instrumented-store.js';
import type { ObjectStore } from './store/object-store.js';
import { openStore, parseLocation, storeAt } from './store/open-store.js';
import { CredentialCache } from './vending/credential-vendor.js';
import { StsCredentialVendor } from './vending/sts-credential-vendor.js';

export const SERVICE_VERSION = '0.1.0';

/** Where `npm run build` puts the web console (scripts/build-ui.ts): dist/ui/ of the project, from src/ and from dist/ alike. */
export const CONSOLE_DIR = fileURLToPath(new URL('../dist/ui/', import.meta.url));

export interface App {
  server: FastifyInstance;
  store: ObjectStore;
  engine: LancedbEngine;
  /** Resolves once what answered commits and catalog writes left for after their answer is done (see service/versions/after-answer.ts). */
  settled(): Promise<void>;
  /** The table maintenance scheduler (its ticks run every --maintenance-interval-ms; tests call tick()). */
  maintenance: MaintenanceScheduler;
  /** Resolves when the job stops running in this process (tests). */
  jobSettled(id: string): Promise<void>;
  /** Stops accepting requests, lets in-flight ones finish, then releases the store and engine. */
  close(): Promise<void>;
}

/** Wires the store, the engine, the services and the HTTP server for one root. */
export async function createApp(config: Config, logger: FastifyBaseLogger): Promise<App> {
  const rootLocation = parseLocation(config.root);
  if (!rootLocation) throw new Error(`unsupported root ${JSON.stringify(config.root)}: use a path, file://, or s3://bucket/prefix`);
  const metrics = new PrometheusMetrics();
  // Every store the service uses reports its calls; S3 stores their retries too.
  const s3 = { ...config.s3, onRetry: () => metrics.storeRetry() };
  const store = new InstrumentedStore(await openStore(rootLocation, s3, { createBucket: config.s3.createBucket }), metrics);
  // Before anything else writes: recovery, like every race, relies on the store's conditional writes.
  const storeCheck = new StoreCheck(store, { intervalMs: config.storeCheckIntervalMs, allowUnsafe: config.allowUnsafeStore }, logger);
  await storeCheck.atStart().catch(async (e: unknown) => {
    await store.close();
    throw e;
  });
  const engine = await LancedbEngine.start(
    { maxEntries: config.keptDatasets, maxBytes: config.keptDatasetBytes },
    {
      ...udfWorkers(config, logger),
      indexWorkers: {
        ...(config.indexPython !== undefined ? { python: config.indexPython } : {}),
        workers: config.indexWorkers,
        log: (level, message, fields) => logger[level]({ indexWorker: fields }, message),
      },
      // Large compactions go to the Ray cluster the service is given (its rewrites as Ray tasks).
      ...(config.udf.rayAddress !== undefined
        ? { maintenanceRay: { address: config.udf.rayAddress, ...(config.udf.python !== undefined ? { python: config.udf.python } : {}) } }
        : {}),
      session: { indexCacheBytes: config.lanceIndexCacheBytes, metadataCacheBytes: config.lanceMetadataCacheBytes },
    },
  );
  metrics.observe({ handleCache: () => engine.keptStats() });
  const allowed = config.allowedLocations.map((l) => {
    const parsed = parseLocation(l);
    if (!parsed) throw new Error(`unsupported allowed location ${JSON.stringify(l)}: use a path, file://, or s3://bucket/prefix`);
    return parsed;
  });
  const credentials = await credentialCache(config);
  const locations = new Locations(store, rootLocation, (location) => new InstrumentedStore(storeAt(location, s3), metrics), allowed);
  // Built once here, with the helpers the services share (one TableFences, one ListingIndex and its snapshot cache).
  const deps = catalogDeps({
    store,
    engine,
    locations,
    pageTokens: new PageTokens(config.pageTokenSecret),
    settings: { managedVersioningDefault: config.managedVersioning, leaseMs: config.transactionLeaseMs },
    credentials: new TableCredentials(credentials, metrics),
    metrics,
  });
  const transactionLog = new TransactionLog(store);
  const versions = new TableVersionService(
    deps,
    transactionLog,
    { leaseMs: config.transactionLeaseMs, maxDeletedVersions: config.maxBatchDeletedVersions },
    logger,
  );
  const data = new DataTables(deps, versions);
  // Finish or roll back what a crash left in flight before serving.
  const { count: recovered, failures } = await versions.recoverAll();
  if (recovered > 0) logger.info({ recovered }, 'recovered unfinished transactions');
  for (const f of failures) logger.error({ transaction: f.id, err: f.error }, 'could not finish an unfinished transaction; it stays as it is');
  // Backfill jobs: every replica runs a runner; a lease in each job's record picks the one that works it.
  const tables = new TableService(deps, (ctx, id, resolved) => versions.coordinatorFor(ctx, id, resolved));
  const jobs = new JobService(
    data,
    transactionLog,
    { leaseMs: config.transactionLeaseMs },
    (ctx, id, arrowIpcStream) => tables.create(ctx, id, { arrowIpcStream, mode: 'ExistOk' }),
    logger,
  );
  // Table maintenance: every replica's scheduler starts runs of the tables whose policy asks for them; its job runner works them.
  const runSlots = new RunSlots(store);
  const maintenanceRuns = new MaintenanceRuns(
    engine.maintenance,
    runSlots,
    (id) => readTablePolicy(store, id),
    { leaseMs: config.transactionLeaseMs },
    metrics,
    logger,
  );
  jobs.maintenanceWork = maintenanceRuns.work;
  const maintenance = new MaintenanceScheduler(
    deps,
    data,
    jobs,
    transactionLog,
    engine.maintenance,
    new PolicyMarkers(store),
    runSlots,
    {
      intervalMs: config.maintenanceIntervalMs,
      leaseMs: config.transactionLeaseMs,
    },
    logger,
  );
  const server = buildHttpServer(
    {
      namespaces: new NamespaceService(deps),
      tables,
      versions,
      transactions: new TransactionService(deps, transactionLog),
      rows: new RowService(data, logger),
      columns: new ColumnService(data),
      indices: new IndexService(data),
      tags: new TagService(data),
      branches: new BranchService(data),
      queries: new QueryService(data),
      health: new HealthService(store, storeCheck),
      jobs,
      views: new MaterializedViewService(data, jobs, (ctx, id, arrowIpcStream) => tables.create(ctx, id, { arrowIpcStream, mode: 'Create' })),
    },
    {
      logger,
      jsonBodyLimit: config.maxJsonBodyBytes,
      arrowBodyLimit: config.maxArrowBodyBytes,
      limits: {
        maxMapEntries: config.maxMapEntries,
        maxMapBytes: config.maxMapBytes,
        largeBodyBytes: config.largeBodyBytes,
        maxConcurrentLargeBodies: config.maxConcurrentLargeBodies,
        maxBatchOperations: config.maxBatchOperations,
        maxBatchEntries: config.maxBatchEntries,
      },
      // Every form in which the root's own path can appear in a message (the engine drops the leading '/').
      rootForms: [store.rootUri, store.location(''), store.objectPath('')],
      version: SERVICE_VERSION,
      browser: { corsOrigins: config.corsOrigins, loopbackOnly: isLoopbackAddress(config.host) },
      authentication: config.auth,
      rateLimit: config.rateLimit,
      authorization: config.authorization,
      vending: credentials !== null,
      metrics,
      // On by default only where nothing but this machine reaches it; elsewhere it is asked for (--ui).
      console: (config.ui ?? isLoopbackAddress(config.host)) ? { dir: CONSOLE_DIR } : undefined,
    },
  );
  jobs.start();
  maintenance.start();
  storeCheck.start();
  // Every replica finishes batches whose coordinator died, once their lease has run out.
  versions.start();
  return {
    server,
    store,
    engine,
    settled: async () => void (await Promise.all([versions.settled(), deps.listingIndex.settled()])),
    maintenance,
    jobSettled: (id) => jobs.settled(id),
    close: async () => {
      await server.close();
      await deps.listingIndex.settled();
      await storeCheck.stop();
      await maintenance.stop();
      await jobs.stop();
      await versions.stop();
      await engine.close();
      await locations.close();
      credentials?.close();
      await store.close();
    },
  };
}

/** The engine's Python UDF workers, when udf_execution is on (their output goes to the service's log). */
function udfWorkers(config: Config, logger: FastifyBaseLogger): { udf?: PythonUdfOptions } {
  const { udf } = config;
  if (udf.execution === 'off') return {};
  return {
    udf: {
      ...(udf.python !== undefined ? { python: udf.python } : {}),
      workers: udf.workers,
      ...(udf.execution === 'ray' && udf.rayAddress !== undefined ? { rayAddress: udf.rayAddress } : {}),
      log: (level, message, fields) => logger[level]({ udfWorker: fields }, message),
    },
  };
}

/** The vended-credentials cache in front of STS, when credential_vending is configured (null otherwise). */
async function credentialCache(config: Config): Promise<CredentialCache | null> {
  const vending = config.credentialVending;
  if (!vending) return null;
  const { s3 } = config;
  const vendor = await StsCredentialVendor.create({
    roleArn: vending.roleArn,
    durationSeconds: vending.durationSeconds,
    endpoint: vending.stsEndpoint ?? s3.endpoint,
    region: s3.region,
    externalId: vending.externalId,
    credentials:
      s3.accessKeyId && s3.secretAccessKey ? { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey, sessionToken: s3.sessionToken } : undefined,
  });
  return new CredentialCache(vendor, { refreshBeforeMs: vending.refreshBeforeSeconds * 1000 });
}
