import { randomUUID } from 'node:crypto';
import type { DatasetLocation } from '../../engine/lance-engine.js';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import { type BranchName, type BranchRef, branchTreeDir, onBranch, requireBranchRef } from '../branches/branch-refs.js';
import { displayId } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { stagedManifestPath, type TableRef, tableDirKey, tableRefOf } from '../catalog/layout.js';
import { type StoreDir, sameDir } from '../catalog/locations.js';
import type { RequestContext } from '../context/request-context.js';
import { pausePoint } from '../coordination/fault-points.js';
import { settled, unwrap } from '../coordination/settled.js';
import { type EngineFailureContext, onEngine } from '../errors/engine-errors.js';
import { branchLatestCommitted, latestCommitted, type ResolvedTable, resolveTableWithLatest } from '../tables/resolved-table.js';
import { requireUnlinkedTable } from '../tables/table-state.js';
import { versionsOn } from '../versions/branch-versions.js';
import { type CommittedVersion, TableVersions } from '../versions/dataset-versions.js';
import type { TableVersionService } from '../versions/table-version-service.js';

/** A table resolved for a data operation: where its dataset is and how the engine opens it. */
export interface DataTable extends ResolvedTable {
  ref: TableRef;
  /** For the engine; carries the commit coordinator when the table's versions are managed. */
  at: DatasetLocation;
  /** The branch the request works on, as its ref was read for it; null for main. */
  branch: BranchRef | null;
  /** Where the versions of that branch are: the dataset's own directory for main, `tree/<branch>/` else. */
  versionsDir: StoreDir;
}

/** A table opened for a data operation, and whether its dataset exists yet. */
export type OpenTable = DataTable & { hasData: boolean };

/** How a table is opened for work: whether a declared table will do, and what a failure is about. */
export interface TableWorkOptions extends EngineFailureContext {
  /** A declared table without data is opened too (otherwise it is a 409 code 19). */
  allowDeclared?: boolean;
  /** The branch to work on (branch-refs.ts normalizeBranch); main when absent or null. */
  branch?: BranchName;
}

/** How `open` opens a table: TableWorkOptions, and the links its name's directory was seen to hold. */
interface OpenOptions {
  allowDeclared?: boolean | undefined;
  branch?: BranchName | undefined;
  nameLinks?: string[];
}

/** A branch's ref (404 code 22 when absent) and its latest version, read at the same time. */
async function readBranch(
  dir: StoreDir,
  name: string,
  id: string[],
): Promise<{ branch: BranchRef; branchLatest: CommittedVersion | null; versionsDir: StoreDir }> {
  const versionsDir = branchTreeDir(dir, name);
  const [branch, branchLatest] = await Promise.all([requireBranchRef(dir, name, displayId(id)), new TableVersions(versionsDir).latest()]);
  return { branch, branchLatest, versionsDir };
}

/** Resolves tables for the data services (rows, columns, indices, tags, queries). */
export class DataTables {
  constructor(
    private readonly deps: CatalogDeps,
    private readonly versions: TableVersionService,
  ) {}

