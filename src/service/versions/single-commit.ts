import type { CreateTableVersionEntry, CreateTableVersionResponse, TableVersion } from '../../model/versions.js';
import type { StoredObject } from '../../store/object-store.js';
import { type BranchRef, normalizeBranch, onBranch } from '../branches/branch-refs.js';
import { displayId } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { reservedMarkerKey } from '../catalog/layout.js';
import type { RequestContext } from '../context/request-context.js';
import { faultPoint, pausePoint } from '../coordination/fault-points.js';
import { type Outcome, unwrap } from '../coordination/settled.js';
import type { ResolvedTable } from '../tables/resolved-table.js';
import { isStillResolved } from '../tables/table-fences.js';
import { tableNotFound } from '../tables/table-state.js';
import type { BatchEntry } from '../transactions/transaction-log.js';
import { type AfterAnswer, nextTurn } from './after-answer.js';
import { nextVersionOn, refOf, requireRefOrManaged, requireSameRef, type VersionLine, versionLine } from './branch-versions.js';
import { beginWrites, conflict, type PlannedVersion, planVersion, versionsOnWire, writeManifest } from './commit-steps.js';
import type { CommittedVersion, TableVersions } from './dataset-versions.js';
import type { VersionSlots } from './version-slots.js';

// One create_table_version: the commit of one version of one table (see the invariants in
// commit-steps.ts).
//
// Protocol: read and check the staged manifest; hold the version's slot; holding it, look again
// at the table (unless the request holds a write lease on it, which a drop waits for) and at the
// latest version; then the final manifest's create-if-absent and its sidecar; delete the staged
// file; answer. After the answer, Lance's hint (unless its writer keeps it), then the slot's
// release (after-answer.ts: neither is part of the commit, and each is safe to lose). A request
// that names its naming scheme (Lance's do) knows the final name before the latest version, so it
// writes the manifest and sidecar files (on a local disk, fsyncs included) while it claims the
// slot and looks again, out of sight (temporary files, never listed); they are placed only if
// those checks pass, else discarded (beginWrites).
//
// Cost, the next version of a table on a local disk (pinned by test/service/commit-path-cost.test.ts).
// What Lance's clients commit: 12 store calls and 2 fsyncs, both waited for in turn. The request
// resolves the table: 2 (LIST, GET of its record). The staged manifest: 1, read at once with those (in the table's name's directory: TableVersionService.create). The manifest: 1, the
// staged file linked into place (its file fsynced while the checks run, then its directory), with
// no sidecar, as the client's e_tag and size are the staged file's (needsNoSidecar in
// commit-steps.ts). The slot: 2 (a put that is not fsynced, as a single writer's hold is harmless
// to lose with the machine, which the writer does not survive either; and its delete after the
// answer, without a look within its lease, leaving the reservations directory for the next slot).
// The look again: 2 (the marker, and the record's HEAD: read again only if its etag changed), at
// once with the latest version: 3 (hint, its manifest, the one above under its V2 name: a V2 table
// never goes back to V1 names). The staged file's delete: 1. Lance's hint is not placed: the
// client places it itself, so the commit found it naming the version before (hintWanted in
// dataset-versions.ts). A request that needs a sidecar (its own e_tag, or metadata) adds it,
// fsynced with its directory after the manifest's: 13 calls, 4 fsyncs, 3 in turn. A writer that
// leaves the hint to the service finds it a version behind every other commit, which then costs
// 2 more HEADs to the lookup and the hint after the answer (not fsynced: readers probe past a
// stale one): 16 calls (before the hint was left to its writers, 14 and 4 fsyncs; before that,
// 16 and 8). The first version of a declared table: 14 (no hint yet, one LIST instead; Lance's
// reserved marker goes). On a branch, two GETs more, the branch's ref, read at once with the
// staged manifest and again with the latest version: 14 for what Lance's clients commit; none
// for the service's own writes on a branch, which read the ref under their write lease.
//
// A pylance append to a managed table is three requests, this one last; on a local disk, 21 store
// calls and 2 fsyncs in all (counted in the service's metrics and a system-call trace). Its
// DescribeTable: 2 (LIST of the table's directory, GET of its record). Its ListTableVersions
// (limit 1, descending): 7 (those 2; the latest version's 3; a HEAD of the version before, for the
// page token; the version's sidecar, absent). Then this commit: 12, both fsyncs, one call after the
// answer. The rest of an append's time in the service is per request, not per call: HTTP and
// validation, and this commit's read and check of the staged manifest, which grows with the
// table's fragments (a pylance append adds one).

