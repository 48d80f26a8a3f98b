// The web console in a real browser (Debian's chromium, driven by playwright-core) against the real
// service over real Lance tables (test/support/console-fixture.ts): from the root to a table, its
// versions, a Lance commit; a branch's version timeline; from the root to the jobs list and a backfill job held running, whose
// progress bar moves once the job goes on; paging (namespaces, versions, jobs), counting, search,
// the jobs list before any job, API errors, and credentials when authentication is on.
// Everything is checked on the screen. Chromium comes from scripts/install-browser-test-deps.sh.

import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { type Browser, chromium, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenTestApp, type TestApp } from '../support/app.js';
import { localBackend, type TestRoot } from '../support/backends.js';
import {
  BRANCH_DELETED,
  BULK_TABLES,
  type HeldJob,
  holdRunningJob,
  insertJobHistory,
  type JobHistoryRow,
  MANY_VERSIONS,
  ORDER_ROWS,
  type SeededCatalog,
  seedCatalog,
  startJobReplica,
} from '../support/console-fixture.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// CI installs chromium (scripts/test.sh); elsewhere a machine without it skips these, saying so.
const missing = !existsSync(CHROMIUM) && !process.env.CI;
if (missing) console.log(`browser tests skipped: no chromium at ${CHROMIUM} (bash scripts/install-browser-test-deps.sh installs it)`);

/** How long the screen may take to show what it should (a wait for an event, not a measurement). */
const SCREEN_MS = 30_000;

// The screen is read again until it shows what is expected (or SCREEN_MS passes).
const poll = <T>(read: () => Promise<T>, timeout = SCREEN_MS) => expect.poll(read, { timeout, interval: 50 });
const text = (l: Locator) => () =>
  l
    .first()
    .textContent({ timeout: 1000 })
    .catch(() => null);
const attr = (l: Locator, name: string) => () =>
  l
    .first()
    .getAttribute(name, { timeout: 1000 })
    .catch(() => null);
const count = (l: Locator) => () => l.count();

