import { arrow } from '../arrow.js';
import { schemaToJson, type JsonArrowSchema } from '../json-arrow-schema.js';
import { type CreateDatasetMode, type DatasetLocation, EngineError, type LanceEngine } from '../lance-engine.js';
import { LancedbColumns } from './columns.js';
import { LancedbIndices } from './indices.js';
import { LancedbQueries } from './queries.js';
import { LancedbRows } from './rows.js';
import { classify, TableAccess } from './table-access.js';
import { LancedbTags } from './tags.js';

/** Decodes an Arrow IPC stream request body; a 400-class EngineError when it is not one. */
export function decodeArrowStream(body: Buffer): import('apache-arrow').Table {
  if (body.length === 0) {
    throw new EngineError('invalid_input', 'the request body must be an Arrow IPC stream (it is required and was empty)');
  }
  let data: import('apache-arrow').Table;
  try {
    data = arrow.tableFromIPC(body);
  } catch (e) {
    throw new EngineError('invalid_input', `the request body is not a valid Arrow IPC stream: ${(e as Error).message}`, { cause: e });
  }
  if (data.schema.fields.length === 0) throw new EngineError('invalid_input', 'the Arrow IPC stream has no columns');
  return data;
}

/** The Lance engine over @lancedb/lancedb; one module per resource group beside this one. */
export class LancedbEngine implements LanceEngine {
  readonly rows: LancedbRows;
  readonly columns: LancedbColumns;
  readonly indices: LancedbIndices;
  readonly tags: LancedbTags;
  readonly queries: LancedbQueries;

  private constructor(private readonly access: TableAccess) {
    this.rows = new LancedbRows(access);
    this.columns = new LancedbColumns(access);
    this.indices = new LancedbIndices(access);
    this.tags = new LancedbTags(access);
    this.queries = new LancedbQueries(access);
  }

  static async start(): Promise<LancedbEngine> {
    return new LancedbEngine(await TableAccess.start());
  }

  async createDataset(at: DatasetLocation, arrowIpcStream: Buffer, mode: CreateDatasetMode): Promise<{ version: number; rows: number }> {
    const data = decodeArrowStream(arrowIpcStream);
    return this.access.withNewTable(at, async (connection, handle) => {
      try {
        if (mode === 'overwrite') {
          const existing = await connection.openTable(handle).catch(() => null);
          if (existing) {
            try {
              await existing.add(data, { mode: 'overwrite' });
              return { version: await existing.version(), rows: data.numRows };
            } finally {
              existing.close();
            }
          }
        }
        const table = data.numRows === 0 ? await connection.createEmptyTable(handle, data.schema) : await connection.createTable(handle, data);
        try {
          return { version: await table.version(), rows: data.numRows };
        } finally {
          table.close();
        }
      } catch (e) {
        // A dataset found at the location when creating: another writer created it first.
        if (!(e instanceof EngineError) && /already exists/i.test(e instanceof Error ? e.message : String(e))) {
          throw new EngineError('already_exists', (e as Error).message, { cause: e });
        }
        throw classify(e);
      }
    });
  }

  async datasetVersion(at: DatasetLocation): Promise<number> {
    return this.access.withTable(at, (table) => table.version());
  }

  async describeDataset(at: DatasetLocation, version?: number): Promise<{ version: number; schema: JsonArrowSchema }> {
    return this.access.withTable(at, async (table) => ({ version: await table.version(), schema: schemaToJson(await table.schema()) }), version === undefined ? {} : { version });
  }

  close(): Promise<void> {
    return this.access.close();
  }
}
