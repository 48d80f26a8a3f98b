// Benchmark of the web console on a large catalog, in Debian's chromium (playwright-core).
//
//   npx tsx scripts/bench-console.ts [--tables 10000] [--versions 100000]
//   npm run bench:console
//
// Starts the service in-process on a fresh local root (bench-support.ts), declares --tables tables
// in one namespace and gives one real Lance table --versions versions (its first manifest
// re-stamped with each version number and written straight into `_versions/`, as Lance's own
// writers leave them: every version opens, with the same rows), then times in the browser, from
// the click or navigation to the screen showing it:
//   - the namespace page's first 100 tables, the next page, and "count all";
//   - the version timeline's latest 50 versions, their operations and row counts, and "load more";
//   - a search over every table;
// and the longest task that blocked the page's main thread meanwhile (PerformanceObserver
// 'longtask': 50 ms or more), which is what "stays responsive" means for a page.

import { parseArgs } from 'node:util';
import pLimit from 'p-limit';
import { chromium, type Page } from 'playwright-core';
import { nextManifestWithSchemaMetadata } from '../src/engine/lance-format/manifest.js';
import { manifestFileName } from '../src/engine/lance-format/manifest-names.js';
import { tableDirKey, VERSIONS_DIR } from '../src/service/catalog/layout.js';
import { numbersStream } from '../test/support/jobs.js';
import { type BenchService, checkAborted, cleanups, ms, now, runMain, secs, startBenchService } from './bench-support.js';
import { buildConsole } from './build-ui.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

async function inject(service: BenchService, method: 'GET' | 'POST', url: string, body?: unknown, headers: Record<string, string> = {}): Promise<void> {
  const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body);
  const res = await service.app.server.inject({ method, url, payload, headers: { 'content-type': 'application/json', ...headers } });
  if (res.statusCode !== 200) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
}

async function seed(service: BenchService, tables: number, versions: number): Promise<void> {
  const limit = pLimit(16);
  let started = now();
  await inject(service, 'POST', '/v1/namespace/wide/create', {});
  await Promise.all(
    Array.from({ length: tables }, (_, i) =>
      limit(() => {
        checkAborted();
        return inject(service, 'POST', `/v1/table/wide$t${String(i).padStart(6, '0')}/declare`, {});
      }),
    ),
  );
  log(`${tables} tables declared in ${secs(now() - started)}`);

  started = now();
  await inject(service, 'POST', '/v1/namespace/deep/create', {});
  await inject(service, 'POST', '/v1/table/deep$history/create', numbersStream(1000), { 'content-type': 'application/vnd.apache.arrow.stream' });
  const store = service.app.store;
  const dir = `${tableDirKey({ namespace: ['deep'], name: 'history' })}${VERSIONS_DIR}/`;
  const first = await store.get(`${dir}${manifestFileName(1, 'V2')}`);
  if (!first) throw new Error('the first manifest of deep$history is not where expected');
  const writes = pLimit(64);
  const t0 = Date.now() - versions * 1000;
  await Promise.all(
    Array.from({ length: versions - 1 }, (_, i) => i + 2).map((v) =>
      writes(() => {
        checkAborted();
        return store.put(
          `${dir}${manifestFileName(v, 'V2')}`,
          nextManifestWithSchemaMetadata(first.body, { version: v, schemaMetadata: {}, timestampMillis: t0 + v * 1000 }),
        );
      }),
    ),
  );
  log(`${versions} versions written in ${secs(now() - started)}`);
}

interface Row {
  metric: string;
  value: string;
}

/** Clears the record of long tasks; returns the longest since the last call, in ms. */
const longestTask = async (page: Page): Promise<number> =>
  page.evaluate(() => {
    const w = globalThis as unknown as { __longTasks: number[] | undefined };
    const longest = Math.max(0, ...(w.__longTasks ?? []));
    w.__longTasks = [];
    return longest;
  });

