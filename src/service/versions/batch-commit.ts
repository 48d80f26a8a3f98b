import { randomUUID } from 'node:crypto';
import { ErrorCode, invalidInput, NamespaceError } from '../../model/errors.js';
import type {
  BatchCommitTablesResponse,
  BatchCreateTableVersionsResponse,
  CommitTableOperation,
  CommitTableResult,
  CreateTableVersionEntry,
  TableVersion,
} from '../../model/versions.js';
import { listAll, PreconditionFailedError } from '../../store/object-store.js';
import { type BranchRef, branchNotFound, normalizeBranch, onBranch } from '../branches/branch-refs.js';
import { createInNamespace, displayId, type ResolvedNamespace, resolveManagedVersioning, resolveNamespace } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { deregisteredMarkerKey, tableDirKey, tableRecordKey, tableRefOf } from '../catalog/layout.js';
import { encodeRecord, type TableRecord } from '../catalog/records.js';
import type { RequestContext } from '../context/request-context.js';
import { faultPoint, pausePoint } from '../coordination/fault-points.js';
import { refuseWhileBusy, withMarkerSettled } from '../tables/name-claim.js';
import { resolveTable } from '../tables/resolved-table.js';
import { isStillResolved } from '../tables/table-fences.js';
import { dataDir, incarnationOf, isVisible, readTableState, requireVisibleTable, type TableState, tableNotFound } from '../tables/table-state.js';
import type { TableOp, TransactionLog } from '../transactions/transaction-log.js';
import { BatchLease } from './batch-lease.js';
import type { BatchRecovery, VersionSettings } from './batch-recovery.js';
import {
  lineId,
  nextVersionOn,
  refOf,
  requireBranchFound,
  requireRefOrManaged,
  requireSameRef,
  slotId,
  type VersionLine,
  versionLine,
} from './branch-versions.js';
import { conflict, type PlannedVersion, planVersion, stagedMissing, versionsOnWire } from './commit-steps.js';
import { type CommittedVersion, inRanges, TableVersions } from './dataset-versions.js';
import type { VersionSlots } from './version-slots.js';

// Batch commits: versions of several tables, and table operations (declare, delete versions,
// deregister), all or none, also across a crash at any step (the invariants of every commit are
// in commit-steps.ts).
//
// Protocol: a batch writes its marker, then its transaction record (`reserving`), then claims
// all its slots (version-slots.ts; fsynced, unlike a single writer's: after a crash of the machine
// recovery rolls the batch forward into them) and the names it declares, then, holding its slots,
// looks again at each table it writes (a drop that began meanwhile stops it here, 404: see
// table-fences.ts for why one of the two always sees the other), then flips the record to
// `committing` (the commit point, a replace-if-unchanged), then writes the manifests. Before the
// commit point a crash leaves only reservations and pending table records, which are rolled back
// once the lease expires; after it, whoever finds the record rolls it forward (batch-recovery.ts).
// The coordinator keeps the lease renewed while it works, and stops before the commit point once
// another process has taken the batch over (batch-lease.ts).

/** A version a batch commits, with the table as the batch resolved it (null: a table the batch declares) and the line of its history. */
interface BatchVersion extends PlannedVersion {
  resolved: TableState | null;
  line: VersionLine;
  /** The branch's ref as the entry was resolved (null on main, or on a branch's first commit): read again holding the slots (requireSameRef). */
  ref?: BranchRef | null;
}

export class BatchCommits {
  constructor(
    private readonly deps: CatalogDeps,
    private readonly log: TransactionLog,
    private readonly slots: VersionSlots,
    private readonly recovery: BatchRecovery,
    private readonly settings: VersionSettings,
  ) {}

  /** A version of an existing table (on the line of its history the request's `branch` names), resolved once. */
  private async plan(id: string[], request: Omit<CreateTableVersionEntry, 'id'>): Promise<BatchVersion> {
    const branch = normalizeBranch(request.branch);
    const table = await resolveTable(this.deps, id);
    const { dir, state } = table;
    const line = versionLine(dir, branch);
    const [planned, ref] = await Promise.all([planVersion(id, line, request), refOf(line)]);
    await requireRefOrManaged(table, line, ref);
    const incarnation = incarnationOf(state);
    return { ...planned, entry: { ...planned.entry, ...(incarnation !== null ? { incarnation } : {}) }, resolved: state, line, ref };
  }