describe.skipIf(missing)('web console in chromium', () => {
  let root: TestRoot;
  let app: TestApp & { url: string };
  let browser: Browser;
  let job: HeldJob;
  let seeded: SeededCatalog;
  const live = new Set<ChildProcess>();
  /** Console messages that are errors, other than the failed requests a test causes on purpose. */
  const pageErrors: string[] = [];

  beforeAll(async () => {
    root = await localBackend.newRoot();
    app = await listenTestApp(root);
    const replica = startJobReplica(root, live);
    const launched = chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    seeded = await seedCatalog(app.call);
    job = await holdRunningJob(app.call, await replica, seeded.jobTable);
    browser = await launched;
  }, 180_000);
  afterAll(async () => {
    for (const child of live) child.kill('SIGKILL');
    await browser?.close();
    await app?.close();
    await root?.dispose();
    expect(pageErrors).toEqual([]);
  });

  /** The job as the service describes it once it has ended (Running and Queued wait, up to `timeoutMs`). */
  async function endOf(jobId: string, timeoutMs: number): Promise<{ status: string; properties: Record<string, string> }> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const described = (await app.call('POST', `/v1/transaction/${jobId}/describe`, {})).json as { status: string; properties: Record<string, string> };
      if ((described.status !== 'Running' && described.status !== 'Queued') || Date.now() > until) return described;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async function open(hash = '', base = app.url): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(`page error: ${e.message}`));
    page.on('console', (m) => {
      // Chromium logs every 4xx the page receives; those the tests cause are checked on screen instead.
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) pageErrors.push(m.text());
    });
    await page.goto(`${base}/ui${hash}`);
    return page;
  }
  const see = (page: Page, what: string | RegExp) => poll(count(page.locator('main').getByText(what))).toBeGreaterThan(0);

  it('clicks from the root to a table, its versions and one commit', async () => {
    const page = await open();
    const main = page.locator('main');
    // sales, ml, ops, bulk, and __system (where the service keeps the job table since the first job).
    await poll(text(page.getByTestId('count-namespaces'))).toContain('5 namespaces');
    await poll(text(page.getByTestId('count-tables'))).toContain('0 tables');
    await poll(text(page.getByTestId('tree'))).toContain('sales');

    await main.getByRole('link', { name: 'sales', exact: true }).click();
    await poll(text(page.getByTestId('properties'))).toContain('owneranalytics');
    await poll(text(page.getByTestId('properties'))).toContain('retention90d');
    await poll(text(page.getByTestId('count-namespaces'))).toContain('2 namespaces');
    await poll(text(page.getByTestId('count-tables'))).toContain('3 tables');
    await poll(text(page.getByTestId('list-namespaces'))).toMatch(/eu\s*us/);

    await main.getByRole('link', { name: 'orders', exact: true }).click();
    await poll(text(page.getByTestId('location'))).toContain('sales/orders.lance');
    await poll(text(page.getByTestId('card-rows'))).toContain(String(ORDER_ROWS - ORDER_ROWS / 50));
    await poll(text(page.getByTestId('card-size'))).toContain('KiB');
    await poll(text(page.getByTestId('card-managed-versioning'))).toContain('off');
    await poll(text(page.getByTestId('properties'))).toContain('ownersales-team');
    // Nested types, each a row under its parent.
    const schema = page.getByTestId('schema');
    await poll(text(schema.locator('tr[data-path="customer.address.city"] td').nth(1))).toBe('utf8');
    await poll(text(schema.locator('tr[data-path="customer.address"] td').nth(1))).toBe('struct');
    await poll(text(schema.locator('tr[data-path="lines"] td').nth(1))).toBe('list<struct>');
    await poll(text(schema.locator('tr[data-path="lines.qty"] td').nth(1))).toBe('int32');
    await poll(text(schema.locator('tr[data-path="embedding"] td').nth(1))).toBe('fixed_size_list<float32>[8]');
    // Indices with their stats, tags and branches.
    const indices = page.getByTestId('indices');
    await poll(text(indices.locator('tr[data-index="id_idx"]'))).toMatch(/BTREE\s*294\s*0/);
    await poll(text(indices.locator('tr[data-index="status_bitmap"]'))).toContain('BITMAP');
    await poll(text(indices.locator('tr[data-index="embedding_idx"]'))).toMatch(/IVF_FLAT.*cosine/);
    await poll(text(page.getByTestId('tags'))).toMatch(/first-load\s*main\s*2/);
    await poll(text(page.getByTestId('tags'))).toMatch(/indexed\s*main\s*8/);
    await poll(text(page.getByTestId('branches'))).toMatch(/exp\/first-load\s*main\s*2/);

    await page.getByRole('link', { name: 'Version timeline →' }).click();
    const versions = page.getByTestId('versions');
    await poll(count(versions.locator('tbody tr'))).toBe(8);
    const row = (v: number) => versions.locator(`tr[data-version="${v}"]`);
    await poll(text(row(1).getByTestId('operation'))).toBe('overwrite');
    await poll(text(row(2).getByTestId('operation'))).toBe('append');
    await poll(text(row(4).getByTestId('operation'))).toBe('delete');
    await poll(text(row(5).getByTestId('operation'))).toBe('update');
    await poll(text(row(8).getByTestId('operation'))).toBe('create_index');
    await poll(text(row(2).getByTestId('rows'))).toBe('200');
    await poll(text(row(3).getByTestId('rows'))).toBe('300');
    await poll(text(row(4).getByTestId('rows'))).toBe('294');
    // The chart plots a point per version once every row count is in.
    await poll(count(page.getByTestId('version-chart').locator('circle'))).toBe(8);
    await poll(text(page.getByTestId('versions-shown'))).toBe('8 versions shown, down to the first');

    await row(4).getByRole('link', { name: 'delete' }).click();
    await poll(text(page.getByTestId('status'))).toBe('Succeeded');
    await poll(text(page.getByTestId('operation'))).toBe('delete');
    await poll(text(page.getByTestId('properties'))).toContain('version4');
    await see(page, 'Lance commit');
  });

  it("shows each branch's version timeline: from the table's branches to one, and between it and main", async () => {
    const page = await open('#/table/sales/orders');
    await page.getByTestId('branches').getByRole('link', { name: 'exp/first-load', exact: true }).click();
    await poll(text(page.getByTestId('versions-branch'))).toBe('exp/first-load');
    const versions = page.getByTestId('versions');
    // The branch's history: the version it was forked at (main's 2) and the delete on it.
    await poll(count(versions.locator('tbody tr'))).toBe(2);
    const row = (v: number) => versions.locator(`tr[data-version="${v}"]`);
    await poll(text(row(2).getByTestId('rows'))).toBe('200');
    await poll(text(row(3).getByTestId('rows'))).toBe(String(200 - BRANCH_DELETED));
    await poll(count(page.getByTestId('version-chart').locator('circle'))).toBe(2);
    await poll(text(page.getByTestId('versions-shown'))).toBe('2 versions shown, down to the first');
    // main's timeline is one click away, and offers the branch's back.
    await page.getByTestId('version-lines').getByRole('link', { name: 'main', exact: true }).click();
    await poll(count(versions.locator('tbody tr'))).toBe(8);
    await poll(text(row(3).getByTestId('rows'))).toBe('300');
    await poll(count(page.getByTestId('versions-branch'))).toBe(0);
    await page.getByTestId('version-lines').getByRole('link', { name: 'exp/first-load', exact: true }).click();
    await poll(count(versions.locator('tbody tr'))).toBe(2);
    // The branch's own commits, as Lance recorded them in its tree: the fork's clone, then the delete.
    await poll(text(row(2).getByTestId('operation'))).toBe('clone');
    await poll(text(row(3).getByTestId('operation'))).toBe('delete');
    await row(3).getByRole('link', { name: 'delete' }).click();
    await poll(text(page.getByTestId('transaction-branch'))).toBe('exp/first-load');
    await poll(text(page.getByTestId('status'))).toBe('Succeeded');
    await poll(text(page.getByTestId('properties'))).toContain('version3');
  });

  it('lists the jobs, running first; follows a running job from the list to its end', async () => {
    const page = await open();
    // The job table's queries, by what they ask for: every job's launch time, or rows.
    const asked = { launchTimes: 0, rows: 0 };
    page.on('request', (request) => {
      if (!request.url().includes('geneva_jobs/query')) return;
      const columns = (request.postDataJSON() as { columns?: { column_names?: string[] } } | null)?.columns?.column_names ?? [];
      if (columns.length === 1 && columns[0] === 'launched_at') asked.launchTimes++;
      else asked.rows++;
    });
    await page.getByRole('link', { name: 'Transactions & jobs' }).click();
    const jobRow = (list: string, id: string) => page.getByTestId(list).locator(`tr[data-job="${id}"]`);
    // The held job runs: on its own under "Running now", and first in the list of all jobs.
    const running = jobRow('running-jobs', job.jobId);
    await poll(text(running.getByTestId('status'))).toBe('RUNNING');
    await poll(text(running.getByTestId('job-table'))).toBe('events');
    await poll(text(running.getByTestId('job-column'))).toBe('score');
    await poll(text(running.getByTestId('job-kind'))).toBe('backfill');
    await poll(count(page.getByTestId('running-jobs').locator('tbody tr'))).toBe(1);
    await poll(text(page.getByTestId('jobs-live'))).toContain('asked again every');
    await poll(attr(page.getByTestId('job-list').locator('tbody tr').first(), 'data-job')).toBe(job.jobId);
    // The finished ones, newest first, each with what it filled.
    const [first, second] = seeded.finishedJobs as [string, string];
    await poll(count(page.getByTestId('job-list').locator('tbody tr'))).toBe(3);
    await poll(attr(page.getByTestId('job-list').locator('tbody tr').nth(1), 'data-job')).toBe(second);
    await poll(attr(page.getByTestId('job-list').locator('tbody tr').nth(2), 'data-job')).toBe(first);
    await poll(text(jobRow('job-list', first).getByTestId('status'))).toBe('DONE');
    await poll(text(jobRow('job-list', first).getByTestId('job-table'))).toBe('clicks');
    await poll(text(jobRow('job-list', first).getByTestId('job-row-progress'))).toContain('2,000 of 2,000 rows');
    await poll(attr(jobRow('job-list', first).getByTestId('progress'), 'aria-valuenow')).toBe('2000');
    // While the job runs the list is asked again every second, for its rows only: every job's
    // launch time was read once, for the page.
    const rowsBefore = asked.rows;
    await poll(async () => asked.rows, 10_000).toBeGreaterThanOrEqual(rowsBefore + 4);
    expect(asked.launchTimes).toBe(1);

    // The running job's page: its live progress.
    await running.getByRole('link', { name: job.jobId }).click();
    await poll(text(page.getByTestId('status'))).toBe('Running');
    await see(page, 'backfill job');
    const bar = page.getByTestId('progress');
    const shown = Number(await bar.getAttribute('aria-valuenow'));
    expect(shown).toBeGreaterThanOrEqual(job.rowsDone);
    expect(shown).toBeLessThan(job.rowsTotal);
    await poll(attr(bar, 'aria-valuemax')).toBe(String(job.rowsTotal));
    await poll(text(page.getByTestId('live'))).toContain('asked again every');
    await poll(text(page.getByTestId('job-figures'))).toContain(`of ${job.rowsTotal.toLocaleString('en')}`);

    // The job goes on: the page, asking again by itself, follows it to the end.
    job.resume();
    // Asked of the service first, so that a job that ends otherwise says why (its error property).
    const ended = await endOf(job.jobId, 120_000);
    expect(ended, JSON.stringify(ended)).toMatchObject({ status: 'Succeeded' });
    await poll(text(page.getByTestId('status')), 120_000).toBe('Succeeded');
    await poll(attr(bar, 'aria-valuenow')).toBe(String(job.rowsTotal));
    await poll(text(bar)).toContain('100%');
    await see(page, 'ended: not asked again');

    // Back in the list, the job's row follows (it may be a moment behind the job's page), and the list stops asking.
    await page.locator('main nav.crumbs').getByRole('link', { name: 'transactions' }).click();
    const done = jobRow('job-list', job.jobId);
    await poll(text(done.getByTestId('status'))).toBe('DONE');
    await poll(text(done.getByTestId('job-row-progress'))).toContain(`${job.rowsTotal.toLocaleString('en')} of ${job.rowsTotal.toLocaleString('en')} rows`);
    await poll(text(page.getByTestId('no-running'))).toBe('No job is running.');
    await poll(text(page.getByTestId('jobs-live'))).toContain('not asked again');

    // From the job to its table, where the filled column is bound to its expression.
    await done.getByRole('link', { name: job.jobId }).click();
    await page.getByRole('link', { name: 'ml.events' }).click();
    await poll(text(page.getByTestId('schema').locator('tr[data-path="score"]'))).toContain('virtual_column');
  }, 180_000);

  it('pages the jobs newest first, a page ending after every job launched at the same time', async () => {
    // Older jobs as Geneva's client leaves them: an hour apart with microseconds of their own, seven
    // launched at the same microsecond where the first page ends, and one a microsecond before them.
    const hour = 3_600_000_000n;
    const base = 1_709_251_200_000_000n; // 2024-03-01T00:00:00Z
    const tie = base + 10n * hour + 370n;
    const history: JobHistoryRow[] = Array.from({ length: 60 }, (_, i) => ({
      jobId: `history-${String(i).padStart(2, '0')}`,
      table: `t${i % 4}`,
      column: 'c',
      status: i % 7 === 3 ? 'FAILED' : 'DONE',
      launchedAt: i >= 10 && i <= 16 ? tie : i === 9 ? tie - 1n : base + BigInt(i) * hour + BigInt((i * 37) % 1000),
      rows: 100 * (i + 1),
    }));
    await insertJobHistory(app.call, history);
    // Newest first; at the same time, the greater id first.
    const expected = [...history]
      .sort((a, b) => (a.launchedAt === b.launchedAt ? b.jobId.localeCompare(a.jobId) : a.launchedAt < b.launchedAt ? 1 : -1))
      .map((r) => r.jobId);
    const real = 3; // the held job and the two finished ones, launched after all of these
    const total = real + history.length;
    // The 50th newest is one of the seven launched together: the first page ends after all seven.
    const firstPage = real + history.filter((r) => r.launchedAt >= tie).length;
    expect(firstPage).toBeGreaterThan(50);

    const page = await open('#/transactions');
    const list = page.getByTestId('job-list').locator('tbody tr');
    const ids = () => list.evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job')));
    const pager = page.getByTestId('pager-jobs');
    await poll(text(pager)).toContain(`jobs 1–${firstPage} of ${total}`);
    await poll(count(list)).toBe(firstPage);
    const one = await ids();
    expect(one.slice(real)).toEqual(expected.slice(0, firstPage - real));
    expect(await pager.getByRole('button', { name: '← Newer' }).isDisabled()).toBe(true);

    await pager.getByRole('button', { name: 'Older →' }).click();
    await poll(text(pager)).toContain(`jobs ${firstPage + 1}–${total} of ${total}`);
    await poll(ids).toEqual(expected.slice(firstPage - real));
    expect(await pager.getByRole('button', { name: 'Older →' }).isDisabled()).toBe(true);
    await poll(text(page.getByTestId('job-list').locator('tr[data-job="history-09"]').getByTestId('job-row-progress'))).toContain('1,000 of 1,000 rows');
    await poll(text(page.getByTestId('job-list').locator('tr[data-job="history-03"]').getByTestId('status'))).toBe('FAILED');

    await pager.getByRole('button', { name: '← Newer' }).click();
    await poll(ids).toEqual(one);
    // A row of Geneva's client names a job this service never ran: its page says so.
    await page.getByTestId('job-list').getByRole('link', { name: 'history-59' }).click();
    await poll(text(page.getByTestId('api-error').getByTestId('error-code'))).toBe('code 10 TransactionNotFound');
  });

  it('says plainly that there are no jobs before the first one', async () => {
    const fresh = await localBackend.newRoot();
    const empty = await listenTestApp(fresh);
    let page: Page | undefined;
    try {
      page = await open('#/transactions', empty.url);
      await poll(text(page.getByTestId('no-jobs'))).toContain('No jobs yet.');
      expect(await page.getByTestId('api-error').count()).toBe(0);
      // The lookup by id stays.
      await page.getByLabel('Transaction or job id').fill('no-such-job');
      await page.getByRole('button', { name: 'Describe' }).click();
      await poll(text(page.getByTestId('api-error').getByTestId('error-code'))).toBe('code 10 TransactionNotFound');
    } finally {
      // The page's connections go first: the server then closes at once.
      await page?.context().close();
      await empty.close();
      await fresh.dispose();
    }
  });

  it('pages a namespace with more tables than a page, and counts them on demand', async () => {
    const page = await open('#/ns/bulk');
    const tables = page.getByTestId('count-tables');
    await poll(text(tables)).toContain('more than 100 tables');
    const list = page.getByTestId('list-tables').locator('li');
    await poll(count(list)).toBe(100);
    await poll(text(list.first())).toBe('t0000');
    await poll(text(page.getByTestId('pager-tables'))).toContain('tables 1–100 (page 1, more follow)');
    await page.getByTestId('pager-tables').getByRole('button', { name: 'Next →' }).click();
    await poll(count(list)).toBe(BULK_TABLES - 100);
    await poll(text(list.first())).toBe('t0100');
    await poll(text(page.getByTestId('pager-tables'))).toContain('tables 101–120 (page 2, the last)');
    // The last page tells the count.
    await poll(text(tables)).toContain(`${BULK_TABLES} tables`);
    await page.getByTestId('pager-tables').getByRole('button', { name: '← Previous' }).click();
    await poll(text(list.first())).toBe('t0000');
    await poll(text(tables)).toContain('more than 100 tables');
    await tables.getByRole('button', { name: 'count all' }).click();
    await poll(text(tables)).toContain(`${BULK_TABLES} tables`);
    // A declared table shows as such.
    await list.first().getByRole('link').click();
    await see(page, 'Declared only');
  });

  it('shows the latest 50 versions and loads older ones on demand', async () => {
    const page = await open('#/versions/ops/metrics');
    const rows = page.getByTestId('versions').locator('tbody tr');
    await poll(count(rows)).toBe(50);
    await poll(attr(rows.first(), 'data-version')).toBe(String(MANY_VERSIONS));
    await poll(text(page.getByTestId('versions-shown'))).toBe('50 versions shown, older ones follow');
    await page.getByRole('button', { name: 'Load 50 more' }).click();
    await poll(count(rows)).toBe(MANY_VERSIONS);
    await poll(attr(rows.last(), 'data-version')).toBe('1');
    await poll(text(page.getByTestId('versions-shown'))).toBe(`${MANY_VERSIONS} versions shown, down to the first`);
    await poll(count(page.getByTestId('version-chart').locator('circle'))).toBe(MANY_VERSIONS);
  });

  it('finds a table by part of its name', async () => {
    const page = await open();
    await page.getByRole('searchbox', { name: 'find a table by name' }).fill('INVOIC');
    await page.getByRole('searchbox', { name: 'find a table by name' }).press('Enter');
    await poll(text(page.getByTestId('search-status'))).toMatch(/Read \d+ tables \(all of them\); 1 match\./);
    await page.getByTestId('search-results').getByRole('link', { name: 'sales.eu.invoices' }).click();
    await poll(text(page.getByTestId('location'))).toContain('sales/eu/invoices.lance');
  });

  it('shows API errors with their code and message', async () => {
    const page = await open('#/table/sales/nope');
    const error = page.getByTestId('api-error').first();
    await poll(text(error)).toContain('DescribeTable failed');
    await poll(text(error.getByTestId('error-code'))).toBe('code 4 TableNotFound');
    await poll(text(error)).toContain('HTTP 404');
    await poll(text(error.getByTestId('error-message'))).toContain('nope');
    await page.goto(`${app.url}/ui#/transaction/no-such-job`);
    await poll(text(page.getByTestId('api-error').getByTestId('error-code'))).toBe('code 10 TransactionNotFound');
  });

  it('asks for credentials when the service needs them, sends them as a header, and keeps them out of URLs', async () => {
    const key = 'console-test-key';
    const secured = await listenTestApp(root, { auth: { apiKeys: [{ principal: 'viewer', sha256: createHash('sha256').update(key).digest('hex') }] } });
    try {
      const page = await open('', secured.url);
      const seen: Array<{ url: string; key: string | undefined }> = [];
      page.on('request', (r) => seen.push({ url: r.url(), key: r.headers()['x-api-key'] }));
      const error = page.locator('main').getByTestId('api-error').first();
      await poll(text(error.getByTestId('error-code'))).toBe('code 16 Unauthenticated');
      await poll(text(error)).toContain('HTTP 401');

      await page.getByTestId('credentials-button').click();
      await page.getByRole('textbox', { name: 'API key' }).fill(key);
      await page.getByRole('button', { name: 'Use' }).click();
      await poll(text(page.getByTestId('count-namespaces'))).toContain('5 namespaces');
      await poll(text(page.getByTestId('credentials-button'))).toBe('API key ✓');
      const api = seen.filter((r) => new URL(r.url).pathname.startsWith('/v1/'));
      expect(api.filter((r) => r.key === key).length).toBeGreaterThan(0);
      expect(seen.every((r) => !r.url.includes(key))).toBe(true);
      expect(page.url()).not.toContain(key);
      // Not asked to keep them: memory only, gone with a reload.
      expect(await page.evaluate('sessionStorage.length')).toBe(0);
      await page.reload();
      await poll(text(page.locator('main').getByTestId('error-code').first())).toBe('code 16 Unauthenticated');
    } finally {
      await secured.close();
    }
  });
});
