import type { DatasetLocation } from '../dataset-location.js';

/** Index types as Lance names them (canonical spelling). */
export type EngineIndexType =
  | 'IVF_PQ'
  | 'IVF_FLAT'
  | 'IVF_SQ'
  | 'IVF_RQ'
  | 'IVF_HNSW_FLAT'
  | 'IVF_HNSW_SQ'
  | 'IVF_HNSW_PQ'
  | 'BTREE'
  | 'BITMAP'
  | 'LABEL_LIST'
  | 'FTS'
  | 'NGRAM'
  | 'ZONEMAP'
  | 'BLOOMFILTER'
  | 'RTREE';

export type EngineDistanceType = 'l2' | 'cosine' | 'dot' | 'hamming';

/** Build parameters of vector indexes; each applies to the types that have it and is ignored by the others. */
export interface VectorIndexParams {
  numPartitions?: number | undefined;
  numSubVectors?: number | undefined;
  numBits?: number | undefined;
  sampleRate?: number | undefined;
  maxIterations?: number | undefined;
  /** Used when numPartitions is absent: partitions = ceil(rows / targetPartitionSize). */
  targetPartitionSize?: number | undefined;
  m?: number | undefined;
  efConstruction?: number | undefined;
}

/** Tokenizer parameters of an FTS index. */
export interface FtsIndexParams {
  withPosition?: boolean | undefined;
  baseTokenizer?: string | undefined;
  language?: string | undefined;
  maxTokenLength?: number | undefined;
  lowerCase?: boolean | undefined;
  stem?: boolean | undefined;
  removeStopWords?: boolean | undefined;
  asciiFolding?: boolean | undefined;
}

export interface IndexSpec {
  column: string;
  type: EngineIndexType;
  name: string;
  distanceType?: EngineDistanceType | undefined;
  vector: VectorIndexParams;
  fts: FtsIndexParams;
}

/** One index of a dataset version. */
export interface IndexDescription {
  name: string;
  uuid: string;
  columns: string[];
  /** Friendly type: IVF_PQ, BTREE, FTS, ... */
  type: string;
  typeUrl?: string | undefined;
  numIndexedRows?: number | undefined;
  numUnindexedRows?: number | undefined;
  sizeBytes?: number | undefined;
  numSegments?: number | undefined;
  /** ISO 8601. */
  createdAt?: string | undefined;
  indexVersion?: number | undefined;
  /** Type-specific details as a JSON text. */
  details?: string | undefined;
}

/** Engine operations on a dataset's indices (see lance-engine.ts). */
export interface IndexOps {
  /**
   * Builds the index and commits it; returns once it is built. An index of that name already
   * existing is EngineError('index_exists'); a type the engine cannot build (or cannot now: its
   * second engine is not installed) is 'unsupported', with a message that says how to enable it.
   * Rows committed while it is built stay, as rows the index does not cover.
   */
  createIndex(at: DatasetLocation, spec: IndexSpec): Promise<{ name: string; version: number }>;
  /** The indices of the latest version, or of `version`. */
  listIndices(at: DatasetLocation, options?: { version?: number | undefined }): Promise<IndexDescription[]>;
  /** Drops the index and commits; EngineError('index_not_found') when there is none of that name. */
  dropIndex(at: DatasetLocation, name: string): Promise<{ version: number }>;
}
