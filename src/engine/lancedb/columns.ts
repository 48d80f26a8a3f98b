import type * as Arrow from 'apache-arrow';
import { formatFieldPath } from '../../model/columns.js';
import { arrow } from '../arrow.js';
import { type DatasetLocation, EngineError } from '../dataset-location.js';
import { jsonTypeToArrow, jsonTypeToLanceCast, UnsupportedJsonTypeError } from '../json-arrow-schema.js';
import type {
  ColumnAlteration,
  ColumnOps,
  FieldInfo,
  FieldMetadataChange,
  IndexStatistics,
  NewColumns,
  RowIdLayout,
  TableStatistics,
} from '../ports/columns.js';
import { classify, type Table, type TableAccess } from './table-access.js';

type LanceColumnAlteration = Parameters<Table['alterColumns']>[0][number];

/** Lance's messages for a path or column that names nothing. */
const COLUMN_NOT_FOUND = /No field named|does not exist in (the )?dataset|Field '.*' not found|unknown column/i;
/** Lance's messages for a request it refuses as such (bad SQL, impossible cast, name clash, ...). */
const INVALID =
  /Invalid input|Invalid user input|Invalid expression|Error parsing|sql parser error|Invalid data type|Cannot cast|Duplicate field name|cannot contain|NULL values|must be nullable|Schema error|Type conflicts|Unsupported data type|Alteration must have/i;
/** Commit races, which classify() maps to `conflict`; checked first so a racing schema change is a 409, not a 400. */
const CONFLICT = /commit conflict|preempted|concurrent|conflicting/i;

/**
 * The engine's message for a client: its first line (some errors append a dump of the whole
 * schema) without the Rust source locations.
 */
function clientMessage(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  return (message.split('\n')[0] ?? message).replace(/,?\s*\/[^\s,]*\.rs:\d+:\d+/g, '').trim();
}

/** Classifies a failure of a column operation by the engine's message. */
function columnFailure(e: unknown): EngineError {
  if (e instanceof EngineError) return e;
  if (e instanceof UnsupportedJsonTypeError) return new EngineError('invalid_input', e.message, { cause: e });
  const message = e instanceof Error ? e.message : String(e);
  if (CONFLICT.test(message)) return classify(e);
  if (COLUMN_NOT_FOUND.test(message)) return new EngineError('column_not_found', clientMessage(e), { cause: e });
  if (INVALID.test(message)) return new EngineError('invalid_input', clientMessage(e), { cause: e });
  return classify(e);
}

/** The field at a path: a top-level field by its name, then child fields by theirs. */
function fieldAt(schema: Arrow.Schema, path: readonly string[]): Arrow.Field | undefined {
  let candidates: readonly Arrow.Field[] = schema.fields;
  let found: Arrow.Field | undefined;
  for (const segment of path) {
    found = candidates.find((f) => f.name === segment);
    if (!found) return undefined;
    candidates = (found.type.children ?? []) as readonly Arrow.Field[];
  }
  return found;
}

function requireField(schema: Arrow.Schema, path: readonly string[]): Arrow.Field {
  const field = fieldAt(schema, path);
  if (!field) throw new EngineError('column_not_found', `column ${formatFieldPath(path)} does not exist`);
  return field;
}

const metadataOf = (field: Arrow.Field): Record<string, string> => Object.fromEntries(field.metadata ?? new Map<string, string>());

/** The columns operations of the Lance engine over @lancedb/lancedb. */
export class LancedbColumns implements ColumnOps {
  constructor(private readonly access: TableAccess) {}

  /** Opens the table for one write and classifies what fails. */
  private write<T>(at: DatasetLocation, fn: (table: Table) => Promise<T>): Promise<T> {
    return this.access.write(at, async (table) => {
      try {
        return await fn(table);
      } catch (e) {
        throw columnFailure(e);
      }
    });
  }

  alterColumns(at: DatasetLocation, alterations: ColumnAlteration[]): Promise<{ version: number }> {
    return this.write(at, async (table) => {
      const schema = await table.schema();
      const lance: LanceColumnAlteration[] = alterations.map((a) => {
        requireField(schema, a.path);
        return {
          // Lance's alter looks a top-level column up by its bare name and parses quoting only
          // in nested paths (a quoted top-level name is "not found"), so only those are quoted.
          path: a.path.length === 1 ? (a.path[0] as string) : formatFieldPath(a.path),
          ...(a.rename !== undefined ? { rename: a.rename } : {}),
          ...(a.nullable !== undefined ? { nullable: a.nullable } : {}),
          ...(a.dataType !== undefined ? { dataType: jsonTypeToLanceCast(a.dataType) } : {}),
        };
      });
      return { version: (await table.alterColumns(lance)).version };
    });
  }

  dropColumns(at: DatasetLocation, paths: string[][]): Promise<{ version: number }> {
    return this.write(at, async (table) => {
      const schema = await table.schema();
      for (const path of paths) requireField(schema, path);
      return { version: (await table.dropColumns(paths.map(formatFieldPath))).version };
    });
  }

