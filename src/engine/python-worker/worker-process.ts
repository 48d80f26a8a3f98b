import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import readline from 'node:readline';
import { z } from 'zod';

// One Python worker process (worker/udf_worker.py, worker/index_worker.py) and the line protocol
// they share (worker/line_protocol.py): one JSON request per line on its stdin, one JSON answer per
// line on its stdout, one request at a time. Its stderr (whatever the libraries, and UDFs, print)
// goes to the log.

/** Where the worker's stderr lines and the adapter's notes about its workers go. */
export type WorkerLog = (level: 'info' | 'warn', message: string, fields: { pid?: number | undefined; [key: string]: unknown }) => void;

/** The failure kinds the workers answer with (each worker documents which of them it uses). */
const failureKinds = ['udf', 'conflict', 'invalid_input', 'not_found', 'exists', 'internal'] as const;

/** A worker's answer to one request. */
export const workerAnswer = z.union([
  z.object({ id: z.number().nullable(), ok: z.literal(true) }).loose(),
  z.object({
    id: z.number().nullable(),
    ok: z.literal(false),
    kind: z.enum(failureKinds),
    message: z.string(),
    what: z.enum(['dataset', 'column']).optional(),
    traceback: z.string().optional(),
  }),
]);
export type WorkerAnswer = z.infer<typeof workerAnswer>;
export type WorkerFailure = Extract<WorkerAnswer, { ok: false }>;

/** The worker process ended (or could not start) before answering. */
export class WorkerGone extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WorkerGone';
  }
}

/** The worker did not answer within the time allowed; it was killed. */
export class WorkerTimedOut extends Error {
  constructor(readonly timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms`);
    this.name = 'WorkerTimedOut';
  }
}

interface Pending {
  id: number;
  resolve(answer: WorkerAnswer): void;
  reject(error: Error): void;
}

export class PythonWorkerProcess {
  private readonly child: ChildProcessWithoutNullStreams;
  private pending: Pending | undefined;
  private nextId = 1;
  /** Why the process is gone, once it is. */
  private gone: string | undefined;
  /** Set once it was told to stop: whatever it still does, it takes no more requests. */
  private stopping = false;
  /** Settles once the process has ended and its pipes are closed. */
  readonly ended: Promise<void>;

  constructor(
    python: string,
    script: string,
    env: NodeJS.ProcessEnv,
    private readonly log: WorkerLog,
    /** What the worker is called in messages: `UDF worker`, `index worker`. */
    private readonly label: string,
  ) {
    this.child = spawn(python, [script], { stdio: ['pipe', 'pipe', 'pipe'], env });
    let ended = () => {};
    this.ended = new Promise((resolve) => (ended = resolve));
    const end = (why: string) => {
      if (this.gone !== undefined) return;
      this.gone = why;
      const pending = this.pending;
      this.pending = undefined;
      pending?.reject(new WorkerGone(why));
      ended();
    };
    // Writing to a worker that died fails here; 'close' reports the death.
    this.child.stdin.on('error', () => undefined);
    this.child.on('error', (e) => {
      // No process at all (a wrong python path): there will be no 'close' with an exit status.
      if (this.child.pid === undefined) end(`the ${label} could not start ${python}: ${e.message}`);
      else this.log('warn', `${label} error: ${e.message}`, { pid: this.child.pid });
    });
    this.child.on('close', (code, signal) => end(`the ${label} (pid ${this.child.pid}) exited ${signal ? `on signal ${signal}` : `with code ${code}`}`));
    readline.createInterface({ input: this.child.stdout, crlfDelay: Infinity }).on('line', (line) => this.answer(line));
    readline.createInterface({ input: this.child.stderr, crlfDelay: Infinity }).on('line', (line) => this.log('info', line, { pid: this.child.pid }));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return this.gone === undefined && !this.stopping;
  }

  /** Sends one request and waits for its answer; the worker must be idle. */
  request(body: Record<string, unknown>, timeoutMs?: number): Promise<WorkerAnswer> {
    if (!this.alive) return Promise.reject(new WorkerGone(this.gone ?? `the ${this.label} (pid ${this.child.pid}) is stopping`));
    if (this.pending) return Promise.reject(new Error(`the ${this.label} is busy`));
    const id = this.nextId++;
    return new Promise<WorkerAnswer>((resolve, reject) => {
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              if (this.pending?.id !== id) return;
              this.pending = undefined;
              reject(new WorkerTimedOut(timeoutMs));
              // Whatever it is doing (a UDF that never returns), nothing else will answer it.
              this.kill('SIGKILL');
            }, timeoutMs);
      const settle =
        <T>(fn: (value: T) => void) =>
        (value: T) => {
          clearTimeout(timer);
          fn(value);
        };
      this.pending = { id, resolve: settle(resolve), reject: settle(reject) };
      this.child.stdin.write(`${JSON.stringify({ ...body, id })}\n`);
    });
  }

  private answer(line: string): void {
    let answer: WorkerAnswer;
    try {
      answer = workerAnswer.parse(JSON.parse(line));
    } catch (e) {
      // Nothing but the protocol is ever written to the worker's stdout: this one cannot be trusted.
      this.log('warn', `${this.label} wrote a line that is not an answer; stopping it: ${line.slice(0, 200)}`, { pid: this.child.pid, error: String(e) });
      this.kill('SIGKILL');
      return;
    }
    const pending = this.pending;
    if (!pending || (answer.id !== null && answer.id !== pending.id)) {
      this.log('warn', `${this.label} answered a request it was not asked (${String(answer.id)})`, { pid: this.child.pid });
      return;
    }
    this.pending = undefined;
    pending.resolve(answer);
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): void {
    this.stopping = true;
    if (this.gone === undefined) this.child.kill(signal);
  }

  /** Stops the process: SIGTERM, then SIGKILL if it has not ended within `graceMs`. */
  async stop(graceMs = 2_000): Promise<void> {
    this.kill('SIGTERM');
    const timer = setTimeout(() => this.kill('SIGKILL'), graceMs);
    await this.ended;
    clearTimeout(timer);
  }
}
