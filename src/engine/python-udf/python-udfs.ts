import { fileURLToPath } from 'node:url';
import { type DatasetLocation, EngineError } from '../dataset-location.js';
import { classify, type ResolvedHandle } from '../lancedb/table-access.js';
import { type ChunkerExpansion, UdfFailure, type UdfFill, type UdfOps, type UdtfRun } from '../ports/udfs.js';
import type { Materialization, Materialized } from '../ports/views.js';
import {
  fillAnswer,
  materializeAnswer,
  type UdfWorkerLog,
  UdfWorkerProcess,
  type WorkerAnswer,
  type WorkerFailure,
  WorkerGone,
  WorkerTimedOut,
} from './worker-process.js';

// The UDF port over a small pool of Python worker processes (worker/udf_worker.py). This module
// is the only code that knows about them: it hands each fill to an idle worker together with a
// handle the engine's resolver answers for the dataset's location (the worker opens the dataset
// and commits through it, so a managed table's commit goes through its commit coordinator), and
// turns the worker's answer into the port's results and errors. It never loads a pickle itself.

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const WORKER_SCRIPT = `${REPO}worker/udf_worker.py`;
export const DEFAULT_UDF_PYTHON = `${REPO}.venv-udf/bin/python`;

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
  log?: UdfWorkerLog;
  /** udf_execution ray: the workers send the UDF calls to the Ray cluster at this address (worker/udf_worker.py). */
  rayAddress?: string;
}

/** Registers a location with the engine's resolver for the duration of a callback (TableAccess.withResolvedHandle). */
export interface HandleResolver {
  withResolvedHandle<T>(at: DatasetLocation, fn: (resolved: ResolvedHandle) => Promise<T>): Promise<T>;
}

const stderrLog: UdfWorkerLog = (_level, message, fields) => process.stderr.write(`[udf-worker ${fields.pid ?? '-'}] ${message}\n`);

/**
 * The service's environment without its own settings (secrets among them: the worker runs
 * user code and needs none of them; it gets the store's options from the resolver), and with
 * loopback calls to the resolver never sent through a proxy the environment names.
 */
function workerEnv(rayAddress: string | undefined): NodeJS.ProcessEnv {
  const noProxy = [process.env.NO_PROXY ?? process.env.no_proxy, '127.0.0.1', 'localhost'].filter(Boolean).join(',');
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('LANCE_NS_') && name !== 'UDF_WORKER_RAY_ADDRESS'));
  return {
    ...inherited,
    NO_PROXY: noProxy,
    no_proxy: noProxy,
    PYTHONUNBUFFERED: '1',
    PYTHONDONTWRITEBYTECODE: '1',
    ...(rayAddress !== undefined ? { UDF_WORKER_RAY_ADDRESS: rayAddress } : {}),
  };
}

export class PythonUdfs implements UdfOps {
  /** One slot per worker; a slot whose process died is refilled by the next request that takes it. */
  private readonly slots: Array<UdfWorkerProcess | undefined>;
  private readonly idle: number[];
  private readonly waiting: Array<{ take(slot: number): void; refuse(e: Error): void }> = [];
  private closed = false;

  private constructor(
    private readonly resolver: HandleResolver,
    private readonly options: Required<Pick<PythonUdfOptions, 'python' | 'log'>> & PythonUdfOptions,
    size: number,
  ) {
    this.slots = new Array<UdfWorkerProcess | undefined>(size).fill(undefined);
    this.idle = Array.from({ length: size }, (_, i) => i);
  }

  /**
   * Starts the workers and waits until each answers a ping, so that a Python without the pinned
   * packages fails here, at start, with its own words.
   */
  static async start(resolver: HandleResolver, options: PythonUdfOptions = {}): Promise<PythonUdfs> {
    const size = options.workers ?? 1;
    if (!Number.isInteger(size) || size < 1) throw new Error(`UDF workers must be a positive integer, not ${size}`);
    const udfs = new PythonUdfs(resolver, { ...options, python: options.python ?? DEFAULT_UDF_PYTHON, log: options.log ?? stderrLog }, size);
    try {
      await Promise.all(udfs.slots.map((_, slot) => udfs.workerAt(slot)));
    } catch (e) {
      await udfs.close();
      throw e;
    }
    return udfs;
  }

  /**
   * The slot's live worker. An empty slot, or one whose worker ended, gets a new worker, handed
   * out once it answers a ping: its start-up (Python importing geneva) is not charged to a fill's
   * timeout.
   */
  private async workerAt(slot: number): Promise<UdfWorkerProcess> {
    const current = this.slots[slot];
    if (current?.alive) return current;
    if (current) this.options.log('warn', 'starting a new UDF worker in place of one that ended', { pid: current.pid });
    const worker = new UdfWorkerProcess(this.options.python, WORKER_SCRIPT, workerEnv(this.options.rayAddress), this.options.log);
    this.slots[slot] = worker;
    const answer = await worker.request({ op: 'ping' }).catch((e: unknown) => ({ ok: false as const, message: e instanceof Error ? e.message : String(e) }));
    if (!answer.ok) {
      worker.kill('SIGKILL');
      throw new EngineError(
        'internal',
        `the UDF worker (${this.options.python} ${WORKER_SCRIPT}) did not start: ${answer.message}. ` +
          'Install its Python with scripts/install-udf-worker.sh, or name one with geneva, pylance and pyarrow.',
      );
    }
    this.options.log('info', 'UDF worker ready', { pid: worker.pid, versions: answer.versions });
    return worker;
  }

  private async withWorker<T>(fn: (worker: UdfWorkerProcess) => Promise<T>): Promise<T> {
    if (this.closed) throw new EngineError('internal', 'the UDF workers are stopped');
    const slot = this.idle.pop() ?? (await new Promise<number>((take, refuse) => this.waiting.push({ take, refuse })));
    try {
      return await fn(await this.workerAt(slot));
    } finally {
      const next = this.waiting.shift();
      if (next) next.take(slot);
      else this.idle.push(slot);
    }
  }

  async fill(at: DatasetLocation, fill: UdfFill): Promise<{ rows: number; version: number }> {
    return this.withWorker((worker) =>
      this.resolver.withResolvedHandle(at, async ({ resolverUri, handle }) => {
        const request = {
          op: 'fill',
          resolver: resolverUri,
          table_id: [handle],
          column: fill.column,
          udf_path: fill.udfPath,
          input_columns: fill.inputColumns,
          filter: fill.filter,
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
  private async send(worker: UdfWorkerProcess, request: Record<string, unknown>, what: string): Promise<WorkerAnswer> {
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
    return this.withWorker((worker) =>
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
    switch (answer.kind) {
      case 'udf':
        return new UdfFailure(answer.message, answer.traceback);
      case 'conflict':
        return new EngineError('conflict', answer.message);
      case 'invalid_input':
        return new EngineError('invalid_input', answer.message);
      case 'not_found':
        return new EngineError(answer.what === 'column' ? 'column_not_found' : 'not_a_dataset', answer.message);
      case 'internal':
        if (answer.traceback) this.options.log('warn', `UDF worker failure: ${answer.traceback}`, { pid });
        return classify(new Error(answer.message));
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const waiter of this.waiting.splice(0)) waiter.refuse(new EngineError('internal', 'the UDF workers are stopped'));
    await Promise.all(this.slots.map((worker) => worker?.stop()));
  }
}
