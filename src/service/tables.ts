import pLimit from 'p-limit';
import { type CommitCoordinator, EngineError } from '../engine/lance-engine.js';
import { claimDatasetCreation } from './dataset-creation.js';
import { engineFailure } from './engine-errors.js';
import { ErrorCode, invalidInput, NamespaceError, unsupported } from '../model/errors.js';
import type {
  CreateTableResponse,
  DeclareTableRequest,
  DeclareTableResponse,
  DescribeTableRequest,
  DescribeTableResponse,
  DropTableResponse,
  ListTablesResponse,
  RegisterTableRequest,
  RegisterTableResponse,
  RenameTableRequest,
  RenameTableResponse,
} from '../model/tables.js';
import { listAll, PreconditionFailedError } from '../store/object-store.js';
import { type CatalogDeps, createInNamespace, displayId, readNamespace, requireNamespace, resolveManagedVersioning } from './catalog.js';
import {
  childOfPrefix,
  deregisteredMarkerKey,
  NAMESPACE_MARKER,
  namespaceDirKey,
  reservedMarkerKey,
  type TableRef,
  tableDirKey,
  tableRecordKey,
  tableRefOf,
  validateNamespaceId,
  VERSIONS_DIR,
} from './layout.js';
import type { StoreDir } from './locations.js';
import { manifestFileName } from './manifest-names.js';
import type { PageRequest } from './namespaces.js';
import { paginate } from './page-token.js';
import { encodeRecord, TableRecord } from './records.js';
import type { RequestContext } from './request-context.js';
import {
  dataDir,
  isVisible,
  readVersionManifest,
  readTableState,
  requireVisibleTable,
  tableHasData,
  tableNotFound,
} from './table-state.js';

const CHECK_CONCURRENCY = 16;

export interface CreateTableInput {
  mode?: 'Create' | 'ExistOk' | 'Overwrite' | undefined;
  properties?: Record<string, string> | undefined;
  storageOptions?: Record<string, string> | undefined;
  arrowIpcStream: Buffer;
}

export interface DescribeFlags {
  withTableUri: boolean;
  loadDetailedMetadata: boolean;
  checkDeclared: boolean;
}

const tableAlreadyExists = (id: string[], why = 'already exists') =>
  new NamespaceError(ErrorCode.TableAlreadyExists, `table ${displayId(id)} ${why}`);


export class TableService {
  constructor(
    private readonly deps: CatalogDeps,
    /** The commit path of a managed table, so that the engine's writes go through it. */
    private readonly coordinatorFor: (ctx: RequestContext, id: string[]) => CommitCoordinator,
  ) {}

  private get store() {
    return this.deps.store;
  }

  private datasetAt(dir: StoreDir, extraOptions: Record<string, string> = {}) {
    return { location: dir.store.location(dir.key), storageOptions: { ...dir.store.engineStorageOptions(), ...extraOptions } };
  }

  /** Creates the table record with create-if-absent inside a live namespace: the linearization point of every new table. */
  private async claimName(ref: TableRef, record: TableRecord, alsoUndo: () => Promise<void> = async () => {}): Promise<void> {
    const id = [...ref.namespace, ref.name];
    try {
      await createInNamespace(
        this.store,
        ref.namespace,
        () => this.store.put(tableRecordKey(ref), encodeRecord(record), { ifNoneMatch: '*' }),
        async () => {
          await alsoUndo();
          await this.store.delete(tableRecordKey(ref));
        },
      );
    } catch (e) {
      if (e instanceof PreconditionFailedError) throw tableAlreadyExists(id);
      throw e;
    }
  }

