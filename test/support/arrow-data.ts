import { createRequire } from 'node:module';
import { arrow } from '../../src/engine/arrow.js';

const require = createRequire(import.meta.url);

/** An Arrow IPC stream of rows {id: int64, name: utf8}. */
export function peopleStream(ids: number[]): Buffer {
  const table = new arrow.Table({
    id: arrow.vectorFromArray(BigInt64Array.from(ids.map(BigInt))),
    name: arrow.vectorFromArray(
      ids.map((i) => `name-${i}`),
      new arrow.Utf8(),
    ),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

/** Opens the Lance dataset at a location straight through the engine library. */
export async function connectTable(location: string, storageOptions: Record<string, string> = {}): Promise<import('@lancedb/lancedb').Table> {
  const lancedb = require('@lancedb/lancedb') as typeof import('@lancedb/lancedb');
  const slash = location.lastIndexOf('/');
  const db = await lancedb.connect(location.slice(0, slash), { storageOptions });
  return db.openTable(location.slice(slash + 1).replace(/\.lance$/, ''));
}

/** Reads every row of the Lance dataset at a location straight through the engine library, ordered by id. */
export async function readRows(location: string, storageOptions: Record<string, string> = {}): Promise<Array<Record<string, unknown>>> {
  const table = await connectTable(location, storageOptions);
  try {
    const rows = (await table.query().toArray()) as Array<Record<string, unknown>>;
    return rows.map((r) => ({ ...r, id: typeof r.id === 'bigint' ? Number(r.id) : r.id })).sort((a, b) => Number(a.id) - Number(b.id));
  } finally {
    table.close();
  }
}