  /**
   * The visible table `id`. Unless `allowDeclared`, a declared table without data is a 409 code
   * 19: there is no dataset to operate on yet.
   */
  async open(ctx: RequestContext, id: string[], options: OpenOptions = {}): Promise<OpenTable> {
    // One look at the latest committed version answers whether the table has data and lets the
    // engine serve the request from the dataset it keeps open (checked against this version).
    const ref = tableRefOf(id);
    const nameLinks = options.nameLinks ?? requireUnlinkedTable(this.deps.store, ref);
    // A branch's ref and latest version are read beside the table's own reads when its dataset is
    // the name's directory (every table's but a registered one's), as resolveTableWithLatest does
    // for main's; only once the table is known to be there do they count (a 404 code 4 first).
    const ownDir = this.deps.locations.own(tableDirKey(ref));
    const early = options.branch && nameLinks.length === 0 ? settled(readBranch(ownDir, options.branch, id)) : undefined;
    const resolved = await resolveTableWithLatest(this.deps, id, nameLinks);
    const { table } = resolved;
    const { state, dir } = table;
    const latest = latestCommitted(resolved.latest, state);
    const hasData = latest !== undefined;
    if (!hasData && !options.allowDeclared) {
      throw new NamespaceError(ErrorCode.InvalidTableState, `table ${displayId(id)} is declared but has no data yet`);
    }
    const location = { location: dir.store.location(dir.key), storageOptions: dir.store.engineStorageOptions() };
    const managed = await table.managedVersioning();
    if (options.branch) {
      // A branch: its ref, read once (404 code 22 when absent), and its latest version at the same
      // time; the engine opens the dataset on it.
      const own = early !== undefined && sameDir(dir, ownDir);
      const { branch, branchLatest, versionsDir } = own ? unwrap(await early) : await readBranch(dir, options.branch, id);
      const committed = branchLatestCommitted(branchLatest, state, branch);
      // A managed table's writes on the branch commit through the service, on the branch's own history.
      const at: DatasetLocation = {
        ...location,
        branch: branch.name,
        ...(managed
          ? {
              coordinator: this.versions.coordinatorFor(ctx, table, true, branch.name, branch),
              coordinatorOn: (line: string | null) => this.versions.coordinatorFor(ctx, table, true, line),
            }
          : {}),
        ...(committed ? { latest: committed } : {}),
      };
      return { ...table, ref: state.ref, at, branch, versionsDir, hasData };
    }
    // The engine commits only through `write`, under a write lease a drop waits for.
    const at: DatasetLocation = {
      ...location,
      ...(managed ? { coordinator: this.versions.coordinatorFor(ctx, table, true) } : {}),
      ...(latest ? { latest } : {}),
    };
    return { ...table, ref: state.ref, at, branch: null, versionsDir: dir, hasData };
  }

  /**
   * Runs `write` on the table `id` under a write lease: a drop waits for it, or it fails cleanly.
   * The lease comes first and the table is opened (as `open`) after it, which is the writer's look
   * the protocol asks for (table-fences.ts). Engine failures pass through as they are (the backfill
   * runner tells transient ones from the rest by them). The lease is put only in a `_catalog/`
   * neither reached through a symbolic link nor one (a 404 otherwise, see LinkedTableDir).
   *
   * What a one-row update or delete of an unmanaged table costs on a local disk besides Lance's
   * own write (measured on 100,000 rows, server side, medians at load 10 on 2 cores): the lease's
   * PUT, not fsynced, a rewrite of the file the previous lease left (0.2-0.3 ms); the open: the
   * name directory's LIST (from the kept sorted listing) and the record's GET, Lance's hint's GET
   * and two HEADs at once (0.3-0.4 ms, of which 0.1-0.2 ms parsing the record); the write itself on
   * the dataset kept open (handle-cache.ts: as fast as a warm handle; its version after is the one
   * the write's result names, not asked of the handle); the lease's DELETE, not waited for; no fsync of the service's. HTTP (body,
   * validation, answer) adds about 0.4 ms to what a trivial route costs (0.4 ms). In one
   * interleaved run (load 8-9), from a request's arrival to its answer, a delete stood 1.1 ms above
   * the same call on a warm handle and an update 2.6 ms (9.9 and 6.3 ms before it wrote on the kept
   * dataset with a lease that made and removed two directories).
   */
  async write<T>(
    ctx: RequestContext,
    id: string[],
    write: (table: OpenTable) => Promise<T>,
    options: { allowDeclared?: boolean | undefined; branch?: BranchName | undefined } = {},
  ): Promise<T> {
    const ref = tableRefOf(id);
    const nameLinks = requireUnlinkedTable(this.deps.store, ref);
    // A write on a branch names it in its lease, and reads the branch's ref only after: its delete waits for it, or it is a 404 code 22 (table-fences.ts).
    return this.deps.fences.whileWritingTo(
      ref,
      ctx.requestId,
      async () => {
        const table = await this.open(ctx, id, { allowDeclared: options.allowDeclared, branch: options.branch, nameLinks });
        await pausePoint('write:after-resolve');
        return write(table);
      },
      options.branch ?? null,
    );
  }