  async declare(_ctx: RequestContext, id: string[], request: DeclareTableRequest): Promise<DeclareTableResponse> {
    const ref = tableRefOf(id);
    const own = this.deps.locations.own(tableDirKey(ref));
    const location = own.store.location(own.key);
    if (request.location !== undefined && request.location !== null && request.location.trim() !== '') {
      const asked = this.deps.locations.resolve(request.location);
      if (asked.store !== own.store || asked.key !== own.key) {
        throw invalidInput(`location ${JSON.stringify(request.location)} differs from the table's location ${location}; declared tables live in their namespace directory`);
      }
    }
    await requireNamespace(this.store, ref.namespace);
    const state = await readTableState(this.store, ref);
    if (isVisible(state)) throw tableAlreadyExists(id);
    if (state.deregistered) throw tableAlreadyExists(id, 'is deregistered but its data is still in place; register it again or drop it');
    const properties = request.properties ?? {};
    const managed = await resolveManagedVersioning(this.deps, ref.namespace, properties);
    await this.claimName(ref, { properties, created_at: new Date().toISOString(), managed_versioning: managed }, () =>
      this.store.delete(reservedMarkerKey(ref)),
    );
    // Lance's directory catalog recognizes a declared table by this marker.
    await this.store.put(reservedMarkerKey(ref), '', { ifNoneMatch: '*' }).catch((e: unknown) => {
      if (!(e instanceof PreconditionFailedError)) throw e;
    });
    return {
      location,
      storage_options: this.store.clientStorageOptions(),
      properties,
      managed_versioning: managed,
    };
  }

  /**
   * Creates a table from an Arrow IPC stream. A new name is claimed by creating its record first,
   * so of concurrent creators exactly one proceeds to write data. A declared table (reserved
   * marker) is filled in place by the one request holding its creation claim (see
   * dataset-creation.ts: Lance would turn a losing concurrent create into an overwrite).
   */
  async create(ctx: RequestContext, id: string[], input: CreateTableInput): Promise<CreateTableResponse> {
    const ref = tableRefOf(id);
    const mode = input.mode ?? 'Create';
    await requireNamespace(this.store, ref.namespace);
    const state = await readTableState(this.store, ref);
    let properties = input.properties ?? {};
    let claimed = false;
    let overwrite = false;
    let managed = state.record?.value.managed_versioning;
    if (isVisible(state)) {
      const hasData = await tableHasData(this.deps.locations, state);
      const existingProperties = state.record?.value.properties ?? {};
      if (hasData && mode === 'Create') throw tableAlreadyExists(id);
      if (!hasData && !state.reserved && mode === 'Create') throw tableAlreadyExists(id, 'is being created by another request');
      if (hasData && mode === 'ExistOk') {
        const dir = dataDir(this.deps.locations, state);
        const version = await this.deps.engine.datasetVersion(this.datasetAt(dir)).catch((e: unknown) => {
          throw engineFailure(e, id);
        });
        return { location: dir.store.location(dir.key), version, properties: existingProperties, storage_options: dir.store.clientStorageOptions() };
      }
      overwrite = hasData;
      if (mode !== 'Overwrite') {
        properties = { ...existingProperties, ...properties };
      }
    } else {
      if (state.deregistered) throw tableAlreadyExists(id, 'is deregistered but its data is still in place; register it again or drop it');
      managed = await resolveManagedVersioning(this.deps, ref.namespace, properties);
      await this.claimName(ref, { properties, created_at: new Date().toISOString(), managed_versioning: managed });
      claimed = true;
    }
    managed ??= await resolveManagedVersioning(this.deps, ref.namespace, properties);
    const dir = dataDir(this.deps.locations, state);
    const at = { ...this.datasetAt(dir, input.storageOptions), ...(managed ? { coordinator: this.coordinatorFor(ctx, id) } : {}) };
    // Filling a declared table: only the holder of the creation claim may create its dataset.
    const release = !claimed && !overwrite ? await claimDatasetCreation(this.store, ref, ctx.requestId) : null;
    if (!claimed && !overwrite && !release) throw tableAlreadyExists(id, 'is being created by another request');
    let version: number;
    try {
      if (release && (await tableHasData(this.deps.locations, await readTableState(this.store, ref)))) throw tableAlreadyExists(id);
      ({ version } = await this.deps.engine.createDataset(at, input.arrowIpcStream, overwrite ? 'overwrite' : 'create'));
    } catch (e) {
      if (claimed) await this.store.delete(tableRecordKey(ref));
      throw engineFailure(e, id);
    } finally {
      await release?.();
    }
    // Overwrite replaces the properties too, once the data is in (a failed create changes nothing).
    // The data is committed by now, so losing this race is reported with what the table keeps.
    if (mode === 'Overwrite' && state.record && isVisible(state)) {
      await this.store.put(tableRecordKey(ref), encodeRecord({ ...state.record.value, properties }), { ifMatch: state.record.etag }).catch((e: unknown) => {
        if (!(e instanceof PreconditionFailedError)) throw e;
        properties = state.record?.value.properties ?? {};
      });
    }
    if (state.reserved) await this.store.delete(reservedMarkerKey(ref)).catch(() => undefined);
    return { location: dir.store.location(dir.key), version, properties, storage_options: dir.store.clientStorageOptions() };
  }