export class SingleCommits {
  constructor(
    private readonly deps: CatalogDeps,
    private readonly slots: VersionSlots,
    private readonly after: AfterAnswer,
  ) {}

  /**
   * Commits one version of `table`. `underWriteLease`: the request holds a write lease on the
   * table (a drop waits for it, see table-fences.ts), so its commits need no second look at it.
   * Without one, the look again finds the table as resolved or 404s; a table this request is
   * creating (its claim names ctx.requestId) counts as found. `leasedRef`: the ref of the branch
   * the version is for, as the request read it under a write lease naming that branch (a delete
   * of the branch waits for it), so it stands for the commit and is not read again.
   * `stagedRead`: the staged manifest (or the failure) as stagedOn read it for this table's line
   * while the table was resolved (TableVersionService.create); read here otherwise.
   */
  async commit(
    ctx: RequestContext,
    table: ResolvedTable,
    request: Omit<CreateTableVersionEntry, 'id'>,
    underWriteLease: boolean,
    leasedRef?: BranchRef,
    stagedRead?: Promise<Outcome<StoredObject | null>>,
  ): Promise<CreateTableVersionResponse> {
    const { id, state } = table;
    // The line of history the version is for: main, or a branch (its own history, branch-versions.ts).
    const line = versionLine(table.dir, normalizeBranch(request.branch));
    const { versions } = line;
    // Only a staged Lance manifest of this version is ever consumed; checked before anything is written.
    // On a branch, its ref is resolved at the same time: holding the slot, the commit reads it again (requireSameRef).
    const readRef = () => (underWriteLease && leasedRef !== undefined ? Promise.resolve(leasedRef) : refOf(line));
    const [staged, resolvedRef] = await Promise.all([stagedRead ? stagedRead.then(unwrap) : stagedOn(line, request), readRef()]);
    await requireRefOrManaged(table, line, resolvedRef);
    const busy = () => conflict(`table ${displayId(id)}: version ${request.version} is being committed by another writer`);
    // A request that names its naming scheme (Lance's do) knows its final manifest name before the
    // latest version: its manifest and sidecar are written (on a local disk, fsynced) while the slot
    // is claimed and the checks below run, out of sight, and placed only if they pass.
    const early = staged && request.naming_scheme === 'V2' ? beginWrites({ ...(await planVersion(id, line, request, null)), staged }) : undefined;
    // Lance's hint and then the slot's release are left for after the answer (after-answer.ts);
    // a failed commit waits for the hold's release (and the discarding of its early writes)
    // before it answers.
    const trailing: Array<() => Promise<unknown>> = [];
    const leave = (work: () => Promise<unknown>) => void trailing.push(work);
    if (line.branch !== null) await pausePoint('commit:before-slot');
    const slot = await this.slots.hold(versions, request.version, busy).catch(async (e: unknown) => {
      await early?.abandon(e);
      throw e;
    });
    /** Ends the commit's work: `failure`, why it did not go ahead, if it did not. */
    const finish = async (answered: boolean, failure?: unknown) => {
      try {
        if (answered) {
          await nextTurn(); // an HTTP answer has left by then
          faultPoint('commit:after-answer');
        }
        await Promise.allSettled(trailing.map((begin) => begin()));
        await early?.abandon(failure);
      } finally {
        // A release that fails leaves the hold to end with its lease (after an answer, AfterAnswer logs it).
        await slot.release();
      }
    };
    try {
      // Holding the slot, look again: a drop that began after the table was resolved either sees
      // this reservation and waits for the commit, or is seen here (see table-fences.ts). One
      // lookup of the latest version, while holding the slot, decides everything else. On a
      // branch, its ref is read then too: a branch deleted before the slot was held takes no
      // version (a delete after it waits for the slot's release: see table-fences.ts).
      const [same, latest, ref] = await Promise.all([underWriteLease || isStillResolved(this.deps.store, state, ctx.requestId), versions.latest(), readRef()]);
      if (!same) throw tableNotFound(id);
      requireSameRef(id, line, resolvedRef, ref);
      const p = { ...(await planVersion(id, line, request, latest)), staged };
      const { entry } = p;
      const next = nextVersionOn(id, line, ref, latest, entry.version);
      if (entry.version > next) {
        throw conflict(
          `table ${displayId(id)}: version ${entry.version} is not the next version${onBranch(line.branch)} (the latest is ${latest?.version ?? 0})`,
        );
      }
      const retried = entry.version < next ? await this.acceptRetry(p) : null;
      const committed = retried ?? (await writeManifest(p, undefined, early && early.entry.final_key === entry.final_key ? early : undefined, leave));
      // The staged file goes before the answer: its writer may stage the next version under the same name.
      const stagedGone = versions.deleteStaged(entry.staged_key);
      // A later step may throw before it is awaited below: its failure must not go unhandled then.
      stagedGone.catch(() => undefined);
      // A declared table that now has data is declared no more (Lance's marker goes with the first version).
      if (state.reserved && latest === null && line.branch === null) await this.deps.store.delete(reservedMarkerKey(state.ref));
      const [known] = retried ? await versionsOnWire(versions, [retried]) : [];
      await stagedGone;
      const answer = { version: known ?? wireOfEntry(versions, entry, committed) };
      this.after.add(`table ${displayId(id)}: version ${entry.version}`, finish(true));
      return answer;
    } catch (e) {
      // The commit's own failure is the answer.
      await finish(false, e).catch(() => undefined);
      throw e;
    }
  }

