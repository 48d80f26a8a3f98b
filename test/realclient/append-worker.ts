// One writer process for test/realclient/managed-versioning.test.ts, run as
//   node --import tsx test/realclient/append-worker.ts '<WorkerConfig as JSON>'
// It opens a table through @lancedb/lancedb's REST namespace client, prints a `ready` line, waits
// for one line on stdin (the start signal, sent to every writer at once), appends its rows, and
// prints a `done` line with the version each append committed. On failure it prints an `error`
// line and exits 1. Every line on stdout is one JSON WorkerMessage.

import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';

type LancedbModule = typeof import('@lancedb/lancedb');

export interface WorkerConfig {
  /** The service, e.g. http://127.0.0.1:1234. */
  url: string;
  namespace: string[];
  table: string;
  /** Written into every row's `writer` column. */
  writer: string;
  /** Ids firstId, firstId + 1, ... in order, rowsPerAppend per append. */
  firstId: number;
  appends: number;
  rowsPerAppend: number;
}

export type WorkerMessage =
  | { kind: 'ready' }
  | {
      kind: 'done';
      /** The version each append committed, in order. */
      versions: number[];
      /** Wall-clock time (ms since the epoch) when the first append started and the last one ended. */
      startedAt: number;
      endedAt: number;
    }
  | { kind: 'error'; message: string };

const send = (message: WorkerMessage): void => {
  process.stdout.write(`${JSON.stringify(message)}\n`);
};

async function waitForLine(): Promise<void> {
  const lines = createInterface({ input: process.stdin });
  try {
    for await (const _line of lines) return;
    throw new Error('stdin closed before the start signal');
  } finally {
    lines.close();
  }
}

async function main(): Promise<void> {
  const raw = process.argv[2];
  if (!raw) throw new Error('usage: append-worker.ts <config JSON>');
  const config = JSON.parse(raw) as WorkerConfig;
  const require = createRequire(import.meta.url);
  const lancedb = require('@lancedb/lancedb') as LancedbModule;

  const db = await lancedb.connectNamespace('rest', { uri: config.url });
  const table = await db.openTable(config.table, config.namespace);
  send({ kind: 'ready' });
  await waitForLine();

  const versions: number[] = [];
  const startedAt = Date.now();
  for (let i = 0; i < config.appends; i++) {
    const first = config.firstId + i * config.rowsPerAppend;
    const rows = Array.from({ length: config.rowsPerAppend }, (_, j) => ({ id: BigInt(first + j), writer: config.writer }));
    const { version } = await table.add(rows);
    versions.push(version);
  }
  const endedAt = Date.now();
  table.close();
  db.close();
  send({ kind: 'done', versions, startedAt, endedAt });
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    send({ kind: 'error', message: e instanceof Error ? `${e.message}\n${e.stack ?? ''}` : String(e) });
    process.exit(1);
  },
);