  /**
   * As `write` on main, holding a claim too (see coordination/claims.ts): `claim` takes it (or
   * throws) once the write lease is announced, at the same time as the table is opened, so that it
   * costs no store round trip of its own before the work (a fork's claim: a PUT, 5 ms and more on
   * S3); it is released after `write`, or as soon as the open failed. A claim put in the `_catalog/`
   * of a table that turns out to be missing is removed again, as the write lease is.
   */
  async writeClaimed<T>(
    ctx: RequestContext,
    id: string[],
    claim: (ref: TableRef) => Promise<() => Promise<void>>,
    write: (table: OpenTable) => Promise<T>,
  ): Promise<T> {
    const ref = tableRefOf(id);
    const nameLinks = requireUnlinkedTable(this.deps.store, ref);
    return this.deps.fences.whileWritingTo(ref, ctx.requestId, async () => {
      const claimed = settled(claim(ref));
      let table: OpenTable;
      try {
        table = await this.open(ctx, id, { nameLinks });
      } catch (e) {
        const outcome = await claimed;
        if ('value' in outcome) await outcome.value().catch(() => undefined);
        throw e;
      }
      await pausePoint('write:after-resolve');
      const release = unwrap(await claimed);
      try {
        return await write(table);
      } finally {
        await release();
      }
    });
  }

  /**
   * Opens the table `id` (as `open`) and runs engine work on it. Its engine failures become the
   * namespace errors that name the table, here, once (engine-errors.ts): the data operations'
   * one way to the engine.
   */
  async readTable<T>(ctx: RequestContext, id: string[], read: (table: OpenTable) => Promise<T>, options: TableWorkOptions = {}): Promise<T> {
    const table = await this.open(ctx, id, options);
    return onEngine(id, () => read(table), options);
  }

  /** As `readTable`, under a write lease (see `write`). */
  writeTable<T>(ctx: RequestContext, id: string[], write: (table: OpenTable) => Promise<T>, options: TableWorkOptions = {}): Promise<T> {
    return this.write(ctx, id, (table) => onEngine(id, () => write(table), options), options);
  }

  get engine() {
    return this.deps.engine;
  }

  /**
   * Commits manifest bytes the service built itself as the next version of the line of history
   * the request resolved (main, or its branch: `build` gets that line's latest manifest), through
   * the version path every commit takes (reservation, latest + 1, create-if-absent; on a branch,
   * its ref read again holding the slot, so a branch deleted meanwhile is 404 code 22). A lost race
   * is a 409 code 14; the staged file is removed either way.
   */
  async commitManifest(ctx: RequestContext, table: DataTable, build: (latest: { version: number; bytes: Buffer }) => Buffer): Promise<number> {
    const branch = table.branch?.name ?? null;
    const versions = versionsOn(table.dir, branch);
    const { store, key } = versions.dir;
    const latest = await versions.latest();
    const current = latest ? await store.get(latest.key) : null;
    if (!latest || !current) throw new NamespaceError(ErrorCode.InvalidTableState, `table ${displayId(table.id)} has no committed version${onBranch(branch)}`);
    const version = latest.version + 1;
    const staged = stagedManifestPath(version, randomUUID());
    await store.put(`${key}${staged}`, build({ version: latest.version, bytes: current.body }));
    try {
      await this.versions.commitUnderWriteLease(ctx, table, {
        version,
        manifest_path: staged,
        naming_scheme: latest.scheme,
        ...(branch !== null ? { branch } : {}),
      });
    } catch (e) {
      // A successful create removes the staged file itself; a failed one leaves it to us.
      await store.delete(`${key}${staged}`);
      throw e;
    }
    return version;
  }

  /** The catalog the tables live in (store, locations, page tokens, settings). */
  get catalog(): CatalogDeps {
    return this.deps;
  }
}
