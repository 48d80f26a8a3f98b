import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { type DatasetLocation, EngineError } from '../dataset-location.js';
import type { EngineIndexType, IndexSpec } from '../ports/indices.js';
import { type HandleResolver, stderrLog, WorkerPool, workerEnv, workerFailure } from '../python-worker/worker-pool.js';
import { WorkerGone, type WorkerLog } from '../python-worker/worker-process.js';

// The second Lance engine: pylance, in Python worker processes (worker/index_worker.py, through
// python-worker/), building the index types @lancedb/lancedb 0.39 has no builder for. The workers
// run no user code; they are not the UDF workers and do not depend on udf_execution. Each build is
// handed a handle the engine's resolver answers for the dataset's location: pylance opens the
// dataset through it as a Lance REST namespace, so that on a table with managed versioning its
// commit of the index reaches the location's commit coordinator, the service's commit path, as
// every other engine write does. The workers start with the first build, not with the service.

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const WORKER_SCRIPT = `${REPO}worker/index_worker.py`;
export const DEFAULT_INDEX_PYTHON = `${REPO}.venv-index/bin/python`;
const INSTALL = 'bash scripts/install-index-worker.sh';

/** The index types this engine builds. */
export const PYLANCE_INDEX_TYPES: readonly EngineIndexType[] = ['IVF_SQ', 'IVF_HNSW_FLAT', 'NGRAM', 'ZONEMAP', 'BLOOMFILTER', 'RTREE'];

export interface PylanceIndexOptions {
  /** The Python with pylance pinned (scripts/install-index-worker.sh); default `<repo>/.venv-index/bin/python`. */
  python?: string;
  /** Worker processes, each building one index at a time; default 1. */
  workers?: number;
  /** Where the workers' stderr and notes about them go; default this process's stderr. */
  log?: WorkerLog;
}

const builtAnswer = z.object({ name: z.string(), version: z.number().int().positive() });

export class PylanceIndexBuilder {
  private readonly python: string;
  private readonly log: WorkerLog;
  private readonly pool: WorkerPool;

  constructor(
    private readonly resolver: HandleResolver,
    options: PylanceIndexOptions = {},
  ) {
    this.python = options.python ?? DEFAULT_INDEX_PYTHON;
    this.log = options.log ?? stderrLog('index-worker');
    this.pool = new WorkerPool({
      python: this.python,
      script: WORKER_SCRIPT,
      env: workerEnv(),
      size: options.workers ?? 1,
      log: this.log,
      label: 'index worker',
      notStarted: (reason) => new EngineError('unsupported', `${reason}. ${this.howToEnable()}`),
    });
  }

  private howToEnable(): string {
    return `Install its Python with \`${INSTALL}\` (npm install runs it when python3 3.10 or newer is on the PATH), or name one with pylance 14 with --index-python.`;
  }

  /** Builds the index (one of PYLANCE_INDEX_TYPES) and commits it; returns once it is committed. */
  async createIndex(at: DatasetLocation, spec: IndexSpec): Promise<{ name: string; version: number }> {
    if (!PYLANCE_INDEX_TYPES.includes(spec.type)) throw new EngineError('unsupported', `pylance's index worker does not build ${spec.type} indexes`);
    // No Python at all: say what builds these indexes and how to enable it, without starting anything.
    if (!existsSync(this.python)) {
      throw new EngineError(
        'unsupported',
        `${spec.type} indexes are built by pylance in an index worker, whose Python (${this.python}) is not installed. ${this.howToEnable()}`,
      );
    }
    return this.pool.withWorker((worker) =>
      this.resolver.withResolvedHandle(at, async ({ resolverUri, handle }) => {
        const v = spec.vector;
        const request = {
          op: 'create_index',
          resolver: resolverUri,
          table_id: [handle],
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
        };
        const answer = await worker.request(request).catch((e: unknown) => {
          if (e instanceof WorkerGone)
            throw new EngineError('unavailable', `${e.message} while building index ${spec.name}; the next build starts a new worker`, { cause: e });
          throw e;
        });
        if (!answer.ok) throw workerFailure(answer, this.log, worker.pid, 'index worker');
        return builtAnswer.parse(answer);
      }),
    );
  }

  /** Stops the workers (if any started). */
  close(): Promise<void> {
    return this.pool.close();
  }
}
