import { createHash } from 'node:crypto';
import { readTransactionSummary } from '../../engine/lance-format/manifest.js';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import type { AlterTransactionAction } from '../../model/transactions.js';
import { listAll } from '../../store/object-store.js';
import { type BranchName, normalizeBranch, onBranch, resolveBranch } from '../branches/branch-refs.js';
import { displayId } from '../catalog/catalog.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { lanceTransactionKey, lanceTransactionsDirKey, tableRefOf } from '../catalog/layout.js';
import type { Versioned } from '../catalog/records.js';
import type { RequestContext } from '../context/request-context.js';
import { dataDir, requireVisibleTable } from '../tables/table-state.js';
import { versionsOn } from '../versions/branch-versions.js';
import { TERMINAL, type TransactionLog, type TransactionRecord, type TransactionStatus } from './transaction-log.js';

// DescribeTransaction and AlterTransaction.
//
// Invariant: every alter applies all of its actions or none, as one replace-if-unchanged of the
// transaction record; a writer that loses the race re-reads the record and applies its actions
// again to what it finds, so concurrent alters end in a state equal to some serial order of them.
// A terminal status (Succeeded, Failed, Canceled) never changes.
//
// Ids: the service's own records (batches, jobs) by their id; and, as Lance's clients send them, a
// table id followed by a Lance transaction uuid or a version number (`ns$events$12`), which names
// the Lance commit of that version: status Succeeded, properties from its transaction file, plus
// whatever properties were set on it (kept in a record of their own). The request's `branch` (not
// in the spec, whose Lance-form id names a version of main) makes it a commit on that branch.

const ALTER_ATTEMPTS = 10;

/** Allowed status moves; setting the current status again is a no-op. */
const NEXT: Record<TransactionStatus, readonly TransactionStatus[]> = {
  Queued: ['Running', 'Canceled'],
  Running: ['Succeeded', 'Failed', 'Canceled'],
  Succeeded: [],
  Failed: [],
  Canceled: [],
};

export interface TransactionView {
  status: string;
  properties: Record<string, string>;
}

const conflict = (message: string) => new NamespaceError(ErrorCode.ConcurrentModification, message);

export class TransactionService {
  constructor(
    private readonly deps: CatalogDeps,
    private readonly log: TransactionLog,
  ) {}

  async describe(_ctx: RequestContext, id: string[], tableId: string[] | undefined, branch?: string | null): Promise<TransactionView> {
    const found = await this.find(id, tableId, normalizeBranch(branch));
    return { status: found.record.value.status, properties: found.record.value.properties };
  }

  async alter(
    _ctx: RequestContext,
    id: string[],
    tableId: string[] | undefined,
    actions: AlterTransactionAction[],
    branch?: string | null,
  ): Promise<TransactionView> {
    const line = normalizeBranch(branch);
    for (let attempt = 0; attempt < ALTER_ATTEMPTS; attempt++) {
      const found = await this.find(id, tableId, line);
      const next = this.apply(found.record.value, actions, found.lanceCommit);
      if (next === found.record.value) return { status: next.status, properties: next.properties };
      const written = found.stored ? await this.log.update(found.record, next) : await this.createOverlay(next);
      if (written) return { status: written.value.status, properties: written.value.properties };
    }
    throw conflict(`transaction ${JSON.stringify(id.join('$'))} kept changing; retry`);
  }

  /** The actions applied to a copy of the record, or the record itself when nothing changes. */
  private apply(record: TransactionRecord, actions: AlterTransactionAction[], lanceCommit: boolean): TransactionRecord {
    let status = record.status;
    const properties = { ...record.properties };
    let changed = false;
    for (const action of actions) {
      if (action.setStatusAction) {
        const to = action.setStatusAction.status;
        if (to === undefined || to === null || to === status) continue;
        if (TERMINAL.has(status)) throw conflict(`transaction ${record.id} is ${status}; a terminal status never changes`);
        if (lanceCommit || record.phase !== undefined) {
          throw conflict(`the status of transaction ${record.id} is managed by the service`);
        }
        // A job's outcome is the job's to record; a caller may only cancel it.
        if (record.job !== undefined && to !== 'Canceled') {
          throw conflict(`transaction ${record.id} is a running job: only Canceled can be set on it`);
        }
        if (!NEXT[status].includes(to)) throw conflict(`transaction ${record.id} cannot move from ${status} to ${to}`);
        status = to;
        changed = true;
      } else if (action.setPropertyAction) {
        const { key, value, mode = 'Overwrite' } = action.setPropertyAction;
        if (key === undefined || key === null || value === undefined || value === null) continue;
        if (key in properties) {
          if (mode === 'Fail') throw conflict(`transaction ${record.id} already has property ${JSON.stringify(key)}`);
          if (mode === 'Skip' || properties[key] === value) continue;
        }
        properties[key] = value;
        changed = true;
      } else if (action.unsetPropertyAction) {
        const { key, mode = 'Skip' } = action.unsetPropertyAction;
        if (key === undefined || key === null) continue;
        if (!(key in properties)) {
          if (mode === 'Fail') throw conflict(`transaction ${record.id} has no property ${JSON.stringify(key)}`);
          continue;
        }
        delete properties[key];
        changed = true;
      }
    }
    return changed ? { ...record, status, properties } : record;
  }

  private async createOverlay(record: TransactionRecord): Promise<Versioned<TransactionRecord> | null> {
    try {
      return await this.log.create(record);
    } catch (e) {
      if (e instanceof Error && e.name === 'PreconditionFailedError') return null;
      throw e;
    }
  }

