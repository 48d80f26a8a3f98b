import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { type CoordinatedVersion, type DatasetLocation, EngineError, type EngineErrorKind } from '../dataset-location.js';
import { branchKey, DEFAULT_HANDLE_CACHE_LIMITS, HandleCache, type HandleCacheLimits, type HandleCacheStats } from './handle-cache.js';

export type LancedbModule = typeof import('@lancedb/lancedb');
export type Connection = import('@lancedb/lancedb').Connection;
export type Table = import('@lancedb/lancedb').Table;
type Session = import('@lancedb/lancedb').Session;

const require = createRequire(import.meta.url);
export const lancedb = (): LancedbModule => require('@lancedb/lancedb') as LancedbModule;

// One concern, past 450 lines: reaching a Lance dataset by its location through @lancedb/lancedb
// (the private resolver, the version calls of managed tables, the kept handles' use for reads and
// writes); the handle cache's own bookkeeping lives in handle-cache.ts.
//
// @lancedb/lancedb opens tables only by name under a connection, never by an arbitrary location.
// Its REST namespace client, though, opens whatever location a namespace's `describe` (or
// `declare`) answers. So the adapter runs a private resolver on 127.0.0.1: each operation
// registers a one-off handle for its location, opens the handle through the client, and drops it.
// For a table with managed versioning the resolver also answers the client's version calls
// (list latest, describe, create) from the handle's commit coordinator, so that the engine's own
// commits go through the service's commit path like every client's.
//
// Every dataset is opened under one Lance session (its index and metadata caches, and its object
// stores). Lance keeps an object store per location, options and table id the namespace gave, so a
// location without a coordinator is always registered under the same name (while anyone uses it):
// its datasets then share one store, its connections and TLS set-up, instead of building one per
// operation (about 10 ms on S3). A location with a coordinator gets a name of its own per
// operation, so that its version calls reach that operation's coordinator.

/**
 * What Lance says (through object_store, reqwest, hyper, the AWS SDK and the OS) when the store
 * cannot be reached or fails for now, as collected from the engine against a dead endpoint, one
 * that resets, closes, stalls or answers 5xx, a name that does not resolve, and a failing disk:
 * `HTTP error: error sending request` (caused by `Connection refused`, `Connection reset by peer`,
 * `connection closed before message completed`, `dns error`, `operation timed out`), `Server
 * returned non-2xx status code: 503 Service Unavailable`, the AWS SDK's `dispatch failure`
 * (credentials from STS or IMDS), and the file system's EIO (5), EROFS (30), EBADMSG (74, ext4's
 * checksum failures), ENOTCONN (107), ETIMEDOUT (110), ESTALE (116) and EUCLEAN (117) of a dying
 * disk or a dead network mount. And what it says when the resolver (below) answered a commit
 * coordinator's outage with 503: `Namespace error: Service unavailable: ...`, or `Commit result
 * for version N is unknown` when it could not check its commit.
 */
const STORE_UNREACHABLE =
  /error sending request|non-2xx status code: (5\d\d|429)\b|operation timed out|dispatch failure|Connection refused|Connection reset|connection closed before message completed|dns error|Input\/output error|Read-only file system|Transport endpoint is not connected|Stale file handle|os error (5|30|74|107|110|116|117)\b|Namespace error: Service unavailable|Commit result for version \d+ is unknown/i;
const STORE_FULL = /No space left on device|os error 28\b|Disk quota exceeded|os error 122\b/i;

/**
 * Classifies an error thrown by the Lance engine by its message. "already exists" is left to the
 * callers that know what exists (a dataset, an index, a tag): said of a column or a ref it is
 * not a table conflict.
 */
