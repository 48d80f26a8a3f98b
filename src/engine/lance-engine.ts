import type { DatasetLocation } from './dataset-location.js';
import type { JsonArrowSchema } from './json-arrow-schema.js';
import type { BranchOps } from './ports/branches.js';
import type { ColumnOps } from './ports/columns.js';
import type { IndexOps } from './ports/indices.js';
import type { MaintenanceOps } from './ports/maintenance.js';
import type { QueryOps } from './ports/queries.js';
import type { RowOps } from './ports/rows.js';
import type { TagOps } from './ports/tags.js';
import type { UdfOps } from './ports/udfs.js';
import type { ViewOps } from './ports/views.js';

export {
  type CommitCoordinator,
  type CoordinatedVersion,
  type DatasetLocation,
  EngineError,
  type EngineErrorKind,
  type LatestCommitted,
} from './dataset-location.js';

// The Lance engine port: data operations on Lance datasets, addressed by location. The service
// never sees SDK types; the adapter (engine/lancedb/) is the only code that imports
// @lancedb/lancedb. Operations are grouped by resource, one port module each (engine/ports/).

export type CreateDatasetMode = 'create' | 'overwrite';

export interface LanceEngine {
  /**
   * Writes an Arrow IPC stream as a dataset at the location and returns the committed version and
   * the number of rows written.
   * A stream with a schema and no rows makes an empty dataset. `overwrite` commits a new version
   * replacing the rows of an existing dataset; `create` fails if one exists.
   */
  createDataset(at: DatasetLocation, arrowIpcStream: Buffer, mode: CreateDatasetMode): Promise<{ version: number; rows: number }>;
  /** Opens the dataset and returns its latest version; throws EngineError('not_a_dataset') if there is none. */
  datasetVersion(at: DatasetLocation): Promise<number>;
  /** Version and schema (in the spec's JSON Arrow form) of the latest version, or of `version`. */
  describeDataset(at: DatasetLocation, version?: number): Promise<{ version: number; schema: JsonArrowSchema }>;
  /**
   * Rows given as plain values (strings, numbers, booleans, Dates, arrays for lists, null) as an
   * Arrow IPC stream of `schema`, for the writes the service makes itself (Geneva's job table).
   */
  encodeRows(schema: JsonArrowSchema, rows: ReadonlyArray<Record<string, unknown>>): Buffer;
  /**
   * An Arrow IPC stream of no rows whose schema is the one in `schemaMessage` (one encapsulated
   * IPC schema message, as pyarrow's Schema.serialize() writes it; a whole stream does too), with
   * `metadata.schema` added to its schema metadata and `metadata.fields[name]` to the metadata of
   * each named top-level field; and that schema in the JSON form. EngineError('invalid_input')
   * when the bytes are not a schema message, or name a type the engine does not take.
   */
  schemaStream(
    schemaMessage: Buffer,
    metadata?: { schema?: Record<string, string>; fields?: Record<string, Record<string, string>> },
  ): { stream: Buffer; schema: JsonArrowSchema };
  readonly rows: RowOps;
  readonly columns: ColumnOps;
  readonly indices: IndexOps;
  readonly tags: TagOps;
  readonly branches: BranchOps;
  readonly queries: QueryOps;
  readonly views: ViewOps;
  /** Compaction, index upkeep and version cleanup (issue 33); the service decides when. */
  readonly maintenance: MaintenanceOps;
  /** Python UDFs (Geneva's); undefined unless the engine was configured to run them. */
  readonly udfs?: UdfOps | undefined;
  /**
   * Closes whatever the engine keeps open for the dataset at `location` (its table was dropped,
   * deregistered or renamed). Other replicas' engines find out on their own: every read through a
   * kept dataset is checked against the latest version the caller passes (DatasetLocation.latest).
   */
  forget(location: string): void;
  close(): Promise<void>;
}
