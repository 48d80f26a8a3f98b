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
import { branchOfTagRef, normalizeBranch, tagRefKey } from '../branches/branch-refs.js';
import type { StoreDir } from '../catalog/locations.js';
import type { PageRequest } from '../catalog/namespace-service.js';
import { paginate } from '../catalog/page-token.js';
import type { RequestContext } from '../context/request-context.js';
import type { DataTables } from './data-tables.js';

/** The tag operations of the Lance namespace spec, over the Lance engine (tags live in the dataset's `_refs/tags/`). */
export class TagService {
  constructor(private readonly tables: DataTables) {}

  private get engine() {
    return this.tables.engine;
  }

  /** Tags by name in byte order, a page at a time; page tokens are signed and bound to the table. */
  async list(ctx: RequestContext, id: string[], page: PageRequest): Promise<ListTableTagsResponse> {
    const { pageTokens } = this.tables.catalog;
    const scope = JSON.stringify(id);
    const after = pageTokens.decode('tags', scope, page.pageToken);
    return this.tables.readTable(ctx, id, async (table) => {
      const tags = await this.engine.tags.list(table.at);
      const names = [...tags.keys()].sort(byteOrder).filter((name) => after === undefined || byteOrder(name, after) > 0);
      const { page: pageNames, pageToken } = paginate(
        names,
        page.limit,
        (n) => n,
        (last) => pageTokens.encode('tags', scope, last),
      );
      // The engine does not say which branch a tag points into; its ref does (one GET per tag of the page).
      const branches = await Promise.all(pageNames.map((name) => tagBranch(table.dir, name)));
      const out: Record<string, TagContents> = {};
      pageNames.forEach((name, i) => {
        const tag = tags.get(name);
        const branch = branches[i];
        if (tag) out[name] = { ...(branch ? { branch } : {}), version: tag.version, manifestSize: tag.manifestSize };
      });
      return { tags: out, page_token: pageToken };
    });
  }

  async version(ctx: RequestContext, id: string[], request: GetTableTagVersionRequest): Promise<GetTableTagVersionResponse> {
    return this.tables.readTable(ctx, id, async (table) => {
      const [version, branch] = await Promise.all([this.engine.tags.version(table.at, request.tag), tagBranch(table.dir, request.tag)]);
      return { version, ...(branch ? { branch } : {}) };
    });
  }

  async create(ctx: RequestContext, id: string[], request: CreateTableTagRequest): Promise<CreateTableTagResponse> {
    // On a branch, Lance records the branch in the tag (TagContents.branch): the version is that branch's.
    const branch = normalizeBranch(request.branch);
    await this.tables.writeTable(ctx, id, (table) => this.engine.tags.create(table.at, request.tag, request.version), { branch, version: request.version });
    return {};
  }

  async update(ctx: RequestContext, id: string[], request: UpdateTableTagRequest): Promise<UpdateTableTagResponse> {
    const branch = normalizeBranch(request.branch);
    await this.tables.writeTable(ctx, id, (table) => this.engine.tags.update(table.at, request.tag, request.version), { branch, version: request.version });
    return {};
  }

  async delete(ctx: RequestContext, id: string[], request: DeleteTableTagRequest): Promise<DeleteTableTagResponse> {
    await this.tables.writeTable(ctx, id, (table) => this.engine.tags.delete(table.at, request.tag));
    return {};
  }
}

/** The branch tag `name` points into (Lance's ref `_refs/tags/<name>.json`); undefined for main or a tag gone meanwhile. */
export async function tagBranch(dir: StoreDir, name: string): Promise<string | undefined> {
  const object = await dir.store.get(tagRefKey(dir, name));
  return object ? branchOfTagRef(object.body) : undefined;
}

/** Byte order of UTF-8 strings, the order every list of the service uses. */
function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}