export function classify(e: unknown, fallback: EngineErrorKind = 'internal'): EngineError {
  if (e instanceof EngineError) return e;
  const message = e instanceof Error ? e.message : String(e);
  let kind = fallback;
  // First: an outage says nothing about the request, whatever else its message names.
  if (STORE_FULL.test(message)) kind = 'store_full';
  else if (STORE_UNREACHABLE.test(message)) kind = 'store_unreachable';
  else if (/commit conflict|preempted|concurrent|conflicting/i.test(message)) kind = 'conflict';
  else if (/Dataset at path .* was not found|no such file|not a dataset|Table '.*' was not found/i.test(message)) kind = 'not_a_dataset';
  // A location that is a file, names no bucket, or that the store's credentials cannot read: no dataset there.
  else if (
    /Not a directory|os error 20\b|NoSuchBucket|bucket does not exist|Failed to get AWS credentials|AccessDenied|Permission denied|os error 13\b/i.test(message)
  )
    kind = 'not_a_dataset';
  else if (/File name too long|os error 36\b|Failed to parse path|Invalid input/i.test(message)) kind = 'invalid_input';
  else if (/version .* (not found|does not exist)|not found.*version/i.test(message)) kind = 'version_not_found';
  return new EngineError(kind, message, { cause: e });
}

/** A location registered with the resolver, and how many operations and kept datasets use the name. */
interface Handle {
  at: DatasetLocation;
  users: number;
  /** Registered under the location's shared name (no coordinator): every user's `at` answers alike. */
  shared: boolean;
}

/** Bounds of the caches of the Lance session every dataset is opened under. */
export interface LanceSessionLimits {
  indexCacheBytes: number;
  metadataCacheBytes: number;
}

export const DEFAULT_LANCE_SESSION_LIMITS: LanceSessionLimits = { indexCacheBytes: 1024 * 1024 * 1024, metadataCacheBytes: 256 * 1024 * 1024 };

/** The same name for the same location and options: see the header. */
const sharedName = (at: DatasetLocation): string =>
  `d${createHash('sha256')
    .update(JSON.stringify([at.location, Object.entries(at.storageOptions).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))]))
    .digest('hex')
    .slice(0, 32)}`;

/** A location registered with the resolver for a client outside this process (see withResolvedHandle). */
export interface ResolvedHandle {
  resolverUri: string;
  handle: string;
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify(body));
}

const wireVersion = (v: CoordinatedVersion) => ({
  version: v.version,
  manifest_path: v.manifestPath,
  ...(v.manifestSize !== undefined ? { manifest_size: v.manifestSize } : {}),
  ...(v.eTag !== undefined ? { e_tag: v.eTag } : {}),
  ...(v.timestampMillis !== undefined ? { timestamp_millis: v.timestampMillis } : {}),
});

/** Errors that say nothing about the handle: the request was wrong, not the dataset. */
const REQUEST_ERRORS: ReadonlySet<EngineErrorKind> = new Set([
  'invalid_input',
  'column_not_found',
  'index_not_found',
  'index_exists',
  'tag_not_found',
  'tag_exists',
  'branch_not_found',
  'branch_exists',
  'unsupported',
  'already_exists',
]);
const suggestsBadHandle = (e: unknown): boolean => !(e instanceof EngineError && REQUEST_ERRORS.has(e.kind));

/** A dataset the cache keeps open, and the resolver handle name it was opened by (registered while kept). */
interface KeptTable {
  table: Table;
  name: string;
  version(): Promise<number>;
  checkout(version: number): Promise<void>;
  close(): void;
}

/** The line of history a version call names: main (absent, null, "" or "main") or a branch. */
const lineOf = (branch: unknown): string | null => (typeof branch === 'string' && branch !== '' && branch !== 'main' ? branch : null);

export class TableAccess {
  private readonly kept: HandleCache<KeptTable>;

  private constructor(
    private readonly resolver: http.Server,
    /** Where the resolver listens, as a Lance Namespace REST client is pointed at it. */
    private readonly resolverUri: string,
    private readonly connection: Connection,
    /** The Lance session every dataset is opened under (see the header). */
    private readonly session: Session,
    /** Live handles; the resolver reads the same map. */
    private readonly handles: Map<string, Handle>,
    limits: HandleCacheLimits,
  ) {
    this.kept = new HandleCache(limits, suggestsBadHandle);
  }

