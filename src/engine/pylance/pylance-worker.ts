import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type DatasetLocation, EngineError } from '../dataset-location.js';
import { type HandleResolver, stderrLog, WorkerPool, workerEnv, workerFailure } from '../python-worker/worker-pool.js';
import { WorkerGone, type WorkerLog } from '../python-worker/worker-process.js';

// The second Lance engine: pylance, in Python worker processes (worker/index_worker.py, through
// python-worker/), for what @lancedb/lancedb 0.39 cannot do: build some index types, and maintain
// a table one operation at a time. The workers run no user code; they are not the UDF workers and
// do not depend on udf_execution. Each request is handed a handle the engine's resolver answers
// for the dataset's location: pylance opens the dataset through it as a Lance REST namespace, so
// that on a table with managed versioning its commit reaches the location's commit coordinator,
// the service's commit path, as every other engine write does. The workers start with the first
// request, not with the service.

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const WORKER_SCRIPT = `${REPO}worker/index_worker.py`;
export const DEFAULT_INDEX_PYTHON = `${REPO}.venv-index/bin/python`;
const INSTALL = 'bash scripts/install-index-worker.sh';

export interface PylanceIndexOptions {
  /** The Python with pylance pinned (scripts/install-index-worker.sh); default `<repo>/.venv-index/bin/python`. */
  python?: string;
  /** Worker processes, each running one request at a time; default 1. */
  workers?: number;
  /** Where the workers' stderr and notes about them go; default this process's stderr. */
  log?: WorkerLog;
  /** How to install the Python, for messages: default the index worker's (scripts/install-index-worker.sh, --index-python). */
  howToInstall?: string;
}

/** The pylance workers: one request at a time each, on a dataset opened through the engine's resolver. */
export class PylanceWorkers {
  private readonly python: string;
  private readonly log: WorkerLog;
  private readonly pool: WorkerPool;
  private readonly howToInstall: string;

  constructor(
    private readonly resolver: HandleResolver,
    options: PylanceIndexOptions = {},
  ) {
    this.python = options.python ?? DEFAULT_INDEX_PYTHON;
    this.log = options.log ?? stderrLog('index-worker');
    this.howToInstall =
      options.howToInstall ??
      `Install its Python with \`${INSTALL}\` (npm install runs it when python3 3.10 or newer is on the PATH), or name one with pylance 14 with --index-python.`;
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
    return this.howToInstall;
  }

  /**
   * Sends `request` (its op and fields; the resolver and table_id are added) to a worker for the
   * dataset at `at` and returns the answer's fields. `what` names the work in messages: `building
   * index x`, `compacting`. No Python at all: 'unsupported', saying what needs it and how to
   * enable it, without starting anything.
   */
  async run(at: DatasetLocation, what: string, request: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (!existsSync(this.python)) {
      throw new EngineError('unsupported', `${what} needs pylance's index worker, whose Python (${this.python}) is not installed. ${this.howToEnable()}`);
    }
    return this.pool.withWorker((worker) =>
      this.resolver.withResolvedHandle(at, async ({ resolverUri, handle }) => {
        const answer = await worker.request({ ...request, resolver: resolverUri, table_id: [handle] }).catch((e: unknown) => {
          if (e instanceof WorkerGone) throw new EngineError('unavailable', `${e.message} while ${what}; the next request starts a new worker`, { cause: e });
          throw e;
        });
        if (!answer.ok) throw workerFailure(answer, this.log, worker.pid, 'index worker');
        return answer;
      }),
    );
  }

  /** Stops the workers (if any started). */
  close(): Promise<void> {
    return this.pool.close();
  }
}
