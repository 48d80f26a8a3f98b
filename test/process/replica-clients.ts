import { type ChildProcess, type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { arrow } from '../../src/engine/arrow.js';
import type { TestRoot } from '../support/backends.js';
import { clientCredentialEnv } from '../support/client-credentials.js';
import { REPO, VENV_BIN } from '../support/python.js';

// The real clients of the replica tests (replicas.test.ts, client-in-doubt.test.ts): rows of the
// managed table they append to, and pylance writer processes (replica_writer.py).

const WRITER = fileURLToPath(new URL('./replica_writer.py', import.meta.url));

/** The managed table's schema: {id: int64, writer: utf8}, nullable as pyarrow makes them. */
export const writerSchema = new arrow.Schema([new arrow.Field('id', new arrow.Int64(), true), new arrow.Field('writer', new arrow.Utf8(), true)]);

export function writerRows(ids: number[], writer: string): import('apache-arrow').Table {
  return new arrow.Table(writerSchema, {
    id: arrow.vectorFromArray(
      ids.map((n) => BigInt(n)),
      new arrow.Int64(),
    ),
    writer: arrow.vectorFromArray(
      ids.map(() => writer),
      new arrow.Utf8(),
    ),
  });
}

export interface PylanceWriterConfig {
  /** The namespace's URL (the spreader's). */
  url: string;
  table_id: string[];
  /** Written into every row's `writer` column. */
  writer: string;
  /** Ids first_id, first_id + 1, ... in order, rows_per_append per append. */
  first_id: number;
  /** Appends per phase; each phase waits for go(). */
  phases: number[];
  rows_per_append: number;
}

/** One append as the writer reported it: the version it committed, or the client's error. */
export interface AppendReport {
  first: number;
  count: number;
  version?: number;
  error?: string;
}

export interface PylanceWriter {
  child: ChildProcessWithoutNullStreams;
  /** Resolves once connected (rejects if the process ends first). */
  ready: Promise<void>;
  /** Starts the next phase. */
  go(): void;
  /** Resolves when the process exits cleanly after its last phase. */
  done: Promise<void>;
}

/** Starts a pylance writer process over `root` (its S3 keys in the environment); `live` tracks it until it exits. */
export function startPylanceWriter(
  config: PylanceWriterConfig,
  root: TestRoot,
  onAppend: (report: AppendReport) => void,
  live?: Set<ChildProcess>,
): PylanceWriter {
  const env = { ...process.env, ...clientCredentialEnv(root), NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost' };
  const child = spawn(`${VENV_BIN}python`, [WRITER, JSON.stringify(config)], { cwd: REPO, env, stdio: ['pipe', 'pipe', 'pipe'] });
  live?.add(child);
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (c: string) => (stderr += c));
  let markReady = () => {};
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  let error: string | undefined;
  createInterface({ input: child.stdout }).on('line', (line) => {
    let m: { kind: string; message?: string } & Partial<AppendReport>;
    try {
      m = JSON.parse(line) as typeof m;
    } catch {
      return; // not ours (a library printing to stdout)
    }
    if (m.kind === 'ready') markReady();
    else if (m.kind === 'append')
      onAppend({
        first: m.first ?? 0,
        count: m.count ?? 0,
        ...(m.version !== undefined ? { version: m.version } : {}),
        ...(m.error !== undefined ? { error: m.error } : {}),
      });
    else if (m.kind === 'error') error = m.message;
  });
  const done = new Promise<void>((resolve, reject) =>
    child.on('close', (code, signal) => {
      live?.delete(child);
      if (code === 0) resolve();
      else reject(new Error(`pylance writer ${config.writer}: ${error ?? `exit ${String(code ?? signal)}`}\n${stderr}`));
    }),
  );
  done.catch(() => undefined); // reported through `ready` or to whoever awaits `done`
  return { child, ready: Promise.race([ready, done]), go: () => child.stdin.write('go\n'), done };
}
