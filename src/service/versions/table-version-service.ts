import type { CommitCoordinator } from '../../engine/lance-engine.js';
import { ErrorCode, invalidInput, NamespaceError } from '../../model/errors.js';
import type {
  BatchCommitTablesResponse,
  BatchCreateTableVersionsResponse,
  BatchDeleteTableVersionsRequest,
  BatchDeleteTableVersionsResponse,
  CommitTableOperation,
  CreateTableVersionEntry,
  CreateTableVersionResponse,
  DescribeTableVersionResponse,
  ListTableVersionsResponse,
} from '../../model/versions.js';
import { type BranchName, type BranchRef, normalizeBranch, onBranch } from '../branches/branch-refs.js';
import { displayId } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { tableDirKey, tableRefOf } from '../catalog/layout.js';
import { sameDir } from '../catalog/locations.js';
import type { PageRequest } from '../catalog/namespace-service.js';
import { paginate } from '../catalog/page-token.js';
import type { ServiceLogger } from '../context/logger.js';
import type { RequestContext } from '../context/request-context.js';
import { settled } from '../coordination/settled.js';
import { type ResolvedTable, resolvedTable, resolveTable, resolveTableWithLatest } from '../tables/resolved-table.js';
import { requireUnlinkedTable, requireVisibleTable } from '../tables/table-state.js';
import type { TransactionLog } from '../transactions/transaction-log.js';
import { AfterAnswer } from './after-answer.js';
import { BatchCommits } from './batch-commit.js';
import { BatchRecovery, type VersionSettings } from './batch-recovery.js';
import { refOf, requireBranchFound, type VersionLine, versionLine } from './branch-versions.js';
import { commitCoordinator } from './commit-coordinator.js';
import { versionsOnWire } from './commit-steps.js';
import { type CommittedVersion, inRanges, TableVersions } from './dataset-versions.js';
import { SingleCommits, stagedOn } from './single-commit.js';
import { VersionSlots } from './version-slots.js';

export type { VersionSettings } from './batch-recovery.js';

// The table-versions API: reads of a table's versions here; commits in single-commit.ts and
// batch-commit.ts (the invariants every commit keeps are in commit-steps.ts), over the version
// slots of version-slots.ts; batches whose coordinator died are finished by batch-recovery.ts;
// the engine's commits of managed tables come in through commit-coordinator.ts.

const versionNotFound = (id: string[], version: number, branch: BranchName) =>
  new NamespaceError(ErrorCode.TableVersionNotFound, `table ${displayId(id)} has no version ${version}${onBranch(branch)}`);

export class TableVersionService {
  private readonly single: SingleCommits;
  private readonly batches: BatchCommits;
  private readonly recovery: BatchRecovery;
  /** What single commits leave for after their answer (after-answer.ts). */
  private readonly after: AfterAnswer;

  constructor(
    private readonly deps: CatalogDeps,
    log: TransactionLog,
    settings: VersionSettings,
    logger?: ServiceLogger,
  ) {
    this.recovery = new BatchRecovery(deps, log, settings, logger);
    const slots = new VersionSlots(settings.leaseMs, (transactionId) => this.recovery.recover(transactionId));
    // A drop meeting a batch's slot brings the batch to an end, as a writer of the slot would (see table-fences.ts).
    deps.fences.settleBatchesWith((transactionId) => this.recovery.holdsSlots(transactionId));
    this.after = new AfterAnswer(logger);
    this.single = new SingleCommits(deps, slots, this.after);
    this.batches = new BatchCommits(deps, log, slots, this.recovery, settings);
  }

  /**
   * The table `id` and the line of its history `branch` names (main, or a branch: see
   * branch-versions.ts); a bad branch name is 400 code 13 before anything is read.
   */
  private async lineOf(id: string[], branch: string | null | undefined): Promise<VersionLine> {
    const name = normalizeBranch(branch);
    return versionLine((await resolveTable(this.deps, id)).dir, name);
  }

  /** Reports how a commit on `path` ended (a lost race is 409 code 14: a conflict). */
  private async counted<T>(path: 'single' | 'batch' | 'engine', commit: () => Promise<T>): Promise<T> {
    try {
      const result = await commit();
      this.deps.metrics.commit(path, 'committed');
      return result;
    } catch (e) {
      this.deps.metrics.commit(path, e instanceof NamespaceError && e.code === ErrorCode.ConcurrentModification ? 'conflict' : 'failed');
      throw e;
    }
  }

