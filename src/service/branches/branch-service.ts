import type {
  BranchContents,
  CreateTableBranchRequest,
  CreateTableBranchResponse,
  DeleteTableBranchRequest,
  DeleteTableBranchResponse,
  ListTableBranchesResponse,
} from '../../model/branches.js';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { displayId } from '../catalog/catalog.js';
import type { PageRequest } from '../catalog/namespace-service.js';
import type { RequestContext } from '../context/request-context.js';
import { pausePoint } from '../coordination/fault-points.js';
import type { DataTables, OpenTable } from '../data/data-tables.js';
import { onEngine } from '../errors/engine-errors.js';
import { resolveTable } from '../tables/resolved-table.js';
import { versionsOn } from '../versions/branch-versions.js';
import { takeBranchClaim } from './branch-claim.js';
import {
  branchesForkedFrom,
  branchRefKey,
  findBranchRef,
  listBranchRefs,
  listBranchTree,
  normalizeBranch,
  removeBranchLeftovers,
  requireBranchName,
  requireBranchRef,
  requireDeletableBranchName,
  resolveBranch,
  tagsPointingInto,
} from './branch-refs.js';

/** A page of branches without a `limit` holds at most this many: one LIST of the refs and as many GETs. */
export const DEFAULT_BRANCH_PAGE = 1000;

/**
 * The branch operations of the Lance namespace spec. A branch is Lance's own (branch-refs.ts): the
 * engine forks it, under the table's write lease (a drop waits for it), as does the delete; the
 * service reads the refs, and deletes them. Lance's rules hold: a taken name is a 409 code 23 (checked
 * before the engine, which fails on it with an internal error), a branch other branches were
 * forked from, or a tag points into, cannot be deleted while they refer to its versions (409 code
 * 19, naming them), and a branch's delete removes its ref and its tree.
 *
 * Invariant: a table's refs change through one fork or delete at a time. Lance alone does not
 * settle two forks of one name (the loser fails inside the engine, or forks over the winner), nor a
 * fork from a branch and that branch's delete (the fork would refer to a deleted tree). So each
 * takes the table's branch claim (coordination/claims.ts, `_catalog/branches.json`) and checks the
 * refs only once it holds it: the name free, the source there. Test: data/branches.test.ts races them.
 * A tag's create or update into a branch holds the same claim (data/tags.ts), so the tags a delete
 * reads under it are every tag into the branch.
 *
 * A delete meets the writes in flight on the branch as a drop meets a table's (the protocol and its
 * invariant are in tables/table-fences.ts): it removes the ref, waits until no write and no commit
 * holds the branch, then removes its tree but the trees of branches nested in it
 * (removeBranchLeftovers; Lance's own delete removes ref and tree at once, under a write in flight,
 * and leaves the whole tree of a branch others are nested in, where its history would still be
 * read). A fork removes such leftovers of its name too before the engine forks (a delete killed
 * before its end, a writer frozen past its lease, a delete by Lance itself), so a branch never
 * takes an old one's manifests as its history. Tests: process/branch-delete-races.test.ts.
 *
 * What a fork of main at its latest costs (a table without a coordinator; S3 requests as counted
 * through a proxy to radosgw, each a round trip of 2-10 ms there; on a local disk the same calls,
 * tenths of a millisecond each), in order, calls on one line at the same time:
 *   1. the write lease: a PUT (no fsync; its DELETE follows the answer, unawaited);
 *   2. the table's record and marker (2 GETs), main's latest (a LIST of _versions/ and HEADs), and
 *      the branch claim (a PUT, no fsync: see changeRefs);
 *   3. the name's ref (a GET; and the source's, forking from a branch) and its tree (a LIST);
 *   4. the engine, on the main dataset it keeps open (no open): Lance's clone, 8 requests (a LIST
 *      of the branch's _versions/, HEAD and GET of the source's manifest, PUT of the transaction
 *      and of the manifest, 2 HEADs, PUT of the ref), one after the other;
 *   5. the claim's DELETE (no HEAD: released within its lease).
 * 17 requests, 4 round trips of the service's own before Lance's 8. Before (issue 30's first
 * cut): 21, and 7 round trips: the claim PUT after the table's reads (fsynced twice on a local
 * disk, the largest single cost there), a LIST of every branch's ref, a fresh open of the dataset
 * (a LIST of _versions/), Lance's LIST of _versions/ for main's latest, and a HEAD of the claim.
 */
