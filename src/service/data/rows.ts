import { EngineError } from '../../engine/lance-engine.js';
import type { MergeInsertOptions } from '../../engine/ports/rows.js';
import { ErrorCode, invalidInput, NamespaceError } from '../../model/errors.js';
import type {
  DeleteFromTableRequest,
  DeleteFromTableResponse,
  InsertIntoTableResponse,
  MergeInsertIntoTableQuery,
  MergeInsertIntoTableResponse,
  RestoreTableRequest,
  RestoreTableResponse,
  UpdateTableRequest,
  UpdateTableResponse,
} from '../../model/rows.js';
import { PreconditionFailedError } from '../../store/object-store.js';
import { normalizeBranch } from '../branches/branch-refs.js';
import { displayId } from '../catalog/catalog.js';
import { reservedMarkerKey, tableRecordKey } from '../catalog/layout.js';
import { encodeRecord, readRecord, TableRecord } from '../catalog/records.js';
import type { ServiceLogger } from '../context/logger.js';
import type { RequestContext } from '../context/request-context.js';
import { backoffMs, sleep } from '../coordination/backoff.js';
import { acceptPolicy } from '../maintenance/policy-markers.js';
import { claimDatasetCreation } from '../tables/dataset-creation.js';
import type { DataTable, DataTables } from './data-tables.js';

/** A SQL predicate that is blank means "no predicate" where one is optional. */
const optionalPredicate = (p: string | null | undefined): string | undefined => (p === undefined || p === null || p.trim() === '' ? undefined : p);

const UNITS_MS: Record<string, number> = { ms: 1, s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000 };

/** A merge timeout like "30s", "5m", "1m30s", "250ms"; a bare number is seconds. */
export function parseTimeout(text: string): number {
  const t = text.trim();
  let ms: number;
  if (/^\d+(\.\d+)?$/.test(t)) ms = Number(t) * 1000;
  else if (/^(\d+(\.\d+)?\s*(ms|sec|s|min|m|h)\s*)+$/.test(t)) {
    ms = 0;
    for (const [, n, unit] of t.matchAll(/(\d+(?:\.\d+)?)\s*(ms|sec|s|min|m|h)/g)) ms += Number(n) * (UNITS_MS[unit ?? 's'] ?? 1000);
  } else {
    throw invalidInput(`timeout: must be a duration such as "30s", "5m" or "250ms", got ${JSON.stringify(text)}`);
  }
  if (!Number.isFinite(ms) || ms < 1) throw invalidInput(`timeout: must be at least 1ms, got ${JSON.stringify(text)}`);
  return Math.round(ms);
}

/** How long an update keeps trying to record its properties against concurrent changes of the table record. */
const RECORD_PROPERTIES_BOUND_MS = 10_000;

export interface RowSettings {
  /** Time bound for recording an update's properties after its commit (default 10 s). */
  recordPropertiesBoundMs?: number;
}

/** The row operations of the Lance namespace spec, over the Lance engine. */
export class RowService {
  constructor(
    private readonly tables: DataTables,
    private readonly logger?: ServiceLogger,
    private readonly settings: RowSettings = {},
  ) {}

  private get engine() {
    return this.tables.engine;
  }

  async update(ctx: RequestContext, id: string[], request: UpdateTableRequest): Promise<UpdateTableResponse> {
    // Null or absent updates every row; a blank string is more likely a mistake than that wish.
    if (typeof request.predicate === 'string' && request.predicate.trim() === '') {
      throw invalidInput('predicate: must not be blank (omit it, or send null, to update every row)');
    }
    const seen = new Set<string>();
    for (const [column] of request.updates) {
      if (seen.has(column)) throw invalidInput(`updates: column ${JSON.stringify(column)} is updated twice`);
      seen.add(column);
    }
    const branch = normalizeBranch(request.branch);
    await acceptPolicy(this.tables.catalog.store, { kind: 'table', id }, request.properties);
    return this.tables.writeTable(
      ctx,
      id,
      async (table) => {
        const { updatedRows, version } = await this.engine.rows.update(table.at, request.updates, request.predicate ?? undefined);
        // The rows are the operation; the properties are recorded once they are committed, so that a
        // refused update changes nothing, and a committed one is answered as committed (see below).
        const properties = await this.recordProperties(table, request.properties ?? {});
        return { updated_rows: updatedRows, version, properties };
      },
      { branch },
    );
  }