  /** Commits a staged manifest as the next version of table `id` (see single-commit.ts). */
  async create(ctx: RequestContext, id: string[], request: Omit<CreateTableVersionEntry, 'id'>): Promise<CreateTableVersionResponse> {
    // The staged manifest is read while the table is resolved, where every table's dataset but a
    // registered one's lives (its name's directory, when no entry of it is a symbolic link: see
    // resolveTableWithLatest): one round trip less on S3. It counts only once the table is found
    // there; a bad path or branch is left for the commit to refuse, after the table's 404.
    const ref = tableRefOf(id);
    const nameLinks = requireUnlinkedTable(this.deps.store, ref);
    const ownDir = this.deps.locations.own(tableDirKey(ref));
    const ahead =
      nameLinks.length === 0 ? settled(Promise.resolve().then(() => stagedOn(versionLine(ownDir, normalizeBranch(request.branch)), request))) : undefined;
    const table = resolvedTable(this.deps, id, await requireVisibleTable(this.deps.store, ref, { creatingRequest: ctx.requestId, nameLinks }));
    const own = ahead !== undefined && sameDir(table.dir, ownDir);
    return this.counted('single', () => this.single.commit(ctx, table, request, false, undefined, own ? ahead : undefined));
  }

  /**
   * Commits manifest bytes the service staged itself for `table`, which the request resolved and
   * holds a write lease on (see DataTables.commitManifest).
   */
  async commitUnderWriteLease(ctx: RequestContext, table: ResolvedTable, request: Omit<CreateTableVersionEntry, 'id'>): Promise<CreateTableVersionResponse> {
    return this.counted('engine', () => this.single.commit(ctx, table, request, true));
  }

  /**
   * The engine's commit path for managed `table` (see commit-coordinator.ts). `underWriteLease`:
   * the request holds a write lease on the table; without one (a table being created), each commit
   * looks again at the table while it holds the version's slot. `branch`: the line of history the
   * engine commits on (main by default), which the request resolved; `leasedRef`: its ref, when
   * the request read it under a write lease naming the branch (SingleCommits.commit).
   */
  coordinatorFor(ctx: RequestContext, table: ResolvedTable, underWriteLease: boolean, branch: BranchName = null, leasedRef?: BranchRef): CommitCoordinator {
    const commits = { commit: (...args: Parameters<SingleCommits['commit']>) => this.counted('engine', () => this.single.commit(...args)) };
    return commitCoordinator(commits, ctx, table, underWriteLease, this.deps.metrics, branch, leasedRef);
  }

  async describe(_ctx: RequestContext, id: string[], version: number | null | undefined, branch?: string | null): Promise<DescribeTableVersionResponse> {
    const name = normalizeBranch(branch);
    let versions: TableVersions;
    let committed: CommittedVersion | null;
    if (name === null && (version === undefined || version === null)) {
      // The latest is looked up while the table is resolved (one round trip less on S3).
      const { table, latest } = await resolveTableWithLatest(this.deps, id);
      versions = new TableVersions(table.dir);
      committed = latest;
      if (!committed) throw new NamespaceError(ErrorCode.TableVersionNotFound, `table ${displayId(id)} has no versions`);
    } else {
      const line = await this.lineOf(id, name);
      versions = line.versions;
      // A branch's ref is read with its version: a branch with neither is 404 code 22.
      const [ref, found] = await Promise.all([refOf(line), version === undefined || version === null ? versions.latest() : versions.get(version)]);
      committed = found;
      if (!committed) {
        if (line.branch !== null && ref === null)
          requireBranchFound(id, line, ref, version !== undefined && version !== null && (await versions.hasCommitted()));
        if (version === undefined || version === null)
          throw new NamespaceError(ErrorCode.TableVersionNotFound, `table ${displayId(id)} has no versions${onBranch(line.branch)}`);
        throw versionNotFound(id, version, line.branch);
      }
    }
    const [wire] = await versionsOnWire(versions, [committed]);
    if (!wire) throw versionNotFound(id, committed.version, name);
    return { version: wire };
  }

