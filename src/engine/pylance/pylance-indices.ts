import { z } from 'zod';
import { type DatasetLocation, EngineError } from '../dataset-location.js';
import type { EngineIndexType, IndexSpec } from '../ports/indices.js';
import type { PylanceWorkers } from './pylance-worker.js';

// The index types @lancedb/lancedb 0.39 has no builder for, built by pylance's worker (see
// pylance-worker.ts).

/** The index types this engine builds. */
export const PYLANCE_INDEX_TYPES: readonly EngineIndexType[] = ['IVF_SQ', 'IVF_HNSW_FLAT', 'NGRAM', 'ZONEMAP', 'BLOOMFILTER', 'RTREE'];

const builtAnswer = z.object({ name: z.string(), version: z.number().int().positive() });

export class PylanceIndexBuilder {
  constructor(private readonly workers: PylanceWorkers) {}

  /** Builds the index (one of PYLANCE_INDEX_TYPES) and commits it; returns once it is committed. */
  async createIndex(at: DatasetLocation, spec: IndexSpec): Promise<{ name: string; version: number }> {
    if (!PYLANCE_INDEX_TYPES.includes(spec.type)) throw new EngineError('unsupported', `pylance's index worker does not build ${spec.type} indexes`);
    const v = spec.vector;
    const answer = await this.workers.run(at, `building index ${spec.name}`, {
      op: 'create_index',
      column: spec.column,
      index_type: spec.type,
      name: spec.name,
      distance_type: spec.distanceType ?? null,
      num_partitions: v.numPartitions ?? null,
      target_partition_size: v.targetPartitionSize ?? null,
      num_bits: v.numBits ?? null,
      sample_rate: v.sampleRate ?? null,
      max_iterations: v.maxIterations ?? null,
      m: v.m ?? null,
      ef_construction: v.efConstruction ?? null,
      branch: at.branch ?? null,
    });
    return builtAnswer.parse(answer);
  }
}