  static async start(
    limits: HandleCacheLimits = DEFAULT_HANDLE_CACHE_LIMITS,
    session: LanceSessionLimits = DEFAULT_LANCE_SESSION_LIMITS,
  ): Promise<TableAccess> {
    const handles = new Map<string, Handle>();
    const resolver = http.createServer((req, res) => void TableAccess.resolve(handles, req, res));
    await new Promise<void>((resolve, reject) => {
      resolver.once('error', reject);
      resolver.listen(0, '127.0.0.1', () => resolve());
    });
    const resolverUri = `http://127.0.0.1:${(resolver.address() as AddressInfo).port}`;
    const lanceSession = new (lancedb().Session)(BigInt(session.indexCacheBytes), BigInt(session.metadataCacheBytes));
    const connection = await lancedb().connectNamespace('rest', { uri: resolverUri }, { session: lanceSession });
    return new TableAccess(resolver, resolverUri, connection, lanceSession, handles, limits);
  }

  private static async resolve(handles: Map<string, Handle>, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const url = new URL(req.url ?? '/', 'http://resolver');
    const match = /^\/v1\/table\/([^/]+)\/(describe|declare|version\/list|version\/describe|version\/create)$/.exec(url.pathname);
    const handle = match ? handles.get(decodeURIComponent(match[1] ?? ''))?.at : undefined;
    if (!match || !handle) {
      send(res, 404, { code: 4, error: 'unknown engine handle' });
      return;
    }
    const op = match[2];
    const coordinator = handle.coordinator;
    if (op === 'describe' || op === 'declare') {
      send(res, 200, { location: handle.location, storage_options: handle.storageOptions, managed_versioning: coordinator !== undefined });
      return;
    }
    if (!coordinator) {
      send(res, 406, { code: 0, error: 'this table does not have managed versioning' });
      return;
    }
    try {
      const text = Buffer.concat(chunks).toString('utf8').trim();
      const body = (text === '' || text === 'null' ? {} : JSON.parse(text)) as Record<string, unknown>;
      // The coordinator commits the handle's own line of history (main, or the branch it was opened
      // on); Lance working on a branch also asks for other lines (main's latest, first).
      const asked = lineOf(op === 'version/list' ? url.searchParams.get('branch') : body.branch);
      const line = asked === (handle.branch ?? null) ? coordinator : handle.coordinatorOn?.(asked);
      if (!line) {
        send(res, 406, { code: 0, error: `this handle commits ${handle.branch === undefined ? 'main' : `branch ${handle.branch}`}, not ${asked ?? 'main'}` });
        return;
      }
      if (op === 'version/list') {
        const latestOnly = url.searchParams.get('descending') === 'true' && url.searchParams.get('limit') === '1';
        const all = latestOnly ? [await line.latest()].filter((v): v is CoordinatedVersion => v !== null) : await line.list();
        if (url.searchParams.get('descending') === 'true') all.sort((a, b) => b.version - a.version);
        send(res, 200, { versions: all.map(wireVersion) });
      } else if (op === 'version/describe') {
        const asked = typeof body.version === 'number' ? body.version : undefined;
        const found = asked === undefined ? await line.latest() : await line.describe(asked);
        if (!found) send(res, 404, { code: 11, error: `version ${asked ?? 'latest'} not found` });
        else send(res, 200, { version: wireVersion(found) });
      } else {
        const created = await line.create({
          version: Number(body.version),
          manifestPath: String(body.manifest_path),
          ...(typeof body.manifest_size === 'number' ? { manifestSize: body.manifest_size } : {}),
          ...(typeof body.e_tag === 'string' ? { eTag: body.e_tag } : {}),
          ...(body.naming_scheme === 'V1' || body.naming_scheme === 'V2' ? { namingScheme: body.naming_scheme } : {}),
        });
        send(res, 200, { version: wireVersion(created) });
      }
    } catch (e) {
      const failure = classify(e);
      const outage = failure.kind === 'store_unreachable' || failure.kind === 'store_full';
      if (failure.kind === 'conflict') send(res, 409, { code: 14, error: failure.message });
      else if (outage) send(res, 503, { code: 17, error: failure.message });
      else send(res, 500, { code: 18, error: failure.message });
    }
  }

  private register(at: DatasetLocation): string {
    const shared = at.coordinator === undefined;
    const name = shared ? sharedName(at) : `h${randomBytes(8).toString('hex')}`;
    const registered = this.handles.get(name);
    if (registered) registered.users++;
    else this.handles.set(name, { at, users: 1, shared });
    return name;
  }

