import { EventEmitter } from 'node:events';
import type { WorkerLog } from '../../src/engine/python-worker/worker-process.js';

/** A line a Python worker logged: its message and the worker's pid. */
export interface WorkerLogLine {
  message: string;
  pid: number | undefined;
}

/**
 * A WorkerLog that keeps every line (`lines`) and tells of the next one matching a pattern
 * (`next`), so that a test awaits a worker's line instead of sleeping.
 */
export function recordingWorkerLog(): { log: WorkerLog; lines: WorkerLogLine[]; next: (pattern: RegExp) => Promise<WorkerLogLine> } {
  const lines: WorkerLogLine[] = [];
  const logged = new EventEmitter<{ line: [WorkerLogLine] }>();
  const log: WorkerLog = (_level, message, fields) => {
    const line = { message, pid: fields.pid };
    lines.push(line);
    logged.emit('line', line);
  };
  const next = (pattern: RegExp) =>
    new Promise<WorkerLogLine>((resolve) => {
      const listener = (line: WorkerLogLine) => {
        if (!pattern.test(line.message)) return;
        logged.off('line', listener);
        resolve(line);
      };
      logged.on('line', listener);
    });
  return { log, lines, next };
}
