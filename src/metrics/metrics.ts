// The port through which every layer reports what it did, for operators to graph (adapter:
// prometheus-metrics.ts, served at GET /metrics). Each method records one event; figures that
// someone else already keeps (kept engine handles, jobs running here) are read at scrape time
// through `observe`.

/**
 * How a store call ended: found nothing, lost a conditional write (or the write it was to follow
 * lost its own), was withdrawn by its caller before it was placed (PutOptions.placeAfter rejected:
 * nothing was asked of the store), or failed. Only `error` is a failure of the store.
 */
export type StoreOutcome = 'ok' | 'not_found' | 'precondition_failed' | 'withdrawn' | 'error';

/** How a commit of a table version ended (a conflict is 409 code 14: another writer got the version). */
export type CommitOutcome = 'committed' | 'conflict' | 'failed';

/** Engine handles kept, their bytes, and the running totals of opens, reloads and hits. */
export interface HandleCacheFigures {
  entries: number;
  bytes: number;
  opens: number;
  reloads: number;
  hits: number;
  /** Bytes in Lance's own caches (index and metadata), shared by every dataset. */
  lanceCacheBytes?: number;
}

/** What is read at scrape time. */
export interface ObservedFigures {
  handleCache?: () => HandleCacheFigures;
  /** Backfill jobs this replica is working on now. */
  jobsRunning?: () => number;
}

/** What one maintenance run did (service/maintenance/), for the counters of /metrics. */
export interface MaintenanceFigures {
  rowsRewritten: number;
  bytesRewritten: number;
  /** Fragments before and after a compaction (0 and 0 when the run did not compact). */
  fragmentsBefore: number;
  fragmentsAfter: number;
  rowsIndexed: number;
  versionsRemoved: number;
  bytesRemoved: number;
}

export interface Metrics {
  /** One answered HTTP request of a route (`operation`: its operationId). */
  httpRequest(operation: string, status: number, seconds: number): void;
  /** One call of the object store port. */
  storeCall(operation: string, outcome: StoreOutcome, seconds: number): void;
  /** One more attempt of a store request after a retryable failure (throttling, 5xx, a dropped connection). */
  storeRetry(): void;
  /**
   * One version commit: `single` a CreateTableVersion, `batch` a batch of versions, `engine` a
   * commit of the service's own data operations on a table with managed versioning.
   */
  commit(path: 'single' | 'batch' | 'engine', outcome: CommitOutcome): void;
  /**
   * A writer the service runs tries its commit again after losing the version to another writer:
   * the engine (Lance rebases on the conflict the commit path answers it), or a backfill chunk.
   */
  commitRetry(writer: 'engine' | 'backfill'): void;
  /** One credential vend (see service/tables/credential-vending.ts). */
  vend(access: string, outcome: string): void;
  /** A backfill job this replica finished with the status it recorded. */
  jobFinished(status: string): void;
  /**
   * A table maintenance run this replica ended: `succeeded`, `conflict` (it lost a commit race to a
   * writer and is retried at a later tick) or `failed`; with what it did.
   */
  maintenanceRun(outcome: 'succeeded' | 'conflict' | 'failed', figures: MaintenanceFigures): void;
  observe(figures: ObservedFigures): void;
}

/** Metrics that can also be read, in Prometheus' text format (GET /metrics). */
export interface ScrapedMetrics extends Metrics {
  scrape(): Promise<{ contentType: string; body: string }>;
}

/** Records nothing: for tests and tools that build services without the HTTP server. */
export const NO_METRICS: Metrics = Object.freeze({
  httpRequest: () => undefined,
  storeCall: () => undefined,
  storeRetry: () => undefined,
  commit: () => undefined,
  commitRetry: () => undefined,
  vend: () => undefined,
  jobFinished: () => undefined,
  maintenanceRun: () => undefined,
  observe: () => undefined,
});