  private unregister(name: string): void {
    const registered = this.handles.get(name);
    if (registered && --registered.users === 0) this.handles.delete(name);
  }

  private async withHandle<T>(at: DatasetLocation, fn: (handle: string) => Promise<T>): Promise<T> {
    const handle = this.register(at);
    try {
      return await fn(handle);
    } finally {
      this.unregister(handle);
    }
  }

  /** Opens the dataset by a registered handle name, on `at.branch` (main when undefined), at `version` when given. */
  private async openTable(name: string, version: number | undefined, at?: DatasetLocation): Promise<Table> {
    if (at?.branch !== undefined) return this.openBranch(name, at, at.branch, version);
    let table: Table;
    try {
      table = await this.connection.openTable(name);
    } catch (e) {
      // Only a missing dataset is `not_a_dataset`; an unreachable store or a failing commit
      // coordinator stays an internal failure with its cause.
      throw classify(e);
    }
    if (version !== undefined) {
      try {
        await table.checkout(version);
      } catch (e) {
        table.close();
        // Whatever Lance calls it, a failed checkout of an existing dataset is a missing version.
        throw new EngineError('version_not_found', e instanceof Error ? e.message : String(e), { cause: e });
      }
    }
    return table;
  }

  /**
   * Opens the dataset on a branch (Lance reads `tree/<branch>/_versions/`), at `version` of that
   * branch when given. The service looked its ref up first, so a history that is not there is a
   * missing version (or a branch deleted meanwhile).
   */
  private async openBranch(name: string, at: DatasetLocation, branch: string, version: number | undefined): Promise<Table> {
    // Lance opens a branch by opening main's latest first (a LIST of _versions/ on S3, then the
    // branch's own): the branch's latest checked out from the main dataset kept open for the
    // location reads the branch's history alone. Only for a table without a coordinator: a kept
    // handle's version calls go to the coordinator of main's last request, and a branch of a
    // managed table commits through its own. Lance reads the branch afresh from the store, so the
    // kept handle's own version does not matter; should that fail, the branch is opened anew.
    if (version === undefined && at.coordinator === undefined && this.kept.enabled) {
      const fromMain = await this.kept
        .withKeptAsIs(branchKey(at.location, undefined), async (main) => (await main.table.branches()).checkout(branch))
        .catch(() => undefined);
      if (fromMain) return fromMain.value;
    }
    try {
      return await this.connection.openTable(name, undefined, version === undefined ? { branch } : { branch, version });
    } catch (e) {
      const failure = classify(e);
      if (failure.kind !== 'not_a_dataset') throw failure;
      const kind = version === undefined ? 'branch_not_found' : 'version_not_found';
      throw new EngineError(kind, e instanceof Error ? e.message : String(e), { cause: e });
    }
  }

  /** Opens the dataset (at `version` when given) for one operation and closes it afterwards. */
  private async withFreshTable<T>(at: DatasetLocation, fn: (table: Table) => Promise<T>, version: number | undefined): Promise<T> {
    return this.withHandle(at, async (name) => {
      const table = await this.openTable(name, version, at);
      try {
        return await fn(table);
      } finally {
        table.close();
      }
    });
  }

  /**
   * Runs a read on the dataset. At the latest version, and when the caller read the latest
   * committed version for this request (`at.latest`), the read runs on the dataset kept open for
   * the location (see handle-cache.ts), each branch's apart; otherwise on one opened for it.
   */
  async read<T>(at: DatasetLocation, fn: (table: Table) => Promise<T>, options: { version?: number | undefined } = {}): Promise<T> {
    const latest = at.latest;
    if (options.version !== undefined || latest === undefined || !this.kept.enabled) return this.withFreshTable(at, fn, options.version);
    return this.kept.use(
      branchKey(at.location, at.branch),
      latest,
      () => this.openKept(at),
      (kept) => {
        // The resolver answers the kept handle's version calls with the location of the request
        // that used it last (any request on the same table answers a read's calls the same), so
        // that it does not hold on to the first request's coordinator. A shared name keeps its
        // own: other operations use it too.
        const registered = this.handles.get(kept.name);
        if (registered && !registered.shared) registered.at = at;
        return fn(kept.table);
      },
    );
  }

