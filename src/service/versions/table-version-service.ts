import { randomUUID } from 'node:crypto';
import { type CommitCoordinator, type CoordinatedVersion, EngineError } from '../../engine/lance-engine.js';
import { ErrorCode, invalidInput, NamespaceError } from '../../model/errors.js';
import type {
  BatchCommitTablesResponse,
  BatchCreateTableVersionsResponse,
  BatchDeleteTableVersionsRequest,
  BatchDeleteTableVersionsResponse,
  CommitTableOperation,
  CommitTableResult,
  CreateTableVersionEntry,
  CreateTableVersionResponse,
  DescribeTableVersionResponse,
  ListTableVersionsResponse,
  TableVersion,
} from '../../model/versions.js';
import { listAll, PreconditionFailedError } from '../../store/object-store.js';
import { type CatalogDeps, createInNamespace, displayId, resolveManagedVersioning } from '../catalog/catalog.js';
import type { ServiceLogger } from '../logger.js';
import { faultPoint } from '../fault-points.js';
import { type Marker, Poller, pollIntervalMs, UnfinishedMarkers } from '../coordination/markers.js';
import { ListingIndex } from '../catalog/listing-index.js';
import { CATALOG_DIR, deregisteredMarkerKey, reservedMarkerKey, tableDirKey, tableRecordKey, tableRefOf } from '../catalog/layout.js';
import type { ManifestNamingScheme } from '../../engine/lance-format/manifest-names.js';
import type { PageRequest } from '../catalog/namespace-service.js';
import { paginate } from '../catalog/page-token.js';
import type { RequestContext } from '../request-context.js';
import { dataDir, incarnationOf, isVisible, readTableState, requireVisibleTable, type TableState, tableNotFound } from '../tables/table-state.js';
import { type CommittedVersion, type Reservation, TableVersions } from './dataset-versions.js';
import { type BatchEntry, type TableOp, type TransactionLog, type TransactionRecord } from '../transactions/transaction-log.js';
import { encodeRecord, readRecord, TableRecord, type Versioned } from '../catalog/records.js';
import { requireMainBranch } from '../catalog/catalog.js';

// The service as commit coordinator of Lance tables.
//
// Invariants:
// - A version is committed by one create-if-absent of its final manifest name, so an
//   acknowledged version is never overwritten and of two writers of one version exactly one wins
//   (the other gets 409 code 14 and Lance rebases).
// - Only version latest + 1 may be created, so the history has no gaps.
// - Only a staged manifest is ever consumed: a staging name under the dataset's `_versions/`
//   holding a Lance manifest of the requested version (TableVersions.stagedKey, readStaged),
//   checked before any reservation, record or marker is written, so a create can never delete a
//   committed manifest, a data file, an index or a record.
// - Every writer of version v, single or batch, first holds v's reservation (create-if-absent of
//   `_catalog/reservations/v`). A batch claims all its slots, then flips its transaction record to
//   `committing` (the commit point, a replace-if-unchanged), then writes the manifests. Before the
//   commit point a crash leaves only reservations, which are rolled back once the lease expires;
//   after it, whoever finds the record (a later request, a restart, another replica) rolls it
//   forward from the staged manifests, which are deleted only once the record says Succeeded.
// - A batch writes its marker (`_catalog/batches/<id>.json`) before its record, so before it
//   claims anything, and removes it only once the batch is done and cleaned up. Every replica
//   polls the markers and finishes each batch whose lease has run out (rolled back before its
//   commit point, forward after it), so a batch whose coordinator died never keeps a table name
//   or a version slot for longer than its lease plus a poll interval, without any restart.

export interface VersionSettings {
  /** How long a reservation or an unfinished batch is trusted before it is presumed dead. */
  leaseMs: number;
  /** How often unfinished batches are looked for (default: derived from the lease, see pollIntervalMs). */
  pollMs?: number;
}

const BATCH_MARKERS = `${CATALOG_DIR}/batches/`;

const conflict = (message: string) => new NamespaceError(ErrorCode.ConcurrentModification, message);
const versionNotFound = (id: string[], version: number) =>
  new NamespaceError(ErrorCode.TableVersionNotFound, `table ${displayId(id)} has no version ${version}`);

const ignorePrecondition = (e: unknown): void => {
  if (!(e instanceof PreconditionFailedError)) throw e;
};

const inRanges = (version: number, ranges: Array<{ start_version: number; end_version: number }>): boolean =>
  ranges.some((r) => version >= r.start_version && (r.end_version === -1 || version < r.end_version));

/** A version create request resolved against its table. */
interface PlannedVersion {
  entry: BatchEntry;
  versions: TableVersions;
  /** The staged bytes as validated (a Lance manifest of entry.version); null when the staged file is gone. */
  staged?: Buffer | null;
}

/** Longest a writer waits for another writer's hold on the same version slot. */
const MAX_SLOT_WAIT_MS = 10_000;