export class BranchService {
  constructor(private readonly tables: DataTables) {}

  /** Branches by the byte order of their refs' keys, a page at a time; page tokens are signed and bound to the table. */
  async list(_ctx: RequestContext, id: string[], page: PageRequest): Promise<ListTableBranchesResponse> {
    const { pageTokens } = this.tables.catalog;
    const scope = JSON.stringify(id);
    const afterName = pageTokens.decode('branches', scope, page.pageToken);
    const limit = page.limit ?? DEFAULT_BRANCH_PAGE;
    const table = await resolveTable(this.tables.catalog, id);
    if (limit === 0) return { branches: {}, page_token: null };
    const listed = await listBranchRefs(table.dir, { ...(afterName === undefined ? {} : { afterName }), limit: Math.min(limit, DEFAULT_BRANCH_PAGE) });
    const branches: Record<string, BranchContents> = {};
    for (const { name, contents } of listed.branches) branches[name] = contents;
    return { branches, page_token: listed.lastName === null ? null : pageTokens.encode('branches', scope, listed.lastName) };
  }

  async create(ctx: RequestContext, id: string[], request: CreateTableBranchRequest): Promise<CreateTableBranchResponse> {
    requireBranchName(request.name);
    const from = normalizeBranch(request.from_branch, 'from_branch');
    const fromVersion = request.from_version ?? undefined;
    await this.changeRefs(ctx, id, async (table) => {
      // Read at once: the source's ref, the name's, and what its tree holds (nothing, unless a
      // branch of the name lived before), which is removed only once the name is known free.
      const [source, taken, tree] = await Promise.all([
        resolveBranch(table.dir, from, displayId(id)),
        findBranchRef(table.dir, request.name),
        listBranchTree(table.dir, request.name),
      ]);
      if (taken) throw this.exists(table, request.name);
      await removeBranchLeftovers(table.dir, request.name, tree);
      try {
        await onEngine(id, () => this.tables.engine.branches.create(table.at, request.name, source?.name ?? null, fromVersion), {
          version: fromVersion,
        });
      } catch (e) {
        // Another create of the name won the race past the check above.
        if (e instanceof NamespaceError && e.code === ErrorCode.TableBranchAlreadyExists) throw this.exists(table, request.name);
        throw e;
      }
    });
    return {};
  }

  async delete(ctx: RequestContext, id: string[], request: DeleteTableBranchRequest): Promise<DeleteTableBranchResponse> {
    requireDeletableBranchName(request.name);
    await this.changeRefs(ctx, id, async (table) => {
      await requireBranchRef(table.dir, request.name, displayId(id));
      const forked = await branchesForkedFrom(table.dir, request.name);
      if (forked.length > 0) {
        throw new NamespaceError(
          ErrorCode.InvalidTableState,
          `branch ${JSON.stringify(request.name)} of table ${displayId(id)} is referenced by the branches forked from it (${forked.join(', ')}): delete them first`,
        );
      }
      const tagged = await tagsPointingInto(table.dir, request.name);
      if (tagged.length > 0) {
        throw new NamespaceError(
          ErrorCode.InvalidTableState,
          `branch ${JSON.stringify(request.name)} of table ${displayId(id)} is referenced by tags (${tagged.join(', ')}): delete them first`,
        );
      }
      await pausePoint('branch-delete:after-tags');
      await table.dir.store.delete(branchRefKey(table.dir, request.name));
      await pausePoint('branch-delete:after-ref');
      await this.tables.catalog.fences.branchWritesEnded(table.ref, request.name, versionsOn(table.dir, request.name));
      await removeBranchLeftovers(table.dir, request.name);
    });
    return {};
  }

  /**
   * Runs `change` under the table's write lease and its branch claim (see the invariant above),
   * the claim taken while the table is opened (DataTables.writeClaimed).
   */
  private changeRefs(ctx: RequestContext, id: string[], change: (table: OpenTable) => Promise<void>): Promise<void> {
    return this.tables.writeClaimed(ctx, id, (ref) => takeBranchClaim(this.tables.catalog, ctx, ref), change);
  }

  private exists(table: OpenTable, name: string): NamespaceError {
    return new NamespaceError(ErrorCode.TableBranchAlreadyExists, `table ${displayId(table.id)} already has a branch ${JSON.stringify(name)}`);
  }
}
