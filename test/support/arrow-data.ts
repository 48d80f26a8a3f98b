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

/** Opens the Lance dataset at a location straight through the engine library (on `branch` when given). */
export async function connectTable(location: string, storageOptions: Record<string, string> = {}, branch?: string): Promise<import('@lancedb/lancedb').Table> {
  const lancedb = require('@lancedb/lancedb') as typeof import('@lancedb/lancedb');
  const slash = location.lastIndexOf('/');
  const db = await lancedb.connect(location.slice(0, slash), { storageOptions });
  return db.openTable(location.slice(slash + 1).replace(/\.lance$/, ''), undefined, branch === undefined ? {} : { branch });
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

/** id, x and one column of every row as numbers (null stays null), ordered by id, read straight through the engine. */
export async function readColumn(
  location: string,
  options: Record<string, string>,
  column: string,
): Promise<Array<{ id: number; x: number; v: number | null }>> {
  const table = await connectTable(location, options);
  try {
    const data = await table.query().select(['id', 'x', column]).toArrow();
    const ids = data.getChild('id');
    const xs = data.getChild('x');
    const vs = data.getChild(column);
    if (!ids || !xs || !vs) throw new Error('missing columns');
    const rows: Array<{ id: number; x: number; v: number | null }> = [];
    for (let i = 0; i < data.numRows; i++) {
      const v = vs.get(i) as bigint | number | null;
      rows.push({ id: Number(ids.get(i)), x: Number(xs.get(i)), v: v === null ? null : Number(v) });
    }
    return rows.sort((a, b) => a.id - b.id);
  } finally {
    table.close();
  }
}
