import { arrow, schemaOnlyStream, withFieldMetadata } from '../arrow.js';
import { type DatasetLocation, EngineError } from '../dataset-location.js';
import { type JsonArrowSchema, jsonSchemaToArrow, schemaToJson } from '../json-arrow-schema.js';
import type { CreateDatasetMode, LanceEngine } from '../lance-engine.js';
import type { UdfOps } from '../ports/udfs.js';
import { PylanceIndexBuilder } from '../pylance/pylance-indices.js';
import { DEFAULT_DISTRIBUTE_ABOVE_ROWS, type MaintenanceRay, PylanceMaintenance } from '../pylance/pylance-maintenance.js';
import { type PylanceIndexOptions, PylanceWorkers } from '../pylance/pylance-worker.js';
import { DEFAULT_UDF_PYTHON, type PythonUdfOptions, PythonUdfs } from '../python-udf/python-udfs.js';
import { LancedbBranches } from './branches.js';
import { LancedbColumns } from './columns.js';
import type { HandleCacheLimits, HandleCacheStats } from './handle-cache.js';
import { LancedbIndices } from './indices.js';
import { addIpcFile, arrowStreamToIpcFile, createTableFromIpcFile } from './ipc-writes.js';
import { LancedbQueries } from './queries.js';
import { LancedbRows } from './rows.js';
import { classify, type LanceSessionLimits, lancedb, TableAccess } from './table-access.js';
import { LancedbTags } from './tags.js';
import { LancedbViews } from './views.js';

/** The IPC end-of-stream marker: a continuation token and a zero length. */
const END_OF_STREAM = Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);

export interface LancedbEngineOptions {
  /** Runs Python UDFs (engine.udfs) in worker processes with these settings; without it, engine.udfs is undefined. */
  udf?: PythonUdfOptions;
  /** The index workers (pylance), which build the index types @lancedb/lancedb cannot and maintain tables; they start with the first request. */
  indexWorkers?: PylanceIndexOptions;
  /**
   * A Ray cluster for compactions of at least `distributeAboveRows` rows (default
   * DEFAULT_DISTRIBUTE_ABOVE_ROWS): their rewrites run as Ray tasks, driven by a pylance worker
   * with `python` (default: the UDF workers', which has ray), and commit once through the resolver.
   */
  maintenanceRay?: { address: string; python?: string; distributeAboveRows?: number };
  /** Bounds of Lance's caches, shared by every dataset (default DEFAULT_LANCE_SESSION_LIMITS). */
  session?: LanceSessionLimits;
}

/** The Lance engine over @lancedb/lancedb; one module per resource group beside this one. */
export class LancedbEngine implements LanceEngine {
  readonly rows: LancedbRows;
  readonly columns: LancedbColumns;
  readonly indices: LancedbIndices;
  readonly tags: LancedbTags;
  readonly branches: LancedbBranches;
  readonly queries: LancedbQueries;
  readonly views: LancedbViews;
  readonly maintenance: PylanceMaintenance;
  readonly udfs: UdfOps | undefined;

  private constructor(
    private readonly access: TableAccess,
    udfs: UdfOps | undefined,
    private readonly pylance: PylanceWorkers,
    private readonly ray: MaintenanceRay | undefined,
  ) {
    this.udfs = udfs;
    this.rows = new LancedbRows(access);
    this.columns = new LancedbColumns(access);
    this.indices = new LancedbIndices(access, new PylanceIndexBuilder(pylance));
    this.maintenance = new PylanceMaintenance(pylance, ray);
    this.tags = new LancedbTags(access);
    this.branches = new LancedbBranches(access);
    this.queries = new LancedbQueries(access);
    this.views = new LancedbViews(access);
  }