  async register(_ctx: RequestContext, id: string[], request: RegisterTableRequest): Promise<RegisterTableResponse> {
    const ref = tableRefOf(id);
    const mode = request.mode ?? 'Create';
    const dir = this.deps.locations.resolve(request.location);
    await requireNamespace(this.store, ref.namespace);
    try {
      await this.deps.engine.datasetVersion(this.datasetAt(dir));
    } catch (e) {
      if (e instanceof EngineError && e.kind !== 'internal') {
        throw invalidInput(`location ${JSON.stringify(request.location)} is not a readable Lance dataset: ${e.message}`, e);
      }
      throw engineFailure(e, id);
    }
    const ownDir = tableDirKey(ref);
    const isOwnDir = dir.store === this.store && dir.key === ownDir;
    const properties = request.properties ?? {};
    const record: TableRecord = {
      properties,
      created_at: new Date().toISOString(),
      ...(isOwnDir ? {} : { location: request.location.trim() }),
      managed_versioning: await resolveManagedVersioning(this.deps, ref.namespace, properties),
    };
    const state = await readTableState(this.store, ref);
    if (isVisible(state) && mode === 'Create') throw tableAlreadyExists(id);
    if (state.record) {
      // Overwrite, or re-register a deregistered table: replace exactly the record that was read.
      try {
        await this.store.put(tableRecordKey(ref), encodeRecord(record), { ifMatch: state.record.etag });
      } catch (e) {
        if (e instanceof PreconditionFailedError) throw new NamespaceError(ErrorCode.ConcurrentModification, `table ${displayId(id)} changed during the register; retry`);
        throw e;
      }
    } else {
      await this.claimName(ref, record);
    }
    if (state.reserved) await this.store.delete(reservedMarkerKey(ref));
    if (state.deregistered) await this.store.delete(deregisteredMarkerKey(ref));
    return { location: request.location.trim(), properties };
  }

  async describe(_ctx: RequestContext, id: string[], request: DescribeTableRequest, flags: DescribeFlags): Promise<DescribeTableResponse> {
    const ref = tableRefOf(id);
    const state = await requireVisibleTable(this.store, ref);
    const dir = dataDir(this.deps.locations, state);
    const properties = state.record?.value.properties ?? {};
    const response: DescribeTableResponse = {
      location: dir.store.location(dir.key),
      properties,
      managed_versioning: state.record?.value.managed_versioning ?? (await resolveManagedVersioning(this.deps, ref.namespace, properties)),
      storage_options: dir.store.clientStorageOptions(),
    };
    if (flags.withTableUri) response.table_uri = dir.store.uri(dir.key);
    if (flags.checkDeclared || flags.loadDetailedMetadata) {
      response.is_only_declared = !(await tableHasData(this.deps.locations, state));
    }
    if (flags.loadDetailedMetadata) {
      if (response.is_only_declared) {
        throw new NamespaceError(ErrorCode.InvalidTableState, `table ${displayId(id)} is declared but has no data yet, so it has no detailed metadata`);
      }
      const asked = request.version ?? undefined;
      const { version, schema } = await this.deps.engine.describeDataset(this.datasetAt(dir), asked).catch((e: unknown) => {
        if (e instanceof EngineError && e.kind === 'version_not_found') {
          throw new NamespaceError(ErrorCode.TableVersionNotFound, `table ${displayId(id)} has no version ${asked}`, { cause: e });
        }
        throw engineFailure(e, id);
      });
      const manifest = await readVersionManifest(dir, version);
      response.table = ref.name;
      response.namespace = ref.namespace;
      response.version = version;
      response.schema = { ...schema };
      if (manifest) {
        response.stats = { num_deleted_rows: manifest.numDeletedRows, num_fragments: manifest.numFragments };
        response.metadata = manifest.tableMetadata;
      }
    }
    return response;
  }

