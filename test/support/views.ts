import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { arrow } from '../../src/engine/arrow.js';
import { DEFAULT_UDF_PYTHON } from '../../src/engine/python-udf/python-udfs.js';
import { connectTable } from './arrow-data.js';
import { describeRun, run } from './python.js';

// Materialized views as Geneva 0.17 sends them (CreateMaterializedView): the view's schema as one
// IPC schema message, and the GenevaQuery JSON of its source query.

/** What pyarrow's Schema.serialize() gives: one IPC schema message, without the end of stream. */
export function schemaMessage(fields: Array<[string, import('apache-arrow').DataType]>): string {
  const schema = new arrow.Schema(fields.map(([name, type]) => new arrow.Field(name, type, true)));
  const writer = new arrow.RecordBatchStreamWriter();
  writer.reset(undefined, schema);
  writer.close();
  const stream = Buffer.from(writer.toUint8Array(true));
  return stream.subarray(0, stream.length - 8).toString('base64');
}

export const META: Array<[string, import('apache-arrow').DataType]> = [
  ['__source_row_id', new arrow.Int64()],
  ['__is_set', new arrow.Bool()],
];

export interface UdfEntry {
  output_index: number;
  output_name: string;
  input_columns: string[] | null;
  udf: { name: string; backend: string; udf_payload: string; runner_payload: string | null };
}

/** A GenevaQuery JSON as Geneva's create_materialized_view sends it (nulls where Geneva sends nulls). */
export function genevaQuery(
  source: string,
  base: { filter?: string; columns?: unknown; limit?: number; offset?: number },
  udfs: UdfEntry[] = [],
  extra: Record<string, unknown> = {},
): string {
  return JSON.stringify({
    base: {
      vector_column: null,
      vector: null,
      filter: base.filter ?? null,
      full_text_query: null,
      limit: base.limit ?? null,
      offset: base.offset ?? null,
      columns: base.columns ?? null,
      with_row_id: null,
      order_by: null,
    },
    shuffle: null,
    shuffle_seed: null,
    fragment_ids: null,
    with_row_address: null,
    column_udfs: udfs.length > 0 ? udfs : null,
    source_table: source,
    source_db_uri: 'db://tests',
    ...extra,
  });
}

export const udfEntry = (name: string, payload: string, output: string, index: number, inputs: string[] | null): UdfEntry => ({
  output_index: index,
  output_name: output,
  input_columns: inputs,
  udf: { name, backend: 'DockerUDFSpecV1', udf_payload: payload, runner_payload: '{"image": "test-image:latest"}' },
});

/**
 * The test UDF, chunker and UDTF envelopes of test/support/geneva_udfs.py, built with the pinned
 * Geneva: by name, the envelope's sha256 (its name under a dataset's `_udfs/`) and its text.
 */
export async function makeUdfEnvelopes(): Promise<Record<string, { sha: string; body: string }>> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'udf-envelopes-'));
  try {
    const made = await run(DEFAULT_UDF_PYTHON, ['test/support/geneva_udfs.py', dir], {
      timeoutMs: 60_000,
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
    });
    if (made.code !== 0) throw new Error(describeRun('geneva_udfs.py', made));
    const envelopes: Record<string, { sha: string; body: string }> = {};
    for (const [name, sha] of Object.entries(JSON.parse(made.stdout) as Record<string, string>))
      envelopes[name] = { sha, body: await readFile(path.join(dir, sha), 'utf8') };
    return envelopes;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Every row of a view, its integers as numbers, by source row id (and child index, for a chunker's). */
export async function viewRows(location: string, options: Record<string, string>): Promise<Array<Record<string, unknown>>> {
  const table = await connectTable(location, options);
  try {
    const rows = (await table.query().toArray()) as Array<Record<string, unknown>>;
    return rows
      .map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'bigint' ? Number(v) : v])))
      .sort((a, b) => Number(a.__source_row_id) - Number(b.__source_row_id) || Number(a.__child_index ?? 0) - Number(b.__child_index ?? 0));
  } finally {
    table.close();
  }
}