  async list(
    _ctx: RequestContext,
    id: string[],
    page: PageRequest & { descending?: boolean | null | undefined; branch?: string | null | undefined },
  ): Promise<ListTableVersionsResponse> {
    const branch = normalizeBranch(page.branch);
    // A token is good only for the line of history it was given for.
    const scope = JSON.stringify(branch === null ? id : [...id, { branch }]);
    const afterToken = this.deps.pageTokens.decode('versions', scope, page.pageToken);
    const descending = page.descending ?? false;
    let ordered: CommittedVersion[];
    if (descending && page.limit === 1 && afterToken === undefined) {
      // The commit path of every Lance client: constant cost on V2 tables, looked up while the table
      // is resolved (on main; a branch's, with its ref, once the table is).
      let versions: TableVersions;
      let latest: CommittedVersion | null;
      if (branch === null) {
        const resolved = await resolveTableWithLatest(this.deps, id);
        versions = new TableVersions(resolved.table.dir);
        latest = resolved.latest;
      } else {
        const line = await this.lineOf(id, branch);
        versions = line.versions;
        let ref: BranchRef | null;
        [ref, latest] = await Promise.all([refOf(line), versions.latest()]);
        requireBranchFound(id, line, ref, latest !== null);
      }
      ordered = latest ? [latest] : [];
      const [next, wire] = await Promise.all([latest ? versions.hasOlderThan(latest.version) : false, versionsOnWire(versions, ordered)]);
      const pageToken = next && latest ? this.deps.pageTokens.encode('versions', scope, String(latest.version)) : null;
      return { versions: wire, page_token: pageToken };
    }
    const line = await this.lineOf(id, branch);
    const { versions } = line;
    const [ref, all] = await Promise.all([refOf(line), versions.all()]);
    requireBranchFound(id, line, ref, all.length > 0);
    ordered = all;
    if (descending) ordered.reverse();
    if (afterToken !== undefined && afterToken !== '') {
      const after = Number(afterToken);
      ordered = ordered.filter((v) => (descending ? v.version < after : v.version > after));
    }
    const { page: slice, pageToken } = paginate(
      ordered,
      page.limit,
      (v) => String(v.version),
      (last) => this.deps.pageTokens.encode('versions', scope, last),
    );
    return { versions: await versionsOnWire(versions, slice), page_token: pageToken };
  }

  /** Deletes the manifests of the versions in the ranges ([start, end), end -1 = through the latest). */
  async batchDelete(_ctx: RequestContext, id: string[], request: BatchDeleteTableVersionsRequest): Promise<BatchDeleteTableVersionsResponse> {
    for (const r of request.ranges) {
      if (r.end_version !== -1 && r.end_version < r.start_version) {
        throw invalidInput(`ranges: end_version ${r.end_version} is before start_version ${r.start_version}`);
      }
    }
    const line = await this.lineOf(id, request.branch);
    const { versions } = line;
    const [ref, all] = await Promise.all([refOf(line), versions.all()]);
    requireBranchFound(id, line, ref, all.length > 0);
    const doomed = all.filter((v) => inRanges(v.version, request.ranges));
    for (const v of doomed) {
      await versions.store.delete(v.key);
      await versions.store.delete(versions.sidecarKey(v.version));
    }
    // A hint below a deleted range would stop upward probing short of the latest version.
    const remaining = await versions.all();
    const latest = remaining[remaining.length - 1];
    if (doomed.length > 0 && latest) await versions.writeHint(latest.version);
    return { deleted_count: doomed.length };
  }

  /** Commits versions of several tables atomically (see batch-commit.ts). */
  async batchCreate(ctx: RequestContext, entries: CreateTableVersionEntry[]): Promise<BatchCreateTableVersionsResponse> {
    return this.counted('batch', () => this.batches.batchCreate(ctx, entries));
  }

  /** Applies table operations and versions on any tables together (see batch-commit.ts). */
  async batchCommit(ctx: RequestContext, operations: CommitTableOperation[]): Promise<BatchCommitTablesResponse> {
    return this.counted('batch', () => this.batches.batchCommit(ctx, operations));
  }

  /** Brings a batch found unfinished to an end (see batch-recovery.ts). */
  async recover(transactionId: string): Promise<void> {
    await this.recovery.recover(transactionId);
  }

  /** Recovers every unfinished batch; run at start-up. */
  async recoverAll(): Promise<{ count: number; failures: Array<{ id: string; error: unknown }> }> {
    return this.recovery.recoverAll();
  }

  /** Starts polling for batches whose coordinator died (every replica runs this). */
  start(): void {
    this.recovery.start();
  }

  async stop(): Promise<void> {
    await this.recovery.stop();
    await this.settled();
  }

  /** Resolves once what the commits answered so far left for after their answer is done. */
  settled(): Promise<void> {
    return this.after.settled();
  }

  /** Looks at every unfinished batch once (see BatchRecovery.pollBatches). */
  async pollBatches(): Promise<void> {
    await this.recovery.pollBatches();
  }
}