  /** 404 unless the table is visible (and, when `version` is given, that version exists). */
  async exists(_ctx: RequestContext, id: string[], version: number | null | undefined): Promise<void> {
    const ref = tableRefOf(id);
    const state = await requireVisibleTable(this.store, ref);
    if (version === undefined || version === null) return;
    const dir = dataDir(this.deps.locations, state);
    const prefix = `${dir.key}${VERSIONS_DIR}/`;
    const found = await Promise.all(['V1', 'V2'].map((s) => dir.store.head(`${prefix}${manifestFileName(version, s as 'V1' | 'V2')}`)));
    if (!found.some(Boolean)) throw new NamespaceError(ErrorCode.TableVersionNotFound, `table ${displayId(id)} has no version ${version}`);
  }

  /** Names of the tables directly in `ns`, in byte order. */
  async list(_ctx: RequestContext, ns: string[], page: PageRequest & { includeDeclared?: boolean | undefined }): Promise<ListTablesResponse> {
    validateNamespaceId(ns);
    const scope = JSON.stringify(ns);
    const after = this.deps.pageTokens.decode('tables', scope, page.pageToken);
    await requireNamespace(this.store, ns);
    const dirKey = namespaceDirKey(ns);
    const listing = await listAll(this.store, dirKey, { delimiter: '/', ...(after ? { startAfter: `${dirKey}${after}.lance/` } : {}) });
    const candidates = listing.commonPrefixes.map((p) => childOfPrefix(dirKey, p)).filter((c) => c?.kind === 'table').map((c) => c?.name ?? '');
    const want = page.limit === undefined || page.limit === null ? Infinity : page.limit + 1;
    const names = (await this.keepTables(ns, candidates, page.includeDeclared ?? true, want)).map((t) => t.name);
    const { page: tables, pageToken } = paginate(names, { limit: page.limit, currentToken: page.pageToken }, (n) => n, (last) =>
      this.deps.pageTokens.encode('tables', scope, last),
    );
    return { tables, page_token: pageToken };
  }

  /** Keeps the visible tables among the candidates (and only those with data unless includeDeclared). */
  private async keepTables(ns: string[], candidates: string[], includeDeclared: boolean, want: number): Promise<TableRef[]> {
    const limit = pLimit(CHECK_CONCURRENCY);
    const kept: TableRef[] = [];
    for (let i = 0; i < candidates.length && kept.length < want; i += CHECK_CONCURRENCY) {
      const batch = candidates.slice(i, i + CHECK_CONCURRENCY).map((name) => ({ namespace: ns, name }));
      const keep = await Promise.all(
        batch.map((ref) =>
          limit(async () => {
            const state = await readTableState(this.store, ref);
            if (!isVisible(state)) return false;
            return includeDeclared || tableHasData(this.deps.locations, state);
          }),
        ),
      );
      batch.forEach((ref, j) => {
        if (keep[j] && kept.length < want) kept.push(ref);
      });
    }
    return kept;
  }

  /** Every table in every namespace, as full ids joined with `delimiter`, ordered by id. */
  async listAll(_ctx: RequestContext, delimiter: string, page: PageRequest & { includeDeclared?: boolean | undefined }): Promise<ListTablesResponse> {
    const after = this.deps.pageTokens.decode('all-tables', '', page.pageToken);
    const afterId: string[] | undefined = after === undefined || after === '' ? undefined : (JSON.parse(after) as string[]);
    const found: string[][] = [];
    const want = page.limit === undefined || page.limit === null ? Infinity : page.limit + 1;
    await this.walkTables([], page.includeDeclared ?? true, afterId, want, found);
    const { page: ids, pageToken } = paginate(found, { limit: page.limit, currentToken: page.pageToken }, (id) => JSON.stringify(id), (last) =>
      this.deps.pageTokens.encode('all-tables', '', last),
    );
    return { tables: ids.map((id) => id.join(delimiter)), page_token: pageToken };
  }

