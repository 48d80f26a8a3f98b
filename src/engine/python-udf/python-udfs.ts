import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { type DatasetLocation, EngineError } from '../dataset-location.js';
import { type ChunkerExpansion, UdfFailure, type UdfFill, type UdfOps, type UdtfRun } from '../ports/udfs.js';
import type { Materialization, Materialized } from '../ports/views.js';
import { type HandleResolver, stderrLog, WorkerPool, workerEnv, workerFailure } from '../python-worker/worker-pool.js';
import {
  type PythonWorkerProcess,
  type WorkerAnswer,
  type WorkerFailure,
  WorkerGone,
  type WorkerLog,
  WorkerTimedOut,
} from '../python-worker/worker-process.js';

// The UDF port over a small pool of Python worker processes (worker/udf_worker.py, through
// python-worker/). This module is the only code that knows what they do: it hands each fill to an idle worker together with a
// handle the engine's resolver answers for the dataset's location (the worker opens the dataset
// and commits through it, so a managed table's commit goes through its commit coordinator), and
// turns the worker's answer into the port's results and errors. It never loads a pickle itself.

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const WORKER_SCRIPT = `${REPO}worker/udf_worker.py`;
export const DEFAULT_UDF_PYTHON = `${REPO}.venv-udf/bin/python`;

const fillAnswer = z.object({ rows: z.number().int().nonnegative(), version: z.number().int().positive() });

const materializeAnswer = z.object({
  rows: z.number().int().nonnegative(),
  version: z.number().int().positive(),
  fragments: z.number().int().nonnegative(),
});

export interface PythonUdfOptions {
  /** The Python with geneva, pylance and pyarrow pinned (scripts/install-udf-worker.sh); default `<repo>/.venv-udf/bin/python`. */
  python?: string;
  /** Worker processes, each running one fill at a time; default 1. */
  workers?: number;
  /** A fill still running after this long fails as a UdfFailure and its worker is killed; default none. */
  fillTimeoutMs?: number;
  /** Rows per batch handed to the UDF when the UDF names no batch size of its own; the worker's default otherwise. */
  batchRows?: number;
  /** Where the workers' stderr and notes about them go; default this process's stderr. */
  log?: WorkerLog;
  /** udf_execution ray: the workers send the UDF calls to the Ray cluster at this address (worker/udf_worker.py). */
  rayAddress?: string;
}

export class PythonUdfs implements UdfOps {
  private constructor(
    private readonly resolver: HandleResolver,
    private readonly pool: WorkerPool,
    private readonly options: PythonUdfOptions,
    private readonly log: WorkerLog,
  ) {}

  /**
   * Starts the workers and waits until each answers a ping, so that a Python without the pinned
   * packages fails here, at start, with its own words.
   */
  static async start(resolver: HandleResolver, options: PythonUdfOptions = {}): Promise<PythonUdfs> {
    const log = options.log ?? stderrLog('udf-worker');
    const pool = new WorkerPool({
      python: options.python ?? DEFAULT_UDF_PYTHON,
      script: WORKER_SCRIPT,
      env: workerEnv({ UDF_WORKER_RAY_ADDRESS: options.rayAddress }),
      size: options.workers ?? 1,
      log,
      label: 'UDF worker',
      notStarted: (reason) =>
        new EngineError('internal', `${reason}. Install its Python with scripts/install-udf-worker.sh, or name one with geneva, pylance and pyarrow.`),
    });
    try {
      await pool.startAll();
    } catch (e) {
      await pool.close();
      throw e;
    }
    return new PythonUdfs(resolver, pool, options, log);
  }

  async fill(at: DatasetLocation, fill: UdfFill): Promise<{ rows: number; version: number }> {
    return this.pool.withWorker((worker) =>
      this.resolver.withResolvedHandle(at, async ({ resolverUri, handle }) => {
        const request = {
          op: 'fill',
          resolver: resolverUri,
          table_id: [handle],
          column: fill.column,
          udf_path: fill.udfPath,
          input_columns: fill.inputColumns,
          filter: fill.filter,
          branch: at.branch ?? null,
          ...(this.options.batchRows !== undefined ? { batch_rows: this.options.batchRows } : {}),
        };
        return fillAnswer.parse(await this.send(worker, request, `a fill of column ${fill.column}`));
      }),
    );
  }

  /**
   * One request to `worker`, doing `what`; a UDF's own failure, or a timeout (the worker is
   * stopped), is a UdfFailure. A worker that died is 'unavailable', worth a retry: the next
   * request gets a new worker (a fill is one chunk again, a refresh a full recompute again), and a
   * UDF that kills its worker every time runs out of retries.
   */
  private async send(worker: PythonWorkerProcess, request: Record<string, unknown>, what: string): Promise<WorkerAnswer> {
    const answer = await worker.request(request, this.options.fillTimeoutMs).catch((e: unknown) => {
      if (e instanceof WorkerTimedOut) throw new UdfFailure(`${what} did not finish within ${e.timeoutMs} ms; its worker was stopped`, undefined);
      if (e instanceof WorkerGone)
        throw new EngineError('unavailable', `${e.message} while running ${what}; the next request starts a new worker`, { cause: e });
      throw e;
    });
    if (!answer.ok) throw this.failure(answer, worker.pid);
    return answer;
  }

  async materialize(source: DatasetLocation, view: DatasetLocation, m: Materialization, expansion?: ChunkerExpansion | UdtfRun): Promise<Materialized> {
    return this.pool.withWorker((worker) =>
      this.resolver.withResolvedHandle(source, (src) =>
        this.resolver.withResolvedHandle(view, async (dst) => {
          const request = {
            op: 'materialize',
            resolver: dst.resolverUri,
            source_id: [src.handle],
            source_version: m.sourceVersion,
            view_id: [dst.handle],
            filter: m.filter,
            columns: m.columns.map((c) => [c.name, c.sql]),
            limit: m.limit,
            offset: m.offset,
            udfs: m.udfs.map((u) => ({ column: u.column, udf_path: u.udfPath, input_columns: u.inputColumns })),
            schema_metadata: m.schemaMetadata,
            field_metadata: m.fieldMetadata,
            max_rows_per_file: m.maxRowsPerFile,
            ...(expansion?.kind === 'chunker'
              ? {
                  chunker: { udf_path: expansion.udfPath, input_columns: expansion.inputColumns, inherited: expansion.inherited },
                  output_limit: expansion.outputLimit,
                }
              : {}),
            ...(expansion?.kind === 'udtf'
              ? { udtf: { udf_path: expansion.udfPath, source_query: expansion.sourceQuery, partition_by: expansion.partitionBy } }
              : {}),
            ...(this.options.batchRows !== undefined ? { batch_rows: this.options.batchRows } : {}),
          };
          return materializeAnswer.parse(await this.send(worker, request, "a materialized view's refresh"));
        }),
      ),
    );
  }

  private failure(answer: WorkerFailure, pid: number | undefined): Error {
    return answer.kind === 'udf' ? new UdfFailure(answer.message, answer.traceback) : workerFailure(answer, this.log, pid, 'UDF worker');
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