  /**
   * A create for a version that already exists succeeds only as a retry of the create that made
   * it: the same staged bytes, or (the staged file gone after that success) the same e_tag and size.
   */
  private async acceptRetry(p: PlannedVersion): Promise<CommittedVersion> {
    const { versions, entry } = p;
    const existing = await versions.get(entry.version, entry.naming_scheme);
    const taken = () => conflict(`table ${displayId(entry.table_id)}: version ${entry.version} already exists with another manifest`);
    if (!existing) throw conflict(`table ${displayId(entry.table_id)}: version ${entry.version} is not the next version`);
    const staged = p.staged !== undefined ? p.staged : await versions.store.get(entry.staged_key);
    if (staged) {
      const final = await versions.store.get(existing.key);
      if (!final || !staged.body.equals(final.body)) throw taken();
    } else {
      // Without the staged bytes, only a positive match makes it this request's version: a request
      // with an e_tag matches the version's e_tag (its sidecar's, else its manifest's own: the
      // staged file placed as it was, see needsNoSidecar in commit-steps.ts), one without matches
      // the size; nothing to match is a 409. Sizes alone never outvote an e_tag: two manifests of
      // one version are often the same size.
      const sidecar = (await versions.readSidecars([entry.version])).get(entry.version);
      const same =
        entry.e_tag !== undefined
          ? entry.e_tag === (sidecar?.e_tag ?? existing.etag)
          : entry.manifest_size !== undefined && entry.manifest_size === (sidecar?.manifest_size ?? existing.size);
      if (!same) throw taken();
    }
    return existing;
  }
}

/** The staged manifest a create names, on the line of history it commits (a 400 for one that is not a manifest of its version). */
export const stagedOn = (line: VersionLine, request: Pick<CreateTableVersionEntry, 'manifest_path' | 'version'>): Promise<StoredObject | null> =>
  line.versions.readStaged(line.versions.stagedKey(request.manifest_path), request.version);

/** The TableVersion of a version this request just committed, without reading it back. */
function wireOfEntry(versions: TableVersions, entry: BatchEntry, committed: CommittedVersion): TableVersion {
  return {
    version: committed.version,
    manifest_path: versions.manifestPath(committed.key),
    manifest_size: entry.manifest_size ?? committed.size,
    e_tag: entry.e_tag ?? committed.etag,
    timestamp_millis: committed.lastModified.getTime(),
    metadata: entry.metadata ?? {},
  };
}