async function timed(rows: Row[], page: Page, metric: string, action: () => Promise<unknown>): Promise<void> {
  await longestTask(page);
  const started = now();
  await action();
  const elapsed = now() - started;
  const blocked = await longestTask(page);
  rows.push({ metric, value: `${ms(elapsed)} ms (longest main-thread task ${blocked === 0 ? '< 50' : ms(blocked)} ms)` });
  log(`${metric}: ${ms(elapsed)} ms`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    strict: true,
    options: { tables: { type: 'string', default: '10000' }, versions: { type: 'string', default: '100000' } },
  });
  const tables = Number(values.tables);
  const versions = Number(values.versions);
  await buildConsole();
  const service = await startBenchService('local', log, 'lance-ns-bench-console-');
  await seed(service, tables, versions);

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  cleanups.push(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.addInitScript(() => {
    // The browser's PerformanceObserver, typed here by hand (this file is compiled without the DOM's types).
    type Observer = new (
      callback: (list: { getEntries(): Array<{ duration: number }> }) => void,
    ) => { observe(options: { type: string; buffered: boolean }): void };
    const w = globalThis as unknown as { __longTasks: number[]; PerformanceObserver: Observer };
    w.__longTasks = [];
    new w.PerformanceObserver((list) => {
      for (const entry of list.getEntries()) w.__longTasks.push(entry.duration);
    }).observe({ type: 'longtask', buffered: true });
  });
  const rows: Row[] = [];
  const tableItems = page.getByTestId('list-tables').locator('li');

  await timed(rows, page, `namespace of ${tables.toLocaleString('en')} tables: open, first 100 shown`, async () => {
    await page.goto(`${service.baseUrl}/ui#/ns/wide`);
    await tableItems.nth(99).waitFor();
  });
  await timed(rows, page, '  next page of 100', async () => {
    await page.getByTestId('pager-tables').getByRole('button', { name: 'Next →' }).click();
    await page.getByTestId('list-tables').getByText('t000100', { exact: true }).waitFor();
  });
  await timed(rows, page, `  count all (${Math.ceil(tables / 1000)} pages of 1,000)`, async () => {
    await page.getByTestId('count-tables').getByRole('button', { name: 'count all' }).click();
    await page
      .getByTestId('count-tables')
      .getByText(`${tables.toLocaleString('en')}`, { exact: true })
      .waitFor({ timeout: 120_000 });
  });

  const versionRows = page.getByTestId('versions').locator('tbody tr');
  await timed(rows, page, `timeline of ${versions.toLocaleString('en')} versions: open, latest 50 listed`, async () => {
    await page.goto(`${service.baseUrl}/ui#/versions/deep/history`);
    await versionRows.nth(49).waitFor();
  });
  await timed(rows, page, '  their operations and row counts all in', async () => {
    await page.getByTestId('version-chart').locator('circle').nth(49).waitFor({ timeout: 120_000 });
  });
  await timed(rows, page, '  load 50 more, listed and counted', async () => {
    await page.getByRole('button', { name: 'Load 50 more' }).click();
    await page.getByTestId('version-chart').locator('circle').nth(99).waitFor({ timeout: 120_000 });
  });

  await timed(rows, page, `search over ${(tables + 1).toLocaleString('en')} tables (ListAllTables pages)`, async () => {
    await page.goto(`${service.baseUrl}/ui#/search?q=t009999`);
    await page
      .getByTestId('search-status')
      .getByText(/all of them|match\.$/)
      .waitFor({ timeout: 120_000 });
    await page.waitForFunction(
      () => !(globalThis as unknown as { document: { body: { textContent: string } } }).document.body.textContent.includes('Searching'),
      undefined,
      { timeout: 120_000 },
    );
  });

  const width = Math.max(...rows.map((r) => r.metric.length));
  process.stdout.write(`\n${'metric'.padEnd(width)}  value\n`);
  for (const r of rows) process.stdout.write(`${r.metric.padEnd(width)}  ${r.value}\n`);
}

runMain(main);
