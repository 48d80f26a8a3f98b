import { ErrorCode, NamespaceError } from '../../model/errors.js';
import type {
  CreateTableTagRequest,
  CreateTableTagResponse,
  DeleteTableTagRequest,
  DeleteTableTagResponse,
  GetTableTagVersionRequest,
  GetTableTagVersionResponse,
  ListTableTagsResponse,
  TagContents,
  UpdateTableTagRequest,
  UpdateTableTagResponse,
} from '../../model/tags.js';
import { underBranchClaim } from '../branches/branch-claim.js';
import { type BranchName, findTagRef, listTagRefs, normalizeBranch, type TagRef } from '../branches/branch-refs.js';
import { displayId } from '../catalog/catalog.js';
import type { StoreDir } from '../catalog/locations.js';
import type { PageRequest } from '../catalog/namespace-service.js';
import type { RequestContext } from '../context/request-context.js';
import type { DataTables } from './data-tables.js';

/** The tag operations of the Lance namespace spec, over the Lance engine (tags live in the dataset's `_refs/tags/`). */
export class TagService {
  constructor(private readonly tables: DataTables) {}

  private get engine() {
    return this.tables.engine;
  }

  /**
   * Tags in the byte order of their refs' keys, `<name>.json` (not always the names' order:
   * `v1.0.1.json` < `v1.0.json`; one LIST cannot give that), a page at a time (at most DEFAULT_TAG_PAGE without a
   * `limit`); page tokens are signed and bound to the table. Read from the refs, not the engine:
   * one LIST of `_refs/tags/` sized to the page and one GET per tag of the page (listTagRefs), where
   * the engine read every tag of the table and the service then each tag of the page again for its branch.
   */
  async list(ctx: RequestContext, id: string[], page: PageRequest): Promise<ListTableTagsResponse> {
    const { pageTokens } = this.tables.catalog;
    const scope = JSON.stringify(id);
    const afterName = pageTokens.decode('tags', scope, page.pageToken);
    const limit = Math.min(page.limit ?? DEFAULT_TAG_PAGE, DEFAULT_TAG_PAGE);
    return this.tables.readTable(ctx, id, async (table) => {
      if (limit === 0) return { tags: {}, page_token: null };
      const listed = await listTagRefs(table.dir, { ...(afterName === undefined ? {} : { afterName }), limit });
      const tags: Record<string, TagContents> = {};
      for (const { name, ...contents } of listed.tags) tags[name] = contents;
      return { tags, page_token: listed.lastName === null ? null : pageTokens.encode('tags', scope, listed.lastName) };
    });
  }

  /** The version and branch of one tag: one GET, of its ref. */
  async version(ctx: RequestContext, id: string[], request: GetTableTagVersionRequest): Promise<GetTableTagVersionResponse> {
    return this.tables.readTable(ctx, id, async (table) => {
      const { version, branch } = await requireTag(table.dir, id, request.tag);
      return { version, ...(branch ? { branch } : {}) };
    });
  }

  async create(ctx: RequestContext, id: string[], request: CreateTableTagRequest): Promise<CreateTableTagResponse> {
    // On a branch, Lance records the branch in the tag (TagContents.branch): the version is that branch's.
    const branch = normalizeBranch(request.branch);
    await this.intoLine(ctx, id, branch, () =>
      this.tables.writeTable(ctx, id, (table) => this.engine.tags.create(table.at, request.tag, request.version), { branch, version: request.version }),
    );
    return {};
  }

  async update(ctx: RequestContext, id: string[], request: UpdateTableTagRequest): Promise<UpdateTableTagResponse> {
    const branch = normalizeBranch(request.branch);
    await this.intoLine(ctx, id, branch, () =>
      this.tables.writeTable(ctx, id, (table) => this.engine.tags.update(table.at, request.tag, request.version), { branch, version: request.version }),
    );
    return {};
  }

  /**
   * Runs the write of a tag pointing into `branch`. Invariant: the service never leaves a tag
   * pointing into a deleted branch. A tag into a branch is written holding the table's branch
   * claim, taken before its write reads the branch's ref (under its write lease, 404 code 22 when
   * gone) and released once the tag is written; a delete of the branch holds the same claim from
   * before it reads the tags until it has removed the ref (branches/branch-service.ts). The two
   * never overlap, so either the tag is there when the delete reads the tags (409 code 19), or the
   * ref is gone when the tag's write reads it. The claim comes before the write lease, as the
   * delete, holding the claim, waits for the leases that name the branch. A tag into main needs
   * neither. Test: process/branch-delete-races.test.ts.
   */
  private intoLine<T>(ctx: RequestContext, id: string[], branch: BranchName, write: () => Promise<T>): Promise<T> {
    return branch === null ? write() : underBranchClaim(this.tables.catalog, ctx, id, write);
  }

  async delete(ctx: RequestContext, id: string[], request: DeleteTableTagRequest): Promise<DeleteTableTagResponse> {
    await this.tables.writeTable(ctx, id, (table) => this.engine.tags.delete(table.at, request.tag));
    return {};
  }
}

/** A page of tags without a `limit` holds at most this many: one LIST of the refs and as many GETs. */
export const DEFAULT_TAG_PAGE = 1000;

/** Tag `name` as its ref says (one GET): 404 code 8 when the table `id` has no such tag. */
export async function requireTag(dir: StoreDir, id: string[], name: string): Promise<TagRef> {
  const tag = await findTagRef(dir, name);
  if (!tag) throw new NamespaceError(ErrorCode.TableTagNotFound, `table ${displayId(id)} has no tag ${JSON.stringify(name)}`);
  return tag;
}
