import type { ChildProcess } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { chromium, type Page } from 'playwright-core';
import { listenTestApp } from '../test/support/app.js';
import { localBackend } from '../test/support/backends.js';
import { holdRunningJob, seedCatalog, startJobReplica } from '../test/support/console-fixture.js';
import { buildConsole } from './build-ui.js';

// `npm run screenshots`: the console's pages over the browser tests' catalog (real Lance tables,
// backfill jobs run to their end and one held running), in Debian's chromium (scripts/install-browser-test-deps.sh),
// saved as PNG under docs/console/.

const OUT = path.resolve(import.meta.dirname, '..', 'docs', 'console');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

await buildConsole();
await mkdir(OUT, { recursive: true });
const root = await localBackend.newRoot();
const live = new Set<ChildProcess>();
const app = await listenTestApp(root);
try {
  const replica = startJobReplica(root, live);
  const seeded = await seedCatalog(app.call);
  const job = await holdRunningJob(app.call, await replica, seeded.jobTable, 0.35, true);
  // A maintenance policy on sales/orders and one run of it, for the table page's Maintenance section.
  const policy = await app.call('POST', '/v1/table/sales%24orders/update', {
    updates: [['id', 'id']],
    predicate: 'false',
    properties: { 'maintenance.compact': 'true', 'maintenance.min_fragments': '2', 'maintenance.cleanup_older_than': '30d' },
  });
  if (policy.status !== 200) throw new Error(`could not set the maintenance policy: ${policy.text}`);
  for (const run of (await app.app.maintenance.tick()).started) await app.app.jobSettled(run.job);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const shoot = async (hash: string, file: string, ready: (page: Page) => Promise<unknown>, fullPage = false) => {
      await page.goto(`${app.url}/ui${hash}`);
      await ready(page);
      await page.screenshot({ path: path.join(OUT, file), fullPage });
      console.log(`docs/console/${file}`);
    };
    // The page is there, nothing is loading and no figure is still awaited ('…').
    const settled = async (p: Page) => {
      await p.locator('main section').waitFor();
      await p.locator('.loading').first().waitFor({ state: 'detached' });
      await p.locator('main').getByText('\u2026').first().waitFor({ state: 'detached' });
    };
    await shoot('#/ns/sales', 'namespace.png', async (p) => {
      await p.getByRole('button', { name: 'open sales' }).click();
      await p.locator('.tree').getByText('eu').waitFor();
      await settled(p);
    });
    await shoot('#/ns/bulk', 'namespace-paged.png', settled);
    await shoot(
      '#/table/sales/orders',
      'table.png',
      async (p) => {
        await p.getByTestId('indices').waitFor();
        await settled(p);
      },
      true,
    );
    await shoot('#/versions/ops/metrics', 'versions.png', settled, true);
    await shoot('#/versions/sales/orders', 'versions-orders.png', settled);
    await shoot('#/transactions', 'jobs.png', async (p) => {
      await p.getByTestId('running-jobs').waitFor();
      await p.getByTestId('job-list').waitFor();
      await settled(p);
    });
    await shoot(`#/transaction/${job.jobId}`, 'job.png', (p) => p.getByTestId('progress').waitFor());
    await shoot('#/search?q=orders', 'search.png', (p) => p.getByTestId('search-results').waitFor());
  } finally {
    await browser.close();
    job.resume();
  }
} finally {
  for (const child of live) child.kill('SIGKILL');
  await app.close();
  await root.dispose();
}
