import { ErrorCode, invalidInput, NamespaceError } from '../../model/errors.js';
import type { DescribeTableRequest, DescribeTableResponse } from '../../model/tables.js';
import { type BranchName, branchDir, normalizeBranch, resolveBranch } from '../branches/branch-refs.js';
import { displayId } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { tableRefOf } from '../catalog/layout.js';
import type { StoreDir } from '../catalog/locations.js';
import type { RequestContext } from '../context/request-context.js';
import { requireTag } from '../data/tags.js';
import { engineFailure } from '../errors/engine-errors.js';
import { describeTableMaintenance } from '../maintenance/table-policy.js';
import { TableVersions } from '../versions/dataset-versions.js';
import { branchLatestCommitted, latestCommitted, resolveTable, resolveTableWithLatest } from './resolved-table.js';
import { datasetAt } from './table-location.js';
import { dataDir, incarnationOf, requireVisibleTable, tableHasData } from './table-state.js';

// DescribeTable and TableExists.

export interface DescribeFlags {
  withTableUri: boolean;
  /** Answer `maintenance` too (a service extension: the slot and the namespaces' records are read). */
  withMaintenance?: boolean;
  loadDetailedMetadata: boolean;
  checkDeclared: boolean;
}

export async function describeTable(
  deps: CatalogDeps,
  ctx: RequestContext,
  id: string[],
  request: DescribeTableRequest,
  flags: DescribeFlags,
): Promise<DescribeTableResponse> {
  const ref = tableRefOf(id);
  // Detailed metadata needs the latest version (the engine checks its kept dataset against it).
  const detailed = flags.loadDetailedMetadata ? await resolveTableWithLatest(deps, id) : null;
  const table = detailed?.table ?? (await resolveTable(deps, id));
  const { state, dir } = table;
  // A tag names a version and the branch it points into; a branch (404 code 22 when it has no ref): its version, schema and stats, the rest the table's.
  requireTagAlone(request);
  const tagged = flags.loadDetailedMetadata ? await taggedVersion(id, dir, request.tag) : undefined;
  const branch = await resolveBranch(dir, tagged ? tagged.branch : normalizeBranch(request.branch), displayId(id));
  const properties = state.record?.value.properties ?? {};
  const managedVersioning = await table.managedVersioning();
  const response: DescribeTableResponse = {
    location: dir.store.location(dir.key),
    properties,
    managed_versioning: managedVersioning,
    storage_options: await deps.credentials.storageOptions(ctx, { id, dir, managedVersioning }, request.vend_credentials),
  };
  if (flags.withTableUri) response.table_uri = dir.store.uri(dir.key);
  if (flags.withMaintenance) response.maintenance = await describeTableMaintenance(deps.store, id, properties, incarnationOf(state));
  if (detailed) response.is_only_declared = detailed.latest === null;
  else if (flags.checkDeclared) response.is_only_declared = !(await tableHasData(deps.locations, state));
  if (flags.loadDetailedMetadata) {
    if (response.is_only_declared) {
      throw new NamespaceError(ErrorCode.InvalidTableState, `table ${displayId(id)} is declared but has no data yet, so it has no detailed metadata`);
    }
    const asked = tagged ? tagged.version : (request.version ?? undefined);
    const versions = new TableVersions(branchDir(dir, branch));
    const branchLatest = branch === null ? undefined : branchLatestCommitted(await versions.latest(), state, branch);
    const latest = branch === null ? (detailed?.latest ? latestCommitted(detailed.latest, state) : undefined) : branchLatest;
    // The manifest of the version the engine is expected to describe is read meanwhile.
    const expected = asked ?? latest?.version;
    const early = expected === undefined ? undefined : versions.readManifest(expected).catch(() => null);
    const at = { ...datasetAt(dir), ...(branch ? { branch: branch.name } : {}), ...(latest ? { latest } : {}) };
    const { version, schema } = await deps.engine.describeDataset(at, asked).catch((e: unknown) => {
      throw engineFailure(e, id, { version: asked, branch: branch?.name ?? null });
    });
    const manifest = (version === expected ? await early : null) ?? (await versions.readManifest(version));
    response.table = ref.name;
    response.namespace = ref.namespace;
    response.version = version;
    response.schema = schema;
    if (manifest) {
      response.stats = { num_deleted_rows: manifest.numDeletedRows, num_fragments: manifest.numFragments };
      response.metadata = manifest.tableMetadata;
    }
  }
  return response;
}

/** The spec: a tag cannot be used with `version` or `branch` (400 code 13). */
function requireTagAlone({ tag, version, branch }: DescribeTableRequest): void {
  if (tag === undefined || tag === null) return;
  if (version !== undefined && version !== null) throw invalidInput('give either version or tag, not both');
  if (branch !== undefined && branch !== null && branch !== '')
    throw invalidInput('give either branch or tag, not both: a tag names the branch it points into');
}

/** The version and branch `tag` points to (Lance records the branch in the tag), or undefined without a tag. */
async function taggedVersion(id: string[], dir: StoreDir, tag: string | null | undefined): Promise<{ version: number; branch: BranchName } | undefined> {
  if (tag === undefined || tag === null) return undefined;
  const { version, branch } = await requireTag(dir, id, tag);
  return { version, branch: branch ?? null };
}

/** 404 unless the table is visible (and, when `version` is given, that version exists). */
export async function tableExists(deps: CatalogDeps, id: string[], version: number | null | undefined): Promise<void> {
  const ref = tableRefOf(id);
  const state = await requireVisibleTable(deps.store, ref);
  if (version === undefined || version === null) return;
  const found = await new TableVersions(dataDir(deps.locations, state)).get(version);
  if (!found) throw new NamespaceError(ErrorCode.TableVersionNotFound, `table ${displayId(id)} has no version ${version}`);
}
