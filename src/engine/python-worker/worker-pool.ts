import { type DatasetLocation, EngineError } from '../dataset-location.js';
import { classify, type ResolvedHandle } from '../lancedb/table-access.js';
import { PythonWorkerProcess, type WorkerFailure, type WorkerLog } from './worker-process.js';

// A small pool of Python worker processes running one script (the UDF workers, the index
// workers): one request at a time per worker, the others waiting for a free one; a worker that
// died is replaced by the next request that takes its slot. The adapters that use it
// (python-udf/, pylance/) hand each request a dataset handle the engine's resolver answers for.

/** Registers a location with the engine's resolver for the duration of a callback (TableAccess.withResolvedHandle). */
export interface HandleResolver {
  withResolvedHandle<T>(at: DatasetLocation, fn: (resolved: ResolvedHandle) => Promise<T>): Promise<T>;
}

export interface WorkerPoolOptions {
  python: string;
  script: string;
  env: NodeJS.ProcessEnv;
  /** Worker processes, each running one request at a time. */
  size: number;
  log: WorkerLog;
  /** What a worker is called in messages: `UDF worker`, `index worker`. */
  label: string;
  /** The error for a worker that did not answer its first ping (the Python lacks its packages, or is not there): says how to install it. */
  notStarted(reason: string): Error;
}

/** A stderr line of the workers, prefixed by what they are, when no log was given. */
export const stderrLog =
  (label: string): WorkerLog =>
  (_level, message, fields) =>
    process.stderr.write(`[${label} ${fields.pid ?? '-'}] ${message}\n`);

/**
 * The service's environment for a worker: without its own settings (secrets among them: a worker
 * gets the store's options from the resolver), with loopback calls to the resolver never sent
 * through a proxy the environment names, and with `extra` set (a variable given as undefined is
 * removed).
 */
export function workerEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const noProxy = [process.env.NO_PROXY ?? process.env.no_proxy, '127.0.0.1', 'localhost'].filter(Boolean).join(',');
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('LANCE_NS_') && !(name in extra)));
  const set = Object.fromEntries(Object.entries(extra).filter((entry): entry is [string, string] => entry[1] !== undefined));
  return { ...inherited, NO_PROXY: noProxy, no_proxy: noProxy, PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1', ...set };
}

/**
 * A worker's failure as the engine's error (the kinds of worker/line_protocol.py; `udf` is the UDF
 * adapter's own, and anything else it does not name is classified by its message like the engine's).
 */
export function workerFailure(answer: WorkerFailure, log: WorkerLog, pid: number | undefined, label: string): Error {
  switch (answer.kind) {
    case 'conflict':
      return new EngineError('conflict', answer.message);
    case 'invalid_input':
      return new EngineError('invalid_input', answer.message);
    case 'not_found':
      return new EngineError(answer.what === 'column' ? 'column_not_found' : 'not_a_dataset', answer.message);
    case 'exists':
      return new EngineError('index_exists', answer.message);
    default:
      if (answer.traceback) log('warn', `${label} failure: ${answer.traceback}`, { pid });
      return classify(new Error(answer.message));
  }
}

export class WorkerPool {
  /** One slot per worker; a slot whose process died is refilled by the next request that takes it. */
  private readonly slots: Array<PythonWorkerProcess | undefined>;
  private readonly idle: number[];
  private readonly waiting: Array<{ take(slot: number): void; refuse(e: Error): void }> = [];
  private closed = false;

  constructor(private readonly options: WorkerPoolOptions) {
    if (!Number.isInteger(options.size) || options.size < 1) throw new Error(`${options.label}s must be a positive integer, not ${options.size}`);
    this.slots = new Array<PythonWorkerProcess | undefined>(options.size).fill(undefined);
    this.idle = Array.from({ length: options.size }, (_, i) => i);
  }

  /** Starts every worker and waits until each answers a ping, so that a Python without its packages fails here, with its own words. */
  async startAll(): Promise<void> {
    await Promise.all(this.slots.map((_, slot) => this.workerAt(slot)));
  }

  /**
   * The slot's live worker. An empty slot, or one whose worker ended, gets a new worker, handed
   * out once it answers a ping: its start-up (Python importing its packages) is not charged to a
   * request's timeout.
   */
  private async workerAt(slot: number): Promise<PythonWorkerProcess> {
    const current = this.slots[slot];
    if (current?.alive) return current;
    const { python, script, env, log, label } = this.options;
    if (current) log('warn', `starting a new ${label} in place of one that ended`, { pid: current.pid });
    const worker = new PythonWorkerProcess(python, script, env, log, label);
    this.slots[slot] = worker;
    const answer = await worker.request({ op: 'ping' }).catch((e: unknown) => ({ ok: false as const, message: e instanceof Error ? e.message : String(e) }));
    if (!answer.ok) {
      worker.kill('SIGKILL');
      throw this.options.notStarted(`the ${label} (${python} ${script}) did not start: ${answer.message}`);
    }
    log('info', `${label} ready`, { pid: worker.pid, versions: answer.versions });
    return worker;
  }

  /** Runs `fn` on an idle worker (waiting for one), started first if its slot is empty. */
  async withWorker<T>(fn: (worker: PythonWorkerProcess) => Promise<T>): Promise<T> {
    if (this.closed) throw this.stopped();
    const slot = this.idle.pop() ?? (await new Promise<number>((take, refuse) => this.waiting.push({ take, refuse })));
    try {
      return await fn(await this.workerAt(slot));
    } finally {
      const next = this.waiting.shift();
      if (next) next.take(slot);
      else this.idle.push(slot);
    }
  }

  private stopped(): Error {
    return new EngineError('internal', `the ${this.options.label}s are stopped`);
  }

  /** Stops the workers; requests waiting for one are refused. */
  async close(): Promise<void> {
    this.closed = true;
    for (const waiter of this.waiting.splice(0)) waiter.refuse(this.stopped());
    await Promise.all(this.slots.map((worker) => worker?.stop()));
  }
}
