import { describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { EngineError } from '../../src/engine/lance-engine.js';
import { arrowStreamToIpcFile } from '../../src/engine/lancedb/ipc-writes.js';

/** Rows `from`..`from + n` of (id int64, name utf8 with nulls, tag dictionary), as one record batch. */
function batch(from: number, n: number): import('apache-arrow').Table {
  const ids = BigInt64Array.from({ length: n }, (_, i) => BigInt(from + i));
  return new arrow.Table({
    id: arrow.vectorFromArray(ids),
    name: arrow.vectorFromArray(
      Array.from({ length: n }, (_, i) => (i % 7 === 0 ? null : `row-${from + i}`)),
      new arrow.Utf8(),
    ),
    tag: arrow.vectorFromArray(Array.from({ length: n }, (_, i) => ['a', 'b', 'c'][i % 3] ?? 'a')),
  });
}

describe('Arrow IPC stream to file', () => {
  it('gives the bytes apache-arrow writes for the same table, over many batches and more than one slice', async () => {
    // 12 batches of 60,000 rows: over 4 MiB in all, so the rewrite hands the event loop back on the way.
    const whole = batch(0, 720_000);
    const table = new arrow.Table(Array.from({ length: 12 }, (_, b) => whole.slice(b * 60_000, (b + 1) * 60_000).batches).flat());
    expect(table.batches).toHaveLength(12);
    const stream = Buffer.from(arrow.tableToIPC(table, 'stream'));
    expect(stream.length).toBeGreaterThan(8 * 1024 * 1024);
    const file = await arrowStreamToIpcFile(stream);
    expect(file.rows).toBe(720_000);
    expect(file.schema.fields.map((f) => f.name)).toEqual(['id', 'name', 'tag']);
    expect(file.bytes.equals(Buffer.from(arrow.tableToIPC(table, 'file')))).toBe(true);
    const back = arrow.tableFromIPC(file.bytes);
    expect(back.numRows).toBe(720_000);
    expect(back.get(719_998)?.toJSON()).toEqual({ id: 719_998n, name: 'row-719998', tag: 'b' });
    expect(back.get(719_999)?.toJSON()).toEqual({ id: 719_999n, name: null, tag: 'c' });
  });

  it('gives the same bytes for a stream of many small batches', async () => {
    const whole = batch(0, 50_000);
    const table = new arrow.Table(Array.from({ length: 5000 }, (_, b) => whole.slice(b * 10, (b + 1) * 10).batches).flat());
    const file = await arrowStreamToIpcFile(Buffer.from(arrow.tableToIPC(table, 'stream')));
    expect(file.rows).toBe(50_000);
    expect(file.bytes.equals(Buffer.from(arrow.tableToIPC(table, 'file')))).toBe(true);
  });

  it('keeps the schema of a stream with no batches', async () => {
    const file = await arrowStreamToIpcFile(Buffer.from(arrow.tableToIPC(batch(0, 1).slice(0, 0), 'stream')));
    expect(file.rows).toBe(0);
    expect(file.schema.fields.map((f) => f.name)).toEqual(['id', 'name', 'tag']);
    expect(arrow.tableFromIPC(file.bytes).numRows).toBe(0);
  });

  it('refuses an empty body, bytes that are not a stream and a stream without columns as invalid input', async () => {
    const refusal = (body: Buffer) =>
      arrowStreamToIpcFile(body).then(
        () => null,
        (e: unknown) => e,
      );
    for (const body of [Buffer.alloc(0), Buffer.from('not arrow at all'), Buffer.from(arrow.tableToIPC(new arrow.Table({}), 'stream'))]) {
      const e = await refusal(body);
      expect(e).toBeInstanceOf(EngineError);
      expect((e as EngineError).kind).toBe('invalid_input');
    }
  });
});
