import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeRun, INSTALL_TIMEOUT_MS, installPythonTestDeps, REPO, run } from '../support/python.js';

// `npm run bench` keeps running: its smoke mode (--quick, from the sources, no build) on one cheap
// row measured from both clients against this service and the reference, whose printout carries
// the fixture in the label and a ratio per client, and whose page (--page) is written.

const TIMEOUT_MS = 5 * 60_000;

describe('npm run bench -- --quick', () => {
  let page: string;
  beforeAll(async () => {
    await installPythonTestDeps();
    page = await mkdtemp(path.join(os.tmpdir(), 'lance-ns-bench-page-'));
  }, INSTALL_TIMEOUT_MS);
  afterAll(() => rm(page, { recursive: true, force: true }));

  it(
    'measures a row from the Node and the Python client on both servers and prints both ratios',
    async () => {
      const bench = await run(
        process.execPath,
        [
          '--import',
          import.meta.resolve('tsx'),
          path.join(REPO, 'scripts/bench.ts'),
          ...['--store', 'local', '--quick', '--from-source', '--only', 'list tables, 200 declared', '--page', page],
        ],
        { timeoutMs: TIMEOUT_MS },
      );
      expect(bench.code, describeRun('scripts/bench.ts', bench)).toBe(0);
      const figure = String.raw`[\d.]+ ms`;
      const ratio = String.raw`[\d.]+×`;
      expect(bench.stdout).toMatch(
        new RegExp(
          String.raw`\| list tables, 200 declared tables present, one call, warm \(Node / Python\) \| ${figure} / ${figure} \| ${figure} / ${figure} \| ${ratio} / ${ratio} \|`,
        ),
      );
      expect(bench.stdout).toMatch(/load average \(1\/5\/15 min\) [\d.]+ [\d.]+ [\d.]+ at the start/);
      const results = JSON.parse(await readFile(path.join(page, 'results.json'), 'utf8')) as unknown;
      expect(JSON.stringify(results)).toContain('list tables, 200 declared tables present');
    },
    TIMEOUT_MS,
  );
});
