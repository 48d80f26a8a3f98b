import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { CommitOutcome, HandleCacheFigures, MaintenanceFigures, ObservedFigures, ScrapedMetrics, StoreOutcome } from './metrics.js';

// The Metrics port over prom-client, one registry per service (so that tests can run several).
// Names follow Prometheus conventions: a `lance_ns_` prefix, `_total` counters, `_seconds`
// histograms. Labels have small fixed sets of values (operation ids, store operations, outcomes),
// never ids of tables or requests.

/**
 * The process's own figures (CPU, memory, event-loop lag, GC), collected once per process
 * however many services it runs (tests run many): their collectors watch the process for as long
 * as it lives.
 */
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry, prefix: 'lance_ns_' });
  }
  return processRegistry;
}

/** Observations noted before they are handed to prom-client (see note). */
const PENDING_MAX = 256;
type Noted =
  | { kind: 'http'; operation: string; status: number; seconds: number }
  | { kind: 'store'; operation: string; outcome: StoreOutcome; seconds: number };

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class PrometheusMetrics implements ScrapedMetrics {
  readonly registry = new Registry();
  private readonly httpDuration: Histogram<'operation' | 'status_class'>;
  private readonly httpRequests: Counter<'operation' | 'status'>;
  private readonly storeDuration: Histogram<'operation'>;
  private readonly storeCalls: Counter<'operation' | 'outcome'>;
  private readonly storeRetries: Counter;
  private readonly commits: Counter<'path' | 'outcome'>;
  private readonly commitRetries: Counter<'writer'>;
  private readonly vends: Counter<'access' | 'outcome'>;
  private readonly jobsFinished: Counter<'status'>;
  private readonly maintenanceRuns: Counter<'outcome'>;
  private readonly maintenanceTotals: Record<keyof MaintenanceFigures, Counter>;
  private figures: ObservedFigures = {};

  constructor() {
    const registers = [this.registry];
    this.httpDuration = new Histogram({
      name: 'lance_ns_http_request_duration_seconds',
      help: 'Time from a request to its answer, by operation and status class',
      labelNames: ['operation', 'status_class'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.httpRequests = new Counter({
      name: 'lance_ns_http_requests_total',
      help: 'Answered requests by operation and HTTP status',
      labelNames: ['operation', 'status'],
      registers,
    });
    this.storeDuration = new Histogram({
      name: 'lance_ns_store_request_duration_seconds',
      help: 'Object store calls by operation',
      labelNames: ['operation'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.storeCalls = new Counter({
      name: 'lance_ns_store_requests_total',
      help: 'Object store calls by operation and outcome (ok, not_found, precondition_failed, withdrawn, error)',
      labelNames: ['operation', 'outcome'],
      registers,
    });
    this.storeRetries = new Counter({ name: 'lance_ns_store_retries_total', help: 'Object store requests sent again after a retryable failure', registers });
    this.commits = new Counter({
      name: 'lance_ns_commits_total',
      help: 'Version commits by path (single, batch, engine) and outcome (committed, conflict, failed)',
      labelNames: ['path', 'outcome'],
      registers,
    });
    this.commitRetries = new Counter({
      name: 'lance_ns_commit_retries_total',
      help: "Commits of the service's own writers (engine, backfill) tried again after losing the version to another writer",
      labelNames: ['writer'],
      registers,
    });
    this.vends = new Counter({
      name: 'lance_ns_credential_vends_total',
      help: 'Credential vends by access and outcome (vended, cached, none, failed)',
      labelNames: ['access', 'outcome'],
      registers,
    });
    this.jobsFinished = new Counter({
      name: 'lance_ns_jobs_finished_total',
      help: 'Jobs (backfills, view refreshes, maintenance runs) this replica finished, by status',
      labelNames: ['status'],
      registers,
    });
    this.maintenanceRuns = new Counter({
      name: 'lance_ns_maintenance_runs_total',
      help: 'Table maintenance runs this replica ended, by outcome (succeeded, conflict: lost a commit race and retried later, failed)',
      labelNames: ['outcome'],
      registers,
    });
    const maintenance = (name: string, help: string) => new Counter({ name: `lance_ns_maintenance_${name}_total`, help, registers });
    this.maintenanceTotals = {
      rowsRewritten: maintenance('rows_rewritten', 'Rows rewritten by maintenance compactions'),
      bytesRewritten: maintenance('bytes_rewritten', 'Bytes rewritten by maintenance compactions'),
      fragmentsBefore: maintenance('fragments_before', 'Fragments of the tables maintenance compacted, before the compaction'),
      fragmentsAfter: maintenance('fragments_after', 'Fragments of the tables maintenance compacted, after the compaction'),
      rowsIndexed: maintenance('rows_indexed', 'Rows brought into indices by maintenance'),
      versionsRemoved: maintenance('versions_removed', 'Table versions removed by maintenance cleanups'),
      bytesRemoved: maintenance('bytes_removed', 'Bytes removed by maintenance cleanups'),
    };
    const figures = () => this.figures;
    new Gauge({
      name: 'lance_ns_jobs_running',
      help: 'Backfill jobs this replica is working on',
      registers,
      collect() {
        this.set(figures().jobsRunning?.() ?? 0);
      },
    });
    const cache = (name: string, help: string, pick: (s: HandleCacheFigures) => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          const stats = figures().handleCache?.();
          this.set(stats ? pick(stats) : 0);
        },
      });
    cache('lance_ns_engine_handles', 'Datasets the engine keeps open', (s) => s.entries);
    cache('lance_ns_engine_handle_bytes', 'Manifest bytes (plus 64 KiB each) of the kept datasets', (s) => s.bytes);
    cache('lance_ns_engine_lance_cache_bytes', "Bytes in Lance's index and metadata caches, shared by every dataset", (s) => s.lanceCacheBytes ?? 0);
    // Running totals the cache keeps itself: each scrape adds what they grew by since the last.
    const total = (name: string, help: string, pick: (s: HandleCacheFigures) => number) => {
      let seen = 0;
      return new Counter({
        name,
        help,
        registers,
        collect() {
          const stats = figures().handleCache?.();
          const now = stats ? pick(stats) : seen;
          if (now > seen) this.inc(now - seen);
          seen = Math.max(seen, now);
        },
      });
    };
    total('lance_ns_engine_handle_hits_total', 'Requests served by a kept dataset', (s) => s.hits);
    total('lance_ns_engine_handle_opens_total', 'Datasets opened to be kept', (s) => s.opens);
    total('lance_ns_engine_handle_reloads_total', 'Kept datasets reloaded because the store had a newer version', (s) => s.reloads);
  }

  // Requests and store calls (a commit makes a dozen) are noted in a buffer and handed to
  // prom-client in a batch, at a scrape or once the buffer is full: prom-client hashes and checks
  // the labels of each observation, which one at a time, between requests, took about 3% of the
  // main thread's time per pylance append in a CPU profile; in a batch that code stays warm.
  private readonly pending: Noted[] = [];

  private note(noted: Noted): void {
    this.pending.push(noted);
    if (this.pending.length >= PENDING_MAX) this.flush();
  }

  private flush(): void {
    for (const noted of this.pending.splice(0)) {
      const { operation, seconds } = noted;
      if (noted.kind === 'http') {
        this.httpDuration.observe({ operation, status_class: `${Math.floor(noted.status / 100)}xx` }, seconds);
        this.httpRequests.inc({ operation, status: String(noted.status) });
      } else {
        this.storeDuration.observe({ operation }, seconds);
        this.storeCalls.inc({ operation, outcome: noted.outcome });
      }
    }
  }

  httpRequest(operation: string, status: number, seconds: number): void {
    this.note({ kind: 'http', operation, status, seconds });
  }

  storeCall(operation: string, outcome: StoreOutcome, seconds: number): void {
    this.note({ kind: 'store', operation, outcome, seconds });
  }

  storeRetry(): void {
    this.storeRetries.inc();
  }

  commit(path: 'single' | 'batch' | 'engine', outcome: CommitOutcome): void {
    this.commits.inc({ path, outcome });
  }

  commitRetry(writer: 'engine' | 'backfill'): void {
    this.commitRetries.inc({ writer });
  }

  vend(access: string, outcome: string): void {
    this.vends.inc({ access, outcome });
  }

  jobFinished(status: string): void {
    this.jobsFinished.inc({ status });
  }

  maintenanceRun(outcome: 'succeeded' | 'conflict' | 'failed', figures: MaintenanceFigures): void {
    this.maintenanceRuns.inc({ outcome });
    for (const [name, counter] of Object.entries(this.maintenanceTotals) as Array<[keyof MaintenanceFigures, Counter]>) counter.inc(figures[name]);
  }

  observe(figures: ObservedFigures): void {
    this.figures = { ...this.figures, ...figures };
  }

  /** The text exposition format, and its content type. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    this.flush();
    const both = Registry.merge([processMetrics(), this.registry]);
    return { contentType: this.registry.contentType, body: await both.metrics() };
  }
}