export class TableVersionService {
  /** Single commits in flight in this process, by reservation key: waiters await them instead of polling. */
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Batches this process coordinates right now: the poller leaves them to their coordinator. */
  private readonly coordinating = new Set<string>();
  private readonly markers: UnfinishedMarkers;
  /** The listing index of table names, which batch declares and deregisters change (see catalog/listing-index.ts). */
  private readonly tableIndex: ListingIndex;
  private poller: Poller | undefined;

  constructor(
    private readonly deps: CatalogDeps,
    private readonly log: TransactionLog,
    private readonly settings: VersionSettings,
    private readonly logger?: ServiceLogger,
  ) {
    this.markers = new UnfinishedMarkers(deps.store, BATCH_MARKERS);
    this.tableIndex = new ListingIndex(deps.store, deps.locations, deps.settings.leaseMs);
  }

  private async tableVersions(id: string[], requestId?: string, resolved?: TableState): Promise<TableVersions> {
    return (await this.table(id, requestId, resolved)).versions;
  }

  /**
   * The table's versions. `resolved` is the table as a request holding a write lease on it
   * resolved it (a drop waits for that request, so its commits still land); `requestId` also
   * finds a table that request is creating (its first commit goes through here).
   */
  private async table(id: string[], requestId?: string, resolved?: TableState): Promise<{ versions: TableVersions; state: TableState }> {
    const state = resolved ?? (await requireVisibleTable(this.deps.store, tableRefOf(id), requestId));
    return { versions: new TableVersions(dataDir(this.deps.locations, state)), state };
  }

  private async toWire(versions: TableVersions, committed: CommittedVersion[]): Promise<TableVersion[]> {
    const sidecars = await versions.readSidecars(committed.map((c) => c.version));
    return committed.map((c) => {
      const sidecar = sidecars.get(c.version);
      return {
        version: c.version,
        manifest_path: versions.manifestPath(c.key),
        manifest_size: sidecar?.manifest_size ?? c.size,
        e_tag: sidecar?.e_tag ?? c.etag,
        timestamp_millis: sidecar ? Date.parse(sidecar.committed_at) : c.lastModified.getTime(),
        metadata: sidecar?.metadata ?? {},
      };
    });
  }

  private lease(transactionId?: string): Reservation {
    const now = Date.now();
    return {
      ...(transactionId ? { transaction_id: transactionId } : {}),
      created_at: new Date(now).toISOString(),
      expires_at: new Date(now + this.settings.leaseMs).toISOString(),
    };
  }

  /**
   * Resolves a version request against its table. Without a naming scheme in the request, the
   * scheme of the latest version is used: `latest` when the caller already looked it up, else
   * one lookup here.
   */
  private async plan(id: string[], request: Omit<CreateTableVersionEntry, 'id'>, known?: { versions: TableVersions; latest: CommittedVersion | null }): Promise<PlannedVersion> {
    requireMainBranch(request.branch);
    const { versions } = known ?? (await this.table(id));
    const stagedKey = versions.stagedKey(request.manifest_path);
    let scheme: ManifestNamingScheme | undefined = request.naming_scheme ?? undefined;
    if (!scheme) scheme = (known ? known.latest : await versions.latest())?.scheme ?? 'V2';
    return {
      versions,
      entry: {
        table_id: id,
        location: versions.store.location(versions.dir.key),
        version: request.version,
        staged_key: stagedKey,
        final_key: versions.finalKey(request.version, scheme),
        naming_scheme: scheme,
        ...(request.manifest_size !== undefined && request.manifest_size !== null ? { manifest_size: request.manifest_size } : {}),
        ...(request.e_tag ? { e_tag: request.e_tag } : {}),
        ...(request.metadata ? { metadata: request.metadata } : {}),
      },
    };
  }

