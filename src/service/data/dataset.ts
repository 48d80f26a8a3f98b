import { randomUUID } from 'node:crypto';
import type { DatasetLocation } from '../../engine/lance-engine.js';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { type CatalogDeps, displayId } from '../catalog/catalog.js';
import { type TableRef, VERSIONS_DIR } from '../catalog/layout.js';
import type { RequestContext } from '../request-context.js';
import { TableFences } from '../tables/table-fences.js';
import { type ResolvedTable, resolveTable } from '../tables/resolved-table.js';
import { tableHasData } from '../tables/table-state.js';
import { TableVersions } from '../versions/dataset-versions.js';
import type { TableVersionService } from '../versions/table-version-service.js';

/** A table resolved for a data operation: where its dataset is and how the engine opens it. */
export interface DataTable extends ResolvedTable {
  ref: TableRef;
  /** For the engine; carries the commit coordinator when the table's versions are managed. */
  at: DatasetLocation;
}

/** Resolves tables for the data services (rows, columns, indices, tags, queries). */
export class DataTables {
  /** Writes announce themselves here, so that a drop waits for them (see table-fences.ts). */
  readonly fences: TableFences;

  constructor(
    private readonly deps: CatalogDeps,
    private readonly versions: TableVersionService,
  ) {
    this.fences = new TableFences(deps.store, deps.settings.leaseMs);
  }

  /**
   * The visible table `id`. Unless `allowDeclared`, a declared table without data is a 409 code
   * 19: there is no dataset to operate on yet.
   */
  async open(ctx: RequestContext, id: string[], options: { allowDeclared?: boolean } = {}): Promise<DataTable & { hasData: boolean }> {
    const table = await resolveTable(this.deps, id);
    const { state, dir } = table;
    // A table in its own directory, not declared, with a `_versions/` folder has data: skip the
    // second LIST (should it hold only staged manifests, the engine's open answers code 19 anyway).
    const hasData =
      state.ownVersionsDir && !state.reserved && state.record?.value.location === undefined ? true : await tableHasData(this.deps.locations, state);
    if (!hasData && !options.allowDeclared) {
      throw new NamespaceError(ErrorCode.InvalidTableState, `table ${displayId(id)} is declared but has no data yet`);
    }
    // The engine commits only through `write`, under a write lease a drop waits for.
    const at: DatasetLocation = {
      location: dir.store.location(dir.key),
      storageOptions: dir.store.engineStorageOptions(),
      ...((await table.managedVersioning()) ? { coordinator: this.versions.coordinatorFor(ctx, table, true) } : {}),
    };
    return { ...table, ref: state.ref, at, hasData };
  }

  /** Opens the table `id` (as `open`) and runs `write` on it under a write lease: a drop waits for it, or it fails cleanly. */
  async write<T>(ctx: RequestContext, id: string[], write: (table: DataTable & { hasData: boolean }) => Promise<T>, options: { allowDeclared?: boolean } = {}): Promise<T> {
    const table = await this.open(ctx, id, options);
    return this.fences.whileWriting(table.state, ctx.requestId, () => write(table));
  }

  get engine() {
    return this.deps.engine;
  }

  /**
   * Commits manifest bytes the service built itself as the next version of a table, through the
   * version path every commit takes (reservation, latest + 1, create-if-absent). A lost race is a
   * 409 code 14; the staged file is removed either way.
   */
  async commitManifest(ctx: RequestContext, table: DataTable, build: (latest: { version: number; bytes: Buffer }) => Buffer): Promise<number> {
    const versions = new TableVersions(table.dir);
    const latest = await versions.latest();
    const current = latest ? await table.dir.store.get(latest.key) : null;
    if (!latest || !current) throw new NamespaceError(ErrorCode.InvalidTableState, `table ${displayId(table.id)} has no committed version`);
    const version = latest.version + 1;
    const staged = `${VERSIONS_DIR}/${version}.manifest-${randomUUID()}`;
    await table.dir.store.put(`${table.dir.key}${staged}`, build({ version: latest.version, bytes: current.body }));
    try {
      await this.versions.commitUnderWriteLease(ctx, table, { version, manifest_path: staged, naming_scheme: latest.scheme });
    } catch (e) {
      // A successful create removes the staged file itself; a failed one leaves it to us.
      await table.dir.store.delete(`${table.dir.key}${staged}`);
      throw e;
    }
    return version;
  }

  /** The catalog the tables live in (store, locations, page tokens, settings). */
  get catalog(): CatalogDeps {
    return this.deps;
  }
}
