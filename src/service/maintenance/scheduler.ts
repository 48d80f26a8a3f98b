import pLimit from 'p-limit';
import type { DatasetLocation } from '../../engine/dataset-location.js';
import type { MaintenanceInspection, MaintenanceOps } from '../../engine/ports/maintenance.js';
import type { ObjectStore } from '../../store/object-store.js';
import { readNamespace } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { tableRecordKey, tableRefOf } from '../catalog/layout.js';
import { readRecord, TableRecord } from '../catalog/records.js';
import type { ServiceLogger } from '../context/logger.js';
import type { RequestContext } from '../context/request-context.js';
import { pausePoint } from '../coordination/fault-points.js';
import { Poller } from '../coordination/markers.js';
import type { DataTables } from '../data/data-tables.js';
import type { JobService } from '../jobs/job-service.js';
import { tablesUnder } from '../tables/list-tables.js';
import { incarnationOf } from '../tables/table-state.js';
import { TERMINAL, type TransactionLog } from '../transactions/transaction-log.js';
import type { MaintainTableJob } from './maintenance-job.js';
import { dueSteps } from './maintenance-plan.js';
import { policyActs, setsPolicy } from './policy.js';
import { type PolicyMarkers, type RunSlots, runsOf } from './policy-markers.js';
import { type NamespaceProperties, readTablePolicy } from './table-policy.js';

// The maintenance scheduler every replica runs (issue 33): every interval, one LIST of the policy
// markers (policy-markers.ts) names the tables and namespaces with a policy; a catalog of tables
// without one costs that LIST and nothing else. For each table with a policy that acts, it reads
// the table's run slot and, unless a run is unfinished, inspects the table and, when a step is
// due, claims the slot and submits a `maintain_table` job (the slot settles which replica starts
// it; the job's lease which runner works it, see jobs/job-runner.ts and maintenance-run.ts).

/** How many tables one tick looks at at once. */
const TABLE_CONCURRENCY = 4;

export interface SchedulerSettings {
  /** How often a tick runs; 0: never (the runner still works runs other replicas started). */
  intervalMs: number;
  /** The transaction lease: a slot naming a job whose record is missing is trusted this long, and a cleanup's reader window. */
  leaseMs: number;
}

/** What one tick found and did (for tests and the benchmark). */
export interface TickReport {
  markers: number;
  tables: number;
  /** The runs started, with their tables. */
  started: Array<{ job: string; table: string[] }>;
}

const systemContext: RequestContext = { requestId: 'maintenance-scheduler', principal: null, context: {} };

/** Inspections kept for tables whose latest version has not changed since (oldest dropped first). */
const KEPT_INSPECTIONS = 10_000;

export class MaintenanceScheduler {
  private poller: Poller | undefined;
  private readonly inspections = new Map<string, { stamp: string; inspection: MaintenanceInspection }>();

  constructor(
    private readonly deps: CatalogDeps,
    private readonly tables: DataTables,
    private readonly jobs: JobService,
    private readonly log: TransactionLog,
    private readonly ops: MaintenanceOps,
    private readonly markers: PolicyMarkers,
    private readonly slots: RunSlots,
    private readonly settings: SchedulerSettings,
    private readonly logger?: ServiceLogger,
  ) {}

  private get store(): ObjectStore {
    return this.deps.store;
  }

  start(): void {
    if (this.settings.intervalMs <= 0) return;
    this.poller = new Poller(async () => {
      await this.tick().catch((e: unknown) => this.logger?.warn({ err: e }, 'maintenance tick failed'));
    }, this.settings.intervalMs);
    this.poller.start();
  }

  async stop(): Promise<void> {
    await this.poller?.stop();
    this.poller = undefined;
  }