  /**
   * Claims version slot v for a writer. A slot held past its lease by a writer that died is taken
   * over with a replace-if-unchanged; a slot held by a batch is first resolved (the batch rolled
   * forward or back), which may free it. A slot held by a live writer is waited for, up to
   * MAX_SLOT_WAIT_MS: a loser must be answered only once the winner's version is visible, because
   * a Lance client that gets 409 asks for that version to learn whether its own commit landed.
   */
  private async claimSlot(versions: TableVersions, version: number, reservation: Reservation): Promise<boolean> {
    const deadline = Date.now() + MAX_SLOT_WAIT_MS;
    let delay = 2;
    for (;;) {
      if (await versions.claim(version, reservation)) return true;
      const held = await versions.readReservation(version);
      if (!held) continue; // released meanwhile
      const holder = held.value.transaction_id;
      if (holder && holder !== reservation.transaction_id) {
        await this.recover(holder);
      } else if (Date.parse(held.value.expires_at) < Date.now()) {
        if (await versions.claim(version, reservation, held.etag)) return true;
        continue;
      }
      if (Date.now() > deadline) return false;
      const local = this.inFlight.get(versions.reservationKey(version));
      if (local) await local;
      else {
        // Held by another replica (or a batch): poll with backoff until it is released.
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 50);
      }
    }
  }

  private stagedMissing(p: PlannedVersion): NamespaceError {
    return invalidInput(`staged manifest ${JSON.stringify(p.versions.manifestPath(p.entry.staged_key))} does not exist`);
  }

  /** Checks that the planned versions of one table are exactly latest + 1, latest + 2, ... */
  private async checkNext(planned: PlannedVersion[]): Promise<void> {
    const byTable = new Map<string, PlannedVersion[]>();
    for (const p of planned) byTable.set(p.entry.location, [...(byTable.get(p.entry.location) ?? []), p]);
    for (const group of byTable.values()) {
      const first = group[0];
      if (!first) continue;
      const latest = (await first.versions.latest())?.version ?? 0;
      group.sort((a, b) => a.entry.version - b.entry.version);
      group.forEach((p, i) => {
        if (p.entry.version !== latest + 1 + i) {
          throw conflict(`table ${displayId(p.entry.table_id)}: version ${p.entry.version} is not the next version (the latest is ${latest})`);
        }
      });
    }
  }

  /**
   * Copies the staged manifest to its final name with create-if-absent. Finding the final name
   * already holding the same bytes is success (a retry, or a roll-forward after a crash).
   */
  private async writeManifest(p: PlannedVersion, transactionId?: string): Promise<CommittedVersion> {
    const { entry, versions } = p;
    const staged = p.staged !== undefined ? p.staged : ((await versions.store.get(entry.staged_key))?.body ?? null);
    let committed: CommittedVersion | null = null;
    if (staged) {
      try {
        const info = await versions.store.put(entry.final_key, staged, { ifNoneMatch: '*' });
        committed = { version: entry.version, scheme: entry.naming_scheme, key: info.key, size: info.size, etag: info.etag, lastModified: info.lastModified };
      } catch (e) {
        if (!(e instanceof PreconditionFailedError)) throw e;
        const existing = await versions.store.get(entry.final_key);
        if (!existing || !existing.body.equals(staged)) {
          throw conflict(`table ${displayId(entry.table_id)}: version ${entry.version} was already committed with another manifest`);
        }
      }
    }
    committed ??= await versions.get(entry.version, entry.naming_scheme);
    if (!committed) throw this.stagedMissing(p);
    // The commit time is the sidecar's, so that every answer about this version agrees on it
    // (object stores report modification times in whole seconds).
    const committedAt = new Date();
    await versions.writeSidecar({
      version: entry.version,
      ...(entry.manifest_size !== undefined ? { manifest_size: entry.manifest_size } : {}),
      ...(entry.e_tag !== undefined ? { e_tag: entry.e_tag } : {}),
      ...(entry.metadata !== undefined ? { metadata: entry.metadata } : {}),
      naming_scheme: entry.naming_scheme,
      committed_at: committedAt.toISOString(),
      ...(transactionId ? { transaction_id: transactionId } : {}),
    });
    committed = { ...committed, lastModified: committedAt };
    // Lance's hint serves readers that cannot list cheaply: V1 tables, and local disks.
    if (entry.naming_scheme === 'V1' || versions.store.listsWholeDirectory) await versions.writeHint(entry.version);
    return committed;
  }

  async create(
    ctx: RequestContext,
    id: string[],
    request: Omit<CreateTableVersionEntry, 'id'>,
    resolved?: TableState,
  ): Promise<CreateTableVersionResponse> {
    requireMainBranch(request.branch);
    const { versions, state } = await this.table(id, ctx.requestId, resolved);
    // Only a staged Lance manifest of this version is ever consumed; checked before anything is written.
    const staged = await versions.readStaged(versions.stagedKey(request.manifest_path), request.version);
    const reservation = this.lease();
    if (!(await this.claimSlot(versions, request.version, reservation))) {
      throw conflict(`table ${displayId(id)}: version ${request.version} is being committed by another writer`);
    }
    const slotKey = versions.reservationKey(request.version);
    let settled = () => {};
    this.inFlight.set(slotKey, new Promise<void>((resolve) => (settled = resolve)));
    try {
      // Holding the slot, look again: a drop that began after the table was resolved either sees
      // this reservation and waits for the commit, or is seen here (see table-fences.ts).
      if (!resolved && incarnationOf((await this.table(id, ctx.requestId)).state) !== incarnationOf(state)) throw tableNotFound(id);
      // One lookup of the latest version, while holding the slot, decides everything.
      const latest = await versions.latest();
      const p = { ...(await this.plan(id, request, { versions, latest })), staged };
      const { entry } = p;
      const next = (latest?.version ?? 0) + 1;
      if (entry.version > next) {
        throw conflict(`table ${displayId(id)}: version ${entry.version} is not the next version (the latest is ${latest?.version ?? 0})`);
      }
      const retried = entry.version < next ? await this.acceptRetry(p) : null;
      const committed = retried ?? (await this.writeManifest(p));
      await versions.store.delete(entry.staged_key);
      // A declared table that now has data is declared no more (Lance's marker goes with the first version).
      if (state.reserved) await this.deps.store.delete(reservedMarkerKey(state.ref));
      const [known] = retried ? await this.toWire(versions, [retried]) : [];
      return { version: known ?? this.wireOfEntry(versions, entry, committed) };
    } finally {
      // Release only our own hold: past its lease another writer may have taken the slot over.
      const held = await versions.readReservation(request.version);
      if (held && !held.value.transaction_id && held.value.created_at === reservation.created_at) await versions.release(request.version);
      this.inFlight.delete(slotKey);
      settled();
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
    const staged = p.staged !== undefined ? p.staged : ((await versions.store.get(entry.staged_key))?.body ?? null);
    if (staged) {
      const final = await versions.store.get(existing.key);
      if (!final || !staged.equals(final.body)) throw taken();
    } else {
      // Without the staged bytes, only a positive match makes it this request's version: the
      // e_tag recorded at commit when both sides have one, else the size; nothing to match is a 409.
      const sidecar = (await versions.readSidecars([entry.version])).get(entry.version);
      const etagKnown = entry.e_tag !== undefined && sidecar?.e_tag !== undefined;
      const same = etagKnown ? sidecar?.e_tag === entry.e_tag : entry.manifest_size !== undefined && entry.manifest_size === existing.size;
      if (!same) throw taken();
    }
    return existing;
  }

  /** The TableVersion of a version this request just committed, without reading it back. */
  private wireOfEntry(versions: TableVersions, entry: BatchEntry, committed: CommittedVersion): TableVersion {
    return {
      version: committed.version,
      manifest_path: versions.manifestPath(committed.key),
      manifest_size: entry.manifest_size ?? committed.size,
      e_tag: entry.e_tag ?? committed.etag,
      timestamp_millis: committed.lastModified.getTime(),
      metadata: entry.metadata ?? {},
    };
  }

  async describe(_ctx: RequestContext, id: string[], version: number | null | undefined, branch?: string | null): Promise<DescribeTableVersionResponse> {
    requireMainBranch(branch);
    const versions = await this.tableVersions(id);
    const committed = version === undefined || version === null ? await versions.latest() : await versions.get(version);
    if (!committed) {
      if (version === undefined || version === null) throw new NamespaceError(ErrorCode.TableVersionNotFound, `table ${displayId(id)} has no versions`);
      throw versionNotFound(id, version);
    }
    const [wire] = await this.toWire(versions, [committed]);
    if (!wire) throw versionNotFound(id, committed.version);
    return { version: wire };
  }

  async list(
    _ctx: RequestContext,
    id: string[],
    page: PageRequest & { descending?: boolean | null | undefined; branch?: string | null | undefined },
  ): Promise<ListTableVersionsResponse> {
    requireMainBranch(page.branch);
    const scope = JSON.stringify(id);
    const afterToken = this.deps.pageTokens.decode('versions', scope, page.pageToken);
    const versions = await this.tableVersions(id);
    const descending = page.descending ?? false;
    let ordered: CommittedVersion[];
    if (descending && page.limit === 1 && afterToken === undefined) {
      // The commit path of every Lance client: constant cost on V2 tables.
      const latest = await versions.latest();
      const next = latest ? await this.hasOlder(versions, latest.version) : false;
      ordered = latest ? [latest] : [];
      const pageToken = next && latest ? this.deps.pageTokens.encode('versions', scope, String(latest.version)) : null;
      return { versions: await this.toWire(versions, ordered), page_token: pageToken };
    }
    ordered = await versions.all();
    if (descending) ordered.reverse();
    if (afterToken !== undefined && afterToken !== '') {
      const after = Number(afterToken);
      ordered = ordered.filter((v) => (descending ? v.version < after : v.version > after));
    }
    const { page: slice, pageToken } = paginate(ordered, { limit: page.limit, currentToken: page.pageToken }, (v) => String(v.version), (last) =>
      this.deps.pageTokens.encode('versions', scope, last),
    );
    return { versions: await this.toWire(versions, slice), page_token: pageToken };
  }

  private async hasOlder(versions: TableVersions, version: number): Promise<boolean> {
    return version > 0 && (await versions.get(version - 1)) !== null;
  }

  /** Deletes the manifests of the versions in the ranges ([start, end), end -1 = through the latest). */
  async batchDelete(_ctx: RequestContext, id: string[], request: BatchDeleteTableVersionsRequest): Promise<BatchDeleteTableVersionsResponse> {
    requireMainBranch(request.branch);
    for (const r of request.ranges) {
      if (r.end_version !== -1 && r.end_version < r.start_version) {
        throw invalidInput(`ranges: end_version ${r.end_version} is before start_version ${r.start_version}`);
      }
    }
    const versions = await this.tableVersions(id);
    const doomed = (await versions.all()).filter((v) => inRanges(v.version, request.ranges));
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

  /**
   * Commits versions of several tables atomically: all or none, also across a crash at any step.
   * See the invariants at the top of this file.
   */
  async batchCreate(_ctx: RequestContext, entries: CreateTableVersionEntry[]): Promise<BatchCreateTableVersionsResponse> {
    const planned: PlannedVersion[] = [];
    for (const e of entries) planned.push(await this.plan(e.id, e));
    const { transactionId, committed } = await this.runBatch('batch_create_table_versions', planned, []);
    return { versions: await this.wireOf(planned, committed), transaction_id: transactionId };
  }

  /**
   * Applies declare / create-version / delete-versions / deregister operations on any tables
   * together: all or none, with the same protocol as batchCreate. A declare claims its table name
   * with a record marked pending on this transaction, invisible until the commit point; the other
   * changes are made only after it.
   */
  async batchCommit(_ctx: RequestContext, operations: CommitTableOperation[]): Promise<BatchCommitTablesResponse> {
    const planned: PlannedVersion[] = [];
    const ops: TableOp[] = [];
    const declared = new Set<string>();
    for (const op of operations) {
      if (op.declare_table) {
        const ref = tableRefOf(op.declare_table.id);
        const own = this.deps.locations.own(tableDirKey(ref));
        if (op.declare_table.location && op.declare_table.location.trim() !== '') {
          const asked = this.deps.locations.resolve(op.declare_table.location);
          if (asked.store !== own.store || asked.key !== own.key) throw invalidInput(`declare_table: location must be the table's directory ${own.store.location(own.key)}`);
        }
        const properties = op.declare_table.properties ?? {};
        ops.push({ kind: 'declare', table_id: op.declare_table.id, properties, managed_versioning: await resolveManagedVersioning(this.deps, ref.namespace, properties) });
        declared.add(JSON.stringify(op.declare_table.id));
      } else if (op.create_table_version) {
        const request = op.create_table_version;
        const newTable = declared.has(JSON.stringify(request.id));
        planned.push(newTable ? this.planNewTable(request.id, request) : await this.plan(request.id, request));
      } else if (op.delete_table_versions) {
        const { id, ranges, branch } = op.delete_table_versions;
        requireMainBranch(branch);
        const versions = await this.tableVersions(id);
        const doomed = (await versions.all()).filter((v) => inRanges(v.version, ranges));
        ops.push({ kind: 'delete_versions', table_id: id, location: versions.store.location(versions.dir.key), versions: doomed.map((v) => ({ version: v.version, key: v.key })) });
      } else if (op.deregister_table) {
        await requireVisibleTable(this.deps.store, tableRefOf(op.deregister_table.id));
        ops.push({ kind: 'deregister', table_id: op.deregister_table.id });
      }
    }
    const { transactionId, committed } = await this.runBatch('batch_commit_tables', planned, ops);
    const versions = await this.wireOf(planned, committed);
    let v = 0;
    let o = 0;
    const results: CommitTableResult[] = [];
    for (const op of operations) {
      if (op.create_table_version) {
        const version = versions[v++];
        if (version) results.push({ create_table_version: { version } });
        continue;
      }
      const applied = ops[o++];
      if (applied?.kind === 'declare') {
        const own = this.deps.locations.own(tableDirKey(tableRefOf(applied.table_id)));
        results.push({
          declare_table: {
            location: own.store.location(own.key),
            properties: applied.properties,
            managed_versioning: applied.managed_versioning,
            storage_options: own.store.clientStorageOptions(),
          },
        });
      } else if (applied?.kind === 'delete_versions') results.push({ delete_table_versions: { deleted_count: applied.versions.length } });
      else if (applied?.kind === 'deregister') {
        const own = this.deps.locations.own(tableDirKey(tableRefOf(applied.table_id)));
        results.push({ deregister_table: { id: applied.table_id, location: own.store.location(own.key), properties: null } });
      }
    }
    return { results, transaction_id: transactionId };
  }

  /** A version of a table this batch declares: it has no record yet, so no state to read. */
  private planNewTable(id: string[], request: Omit<CreateTableVersionEntry, 'id'>): PlannedVersion {
    requireMainBranch(request.branch);
    const versions = new TableVersions(this.deps.locations.own(tableDirKey(tableRefOf(id))));
    const scheme = request.naming_scheme ?? 'V2';
    return {
      versions,
      entry: {
        table_id: id,
        location: versions.store.location(versions.dir.key),
        version: request.version,
        staged_key: versions.stagedKey(request.manifest_path),
        final_key: versions.finalKey(request.version, scheme),
        naming_scheme: scheme,
        ...(request.manifest_size !== undefined && request.manifest_size !== null ? { manifest_size: request.manifest_size } : {}),
        ...(request.e_tag ? { e_tag: request.e_tag } : {}),
        ...(request.metadata ? { metadata: request.metadata } : {}),
      },
    };
  }

  private async wireOf(planned: PlannedVersion[], committed: Map<string, CommittedVersion>): Promise<TableVersion[]> {
    const wire: TableVersion[] = [];
    for (const p of planned) {
      const c = committed.get(`${p.entry.location}#${p.entry.version}`);
      if (c) wire.push(...(await this.toWire(p.versions, [c])));
    }
    return wire;
  }

  /** The batch protocol (see the invariants at the top of this file). */
  private async runBatch(
    operation: string,
    planned: PlannedVersion[],
    ops: TableOp[],
  ): Promise<{ transactionId: string; committed: Map<string, CommittedVersion> }> {
    const seen = new Set<string>();
    for (const p of planned) {
      const slot = `${p.entry.location}#${p.entry.version}`;
      if (seen.has(slot)) throw invalidInput(`version ${p.entry.version} of table ${displayId(p.entry.table_id)} appears twice`);
      seen.add(slot);
    }
    // Every staged file must be a Lance manifest of its version before the batch claims anything.
    for (const p of planned) {
      if ((await p.versions.readStaged(p.entry.staged_key, p.entry.version)) === null) throw this.stagedMissing(p);
    }
    const transactionId = this.log.newId();
    this.coordinating.add(transactionId);
    try {
      // The marker first: a batch that dies at any later step is found and finished by a poller.
      await this.markers.add(transactionId);
      return await this.coordinate(transactionId, operation, planned, ops);
    } finally {
      this.coordinating.delete(transactionId);
    }
  }

  private async coordinate(
    transactionId: string,
    operation: string,
    planned: PlannedVersion[],
    ops: TableOp[],
  ): Promise<{ transactionId: string; committed: Map<string, CommittedVersion> }> {
    const now = new Date().toISOString();
    const tables = [...planned.map((p) => p.entry.table_id), ...ops.map((o) => o.table_id)];
    let record = await this.log.create({
      id: transactionId,
      status: 'Running',
      operation,
      phase: 'reserving',
      properties: {
        operation,
        tables: [...new Set(tables.map((t) => t.join('$')))].join(','),
        ...(planned.length > 0 ? { versions: planned.map((p) => String(p.entry.version)).join(',') } : {}),
      },
      entries: planned.map((p) => p.entry),
      ...(ops.length > 0 ? { table_ops: ops } : {}),
      created_at: now,
      updated_at: now,
      lease_until: new Date(Date.now() + this.settings.leaseMs).toISOString(),
    });
    faultPoint('batch:after-record');
    // A fixed order of claims: two overlapping batches cannot each hold a slot the other needs forever.
    const order = [...planned].sort((a, b) => (a.entry.location < b.entry.location ? -1 : a.entry.location > b.entry.location ? 1 : a.entry.version - b.entry.version));
    try {
      for (const op of ops) if (op.kind === 'declare') await this.claimName(op, transactionId);
      for (const [i, p] of order.entries()) {
        if (!(await this.claimSlot(p.versions, p.entry.version, this.lease(transactionId)))) {
          throw conflict(`table ${displayId(p.entry.table_id)}: version ${p.entry.version} is being committed by another writer`);
        }
        faultPoint(`batch:after-reserve-${i}`);
      }
      await this.checkNext(planned);
      for (const p of planned) {
        if (!(await p.versions.store.head(p.entry.staged_key))) throw this.stagedMissing(p);
      }
      faultPoint('batch:before-commit-point');
      const committing = await this.log.update(record, { ...record.value, phase: 'committing' });
      if (!committing) throw conflict(`transaction ${transactionId} was rolled back while it was being prepared`);
      record = committing;
    } catch (e) {
      await this.rollBack(record);
      throw e;
    }
    faultPoint('batch:after-commit-point');
    return { transactionId, committed: await this.rollForward(record) };
  }

  /** Claims a table name for a declare in a batch: its record, pending on the transaction. */
  private async claimName(op: Extract<TableOp, { kind: 'declare' }>, transactionId: string): Promise<void> {
    const ref = tableRefOf(op.table_id);
    const state = await readTableState(this.deps.store, ref);
    // Staged manifests may already sit in the directory; a record (the claim) or data may not.
    if (isVisible(state) || state.deregistered) throw new NamespaceError(ErrorCode.TableAlreadyExists, `table ${displayId(op.table_id)} already exists`);
    const key = tableRecordKey(ref);
    const record: TableRecord = {
      properties: op.properties,
      created_at: new Date().toISOString(),
      managed_versioning: op.managed_versioning,
      pending_transaction: transactionId,
      incarnation: randomUUID(),
    };
    // The listing index hears of the name once the batch is applied or undone (applyTableOps, undoTableOps).
    await this.tableIndex.begin('table', ref, transactionId);
    try {
      await createInNamespace(this.deps.store, ref.namespace, () => this.deps.store.put(key, encodeRecord(record), { ifNoneMatch: '*' }), () => this.deps.store.delete(key));
    } catch (e) {
      if (e instanceof PreconditionFailedError) throw new NamespaceError(ErrorCode.TableAlreadyExists, `table ${displayId(op.table_id)} already exists`);
      throw e;
    }
    // A dropped table's directory is cleared for the new one, but for the manifests staged for it.
    if (state.dropped) {
      const staging = new TableVersions(this.deps.locations.own(state.dirKey));
      const marker = deregisteredMarkerKey(ref);
      for (const o of (await listAll(this.deps.store, state.dirKey)).objects) {
        if (o.key !== key && o.key !== marker && !staging.isStagingKey(o.key)) await this.deps.store.delete(o.key);
      }
      await this.deps.store.delete(marker);
    }
  }

  /** Applies the table operations of a committed batch. Idempotent. */
  private async applyTableOps(record: TransactionRecord): Promise<void> {
    for (const op of record.table_ops ?? []) {
      const ref = tableRefOf(op.table_id);
      if (op.kind !== 'delete_versions') await this.tableIndex.begin('table', ref, record.id);
      if (op.kind === 'declare') {
        const current = await readRecord(this.deps.store, tableRecordKey(ref), TableRecord);
        if (current?.value.pending_transaction === record.id) {
          const { pending_transaction: _pending, ...settled } = current.value;
          await this.deps.store.put(tableRecordKey(ref), encodeRecord(settled), { ifMatch: current.etag }).catch(ignorePrecondition);
        }
        await this.deps.store.put(reservedMarkerKey(ref), '', { ifNoneMatch: '*' }).catch(ignorePrecondition);
      } else if (op.kind === 'delete_versions') {
        const versions = new TableVersions(this.deps.locations.resolve(op.location));
        for (const v of op.versions) {
          await versions.store.delete(v.key);
          await versions.store.delete(versions.sidecarKey(v.version));
        }
      } else {
        await this.deps.store.put(deregisteredMarkerKey(ref), '', { ifNoneMatch: '*' }).catch(ignorePrecondition);
      }
      if (op.kind !== 'delete_versions') await this.tableIndex.settleOp('table', ref, record.id);
    }
  }

  /** Undoes what an abandoned batch claimed for its table operations: its pending table records. */
  private async undoTableOps(record: TransactionRecord): Promise<void> {
    for (const op of record.table_ops ?? []) {
      if (op.kind !== 'declare') continue;
      const key = tableRecordKey(tableRefOf(op.table_id));
      const current = await readRecord(this.deps.store, key, TableRecord);
      if (current?.value.pending_transaction === record.id) await this.deps.store.delete(key);
      await this.tableIndex.settleOp('table', tableRefOf(op.table_id), record.id);
    }
  }

  private planFromEntry(entry: BatchEntry): PlannedVersion {
    return { entry, versions: new TableVersions(this.deps.locations.resolve(entry.location)) };
  }

  /** Finishes a batch past its commit point: manifests, then Succeeded, then cleanup. Idempotent. */
  private async rollForward(record: Versioned<TransactionRecord>): Promise<Map<string, CommittedVersion>> {
    const committed = new Map<string, CommittedVersion>();
    for (const [i, entry] of (record.value.entries ?? []).entries()) {
      const p = this.planFromEntry(entry);
      committed.set(`${entry.location}#${entry.version}`, await this.writeManifest(p, record.value.id));
      faultPoint(`batch:after-manifest-${i}`);
    }
    await this.applyTableOps(record.value);
    let current: Versioned<TransactionRecord> | null = record;
    while (current && current.value.phase !== 'done') {
      const done = await this.log.update(current, { ...current.value, status: 'Succeeded', phase: 'done' });
      current = done ?? (await this.log.read(record.value.id));
    }
    faultPoint('batch:after-succeeded');
    if (current) await this.finish(current);
    else await this.cleanUpVanished(record.value, true);
    return committed;
  }

  /** Abandons a batch before its commit point: Failed, then its reservations go. */
  private async rollBack(record: Versioned<TransactionRecord>): Promise<void> {
    let current: Versioned<TransactionRecord> | null = record;
    while (current && current.value.phase === 'reserving') {
      const failed = await this.log.update(current, { ...current.value, status: 'Failed', phase: 'done' });
      current = failed ?? (await this.log.read(record.value.id));
    }
    if (current?.value.phase === 'committing') {
      await this.rollForward(current); // a recoverer pushed it past the commit point
      return;
    }
    if (current) await this.finish(current);
    else await this.cleanUpVanished(record.value, false);
  }

  /** Clean-up of a batch whose record is gone (removed by hand): nothing is left to mark. */
  private async cleanUpVanished(record: TransactionRecord, succeeded: boolean): Promise<void> {
    await this.cleanUp(record, succeeded);
    await this.markers.remove(record.id);
  }

  /**
   * Cleans up after a `done` batch, then marks its record cleaned_up. Without the mark, start-up
   * recovery (which skips finished records) could not tell a batch that crashed between `done`
   * and its clean-up: its reservations would stay forever and, if it succeeded, so would its
   * staged manifests. Losing the race to mark the record means another finisher marked it.
   */
  private async finish(record: Versioned<TransactionRecord>): Promise<void> {
    await this.cleanUp(record.value, record.value.status === 'Succeeded');
    if (!record.value.cleaned_up) await this.log.update(record, { ...record.value, cleaned_up: true });
    await this.markers.remove(record.value.id);
  }

  /**
   * Releases the reservations a finished transaction still holds; deletes its staged manifests if
   * it succeeded. The caller removes the marker, or (finish) first marks the record cleaned up;
   * a record gone meanwhile leaves the marker to go here.
   */
  private async cleanUp(record: TransactionRecord, succeeded: boolean): Promise<void> {
    if (!succeeded) await this.undoTableOps(record);
    for (const entry of record.entries ?? []) {
      const { versions } = this.planFromEntry(entry);
      if (succeeded) await versions.store.delete(entry.staged_key);
      const held = await versions.readReservation(entry.version);
      if (held?.value.transaction_id === record.id) await versions.release(entry.version);
    }
  }

  /**
   * Brings a transaction found unfinished to an end: past the commit point it is rolled forward;
   * before it, once its lease has expired, rolled back. A live coordinator is left alone.
   */
  async recover(transactionId: string): Promise<void> {
    const record = await this.log.read(transactionId);
    if (!record || !record.value.entries) return;
    const { phase } = record.value;
    if (phase === 'committing') await this.rollForward(record);
    else if (phase === 'reserving') {
      const lease = record.value.lease_until ? Date.parse(record.value.lease_until) : 0;
      if (lease < Date.now()) await this.rollBack(record);
    } else await this.finish(record);
  }

  /** Recovers every unfinished transaction; run at start-up. Returns how many were looked at, and those that failed. */
  async recoverAll(): Promise<{ count: number; failures: Array<{ id: string; error: unknown }> }> {
    let count = 0;
    const failures: Array<{ id: string; error: unknown }> = [];
    for (const id of await this.log.ids()) {
      // One record that cannot be finished must not keep the service from starting.
      try {
        const record = await this.log.read(id);
        // A `done` batch not yet cleaned up crashed before its clean-up: finish that too.
        if (record?.value.entries && (record.value.phase !== 'done' || !record.value.cleaned_up)) {
          count++;
          await this.recover(id);
          // A batch still within its lease (a live coordinator elsewhere, or one written by a
          // version without markers) is left to the pollers: make sure they can find it.
          const after = await this.log.read(id);
          if (after && !this.isFinished(after.value)) await this.markers.add(id);
        }
      } catch (error) {
        failures.push({ id, error });
      }
    }
    return { count, failures };
  }

  private isFinished(record: TransactionRecord): boolean {
    return record.phase === 'done' && record.cleaned_up === true;
  }

  /** Starts polling for batches whose coordinator died (every replica runs this). */
  start(): void {
    this.poller ??= new Poller(() => this.pollBatches(), this.settings.pollMs ?? pollIntervalMs(this.settings.leaseMs));
    this.poller.start();
  }

  async stop(): Promise<void> {
    await this.poller?.stop();
    this.poller = undefined;
  }

  /**
   * Looks at every unfinished batch once: each whose lease has run out and that is not
   * coordinated here is finished (rolled back or forward). A marker whose record never appeared
   * is removed once older than the lease; one whose batch is finished, at once.
   */
  async pollBatches(): Promise<void> {
    let markers: Marker[];
    try {
      markers = await this.markers.list();
    } catch (err) {
      this.logger?.warn({ err }, 'could not list unfinished batches');
      return;
    }
    for (const { id, lastModified } of markers) {
      if (this.coordinating.has(id)) continue;
      try {
        const record = await this.log.read(id);
        if (!record) {
          if (Date.now() - lastModified.getTime() > this.settings.leaseMs) await this.markers.remove(id);
        } else if (this.isFinished(record.value)) {
          await this.markers.remove(id);
        } else if (!record.value.lease_until || Date.parse(record.value.lease_until) < Date.now()) {
          await this.recover(id);
          const after = await this.log.read(id);
          this.logger?.info({ transaction: id, status: after?.value.status, phase: after?.value.phase }, 'finished a batch whose coordinator died');
        }
      } catch (err) {
        this.logger?.warn({ transaction: id, err }, 'could not finish an unfinished batch; it is tried again at the next poll');
      }
    }
  }

  /**
   * The commit path of one table as the engine sees it: the service's own writes to a table with
   * managed versioning commit through the same create-if-absent of the next manifest, under the
   * same reservations, as clients' commits.
   */
  coordinatorFor(ctx: RequestContext, id: string[], resolved?: TableState): CommitCoordinator {
    const coordinated = (v: TableVersion): CoordinatedVersion => ({
      version: v.version,
      manifestPath: v.manifest_path,
      manifestSize: v.manifest_size,
      eTag: v.e_tag,
      timestampMillis: v.timestamp_millis,
    });
    return {
      latest: async () => {
        const versions = await this.tableVersions(id, ctx.requestId, resolved);
        const latest = await versions.latest();
        return latest ? ((await this.toWire(versions, [latest])).map(coordinated)[0] ?? null) : null;
      },
      describe: async (version) => {
        const versions = await this.tableVersions(id, ctx.requestId, resolved);
        const found = await versions.get(version);
        return found ? ((await this.toWire(versions, [found])).map(coordinated)[0] ?? null) : null;
      },
      list: async () => {
        const versions = await this.tableVersions(id, ctx.requestId, resolved);
        return (await this.toWire(versions, await versions.all())).map(coordinated);
      },
      create: async (request) => {
        try {
          const { version } = await this.create(ctx, id, {
            version: request.version,
            manifest_path: request.manifestPath,
            ...(request.manifestSize !== undefined ? { manifest_size: request.manifestSize } : {}),
            ...(request.eTag !== undefined ? { e_tag: request.eTag } : {}),
            ...(request.namingScheme !== undefined ? { naming_scheme: request.namingScheme } : {}),
          }, resolved);
          return coordinated(version);
        } catch (e) {
          if (e instanceof NamespaceError && e.code === ErrorCode.ConcurrentModification) throw new EngineError('conflict', e.message, { cause: e });
          throw e;
        }
      },
    };
  }
}
