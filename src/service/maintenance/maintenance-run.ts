import { EngineError } from '../../engine/dataset-location.js';
import type { MaintenanceOps } from '../../engine/ports/maintenance.js';
import { type MaintenanceFigures, type Metrics, NO_METRICS } from '../../metrics/metrics.js';
import { listBranchRefs, listTagRefs } from '../branches/branch-refs.js';
import { displayId } from '../catalog/catalog.js';
import type { ServiceLogger } from '../context/logger.js';
import { faultPoint, pausePoint } from '../coordination/fault-points.js';
import type { OpenTable } from '../data/data-tables.js';
import type { JobLease, JobRecords } from '../jobs/job-lease.js';
import { StopSignal } from '../jobs/job-lease.js';
import { incarnationOf } from '../tables/table-state.js';
import { TableVersions } from '../versions/dataset-versions.js';
import type { MaintainTableJob, MaintenanceStep } from './maintenance-job.js';
import { readerWindow } from './maintenance-plan.js';
import type { MaintenancePolicy } from './policy.js';
import type { RunSlots, RunSummary } from './policy-markers.js';

// One maintenance run of a table, as the job runner works it (jobs/job-runner.ts: under a write
// lease on the table, so a drop waits for it; one runner at a time by the job's lease, taken over
// when its replica dies). Each step commits through the engine on the table's DatasetLocation as
// the data operations open it (its commit coordinator on a managed table), as Lance's rebase-able
// operations; a step is checkpointed in the job's record once committed, so a takeover redoes at
// most the step in flight, and redoing one is harmless (it inspects again and finds less to do).
//
// A step that loses a commit race to a writer ends the run as Failed ("conflict"): the slot then
// names a finished run, and the next tick of any replica starts another if the table still needs it.
//
// What a cleanup keeps (besides the latest version, which Lance never removes): tagged versions of
// main, the versions branches were forked from, and every version that was the latest at some
// instant of the last lease (maintenance-plan.ts readerWindow).

const TAG_PAGE = 1000;

const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** A lost commit race, a store that did not answer: the run ends (or is left to its lease) and a later one tries again. */
const isConflict = (e: unknown): boolean => e instanceof EngineError && e.kind === 'conflict';
const isTransientStore = (e: unknown): boolean => e instanceof EngineError && (e.kind === 'unavailable' || e.kind === 'store_unreachable');

export interface RunSettings {
  /** The reader window of a cleanup (the transaction lease). */
  leaseMs: number;
}

export class MaintenanceRuns {
  constructor(
    private readonly ops: MaintenanceOps,
    private readonly slots: RunSlots,
    /** The table's policy as stored now (a run acts on the policy of when it runs). */
    private readonly policyOf: (id: string[]) => Promise<MaintenancePolicy | null>,
    private readonly settings: RunSettings,
    private readonly metrics: Metrics = NO_METRICS,
    private readonly logger?: ServiceLogger,
  ) {}

  /** The job runner's work for a `maintain_table` job (JobWork). */
  readonly work = async (id: string, job: MaintainTableJob, lease: JobLease, table: OpenTable, records: JobRecords): Promise<void> => {
    const started = Date.now();
    const figures: MaintenanceFigures = {
      rowsRewritten: 0,
      bytesRewritten: 0,
      fragmentsBefore: 0,
      fragmentsAfter: 0,
      rowsIndexed: 0,
      versionsRemoved: 0,
      bytesRemoved: 0,
    };
    const summary: Partial<RunSummary> = {};
    let done = job.steps_done;
    try {
      const policy = table.hasData ? await this.policyOf(job.table_id) : null;
      for (const step of job.steps) {
        if (done.includes(step) || !policy) continue;
        await lease.check();
        const properties = await this.step(step, policy, table, figures, summary);
        faultPoint(`maintenance:after-${step}`);
        done = [...done, step];
        const stepsDone = done;
        await records.checkpoint<MaintainTableJob>(id, (j) => ({ ...j, steps_done: stepsDone }), { ...properties, steps_done: stepsDone.join(',') });
      }
      await records.finish(id, 'Succeeded');
      await this.ended(id, job, table, 'succeeded', 'Succeeded', figures, summary, started);
    } catch (e) {
      if (e instanceof StopSignal || isTransientStore(e)) throw e; // the runner hands the lease back or leaves it to run out
      const conflict = isConflict(e);
      const error = conflict ? `lost a commit race to a writer; a later tick tries again (${messageOf(e)})` : messageOf(e);
      await records.finish(id, 'Failed', error);
      await this.ended(id, job, table, conflict ? 'conflict' : 'failed', 'Failed', figures, { ...summary, error }, started);
    }
  };