  /**
   * `keptHandles` bounds the datasets kept open across requests (see handle-cache.ts). With
   * `options.udf` the UDF workers are started too, and a Python that cannot run them fails the start.
   */
  static async start(keptHandles?: HandleCacheLimits, options: LancedbEngineOptions = {}): Promise<LancedbEngine> {
    const access = await TableAccess.start(keptHandles, options.session);
    try {
      const ray = options.maintenanceRay;
      return new LancedbEngine(
        access,
        options.udf ? await PythonUdfs.start(access, options.udf) : undefined,
        new PylanceWorkers(access, options.indexWorkers),
        ray
          ? {
              address: ray.address,
              distributeAboveRows: ray.distributeAboveRows ?? DEFAULT_DISTRIBUTE_ABOVE_ROWS,
              workers: new PylanceWorkers(access, {
                ...options.indexWorkers,
                python: ray.python ?? DEFAULT_UDF_PYTHON,
                workers: 1,
                howToInstall:
                  "Compaction on Ray runs in the UDF worker's Python (ray and pylance): install it with `bash scripts/install-udf-worker.sh`, or name one with --udf-python.",
              }),
            }
          : undefined,
      );
    } catch (e) {
      await access.close();
      throw e;
    }
  }

  async createDataset(at: DatasetLocation, arrowIpcStream: Buffer, mode: CreateDatasetMode): Promise<{ version: number; rows: number }> {
    const data = await arrowStreamToIpcFile(arrowIpcStream);
    return this.access.withNewTable(at, async (connection, handle) => {
      try {
        if (mode === 'overwrite') {
          const existing = await connection.openTable(handle).catch(() => null);
          if (existing) {
            try {
              return { version: (await addIpcFile(existing, data.bytes, 'overwrite')).version, rows: data.rows };
            } finally {
              existing.close();
            }
          }
        }
        const table = data.rows === 0 ? await connection.createEmptyTable(handle, data.schema) : await createTableFromIpcFile(connection, handle, data.bytes);
        try {
          return { version: await table.version(), rows: data.rows };
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

  encodeRows(schema: JsonArrowSchema, rows: ReadonlyArray<Record<string, unknown>>): Buffer {
    try {
      const arrowSchema = jsonSchemaToArrow(schema);
      if (rows.length === 0) {
        return schemaOnlyStream(arrowSchema);
      }
      return Buffer.from(arrow.tableToIPC(lancedb().makeArrowTable([...rows], { schema: arrowSchema }), 'stream'));
    } catch (e) {
      throw new EngineError('invalid_input', `rows do not fit the schema: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
  }

  schemaStream(
    schemaMessage: Buffer,
    metadata: { schema?: Record<string, string>; fields?: Record<string, Record<string, string>> } = {},
  ): { stream: Buffer; schema: JsonArrowSchema } {
    let read: import('apache-arrow').Schema;
    try {
      // A schema message alone is a stream without its end: the end-of-stream marker makes it one.
      const reader = arrow.RecordBatchStreamReader.from(Buffer.concat([schemaMessage, END_OF_STREAM]));
      reader.open();
      read = reader.schema;
    } catch (e) {
      throw new EngineError('invalid_input', `not an Arrow IPC schema message: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
    if (!read || read.fields.length === 0) throw new EngineError('invalid_input', 'the Arrow schema has no fields');
    const schema = new arrow.Schema(
      withFieldMetadata(read.fields, metadata.fields ?? {}),
      new Map([...read.metadata, ...Object.entries(metadata.schema ?? {})]),
    );
    let json: JsonArrowSchema;
    try {
      json = schemaToJson(schema);
    } catch (e) {
      throw new EngineError('invalid_input', e instanceof Error ? e.message : String(e), { cause: e });
    }
    return { stream: schemaOnlyStream(schema), schema: json };
  }

  async datasetVersion(at: DatasetLocation): Promise<number> {
    return this.access.read(at, (table) => table.version());
  }

  async describeDataset(at: DatasetLocation, version?: number): Promise<{ version: number; schema: JsonArrowSchema }> {
    return this.access.read(
      at,
      async (table) => ({ version: await table.version(), schema: schemaToJson(await table.schema()) }),
      version === undefined ? {} : { version },
    );
  }

  forget(location: string): void {
    this.access.forget(location);
  }

  /** How many datasets are kept open and how often they were opened, reloaded and reused. */
  keptStats(): HandleCacheStats & { lanceCacheBytes: number } {
    return this.access.keptStats();
  }

  async close(): Promise<void> {
    await this.udfs?.close();
    await this.pylance.close();
    await this.ray?.workers.close();
    await this.access.close();
  }
}
