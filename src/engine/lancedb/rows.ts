import { arrow } from '../arrow.js';
import { type DatasetLocation, EngineError } from '../dataset-location.js';
import { type MergeInsertOptions, type MergeInsertResult, MergeTimedOut, type RowOps } from '../ports/rows.js';
import { addIpcFile, arrowStreamToIpcFile, nativeMergeInsert, readArrowStream } from './ipc-writes.js';
import { classify, type TableAccess } from './table-access.js';

/**
 * The engine's message without the Rust source locations and the repeated "Caused by" chain the
 * native errors carry: what a client needs is the first message, otherwise kept verbatim.
 */
export function engineMessage(e: unknown): string {
  const raw = e instanceof Error ? e.message : String(e);
  const head = raw.split(/\s+Caused by:/)[0] ?? raw;
  return (
    head
      .replace(/,\s*\/\S+\.rs:\d+:\d+/g, '')
      .replace(/^lance error:\s*/i, '')
      .replace(/GenericFailure,\s*/, '')
      // Lance appends the whole dataset schema (Debug form) to an unknown column's message.
      .replace(/(does not exist in dataset schema):\s*Schema \{[\s\S]*$/, '$1')
      .trim()
  );
}

/**
 * Classifies a failure of a row operation. Unknown columns (in an update, a predicate or a merge
 * key) are column_not_found; anything Lance reports as invalid input (SQL that does not parse,
 * values that do not cast, data that does not fit the schema) is invalid_input; the rest as the
 * engine's generic classification says (conflicts, missing datasets).
 */
export function rowFailure(e: unknown): EngineError {
  if (e instanceof EngineError) return e;
  const raw = e instanceof Error ? e.message : String(e);
  const message = engineMessage(e);
  if (/No field named|does not exist in dataset schema|Merge insert key column .* does not exist|Schema error: Field .* does not exist/i.test(raw)) {
    return new EngineError('column_not_found', message, { cause: e });
  }
  if (/commit conflict|preempted/i.test(raw)) return classify(e);
  if (/Invalid input|Invalid user input|sql parser error|Error parsing|Cast error|different schema|does not exist in table schema/i.test(raw)) {
    return new EngineError('invalid_input', message, { cause: e });
  }
  const classified = classify(e);
  return new EngineError(classified.kind, message, { cause: e });
}

/** Whether the merge changes anything at all; Lance refuses one that does not. */
const changesSomething = (o: MergeInsertOptions): boolean =>
  o.whenMatchedUpdateAll || o.updateAllWhere !== undefined || o.whenNotMatchedInsertAll || o.whenNotMatchedBySourceDelete || o.deleteWhere !== undefined;

const NOTHING_TO_DO =
  'The merge insert job is not configured to change the data in any way: set when_matched_update_all, when_not_matched_insert_all or when_not_matched_by_source_delete';

/** A row write's result names the version it committed (or, changing nothing, the version it found): the handle is there. */
const COMMITTED = { committed: (result: { version: number }) => result.version };

/** The rows operations of the Lance engine over @lancedb/lancedb. */
export class LancedbRows implements RowOps {
  constructor(private readonly access: TableAccess) {}

  async update(at: DatasetLocation, updates: ReadonlyArray<readonly [string, string]>, predicate?: string): Promise<{ updatedRows: number; version: number }> {
    // A Map, not an object: a column may be called anything, `__proto__` included.
    const valuesSql = new Map(updates.map(([column, expression]) => [column, expression] as const));
    return this.access.write(
      at,
      async (table) => {
        try {
          const result = await table.update(predicate === undefined ? { valuesSql } : { valuesSql, where: predicate });
          return { updatedRows: result.rowsUpdated, version: result.version };
        } catch (e) {
          throw rowFailure(e);
        }
      },
      COMMITTED,
    );
  }

  async delete(at: DatasetLocation, predicate: string): Promise<{ deletedRows: number; version: number }> {
    return this.access.write(
      at,
      async (table) => {
        try {
          const result = await table.delete(predicate);
          return { deletedRows: result.numDeletedRows, version: result.version };
        } catch (e) {
          throw rowFailure(e);
        }
      },
      COMMITTED,
    );
  }

  async insert(at: DatasetLocation, arrowIpcStream: Buffer, mode: 'append' | 'overwrite'): Promise<{ insertedRows: number; version: number }> {
    const data = await arrowStreamToIpcFile(arrowIpcStream);
    return this.access.write(
      at,
      async (table) => {
        try {
          const result = await addIpcFile(table, data.bytes, mode);
          return { insertedRows: data.rows, version: result.version };
        } catch (e) {
          throw rowFailure(e);
        }
      },
      COMMITTED,
    );
  }

  async mergeInsert(at: DatasetLocation, arrowIpcStream: Buffer, options: MergeInsertOptions): Promise<MergeInsertResult> {
    if (!changesSomething(options)) throw new EngineError('invalid_input', NOTHING_TO_DO);
    const data = await arrowStreamToIpcFile(arrowIpcStream);
    return this.access.write(
      at,
      async (table) => {
        let builder = nativeMergeInsert(table, options.on);
        // A filter alone asks for the filtered form of its clause (as Lance's own REST adapter reads it).
        if (options.updateAllWhere !== undefined) builder = builder.whenMatchedUpdateAll(options.updateAllWhere);
        else if (options.whenMatchedUpdateAll) builder = builder.whenMatchedUpdateAll();
        if (options.whenNotMatchedInsertAll) builder = builder.whenNotMatchedInsertAll();
        if (options.deleteWhere !== undefined) builder = builder.whenNotMatchedBySourceDelete(options.deleteWhere);
        else if (options.whenNotMatchedBySourceDelete) builder = builder.whenNotMatchedBySourceDelete();
        if (options.useIndex !== undefined) builder = builder.useIndex(options.useIndex);
        if (options.timeoutMs !== undefined) builder.setTimeout(options.timeoutMs);
        try {
          const result = await builder.execute(data.bytes);
          return { version: result.version, insertedRows: result.numInsertedRows, updatedRows: result.numUpdatedRows, deletedRows: result.numDeletedRows };
        } catch (e) {
          if (/timed out/i.test(e instanceof Error ? e.message : String(e))) {
            throw new MergeTimedOut(`${engineMessage(e)} (timeout ${options.timeoutMs ?? 'default'} ms)`, { cause: e });
          }
          throw rowFailure(e);
        }
      },
      COMMITTED,
    );
  }

  async initialStreamForMerge(arrowIpcStream: Buffer, options: MergeInsertOptions): Promise<Buffer> {
    if (!changesSomething(options)) throw new EngineError('invalid_input', NOTHING_TO_DO);
    const { schema } = await readArrowStream(arrowIpcStream);
    // Only a plain top-level name can be checked against the stream's fields; nested or quoted
    // paths are left to Lance, which checks them on the first merge into the dataset.
    if (/^[^.`]+$/.test(options.on) && !schema.fields.some((f) => f.name === options.on)) {
      throw new EngineError('column_not_found', `Merge insert key column '${options.on}' does not exist in schema`);
    }
    if (options.whenNotMatchedInsertAll) return arrowIpcStream;
    return Buffer.from(arrow.tableToIPC(new arrow.Table(schema), 'stream'));
  }

  async countRows(at: DatasetLocation, options: { predicate?: string | undefined; version?: number | undefined } = {}): Promise<number> {
    return this.access.read(
      at,
      async (table) => {
        try {
          return await table.countRows(options.predicate);
        } catch (e) {
          throw rowFailure(e);
        }
      },
      options.version === undefined ? {} : { version: options.version },
    );
  }

  async restore(at: DatasetLocation, version: number): Promise<{ version: number }> {
    return this.access.write(
      at,
      async (table) => {
        try {
          await table.restore();
          return { version: await table.version() };
        } catch (e) {
          throw rowFailure(e);
        }
      },
      { version },
    );
  }
}
