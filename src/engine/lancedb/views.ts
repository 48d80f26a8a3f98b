import type * as Arrow from 'apache-arrow';
import { joinYielding } from '../../event-loop/join-yielding.js';
import { arrow, withFieldMetadata } from '../arrow.js';
import { type DatasetLocation, EngineError } from '../dataset-location.js';
import { IS_SET, type Materialization, type Materialized, SOURCE_ROW_ID, type ViewOps } from '../ports/views.js';
import { addIpcFile, Pieces } from './ipc-writes.js';
import { rowFailure } from './rows.js';
import type { TableAccess } from './table-access.js';

// Materialized views without UDF columns, recomputed by the engine itself (the UDF workers do it
// otherwise, worker/udf_worker.py `materialize`, with the same meaning): the source scanned at
// the version asked for, the view's rows built batch by batch as an IPC file in memory, and one
// overwrite of the view with its schema and the new metadata.

export class LancedbViews implements ViewOps {
  constructor(private readonly access: TableAccess) {}

  async materialize(source: DatasetLocation, view: DatasetLocation, m: Materialization): Promise<Materialized> {
    if (m.udfs.length > 0) throw new EngineError('unsupported', 'a view with UDF columns is recomputed by the UDF workers');
    const current = await this.access.read(view, (table) => table.schema());
    const schema = new arrow.Schema(withFieldMetadata(current.fields, m.fieldMetadata), new Map(Object.entries(m.schemaMetadata)));
    const aliases = new Map(m.columns.map((c, i) => [c.name, `__mv_c${i}`]));
    const select: Record<string, string> = Object.fromEntries(m.columns.map((c, i) => [`__mv_c${i}`, c.sql]));

    const sink = new Pieces();
    const writer = new arrow.RecordBatchFileWriter();
    writer.reset(sink, schema);
    let rows = 0;
    await this.access
      .read(
        source,
        async (table) => {
          // Lance refuses a scan of nothing but row ids: one stored column goes along when nothing else is read.
          if (m.columns.length === 0) {
            const anchor = (await table.schema()).fields[0]?.name;
            if (anchor !== undefined) select.__mv_anchor = `\`${anchor.replace(/`/g, '``')}\``;
          }
          let query = table.query().select(select).withRowId();
          if (m.filter !== null) query = query.where(m.filter);
          if (m.limit !== null) query = query.limit(m.limit);
          if (m.offset !== null) query = query.offset(m.offset);
          for await (const batch of query) {
            if (batch.numRows === 0) continue;
            writer.write(viewBatch(schema, batch, aliases));
            rows += batch.numRows;
          }
        },
        { version: m.sourceVersion },
      )
      .catch((e: unknown) => {
        throw rowFailure(e);
      });
    // Lance overwrites with nothing only when given a batch, if an empty one.
    if (rows === 0)
      writer.write(
        new arrow.RecordBatch(
          schema,
          arrow.makeData({ type: new arrow.Struct(schema.fields), length: 0, nullCount: 0, children: schema.fields.map((f) => nullData(f.type, 0)) }),
        ),
      );
    writer.finish();
    const file = await joinYielding(sink.pieces, sink.size);
    return this.access.write(view, async (table) => {
      try {
        const { version } = await addIpcFile(table, file, 'overwrite');
        return { rows, version, fragments: (await table.stats()).fragmentStats.numFragments };
      } catch (e) {
        throw rowFailure(e);
      }
    });
  }
}

/** One batch of the view from one batch of the source (its SQL columns under their aliases, and `_rowid`). */
function viewBatch(schema: Arrow.Schema, batch: Arrow.RecordBatch, aliases: Map<string, string>): Arrow.RecordBatch {
  const n = batch.numRows;
  const children = schema.fields.map((f) => {
    if (f.name === SOURCE_ROW_ID) {
      const ids = batch.getChild('_rowid');
      if (!ids) throw new EngineError('internal', 'the source scan returned no _rowid');
      // Row ids (a fragment and an offset, or a stable id) are below 2^63: the int64 the view stores is the same number.
      return arrow.makeData({
        type: new arrow.Int64(),
        length: n,
        nullCount: 0,
        data: BigInt64Array.from(ids.toArray() as BigUint64Array, (v) => BigInt.asIntN(64, v)),
      });
    }
    if (f.name === IS_SET) return arrow.vectorFromArray(new Array<boolean>(n).fill(true), new arrow.Bool()).data[0] as Arrow.Data;
    const alias = aliases.get(f.name);
    const values = alias === undefined ? null : batch.getChild(alias);
    if (!values) return nullData(f.type, n);
    if (!arrow.util.compareTypes(values.type, f.type)) {
      throw new EngineError('invalid_input', `the view column ${f.name} is ${String(f.type)}, but its expression gives ${String(values.type)}`);
    }
    // A record batch's column is one piece of data.
    return values.data[0] as Arrow.Data;
  });
  return new arrow.RecordBatch(schema, arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children }));
}

/** `n` nulls of a type (n = 0: an empty column). */
function nullData(type: Arrow.DataType, n: number): Arrow.Data {
  const data = arrow.vectorFromArray(new Array<null>(n).fill(null), type).data[0];
  if (!data) throw new EngineError('internal', `apache-arrow made no data for ${String(type)}`);
  return data;
}
