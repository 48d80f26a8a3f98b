// The index types pylance builds for the service (src/engine/pylance/), each built through the
// service (POST create_index / create_scalar_index: HTTP, the table resolve, the index worker and its
// resolver) against pylance building it directly in a Python process of its own (the floor:
// scripts/bench_index_builds.py, `lance.dataset(uri)` and the build, timed inside Python). Part of
// `npm run bench:data` (scripts/bench-data.ts), on its table of its own: id int64, text utf8, tag
// utf8, vec FixedSizeList(16, float32), point (a geoarrow.point). Each iteration builds every type
// once each way (which way goes first alternates) and drops the index again; the first iteration
// of each side is a warm-up (the service's index worker starts with its first build).

import { spawn } from 'node:child_process';
import readline from 'node:readline';

import { arrow } from '../src/engine/arrow.js';
import { DEFAULT_INDEX_PYTHON } from '../src/engine/pylance/pylance-worker.js';
import { type BenchService, checkAborted, cleanups, ms, now, type Summary, summarize } from './bench-support.js';

const DIM = 16;
const TABLE = 'builds';
const PATH = `/v1/table/${encodeURIComponent(`bench$${TABLE}`)}`;

/** Each type pylance builds, on its column, with the parameters both sides use. */
const BUILDS: Array<{ type: string; column: string; op: 'create_index' | 'create_scalar_index'; params: Record<string, number> }> = [
  { type: 'IVF_SQ', column: 'vec', op: 'create_index', params: { num_partitions: 4 } },
  { type: 'IVF_HNSW_FLAT', column: 'vec', op: 'create_index', params: { num_partitions: 4 } },
  { type: 'NGRAM', column: 'text', op: 'create_scalar_index', params: {} },
  { type: 'ZONEMAP', column: 'id', op: 'create_scalar_index', params: {} },
  { type: 'BLOOMFILTER', column: 'tag', op: 'create_scalar_index', params: {} },
  { type: 'RTREE', column: 'point', op: 'create_scalar_index', params: {} },
];

export interface IndexBuildResult {
  type: string;
  service: Summary;
  direct: Summary;
}

function buildsTable(rows: number): Buffer {
  const ids = Array.from({ length: rows }, (_, i) => i);
  const vecType = new arrow.FixedSizeList(DIM, new arrow.Field('item', new arrow.Float32(), true));
  const floats = new Float32Array(rows * DIM).map(() => Math.random());
  const child = arrow.makeData({ type: new arrow.Float32(), length: rows * DIM, nullCount: 0, data: floats });
  const pointType = new arrow.Struct([new arrow.Field('x', new arrow.Float64(), false), new arrow.Field('y', new arrow.Float64(), false)]);
  const schema = new arrow.Schema([
    new arrow.Field('id', new arrow.Int64(), false),
    new arrow.Field('text', new arrow.Utf8(), true),
    new arrow.Field('tag', new arrow.Utf8(), true),
    new arrow.Field('vec', vecType, true),
    new arrow.Field('point', pointType, true, new Map([['ARROW:extension:name', 'geoarrow.point']])),
  ]);
  const table = new arrow.Table(schema, {
    id: arrow.makeVector(BigInt64Array.from(ids.map(BigInt))),
    text: arrow.vectorFromArray(
      ids.map((i) => `document ${i} word${i % 97} ${i % 2 ? 'alpha' : 'beta'}`),
      new arrow.Utf8(),
    ),
    tag: arrow.vectorFromArray(
      ids.map((i) => `tag-${i % 1000}`),
      new arrow.Utf8(),
    ),
    vec: arrow.makeVector(arrow.makeData({ type: vecType, length: rows, nullCount: 0, child })),
    point: arrow.vectorFromArray(
      ids.map((i) => ({ x: i % 1000, y: Math.floor(i / 1000) })),
      pointType,
    ),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

/** pylance in a Python process of its own, building (and dropping) one index per request. */
function startDirect(): (request: Record<string, unknown>) => Promise<number> {
  const child = spawn(DEFAULT_INDEX_PYTHON, [new URL('./bench_index_builds.py', import.meta.url).pathname], { stdio: ['pipe', 'pipe', 'inherit'] });
  cleanups.push(async () => {
    child.stdin.end();
    child.kill();
  });
  const answers = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return async (request) => {
    child.stdin.write(`${JSON.stringify(request)}\n`);
    const line = await answers.next();
    if (line.done) throw new Error('the direct pylance process ended');
    return (JSON.parse(line.value) as { ms: number }).ms;
  };
}

/** Builds each type `iterations` times each way (after one warm-up each way) on a table of `rows` rows. */
export async function measureIndexBuilds(
  service: BenchService,
  call: (method: 'GET' | 'POST', route: string, body?: unknown) => Promise<unknown>,
  rows: number,
  iterations: number,
  log: (line: string) => void,
): Promise<IndexBuildResult[]> {
  const created = (await call('POST', `${PATH}/create`, buildsTable(rows))) as { location?: unknown };
  if (typeof created.location !== 'string') throw new Error(`CreateTable returned no location: ${JSON.stringify(created)}`);
  const uri = created.location;
  const storageOptions = service.app.store.engineStorageOptions();
  const direct = startDirect();
  const samples = new Map(BUILDS.map((b) => [b.type, { service: [] as number[], direct: [] as number[] }]));
  for (let i = 0; i <= iterations; i++) {
    for (const build of BUILDS) {
      const name = `${build.column}_${build.type.toLowerCase()}`;
      const sides = {
        service: async () => {
          const started = now();
          await call('POST', `${PATH}/${build.op}`, { column: build.column, index_type: build.type, name, ...build.params });
          const elapsed = now() - started;
          await call('POST', `${PATH}/index/${name}/drop`);
          return elapsed;
        },
        direct: () => direct({ uri, storage_options: storageOptions, column: build.column, index_type: build.type, name, params: build.params }),
      };
      for (const side of i % 2 === 0 ? (['service', 'direct'] as const) : (['direct', 'service'] as const)) {
        checkAborted();
        const elapsed = await sides[side]();
        if (i > 0) samples.get(build.type)?.[side].push(elapsed);
        else log(`  ${build.type}: warm-up build ${side} ${ms(elapsed)} ms`);
      }
    }
  }
  return BUILDS.map((b) => {
    const s = samples.get(b.type) ?? { service: [], direct: [] };
    return { type: b.type, service: summarize(s.service), direct: summarize(s.direct) };
  });
}

export function printIndexBuilds(results: IndexBuildResult[], rows: number, iterations: number, out: (line: string) => void): void {
  out(`  index builds by pylance (${rows.toLocaleString('en-US')} rows, ${iterations} builds each way; direct: pylance in its own process, the floor):`);
  const lines = results.map((r) => [
    r.type,
    `${ms(r.service.p50)} ms`,
    `${ms(r.direct.p50)} ms`,
    `${(r.service.p50 / r.direct.p50).toFixed(2)}x`,
    `${r.service.p50 - r.direct.p50 >= 0 ? '+' : ''}${ms(r.service.p50 - r.direct.p50)} ms`,
  ]);
  const header = ['type', 'service p50', 'direct p50', 'ratio p50', 'overhead p50'];
  const widths = header.map((h, c) => Math.max(h.length, ...lines.map((l) => (l[c] ?? '').length)));
  for (const cells of [header, ...lines]) out(`    ${cells.map((cell, c) => cell.padEnd(widths[c] ?? 0)).join('  ')}`.trimEnd());
}