  /**
   * Runs a write. An unmanaged table's on main at its latest runs on the dataset kept open for the
   * location when that is current and was opened under the location's shared name, as `at` would
   * be (handle-cache.ts: Writes); any other on a dataset opened for it (at `version` when given: a
   * restore). A handle that committed is current: with `at.latest` known, it becomes the
   * location's (or its branch's) kept handle, at the version `options.committed` reads off the
   * write's result when given (one native call fewer than asking the handle), else the handle's.
   */
  async write<T>(
    at: DatasetLocation,
    fn: (table: Table) => Promise<T>,
    options: { version?: number | undefined; committed?: (result: T) => number } = {},
  ): Promise<T> {
    const latest = at.latest;
    if (latest === undefined || !this.kept.enabled) return this.withFreshTable(at, fn, options.version);
    if (options.version === undefined && at.coordinator === undefined && at.branch === undefined) {
      const name = sharedName(at);
      const onKept = await this.kept.useToWrite(
        at.location,
        latest,
        (kept) => kept.name === name,
        (kept) => fn(kept.table),
        options.committed,
      );
      if (onKept) return onKept.value;
    }
    const name = this.register(at);
    let table: Table | undefined;
    let adopted = false;
    try {
      table = await this.openTable(name, options.version, at);
      const result = await fn(table);
      const version = options.committed ? options.committed(result) : await table.version().catch(() => undefined);
      if (version !== undefined) {
        // Checked out at a version (a restore), Lance may hold it read-only: not to be written through.
        const pinned = options.version !== undefined;
        this.kept.adopt(branchKey(at.location, at.branch), latest.incarnation, this.keptTable(table, name), version, latest.manifestSize, pinned);
        adopted = true;
      }
      return result;
    } finally {
      if (!adopted) {
        table?.close();
        this.unregister(name);
      }
    }
  }

  private async openKept(at: DatasetLocation): Promise<KeptTable> {
    const name = this.register(at);
    try {
      return this.keptTable(await this.openTable(name, undefined, at), name);
    } catch (e) {
      this.unregister(name);
      throw e;
    }
  }

  private keptTable(table: Table, name: string): KeptTable {
    return {
      table,
      name,
      version: () => table.version(),
      checkout: (version) => table.checkout(version),
      close: () => {
        table.close();
        this.unregister(name);
      },
    };
  }

  /** Closes the dataset kept open at the location, if any (its table was dropped, deregistered or renamed). */
  forget(location: string): void {
    this.kept.forget(location);
  }

  keptStats(): HandleCacheStats & { lanceCacheBytes: number } {
    return { ...this.kept.stats(), lanceCacheBytes: Number(this.session.sizeBytes()) };
  }

  /** Runs `fn` with a handle name for the location, for operations that create the dataset. */
  async withNewTable<T>(at: DatasetLocation, fn: (connection: Connection, handle: string) => Promise<T>): Promise<T> {
    return this.withHandle(at, (handle) => fn(this.connection, handle));
  }

  /**
   * Runs `fn` with the resolver's URI and a handle name registered for the location until `fn`
   * settles: a Lance client in another process (the UDF workers) opens the dataset as
   * `table_id=[handle]` through a REST namespace client pointed at the URI, and commits through the
   * location's commit coordinator like the engine's own writes.
   */
  async withResolvedHandle<T>(at: DatasetLocation, fn: (resolved: ResolvedHandle) => Promise<T>): Promise<T> {
    return this.withHandle(at, (handle) => fn({ resolverUri: this.resolverUri, handle }));
  }

  async close(): Promise<void> {
    this.kept.clear();
    // The tables just closed may hold the native connection a moment longer ("cannot be borrowed
    // mutably while another borrow is active"): close it once they have let go.
    for (let attempt = 0; ; attempt++) {
      try {
        this.connection.close();
        break;
      } catch (e) {
        if (attempt >= 50 || !/borrowed mutably/.test(e instanceof Error ? e.message : String(e))) throw e;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }
    // The client keeps its connections to the resolver alive; close them rather than wait them out.
    const closed = new Promise<void>((resolve) => this.resolver.close(() => resolve()));
    this.resolver.closeAllConnections();
    await closed;
  }
}