  /**
   * Resolves a transaction id: a record of the service's, else the Lance form (table id + uuid or
   * version), where the table id is the leading parts of the id or, when the id is a single part,
   * the request body's `id` (some clients send the table there); a commit on `branch` (null: main).
   */
  private async find(
    id: string[],
    tableId: string[] | undefined,
    branch: BranchName,
  ): Promise<{ record: Versioned<TransactionRecord>; stored: boolean; lanceCommit: boolean }> {
    const joined = id.join('$');
    if (id.length === 1) {
      const own = await this.log.read(id[0] ?? '');
      if (own) return { record: own, stored: true, lanceCommit: false };
    }
    const table = id.length > 1 ? id.slice(0, -1) : tableId && tableId.length > 0 ? tableId : undefined;
    const ref = id[id.length - 1] ?? '';
    if (!table) throw new NamespaceError(ErrorCode.TransactionNotFound, `transaction ${JSON.stringify(joined)} does not exist`);
    const commit = await this.lanceCommit(table, ref, branch);
    // The properties set on a commit are kept by the commit itself: its table, line of history,
    // version and transaction uuid, so that a table or branch made again under the same name, or a
    // table whose id spells another's id and branch, never answers with another commit's record.
    const uuid = commit.properties.uuid ?? null;
    const overlayId = overlayIdOf([table, branch, commit.version, uuid]);
    let overlay = await this.log.read(overlayId);
    // Records written before the uuid and branch were part of the id: a main commit's by table and
    // version alone, taken only while they are of the same commit.
    if (!overlay && branch === null && uuid !== null) {
      const legacy = await this.log.read(overlayIdOf([...table, String(commit.version)]));
      if (legacy?.value.properties.uuid === uuid) overlay = legacy;
    }
    if (overlay) return { record: overlay, stored: true, lanceCommit: true };
    const now = new Date().toISOString();
    return {
      record: {
        value: { id: overlayId, status: 'Succeeded', operation: 'lance_commit', properties: commit.properties, created_at: now, updated_at: now },
        etag: '',
      },
      stored: false,
      lanceCommit: true,
    };
  }

  /**
   * The Lance commit that made a version of main or of `branch` (by number or by its transaction
   * uuid): that line's manifest and the transaction file it names, both in the line's own
   * directory (a branch's in `tree/<branch>/`: `_versions/`, `_transactions/`).
   */
  private async lanceCommit(table: string[], ref: string, branch: BranchName): Promise<{ version: number; properties: Record<string, string> }> {
    if (!/^\d{1,15}$/.test(ref) && !/^[0-9a-f-]{36}$/i.test(ref)) {
      throw new NamespaceError(ErrorCode.TransactionNotFound, `transaction ${JSON.stringify([...table, ref].join('$'))} does not exist`);
    }
    const state = await requireVisibleTable(this.deps.store, tableRefOf(table)).catch((e: unknown) => {
      if (!(e instanceof NamespaceError && e.code === ErrorCode.TableNotFound)) throw e;
      throw new NamespaceError(
        ErrorCode.TransactionNotFound,
        `transaction ${JSON.stringify([...table, ref].join('$'))}: table ${displayId(table)} does not exist`,
        { cause: e },
      );
    });
    const dir = dataDir(this.deps.locations, state);
    // A branch that does not exist is a 404 code 22 (one GET of its ref).
    await resolveBranch(dir, branch, displayId(table));
    const versions = versionsOn(dir, branch);
    const notFound = () =>
      new NamespaceError(ErrorCode.TransactionNotFound, `table ${displayId(table)} has no Lance commit ${JSON.stringify(ref)}${onBranch(branch)}`);
    const describeVersion = async (version: number) => {
      const summary = await versions.readManifest(version);
      if (!summary) return null;
      const properties: Record<string, string> = { version: String(version) };
      if (summary.transactionFile) {
        const txn = await versions.store.get(lanceTransactionKey(versions.dir.key, summary.transactionFile));
        if (txn) {
          const t = readTransactionSummary(txn.body);
          Object.assign(properties, { uuid: t.uuid, read_version: String(t.readVersion), operation: t.operation });
        }
      }
      return { version, properties, uuid: properties.uuid };
    };
    if (/^\d+$/.test(ref)) {
      const found = await describeVersion(Number(ref));
      if (!found) throw notFound();
      return found;
    }
    // A uuid: its transaction file names the version it was read from; the commit is the first
    // later version whose manifest points at that file (normally read_version + 1).
    const listing = await listAll(versions.store, lanceTransactionsDirKey(versions.dir.key), { delimiter: '/' });
    const file = listing.objects.find((o) => o.key.endsWith(`-${ref.toLowerCase()}.txn`));
    if (!file) throw notFound();
    const readVersion = Number(file.key.slice(file.key.lastIndexOf('/') + 1).split('-')[0]);
    const latest = (await versions.latest())?.version ?? 0;
    for (let v = readVersion + 1; v <= Math.min(latest, readVersion + 64); v++) {
      const found = await describeVersion(v);
      if (found?.uuid?.toLowerCase() === ref.toLowerCase()) return found;
    }
    throw notFound();
  }
}

/** The id of the record of properties set on a Lance commit, from what identifies the commit. */
const overlayIdOf = (identity: unknown[]): string => `lance-${createHash('sha256').update(JSON.stringify(identity)).digest('base64url').slice(0, 32)}`;