  /** Does one step; returns the properties its checkpoint records. */
  private async step(
    step: MaintenanceStep,
    policy: MaintenancePolicy,
    table: OpenTable,
    figures: MaintenanceFigures,
    summary: Partial<RunSummary>,
  ): Promise<Record<string, string>> {
    const { at } = table;
    await pausePoint(`maintenance:before-${step}`);
    if (step === 'compact') {
      if (!policy.compact) return {};
      const r = await this.ops.compact(at, { targetRowsPerFragment: policy.targetRowsPerFragment, deletedShareThreshold: policy.deletedShare });
      Object.assign(figures, {
        rowsRewritten: r.rowsRewritten,
        bytesRewritten: r.bytesRewritten,
        fragmentsBefore: r.fragmentsBefore,
        fragmentsAfter: r.fragmentsAfter,
      });
      Object.assign(summary, {
        fragments_before: r.fragmentsBefore,
        fragments_after: r.fragmentsAfter,
        rows_rewritten: r.rowsRewritten,
        bytes_rewritten: r.bytesRewritten,
      });
      return {
        fragments_before: String(r.fragmentsBefore),
        fragments_after: String(r.fragmentsAfter),
        rows_rewritten: String(r.rowsRewritten),
        bytes_rewritten: String(r.bytesRewritten),
        ray_tasks: String(r.rayTasks),
        ...(r.version !== null ? { last_committed_version: String(r.version) } : {}),
      };
    }
    if (step === 'optimize_indices') {
      if (!policy.optimizeIndices) return {};
      const r = await this.ops.optimizeIndices(at);
      figures.rowsIndexed = r.rowsIndexed;
      Object.assign(summary, { indices_updated: r.indicesUpdated, rows_indexed: r.rowsIndexed });
      return {
        indices_updated: String(r.indicesUpdated),
        rows_indexed: String(r.rowsIndexed),
        ...(r.version !== null ? { last_committed_version: String(r.version) } : {}),
      };
    }
    if (policy.cleanupOlderThanMs === null) return {};
    const now = Date.now();
    const olderThanMillis = now - policy.cleanupOlderThanMs;
    // The tags and branches first, the versions after: a tag or branch made meanwhile points at a version this inspection still sees as kept or as latest-within-the-lease.
    const referenced = await this.referencedVersions(table);
    const inspection = await this.ops.inspect(at);
    const keep = new Set([...referenced, ...readerWindow(inspection.versions, now, this.settings.leaseMs)]);
    const r = await this.ops.cleanupOldVersions(at, { olderThanMillis, keep });
    // The service's sidecars of the versions that went (on a managed table): nothing reads them once their manifest is gone.
    const versions = new TableVersions(table.versionsDir);
    await Promise.all(r.removed.map((v) => versions.store.delete(versions.sidecarKey(v))));
    figures.versionsRemoved = r.versionsRemoved;
    figures.bytesRemoved = r.bytesRemoved;
    const kept = inspection.versions.filter((v) => v.timestampMillis < olderThanMillis && referenced.has(v.version)).map((v) => v.version);
    Object.assign(summary, { versions_removed: r.versionsRemoved, bytes_removed: r.bytesRemoved, kept });
    return { versions_removed: String(r.versionsRemoved), bytes_removed: String(r.bytesRemoved), versions_kept: kept.join(',') };
  }

  /** Versions of main that tags point at or branches were forked from. */
  private async referencedVersions(table: OpenTable): Promise<Set<number>> {
    const dir = table.versionsDir;
    const versions = new Set<number>();
    for (let after: string | undefined; ; ) {
      const page = await listTagRefs(dir, { ...(after !== undefined ? { afterName: after } : {}), limit: TAG_PAGE });
      for (const tag of page.tags) if (tag.branch === undefined) versions.add(tag.version);
      if (page.lastName === null || page.tags.length === 0) break;
      after = page.lastName;
    }
    for (let after: string | undefined; ; ) {
      const page = await listBranchRefs(dir, { ...(after !== undefined ? { afterName: after } : {}), limit: TAG_PAGE });
      for (const branch of page.branches) if (branch.contents.parentBranch === undefined) versions.add(branch.contents.parentVersion);
      if (page.lastName === null || page.branches.length === 0) break;
      after = page.lastName;
    }
    return versions;
  }

  /** Records the ended run: the table's slot (the console's last runs), the metrics, the audit log. */
  private async ended(
    id: string,
    job: MaintainTableJob,
    table: OpenTable,
    outcome: 'succeeded' | 'conflict' | 'failed',
    status: 'Succeeded' | 'Failed',
    figures: MaintenanceFigures,
    summary: Partial<RunSummary>,
    started: number,
  ): Promise<void> {
    this.metrics.maintenanceRun(outcome, figures);
    // The latest version from the table's versions directory (a LIST, or the hint and a probe), not an inspection by the engine.
    const version = table.hasData
      ? await new TableVersions(table.versionsDir).latest().then(
          (v) => v?.version ?? null,
          () => null,
        )
      : null;
    const run: RunSummary = { ...summary, job_id: id, status, finished_at: new Date().toISOString(), version, steps: job.steps };
    await this.slots
      .recordRun(job.table_id, run, incarnationOf(table.state))
      .catch((e: unknown) => this.logger?.warn({ job: id, err: e }, 'maintenance run ended, but its summary was not recorded'));
    this.logger?.info(
      {
        audit: {
          operation: 'MaintainTable',
          id: job.table_id,
          status: outcome,
          duration_ms: Date.now() - started,
          request_id: `job-${id}`,
          principal: null,
          job_id: id,
          steps: job.steps,
          ...summary,
        },
      },
      'audit',
    );
    if (outcome !== 'succeeded') this.logger?.warn({ job: id, table: displayId(job.table_id), error: summary.error }, 'maintenance run failed');
  }
}