  /**
   * Merges `given` into the table record's properties with a replace-if-unchanged of the record
   * read (create-if-absent for a table Lance wrote without one), again on a lost race. Returns the
   * table's properties.
   *
   * Invariant: the engine commit already happened, so nothing here turns the update into a
   * failure by losing races: every lost race means another writer's change of the record landed
   * (progress), and rounds are retried with jittered backoff until a time bound. Past the bound
   * the update is still answered as landed, with the properties the record holds, and a warning
   * is logged; a store failure (not a lost race) is also only logged.
   */
  private async recordProperties(table: DataTable, given: Record<string, string>): Promise<Record<string, string>> {
    const current = table.state.record;
    if (Object.keys(given).length === 0) return current?.value.properties ?? {};
    const store = this.tables.catalog.store;
    const key = tableRecordKey(table.ref);
    const deadline = Date.now() + (this.settings.recordPropertiesBoundMs ?? RECORD_PROPERTIES_BOUND_MS);
    let read = current;
    try {
      for (let attempt = 0; ; attempt++) {
        if (attempt > 0) read = await readRecord(store, key, TableRecord);
        const value: TableRecord = read
          ? { ...read.value, properties: { ...read.value.properties, ...given } }
          : { properties: { ...given }, created_at: new Date().toISOString() };
        try {
          await store.put(key, encodeRecord(value), read ? { ifMatch: read.etag } : { ifNoneMatch: '*' });
          return value.properties;
        } catch (e) {
          if (!(e instanceof PreconditionFailedError)) throw e;
        }
        if (Date.now() >= deadline) break;
        await sleep(Math.min(backoffMs(attempt, 5, 200), Math.max(0, deadline - Date.now())));
      }
      this.logger?.warn(
        { table: displayId(table.id), properties: given },
        'update committed, but its properties were not recorded: the table record kept changing',
      );
    } catch (e) {
      this.logger?.warn({ table: displayId(table.id), properties: given, err: e }, 'update committed, but its properties could not be recorded');
    }
    const held = await readRecord(store, key, TableRecord).catch(() => read);
    return held?.value.properties ?? {};
  }

  async delete(ctx: RequestContext, id: string[], request: DeleteFromTableRequest): Promise<DeleteFromTableResponse> {
    if (request.predicate.trim() === '') throw invalidInput("predicate: must not be empty (to delete every row, use 'true')");
    const branch = normalizeBranch(request.branch);
    return this.tables.writeTable(ctx, id, async (table) => ({ version: (await this.engine.rows.delete(table.at, request.predicate)).version }), { branch });
  }

  async insert(
    ctx: RequestContext,
    id: string[],
    input: { mode?: 'Append' | 'Overwrite' | undefined; arrowIpcStream: Buffer; branch?: string | null | undefined },
  ): Promise<InsertIntoTableResponse> {
    const branch = normalizeBranch(input.branch);
    return this.tables.writeTable(
      ctx,
      id,
      async (table) => {
        if (!table.hasData) {
          const created = await this.createDataset(ctx, table, input.arrowIpcStream);
          if (created) return { num_inserted_rows: created.rows, version: created.version };
        }
        const { insertedRows, version } = await this.engine.rows.insert(table.at, input.arrowIpcStream, input.mode === 'Overwrite' ? 'overwrite' : 'append');
        return { num_inserted_rows: insertedRows, version };
      },
      { allowDeclared: true, branch },
    );
  }