  /**
   * Depth-first over the namespace tree with the children of each namespace in name order (a table
   * before a namespace of the same name), which is exactly the order of compareIds; so it can stop
   * once `want` ids are found. Runs of consecutive tables are checked concurrently.
   */
  private async walkTables(ns: string[], includeDeclared: boolean, afterId: string[] | undefined, want: number, out: string[][]): Promise<void> {
    const dirKey = namespaceDirKey(ns);
    const listing = await listAll(this.store, dirKey, { delimiter: '/' });
    if (ns.length > 0 && !listing.objects.some((o) => o.key === `${dirKey}${NAMESPACE_MARKER}`)) return;
    const children = listing.commonPrefixes
      .map((p) => childOfPrefix(dirKey, p))
      .filter((c) => c !== null)
      .sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)) || (a.kind === 'table' ? -1 : 1));
    let run: string[] = [];
    const flush = async () => {
      const refs = await this.keepTables(ns, run, includeDeclared, want - out.length);
      for (const ref of refs) out.push([...ref.namespace, ref.name]);
      run = [];
    };
    for (const child of children) {
      if (out.length >= want) return;
      const childId = [...ns, child.name];
      if (child.kind === 'table') {
        if (!afterId || compareIds(childId, afterId) > 0) run.push(child.name);
        continue;
      }
      await flush();
      // A subtree wholly before the token holds only ids before it.
      if (afterId && compareIds(childId, afterId.slice(0, childId.length)) < 0) continue;
      if (out.length < want) await this.walkTables(childId, includeDeclared, afterId, want, out);
    }
    if (out.length < want) await flush();
  }

  /**
   * Drops the table and deletes its directory. The deregistered marker goes first, so the table
   * disappears atomically; its files follow, the marker last, so a crash part-way leaves a hidden
   * table that another drop finishes. Data at a registered location stays: it may be shared with
   * another registration or live outside the root, and is not the catalog's to delete.
   */
  async drop(_ctx: RequestContext, id: string[]): Promise<DropTableResponse> {
    const ref = tableRefOf(id);
    const state = await readTableState(this.store, ref);
    if (!isVisible(state) && !state.deregistered) throw tableNotFound(id);
    const dir = dataDir(this.deps.locations, state);
    const marker = deregisteredMarkerKey(ref);
    await this.store.put(marker, '', { ifNoneMatch: '*' }).catch((e: unknown) => {
      if (!(e instanceof PreconditionFailedError)) throw e;
    });
    await this.store.deletePrefix(state.dirKey, { keep: [marker] });
    await this.store.delete(marker);
    return { id, location: dir.store.location(dir.key), properties: state.record?.value.properties ?? {} };
  }

  /** Hides the table and keeps its data; registering the same location again brings it back. */
  async deregister(_ctx: RequestContext, id: string[]): Promise<DropTableResponse> {
    const ref = tableRefOf(id);
    const state = await requireVisibleTable(this.store, ref);
    const dir = dataDir(this.deps.locations, state);
    try {
      await this.store.put(deregisteredMarkerKey(ref), JSON.stringify({ deregistered_at: new Date().toISOString() }), { ifNoneMatch: '*' });
    } catch (e) {
      if (e instanceof PreconditionFailedError) throw tableNotFound(id);
      throw e;
    }
    return { id, location: dir.store.location(dir.key), properties: state.record?.value.properties ?? {} };
  }

  /**
   * Renames (or moves) a table by renaming its directory, which is atomic on a local file system
   * and refused when the destination exists. Object stores have no rename, so there it is a 406.
   */
  async rename(_ctx: RequestContext, id: string[], request: RenameTableRequest): Promise<RenameTableResponse> {
    const ref = tableRefOf(id);
    const targetNs = request.new_namespace_id ?? ref.namespace;
    const target = tableRefOf([...targetNs, request.new_table_name]);
    const renameDir = this.store.renameDir?.bind(this.store);
    if (!renameDir) {
      throw unsupported(
        `rename is not supported on ${this.store.rootUri}: an object store cannot rename a directory atomically; deregister the table and register its location under the new name instead`,
      );
    }
    const state = await requireVisibleTable(this.store, ref);
    if (!(await readNamespace(this.store, targetNs))) throw new NamespaceError(ErrorCode.NamespaceNotFound, `namespace ${displayId(targetNs)} does not exist`);
    const targetState = await readTableState(this.store, target);
    if (targetState.occupied) throw tableAlreadyExists([...targetNs, request.new_table_name]);
    await createInNamespace(
      this.store,
      targetNs,
      async () => {
        try {
          await renameDir(state.dirKey, tableDirKey(target));
        } catch (e) {
          if (e instanceof PreconditionFailedError) throw tableAlreadyExists([...targetNs, request.new_table_name]);
          throw e;
        }
      },
      () => renameDir(tableDirKey(target), state.dirKey),
    );
    return {};
  }
}

function compareIds(a: string[], b: string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const c = Buffer.compare(Buffer.from(a[i] ?? ''), Buffer.from(b[i] ?? ''));
    if (c !== 0) return c;
  }
  return a.length - b.length;
}