  /**
   * Commits versions of several tables atomically: all or none, also across a crash at any step.
   * See the protocol at the top of this file.
   */
  async batchCreate(_ctx: RequestContext, entries: CreateTableVersionEntry[]): Promise<BatchCreateTableVersionsResponse> {
    const planned: BatchVersion[] = [];
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
  async batchCommit(ctx: RequestContext, operations: CommitTableOperation[]): Promise<BatchCommitTablesResponse> {
    const planned: BatchVersion[] = [];
    const ops: TableOp[] = [];
    /** The incarnation of each table the batch declares, by its id. */
    const declared = new Map<string, string>();
    /** Versions the delete_table_versions operations delete, all together (bounded: the record holds each). */
    let deleting = 0;
    /** Where each deregistered table's data lives. */
    const deregistered = new Map<TableOp, string>();
    // Each namespace a declare goes into, resolved once: it serves the managed flag and the claim.
    const namespaces = new Map<string, ResolvedNamespace>();
    for (const op of operations) {
      if (op.declare_table) {
        const ref = tableRefOf(op.declare_table.id);
        const own = this.deps.locations.own(tableDirKey(ref));
        if (op.declare_table.location && op.declare_table.location.trim() !== '') {
          const asked = this.deps.locations.resolve(op.declare_table.location);
          if (asked.store !== own.store || asked.key !== own.key)
            throw invalidInput(`declare_table: location must be the table's directory ${own.store.location(own.key)}`);
        }
        const properties = op.declare_table.properties ?? {};
        const nsKey = JSON.stringify(ref.namespace);
        const namespace = namespaces.get(nsKey) ?? (await resolveNamespace(this.deps.store, ref.namespace));
        namespaces.set(nsKey, namespace);
        const incarnation = randomUUID();
        ops.push({
          kind: 'declare',
          table_id: op.declare_table.id,
          properties,
          managed_versioning: await resolveManagedVersioning(this.deps, namespace, properties),
          incarnation,
        });
        declared.set(JSON.stringify(op.declare_table.id), incarnation);
      } else if (op.create_table_version) {
        const request = op.create_table_version;
        const newTable = declared.get(JSON.stringify(request.id));
        planned.push(await (newTable !== undefined ? this.planNewTable(request.id, request, newTable) : this.plan(request.id, request)));
      } else if (op.delete_table_versions) {
        const { id, ranges, branch } = op.delete_table_versions;
        const line = versionLine((await resolveTable(this.deps, id)).dir, normalizeBranch(branch));
        const { versions } = line;
        const [ref, all] = await Promise.all([refOf(line), versions.all()]);
        requireBranchFound(id, line, ref, all.length > 0);
        const doomed = all.filter((v) => inRanges(v.version, ranges));
        deleting += doomed.length;
        const max = this.settings.maxDeletedVersions;
        if (max !== undefined && deleting > max) {
          throw invalidInput(
            `delete_table_versions: at most ${max} versions may be deleted by one BatchCommitTables (--max-batch-deleted-versions), these ranges match ${deleting}`,
          );
        }
        ops.push({
          kind: 'delete_versions',
          table_id: id,
          location: line.dataDir.store.location(line.dataDir.key),
          ...(line.branch !== null ? { branch: line.branch } : {}),
          versions: doomed.map((v) => ({ version: v.version, key: v.key })),
        });
      } else if (op.deregister_table) {
        const state = await requireVisibleTable(this.deps.store, tableRefOf(op.deregister_table.id));
        const deregister: TableOp = { kind: 'deregister', table_id: op.deregister_table.id, incarnation: incarnationOf(state) ?? '' };
        const dir = dataDir(this.deps.locations, state);
        deregistered.set(deregister, dir.store.location(dir.key));
        ops.push(deregister);
      }
    }
    const { transactionId, committed } = await this.runBatch('batch_commit_tables', planned, ops, namespaces);
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
        const target = { id: applied.table_id, dir: own, managedVersioning: applied.managed_versioning };
        results.push({
          declare_table: {
            location: own.store.location(own.key),
            properties: applied.properties,
            managed_versioning: applied.managed_versioning,
            storage_options: await this.deps.credentials.storageOptions(ctx, target, op.declare_table?.vend_credentials),
          },
        });
      } else if (applied?.kind === 'delete_versions') results.push({ delete_table_versions: { deleted_count: applied.versions.length } });
      else if (applied?.kind === 'deregister') {
        results.push({ deregister_table: { id: applied.table_id, location: deregistered.get(applied) ?? '', properties: null } });
      }
    }
    return { results, transaction_id: transactionId };
  }

  /** A version of a table this batch declares (as `incarnation`): it has no record yet, so no state to read, and no versions. */
  private async planNewTable(id: string[], request: Omit<CreateTableVersionEntry, 'id'>, incarnation: string): Promise<BatchVersion> {
    const branch = normalizeBranch(request.branch);
    // A table the batch declares has no branch yet.
    if (branch !== null) throw branchNotFound(displayId(id), branch);
    const line = versionLine(this.deps.locations.own(tableDirKey(tableRefOf(id))), null);
    const planned = await planVersion(id, line, request, null);
    return { ...planned, entry: { ...planned.entry, incarnation }, resolved: null, line };
  }

  /**
   * The versions committed, one for each planned. A version of a table dropped after the batch's
   * commit point (see BatchRecovery.writeEntry) is reported as the batch committed it, from the
   * request: its number, manifest path, metadata, and size and e_tag where the request gave them.
   */
  private async wireOf(planned: PlannedVersion[], committed: Map<string, CommittedVersion>): Promise<TableVersion[]> {
    const wire: TableVersion[] = [];
    for (const { entry, versions } of planned) {
      const c = committed.get(slotId(entry));
      if (c) wire.push(...(await versionsOnWire(versions, [c])));
      else {
        wire.push({
          version: entry.version,
          manifest_path: versions.manifestPath(entry.final_key),
          ...(entry.manifest_size !== undefined ? { manifest_size: entry.manifest_size } : {}),
          ...(entry.e_tag !== undefined ? { e_tag: entry.e_tag } : {}),
          metadata: entry.metadata ?? {},
        });
      }
    }
    return wire;
  }

  /**
   * Holding its slots, looks again at each table the batch writes: 404 if it was dropped (or
   * deregistered, or dropped and created again) since it was resolved (see the protocol above);
   * and checks that its planned versions of each line of its history are exactly the next ones
   * (nextVersionOn, from the line's latest version and, on a branch, its ref, read then: a branch
   * deleted meanwhile is 404 code 22). One round trip a line.
   */
  private async lookAgain(planned: BatchVersion[]): Promise<void> {
    const byLine = new Map<string, BatchVersion[]>();
    for (const p of planned) {
      const line = lineId(p.entry);
      byLine.set(line, [...(byLine.get(line) ?? []), p]);
    }
    for (const group of byLine.values()) {
      const first = group[0];
      if (!first) continue;
      const { resolved, line } = first;
      const [same, latestVersion, ref] = await Promise.all([
        resolved === null || isStillResolved(this.deps.store, resolved),
        first.versions.latest(),
        refOf(line),
      ]);
      if (!same) throw tableNotFound(first.entry.table_id);
      requireSameRef(first.entry.table_id, line, first.ref ?? null, ref);
      group.sort((a, b) => a.entry.version - b.entry.version);
      const next = nextVersionOn(first.entry.table_id, line, ref, latestVersion, first.entry.version);
      group.forEach((p, i) => {
        if (p.entry.version !== next + i) {
          throw conflict(
            `table ${displayId(p.entry.table_id)}: version ${p.entry.version}${onBranch(line.branch)} is not the next version (the latest is ${latestVersion?.version ?? 0})`,
          );
        }
      });
    }
  }

  /** The batch protocol (see the top of this file). */
  private async runBatch(
    operation: string,
    planned: BatchVersion[],
    ops: TableOp[],
    namespaces = new Map<string, ResolvedNamespace>(),
  ): Promise<{ transactionId: string; committed: Map<string, CommittedVersion> }> {
    const seen = new Set<string>();
    for (const p of planned) {
      const slot = slotId(p.entry);
      if (seen.has(slot)) throw invalidInput(`version ${p.entry.version} of table ${displayId(p.entry.table_id)} appears twice`);
      seen.add(slot);
    }
    // Every staged file must be a Lance manifest of its version before the batch claims anything.
    for (const p of planned) {
      if ((await p.versions.readStaged(p.entry.staged_key, p.entry.version)) === null) throw stagedMissing(p);
    }
    const transactionId = this.log.newId();
    this.recovery.coordinating.add(transactionId);
    try {
      // The marker first: a batch that dies at any later step is found and finished by a poller.
      await this.recovery.markers.add(transactionId);
      return await this.coordinate(transactionId, operation, planned, ops, namespaces);
    } finally {
      this.recovery.coordinating.delete(transactionId);
    }
  }

  private async coordinate(
    transactionId: string,
    operation: string,
    planned: BatchVersion[],
    ops: TableOp[],
    namespaces: Map<string, ResolvedNamespace>,
  ): Promise<{ transactionId: string; committed: Map<string, CommittedVersion> }> {
    const now = new Date().toISOString();
    const tables = [...planned.map((p) => p.entry.table_id), ...ops.map((o) => o.table_id)];
    // Held, and renewed, until the batch is finished (batch-lease.ts): every step below may outlast one lease.
    const lease = await BatchLease.begin(this.log, this.settings.leaseMs, {
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
    });
    try {
      faultPoint('batch:after-record');
      // A fixed order of claims: two overlapping batches cannot each hold a slot the other needs forever.
      const order = [...planned].sort((a, b) => {
        const [lineA, lineB] = [lineId(a.entry), lineId(b.entry)];
        return lineA < lineB ? -1 : lineA > lineB ? 1 : a.entry.version - b.entry.version;
      });
      try {
        // Each step first checks that the batch is still held: one that lost it stops at once.
        for (const op of ops) {
          lease.check();
          if (op.kind === 'declare')
            await this.claimName(op, transactionId, namespaces.get(JSON.stringify(op.table_id.slice(0, -1))) ?? op.table_id.slice(0, -1));
        }
        for (const [i, p] of order.entries()) {
          lease.check();
          if (!(await this.slots.claim(p.versions, p.entry.version, this.slots.lease(transactionId)))) {
            throw conflict(`table ${displayId(p.entry.table_id)}: version ${p.entry.version} is being committed by another writer`);
          }
          faultPoint(`batch:after-reserve-${i}`);
        }
        await pausePoint('batch:after-claims');
        await this.lookAgain(planned);
        for (const p of planned) {
          if (!(await p.versions.store.head(p.entry.staged_key))) throw stagedMissing(p);
        }
        await pausePoint('batch:before-commit-point');
        // The commit point: a write through the lease, which fails once another process has written the record.
        if (!(await lease.write((r) => ({ ...r, phase: 'committing' })))) lease.check();
      } catch (e) {
        await this.recovery.rollBack(lease);
        throw e;
      }
      await pausePoint('batch:after-commit-point');
      return { transactionId, committed: await this.recovery.rollForward(lease) };
    } finally {
      await lease.end();
    }
  }

  /** Claims a table name for a declare in a batch: its record, pending on the transaction, inside `namespace` (see createInNamespace). */
  private async claimName(op: Extract<TableOp, { kind: 'declare' }>, transactionId: string, namespace: ResolvedNamespace | string[]): Promise<void> {
    const ref = tableRefOf(op.table_id);
    const state = await readTableState(this.deps.store, ref);
    // Staged manifests may already sit in the directory; a record (the claim) or data may not.
    if (isVisible(state)) throw new NamespaceError(ErrorCode.TableAlreadyExists, `table ${displayId(op.table_id)} already exists`);
    // A drop still deleting would delete what the batch claims: the record, its staged manifests.
    refuseWhileBusy(state);
    // A batch's declared table lives in its name's directory (its versions are staged there).
    if (state.retired) {
      throw new NamespaceError(
        ErrorCode.TableAlreadyExists,
        `table ${displayId(op.table_id)} cannot be declared in a batch: its name's directory holds a deregistered table's data; DeclareTable or CreateTable place a new table of this name elsewhere`,
      );
    }
    const key = tableRecordKey(ref);
    // A deregistered table's record (its data lives elsewhere) is replaced: the name is free.
    const taken = state.deregistered ? state.record : null;
    const record: TableRecord = {
      properties: op.properties,
      created_at: new Date().toISOString(),
      managed_versioning: op.managed_versioning,
      pending_transaction: transactionId,
      incarnation: op.incarnation ?? randomUUID(),
    };
    // The listing index hears of the name once the batch is applied or undone (applyTableOps, undoTableOps).
    await this.deps.listingIndex.begin('table', ref, transactionId);
    // The name's marker (a drop's tombstone, a deregister's marker) is held across the change and
    // deleted after it, never unconditionally (see withMarkerSettled and table-state.ts).
    await withMarkerSettled(this.deps.store, state, record, this.deps.settings.leaseMs, async () => {
      try {
        await createInNamespace(
          this.deps.store,
          namespace,
          () => this.deps.store.put(key, encodeRecord(record), taken ? { ifMatch: taken.etag } : { ifNoneMatch: '*' }),
          () => this.deps.store.delete(key),
        );
      } catch (e) {
        if (e instanceof PreconditionFailedError) throw new NamespaceError(ErrorCode.TableAlreadyExists, `table ${displayId(op.table_id)} already exists`);
        throw e;
      }
      // A dropped or deregistered table's directory is cleared for the new one, but for the manifests staged for it.
      if (state.dropped || taken) {
        const staging = new TableVersions(this.deps.locations.own(state.dirKey));
        const marker = deregisteredMarkerKey(ref);
        for (const o of (await listAll(this.deps.store, state.dirKey)).objects) {
          if (o.key !== key && o.key !== marker && !staging.isStagingKey(o.key)) await this.deps.store.delete(o.key);
        }
      }
    });
  }
}
