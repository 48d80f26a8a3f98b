import { createRequire } from 'node:module';
import path from 'node:path';
import { joinYielding, Pacer } from '../../event-loop/join-yielding.js';
import { arrow } from '../arrow.js';
import { EngineError } from '../dataset-location.js';
import type { Connection, Table } from './table-access.js';

// Why this module exists: @lancedb/lancedb's createTable, Table.add and MergeInsertBuilder.execute
// take a decoded Arrow table and re-encode it to the IPC *file* format synchronously
// (sanitizeTable, then RecordBatchFileWriter.writeAll and two whole-body copies) before handing the
// bytes to the native layer: about 1 ms per MiB during which the event loop is blocked (a 240 MiB
// CreateTable held the health check for 300 ms and more). The native layer refuses the IPC *stream*
// format a request carries ("Arrow file does not contain correct footer"), so the stream is
// rewritten here as a file batch by batch, handing the event loop back every few MiB or ms, and the bytes
// go to the native calls directly.
//
// Private surface of @lancedb/lancedb 0.39.0 this relies on (pinned in package.json; checked at run
// time so that a change fails loudly, as an internal error, rather than silently):
//   - `LocalConnection.inner.createTable(name, ipcFile, mode, namespacePath, storageOptions)`;
//   - `LocalTable.inner.add(ipcFile, mode)` and `LocalTable.inner.mergeInsert([on])` (its builder's
//     `execute(ipcFile)`);
//   - `dist/table.js`'s `LocalTable`, to wrap a native table as the library's own createTable does.

type Schema = import('apache-arrow').Schema;
type RecordBatch = import('apache-arrow').RecordBatch;

export interface IpcFile {
  /** The Arrow IPC file: the stream's own messages, framed with the file's magic and footer. */
  bytes: Buffer;
  schema: Schema;
  rows: number;
}

/**
 * Reads an Arrow IPC stream request body record batch by record batch, handing the event loop
 * back every few MiB or ms of batches (a batch is read as views of the body's bytes, so what costs
 * is the number of batches). `onSchema` and `onBatch` see what is read. A 400-class EngineError
 * when the body is not a stream with columns.
 */
export async function readArrowStream(
  body: Buffer,
  on: { onSchema?(schema: Schema): void; onBatch?(batch: RecordBatch): void } = {},
): Promise<{ schema: Schema; rows: number }> {
  if (body.length === 0) throw new EngineError('invalid_input', 'the request body must be an Arrow IPC stream (it is required and was empty)');
  try {
    const reader = arrow.RecordBatchStreamReader.from(body);
    reader.open();
    const schema = reader.schema;
    if (schema.fields.length === 0) throw new EngineError('invalid_input', 'the Arrow IPC stream has no columns');
    on.onSchema?.(schema);
    const pacer = new Pacer();
    let rows = 0;
    for (let next = reader.next(); !next.done; next = reader.next()) {
      rows += next.value.numRows;
      on.onBatch?.(next.value);
      // An empty batch (apache-arrow makes one for a schema-only stream) may lack its nested columns' buffers.
      await pacer.after(next.value.numRows === 0 ? 0 : next.value.data.byteLength);
    }
    return { schema, rows };
  } catch (e) {
    if (e instanceof EngineError) throw e;
    throw new EngineError('invalid_input', `the request body is not a valid Arrow IPC stream: ${(e as Error).message}`, { cause: e });
  }
}

/**
 * Rewrites an Arrow IPC stream request body as the IPC file the native layer takes, without
 * blocking the event loop for long: re-framing a record batch only takes views of the body's
 * buffers, and the one copy, into the contiguous buffer the binding needs, goes a slice at a time.
 */
export async function arrowStreamToIpcFile(body: Buffer): Promise<IpcFile> {
  const sink = new Pieces();
  const writer = new arrow.RecordBatchFileWriter();
  const { schema, rows } = await readArrowStream(body, { onSchema: (read) => writer.reset(sink, read), onBatch: (batch) => writer.write(batch) });
  writer.finish();
  return { bytes: await joinYielding(sink.pieces, sink.size), schema, rows };
}

type ByteInput = Parameters<InstanceType<typeof arrow.AsyncByteQueue>['write']>[0];

/**
 * The writer's sink: what it writes (views of the body's buffers and the framing), in order. Its
 * own queue hands pieces back with an Array#shift each, quadratic over a stream of many small
 * batches (40,000 of them took 13 s).
 */
export class Pieces extends arrow.AsyncByteQueue {
  readonly pieces: Uint8Array[] = [];
  size = 0;

  override write(value: ByteInput): void {
    if (!(value instanceof Uint8Array)) throw new TypeError('the Arrow writer wrote something other than bytes');
    this.pieces.push(value);
    this.size += value.byteLength;
  }
}

/** What of the native binding's classes these writes call (see the list at the top). */
interface NativeMergeInsert {
  whenMatchedUpdateAll(condition?: string | null): NativeMergeInsert;
  whenNotMatchedInsertAll(): NativeMergeInsert;
  whenNotMatchedBySourceDelete(filter?: string | null): NativeMergeInsert;
  useIndex(useIndex: boolean): NativeMergeInsert;
  setTimeout(timeoutMs: number): void;
  execute(ipcFile: Buffer): Promise<{ version: number; numInsertedRows: number; numUpdatedRows: number; numDeletedRows: number }>;
}
interface NativeTable {
  add(ipcFile: Buffer, mode: string): Promise<{ version: number }>;
  mergeInsert(on: string[]): NativeMergeInsert;
}
interface NativeConnection {
  createTable(name: string, ipcFile: Buffer, mode: string, namespacePath: string[], storageOptions?: Record<string, string> | null): Promise<NativeTable>;
}

const require = createRequire(import.meta.url);
/** `dist/table.js` is not among the package's exports; it is loaded by its path, beside the entry point. */
const LocalTable = (): (new (inner: NativeTable) => Table) =>
  (require(path.join(path.dirname(require.resolve('@lancedb/lancedb')), 'table.js')) as { LocalTable: new (inner: NativeTable) => Table }).LocalTable;

function inner<T>(wrapper: Connection | Table, method: keyof T & string): T {
  const found = (wrapper as unknown as { inner?: Record<string, unknown> }).inner;
  if (typeof found?.[method] !== 'function') {
    throw new EngineError('internal', `@lancedb/lancedb changed: its ${wrapper.constructor.name} has no inner.${method} (this service relies on 0.39.0's)`);
  }
  return found as T;
}

/** Creates table `name` from an IPC file, as `connection.createTable(name, data)` does after its re-encode. */
export async function createTableFromIpcFile(connection: Connection, name: string, ipcFile: Buffer): Promise<Table> {
  const Wrapper = LocalTable();
  return new Wrapper(await inner<NativeConnection>(connection, 'createTable').createTable(name, ipcFile, 'create', []));
}

/** Appends or overwrites with an IPC file, as `table.add(data, { mode })` does after its re-encode. */
export function addIpcFile(table: Table, ipcFile: Buffer, mode: 'append' | 'overwrite'): Promise<{ version: number }> {
  return inner<NativeTable>(table, 'add').add(ipcFile, mode);
}

/** The native merge-insert builder, whose `execute` takes an IPC file (the library's wrapper re-encodes a table). */
export function nativeMergeInsert(table: Table, on: string): NativeMergeInsert {
  return inner<NativeTable>(table, 'mergeInsert').mergeInsert([on]);
}