  async mergeInsert(ctx: RequestContext, id: string[], query: MergeInsertIntoTableQuery, arrowIpcStream: Buffer): Promise<MergeInsertIntoTableResponse> {
    const options: MergeInsertOptions = {
      on: query.on,
      whenMatchedUpdateAll: query.when_matched_update_all ?? false,
      updateAllWhere: optionalPredicate(query.when_matched_update_all_filt),
      whenNotMatchedInsertAll: query.when_not_matched_insert_all ?? false,
      whenNotMatchedBySourceDelete: query.when_not_matched_by_source_delete ?? false,
      deleteWhere: optionalPredicate(query.when_not_matched_by_source_delete_filt),
      timeoutMs: query.timeout === undefined || query.timeout.trim() === '' ? undefined : parseTimeout(query.timeout),
      useIndex: query.use_index,
    };
    const branch = normalizeBranch(query.branch);
    return this.tables.writeTable(
      ctx,
      id,
      async (table) => {
        if (!table.hasData) {
          // Nothing to match yet: the dataset starts as what the merge would make of an empty one.
          const initial = await this.engine.rows.initialStreamForMerge(arrowIpcStream, options);
          const created = await this.createDataset(ctx, table, initial);
          if (created) return { num_inserted_rows: created.rows, num_updated_rows: 0, num_deleted_rows: 0, version: created.version };
        }
        const result = await this.engine.rows.mergeInsert(table.at, arrowIpcStream, options);
        return { num_updated_rows: result.updatedRows, num_inserted_rows: result.insertedRows, num_deleted_rows: result.deletedRows, version: result.version };
      },
      { allowDeclared: true, branch },
    );
  }

  /**
   * Creates the dataset of a declared table from an Arrow IPC stream (as CreateTable fills a
   * declared table) and removes the declared marker. Null when the dataset exists by now: the
   * caller then writes into it like into any table.
   *
   * Lance alone cannot settle concurrent creators: the loser of version 1 rebases its create (an
   * overwrite) onto the winner's version and commits it as version 2, silently replacing the
   * winner's rows. So creators first take a claim (create-if-absent in the table's `_catalog/`);
   * only the holder creates, and a request that meets a live claim is answered 409 code 14 (the
   * dataset is about to exist; a retry appends to it). A claim left by a crashed holder is taken
   * over once its lease has run out, by a replace-if-unchanged of exactly the stale claim.
   */
  private async createDataset(ctx: RequestContext, table: DataTable, arrowIpcStream: Buffer): Promise<{ version: number; rows: number } | null> {
    const release = await claimDatasetCreation(this.tables.catalog.store, table.ref, ctx.requestId, this.tables.catalog.settings.leaseMs);
    if (!release) {
      if (await this.datasetExists(table)) return null;
      throw new NamespaceError(ErrorCode.ConcurrentModification, `table ${displayId(table.id)}: its dataset is being created by another request; retry`);
    }
    try {
      // The previous holder may have created it and released the claim after this request's open.
      if (await this.datasetExists(table)) return null;
      let created: { version: number; rows: number };
      try {
        created = await this.engine.createDataset(table.at, arrowIpcStream, 'create');
      } catch (e) {
        // Created meanwhile by a path that takes no claim (CreateTable, a Lance client).
        if (e instanceof EngineError && e.kind === 'already_exists') return null;
        throw e;
      }
      // The data is committed: nothing after this may turn the answer into a failure (a retry
      // would insert the rows again). The declared marker is only tidiness; the versions decide.
      if (table.state.reserved) await this.tables.catalog.store.delete(reservedMarkerKey(table.ref)).catch(() => undefined);
      return created;
    } finally {
      await release();
    }
  }

  private async datasetExists(table: DataTable): Promise<boolean> {
    try {
      await this.engine.datasetVersion(table.at);
      return true;
    } catch (e) {
      if (e instanceof EngineError && e.kind === 'not_a_dataset') return false;
      throw e;
    }
  }

  async count(
    ctx: RequestContext,
    id: string[],
    request: { predicate?: string | null | undefined; version?: number | null | undefined; branch?: string | null | undefined },
  ): Promise<number> {
    const version = request.version ?? undefined;
    const branch = normalizeBranch(request.branch);
    return this.tables.readTable(ctx, id, (table) => this.engine.rows.countRows(table.at, { predicate: optionalPredicate(request.predicate), version }), {
      version,
      branch,
    });
  }

  async restore(ctx: RequestContext, id: string[], request: RestoreTableRequest): Promise<RestoreTableResponse> {
    const branch = normalizeBranch(request.branch);
    await this.tables.writeTable(ctx, id, (table) => this.engine.rows.restore(table.at, request.version), { version: request.version, branch });
    return {};
  }
}