  addColumns(at: DatasetLocation, columns: NewColumns): Promise<{ version: number }> {
    return this.write(at, async (table) => {
      const schema = await table.schema();
      // Lance reports a taken name as a type conflict (or not at all when the types agree).
      const taken = columns.columns.find((c) => schema.fields.some((f) => f.name === c.name));
      if (taken) throw new EngineError('invalid_input', `column ${formatFieldPath([taken.name])} already exists`);
      if (columns.kind === 'empty') {
        const fields = columns.columns.map((c) => new arrow.Field(c.name, jsonTypeToArrow(c.dataType), true, new Map(Object.entries(c.metadata))));
        return { version: (await table.addColumns(new arrow.Schema(fields))).version };
      }
      const sql = columns.columns.map((c) => ({ name: c.name, valueSql: c.sql }));
      const result = columns.kind === 'computed' ? await table.addColumns({ computed: sql }) : await table.addColumns(sql);
      return { version: result.version };
    });
  }

  updateFieldMetadata(at: DatasetLocation, changes: FieldMetadataChange[]): Promise<{ version: number; fields: Array<Record<string, string>> }> {
    return this.write(at, async (table) => {
      const before = await table.schema();
      for (const change of changes) requireField(before, change.path);
      const { version } = await table.updateFieldMetadata(
        changes.map((c) => ({ path: formatFieldPath(c.path), metadata: c.metadata, ...(c.replace ? { replace: true } : {}) })),
      );
      // The handle has moved to the version it committed, so its schema is the result.
      const after = await table.schema();
      return { version, fields: changes.map((c) => metadataOf(requireField(after, c.path))) };
    });
  }

  field(at: DatasetLocation, path: string[]): Promise<FieldInfo> {
    return this.access.read(at, async (table) => {
      const found = requireField(await table.schema(), path);
      return { path: [...path], typeName: String(found.type), metadata: metadataOf(found) };
    });
  }

  checkExpression(at: DatasetLocation, sql: string, version?: number): Promise<void> {
    return this.access.read(
      at,
      async (table) => {
        try {
          // Lance refuses a scan of literals alone, so one stored column goes along.
          const anchor = (await table.schema()).fields[0]?.name;
          const select: Record<string, string> = { value: sql };
          if (anchor !== undefined) select.anchor = `\`${anchor.replace(/`/g, '``')}\``;
          await table.query().select(select).limit(1).toArray();
        } catch (e) {
          throw columnFailure(e);
        }
      },
      version === undefined ? {} : { version },
    );
  }

  rowIdLayout(at: DatasetLocation, filter: string | undefined, version?: number): Promise<RowIdLayout> {
    return this.access.read(
      at,
      async (table) => {
        const byFragment = new Map<number, { fragment: number; rows: number; minOffset: number; maxOffset: number }>();
        try {
          let query = table.query().withRowId().select([]);
          if (filter !== undefined) query = query.where(filter);
          for await (const batch of query) {
            const ids = batch.getChild('_rowid');
            if (!ids) continue;
            for (let i = 0; i < ids.length; i++) {
              const id = BigInt(ids.get(i) as bigint | number);
              const fragment = Number(id >> 32n);
              const offset = Number(id & 0xffffffffn);
              const f = byFragment.get(fragment);
              if (!f) byFragment.set(fragment, { fragment, rows: 1, minOffset: offset, maxOffset: offset });
              else {
                f.rows++;
                if (offset < f.minOffset) f.minOffset = offset;
                if (offset > f.maxOffset) f.maxOffset = offset;
              }
            }
          }
        } catch (e) {
          throw columnFailure(e);
        }
        const fragments = [...byFragment.values()].sort((a, b) => a.fragment - b.fragment);
        return { version: await table.version(), fragments };
      },
      version === undefined ? {} : { version },
    );
  }

  fillColumn(at: DatasetLocation, column: string, sql: string, filter: string): Promise<{ rows: number; version: number }> {
    return this.write(at, async (table) => {
      const result = await table.update({ where: filter, valuesSql: { [column]: sql } });
      return { rows: result.rowsUpdated, version: result.version };
    });
  }

  countRows(at: DatasetLocation, filter: string): Promise<number> {
    return this.access.read(at, async (table) => {
      try {
        return await table.countRows(filter);
      } catch (e) {
        throw columnFailure(e);
      }
    });
  }

  refreshComputedColumn(at: DatasetLocation, column: string): Promise<{ rows: number; version: number }> {
    return this.write(at, async (table) => {
      const result = await table.refreshColumn(column);
      return { rows: result.rowsFilled, version: result.version };
    });
  }

  tableStats(at: DatasetLocation): Promise<TableStatistics> {
    return this.access.read(at, async (table) => {
      const s = await table.stats();
      const l = s.fragmentStats.lengths;
      return {
        totalBytes: s.totalBytes,
        numRows: s.numRows,
        numIndices: s.numIndices,
        fragments: {
          count: s.fragmentStats.numFragments,
          smallCount: s.fragmentStats.numSmallFragments,
          lengths: { min: l.min, max: l.max, mean: l.mean, p25: l.p25, p50: l.p50, p75: l.p75, p99: l.p99 },
        },
      };
    });
  }

  indexStats(at: DatasetLocation, indexName: string, version?: number): Promise<IndexStatistics> {
    return this.access.read(
      at,
      async (table) => {
        const s = await table.indexStats(indexName);
        if (!s) {
          throw new EngineError('index_not_found', `index ${JSON.stringify(indexName)} does not exist${version === undefined ? '' : ` at version ${version}`}`);
        }
        return {
          indexType: s.indexType ?? null,
          distanceType: s.distanceType ?? null,
          numIndexedRows: s.numIndexedRows ?? null,
          numUnindexedRows: s.numUnindexedRows ?? null,
          numIndices: s.numIndices ?? null,
        };
      },
      version === undefined ? {} : { version },
    );
  }
}