  /** Looks at every table with a policy once and starts the runs that are due. */
  async tick(): Promise<TickReport> {
    const listed = await this.markers.list();
    const report: TickReport = { markers: listed.length, tables: 0, started: [] };
    if (listed.length === 0) return report;
    const namespaces: NamespaceProperties = new Map();
    const ids = new Map<string, string[]>();
    const readLimit = pLimit(TABLE_CONCURRENCY);
    await Promise.all(
      listed.map((marker) =>
        readLimit(async () => {
          const { kind, id } = marker.target;
          const own =
            kind === 'namespace'
              ? (await readNamespace(this.store, id))?.value
              : (await readRecord(this.store, tableRecordKey(tableRefOf(id)), TableRecord))?.value;
          if (!own || !setsPolicy(own.properties)) {
            await this.markers.removeQuiet(marker, this.settings.leaseMs);
            return;
          }
          if (marker.markers.length > 1) await this.markers.removeOlder(marker);
          const found =
            kind === 'namespace'
              ? await tablesUnder(this.deps, id).catch((e: unknown) => {
                  this.logger?.warn({ namespace: id, err: e }, 'maintenance: could not list the tables under a namespace with a policy');
                  return [];
                })
              : [id];
          for (const t of found) ids.set(JSON.stringify(t), t);
        }),
      ),
    );
    report.tables = ids.size;
    const limit = pLimit(TABLE_CONCURRENCY);
    await Promise.all(
      [...ids.values()].map((id) =>
        limit(async () => {
          const started = await this.consider(id, namespaces).catch((e: unknown) => {
            this.logger?.warn({ table: id, err: e }, 'maintenance: could not look at the table');
            return null;
          });
          if (started) report.started.push({ job: started, table: id });
        }),
      ),
    );
    return report;
  }

  /**
   * The table's inspection: the engine's (a pylance worker opens the dataset), or the one this
   * replica made of the same committed version (a manifest's etag names its bytes, the incarnation
   * the table) while the table's run slot is unchanged (every run, of any replica, records itself
   * there: a cleanup changes the versions without committing one). What is due is then decided
   * again from it, as time alone may make a cleanup due.
   */
  private async inspect(
    id: string[],
    at: DatasetLocation,
    targetRowsPerFragment: number,
    withVersions: boolean,
    slotETag: string,
  ): Promise<MaintenanceInspection> {
    const key = JSON.stringify(id);
    const { latest } = at;
    const stamp = latest ? `${latest.incarnation ?? ''}|${latest.version}|${latest.manifestETag}|${targetRowsPerFragment}|${withVersions}|${slotETag}` : null;
    const kept = this.inspections.get(key);
    if (stamp !== null && kept?.stamp === stamp) return kept.inspection;
    const inspection = await this.ops.inspect(at, { targetRowsPerFragment, withVersions });
    this.inspections.delete(key);
    if (this.inspections.size >= KEPT_INSPECTIONS) this.inspections.delete(this.inspections.keys().next().value ?? '');
    if (stamp !== null && inspection.version === latest?.version) this.inspections.set(key, { stamp, inspection });
    return inspection;
  }

  /** Starts a run of the table when one is due and none is unfinished; returns its job id. */
  private async consider(id: string[], namespaces: NamespaceProperties): Promise<string | null> {
    const policy = await readTablePolicy(this.store, id, namespaces);
    if (!policy || !policyActs(policy)) return null;
    const slot = await this.slots.read(id);
    const current = slot?.value.job_id;
    if (current) {
      const record = await this.log.read(current);
      if (record && !TERMINAL.has(record.value.status)) return null;
      // Claimed but not written yet (or its writer died before): trusted for a lease.
      const claimedAt = Date.parse(slot.value.started_at ?? '');
      if (!record && Date.now() - claimedAt < this.settings.leaseMs) return null;
    }
    const table = await this.tables.open(systemContext, id, { allowDeclared: true });
    if (!table.hasData) return null;
    // The versions (a read of each one's manifest) only for a cleanup: a table without one may have many.
    const inspection = await this.inspect(id, table.at, policy.targetRowsPerFragment, policy.cleanupOlderThanMs !== null, slot?.etag ?? '');
    const steps = dueSteps(policy, inspection, runsOf(slot?.value, incarnationOf(table.state)), Date.now(), this.settings.leaseMs);
    if (steps.length === 0) return null;
    const jobId = this.log.newId();
    await pausePoint('maintenance:before-claim');
    if (!(await this.slots.claim(id, slot, jobId))) return null;
    const job: MaintainTableJob = { kind: 'maintain_table', table_id: id, steps, steps_done: [], attempts: 0 };
    await this.jobs.submit(
      systemContext,
      'maintain_table',
      job,
      { table: JSON.stringify(id), steps: steps.join(','), inspected_version: String(inspection.version) },
      jobId,
    );
    this.logger?.info({ job: jobId, table: id, steps }, 'maintenance run started');
    return jobId;
  }
}
