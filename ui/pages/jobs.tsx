import { useRef, useState } from 'preact/hooks';
import { ApiError, api } from '../api.js';
import { ErrorBox, Link, Loading, ProgressBar, StatusBadge, usePolled } from '../components.js';
import { formatCount, formatTime, timestampLiteral } from '../format.js';
import type { JobRow } from '../job-rows.js';

// The list of backfill jobs, read from Geneva's job table `__system$geneva_jobs` through QueryTable
// (the only way the API lists jobs). Each job keeps its row there current as it runs; its
// transaction (DescribeTransaction, the job's own page) stays the source of truth, so a row may be
// a moment behind it.
//
// QueryTable cannot sort, so a page is found in two steps: the launch times of every job before the
// page's bound (one timestamp column: 8 bytes a job), then the rows launched in the page's span,
// newest JOB_PAGE (ties at the span's lower end included, so that the next page, bounded by that
// time, neither repeats nor skips a job). Running and pending jobs are also asked for on their own
// (at most RUNNING_SHOWN), so that a long-running job shows whatever page is on screen. While any
// job runs, the running jobs and the page's rows are asked again every POLL_MS; the launch times
// are read again only when the page changes, on Refresh, or when the page's span may no longer
// fit in one answer (at 100,000 jobs they are 0.8 MB a read).

const JOB_TABLE: readonly string[] = ['__system', 'geneva_jobs'];
const JOB_PAGE = 50;
const RUNNING_SHOWN = 50;
const POLL_MS = 1000;
/** QueryTable's k is a u32: its largest value asks for every row that matches. */
const ALL_ROWS = 4_294_967_295;
const ROW_COLUMNS = ['job_id', 'table_name', 'column_name', 'job_type', 'status', 'launched_at', 'updated_at', 'metrics'];
const ACTIVE_FILTER = "status = 'PENDING' OR status = 'RUNNING'";
const isActive = (row: JobRow) => row.status === 'PENDING' || row.status === 'RUNNING';
/** Whether a job on screen runs (the list is then asked again). */
const isLive = (view: JobsView) => view.running.length > 0 || view.rows.some(isActive);

const newestFirst = (a: JobRow, b: JobRow) =>
  a.launchedAt === b.launchedAt ? (a.jobId < b.jobId ? 1 : -1) : (a.launchedAt ?? 0n) < (b.launchedAt ?? 0n) ? 1 : -1;

interface JobsView {
  running: JobRow[];
  /** More jobs are running than RUNNING_SHOWN. */
  moreRunning: boolean;
  /** The page's jobs, newest first. */
  rows: JobRow[];
  /** How many jobs were launched before the page's bound (all of them on the first page). */
  before: number;
  /** The bound of the next (older) page; undefined on the last. */
  older: bigint | undefined;
  /** What a poll of the same page needs to ask for its rows alone; undefined on an empty page. */
  span: PageSpan | undefined;
}

/** A page's span as its launch times were read: its lower end, and what the times said. */
interface PageSpan {
  low: bigint;
  /** Jobs launched in [low, bound) when the times were read. */
  inPage: number;
  before: number;
  older: bigint | undefined;
}

/**
 * The jobs launched before `bound` (all when undefined), newest JOB_PAGE first; 'no-table' before
 * the first job. `kept`: the page's span from the last read of the same page, so that only its rows
 * are asked for (see the header).
 */
async function loadJobs(bound: bigint | undefined, signal: AbortSignal, kept?: PageSpan): Promise<JobsView | 'no-table'> {
  const reader = await import('../job-rows.js');
  const before = bound === undefined ? [] : [`launched_at < ${timestampLiteral(bound)}`];
  const query = (k: number, filter: string | null, columns: string[]) => api.queryTable(JOB_TABLE, { k, filter, columns: { column_names: columns } }, signal);
  const inSpan = (low: bigint, k: number) => query(k, [`launched_at >= ${timestampLiteral(low)}`, ...before].join(' AND '), ROW_COLUMNS);
  const runningOf = (answer: ArrayBuffer) => {
    const running = reader.readJobRows(answer).sort(newestFirst);
    return { running: running.slice(0, RUNNING_SHOWN), moreRunning: running.length > RUNNING_SHOWN };
  };
  try {
    if (kept) {
      // k leaves room for jobs launched since the times were read (on the first page); an answer
      // that fills it may have left some out, and the page is read afresh.
      const k = kept.inPage + JOB_PAGE;
      const [active, inPage] = await Promise.all([query(RUNNING_SHOWN + 1, ACTIVE_FILTER, ROW_COLUMNS), inSpan(kept.low, k)]);
      const rows = reader.readJobRows(inPage).sort(newestFirst);
      if (rows.length < k) return { ...runningOf(active), rows, before: kept.before + Math.max(0, rows.length - kept.inPage), older: kept.older, span: kept };
    }
    const [active, launched] = await Promise.all([query(RUNNING_SHOWN + 1, ACTIVE_FILTER, ROW_COLUMNS), query(ALL_ROWS, before[0] ?? null, ['launched_at'])]);
    const times = reader.readLaunchTimes(launched).sort((a, b) => (a < b ? 1 : a > b ? -1 : 0));
    const view: JobsView = { ...runningOf(active), rows: [], before: times.length, older: undefined, span: undefined };
    const low = times[Math.min(JOB_PAGE, times.length) - 1];
    if (low === undefined) return view;
    const inPage = times.filter((t) => t >= low).length;
    view.rows = reader.readJobRows(await inSpan(low, inPage + JOB_PAGE)).sort(newestFirst);
    view.older = inPage < times.length ? low : undefined;
    view.span = { low, inPage, before: times.length, older: view.older };
    return view;
  } catch (e) {
    // The service makes its job table (and the namespace __system) with the first job.
    if (e instanceof ApiError && e.status === 404 && (e.code === 4 || e.code === 1)) return 'no-table';
    throw e;
  }
}

export function JobsList() {
  // Page i holds the jobs launched before pages[i].bound (the first: all), after pages[i].offset newer ones.
  const [pages, setPages] = useState<Array<{ bound: bigint | undefined; offset: number }>>([{ bound: undefined, offset: 0 }]);
  const [index, setIndex] = useState(0);
  const { bound, offset } = pages[index] ?? { bound: undefined, offset: 0 };
  // The span of the page on screen as last read, for its polls (see loadJobs).
  const span = useRef<{ bound: bigint | undefined; span: PageSpan } | undefined>(undefined);
  const load = async (signal: AbortSignal) => {
    const kept = span.current;
    const view = await loadJobs(bound, signal, kept && kept.bound === bound ? kept.span : undefined);
    span.current = view !== 'no-table' && view.span ? { bound, span: view.span } : undefined;
    return view;
  };
  const polled = usePolled(load, (v) => v !== 'no-table' && isLive(v), POLL_MS, [bound]);
  const { data: view, error, at } = polled;
  // Refresh reads the launch times again.
  const reload = () => {
    span.current = undefined;
    polled.reload();
  };
  return (
    <div data-testid="jobs">
      <h2>Jobs</h2>
      <ErrorBox error={error} onRetry={reload} />
      {!view && !error && <Loading what="the jobs" />}
      {view === 'no-table' && (
        <div class="status-line">
          <span data-testid="no-jobs">
            No jobs yet. The service lists jobs from the table <code>__system$geneva_jobs</code>, which it makes when the first backfill job starts.
          </span>
          <button type="button" onClick={reload}>
            Refresh
          </button>
        </div>
      )}
      {view && view !== 'no-table' && (
        <>
          <LiveLine live={isLive(view)} at={at} onRefresh={reload} />
          <h3>Running now</h3>
          {view.running.length === 0 ? (
            <p class="muted" data-testid="no-running">
              No job is running.
            </p>
          ) : (
            <JobTable rows={view.running} testId="running-jobs" />
          )}
          {view.moreRunning && <p class="muted small">More than {RUNNING_SHOWN} jobs are running; these are the latest launched.</p>}
          <h3>All jobs, newest first</h3>
          {view.rows.length === 0 ? <p class="muted">No jobs yet.</p> : <JobTable rows={view.rows} testId="job-list" />}
          {(index > 0 || view.older !== undefined) && (
            <div class="pager" data-testid="pager-jobs">
              <button type="button" disabled={index === 0} onClick={() => setIndex(index - 1)}>
                ← Newer
              </button>
              <span class="muted">
                jobs {formatCount(offset + 1)}–{formatCount(offset + view.rows.length)} of {formatCount(offset + view.before)}
              </span>
              <button
                type="button"
                disabled={view.older === undefined}
                onClick={() => {
                  setPages((p) => [...p.slice(0, index + 1), { bound: view.older, offset: offset + view.rows.length }]);
                  setIndex(index + 1);
                }}
              >
                Older →
              </button>
            </div>
          )}
          <p class="muted small">
            From the job table <code>__system$geneva_jobs</code> (QueryTable), where each job keeps its row current as it runs; a job's own page
            (DescribeTransaction) is its source of truth and may be a moment ahead of its row. A row names the table by its last name only: the job's page links
            to the table.
          </p>
        </>
      )}
    </div>
  );
}

function LiveLine({ live, at: date, onRefresh }: { live: boolean; at: Date | undefined; onRefresh: () => void }) {
  const at = date?.toLocaleTimeString('en-GB');
  return (
    <div class="status-line">
      {live ? (
        <span class="muted small" data-testid="jobs-live">
          live: asked again every {POLL_MS / 1000} s while a job runs, last at {at}
        </span>
      ) : (
        <>
          <span class="muted small" data-testid="jobs-live">
            asked at {at}; no job runs, so not asked again
          </span>
          <button type="button" onClick={onRefresh}>
            Refresh
          </button>
        </>
      )}
    </div>
  );
}

/** Geneva's job types as the list names them: a column's backfill, or a materialized view's refresh. */
const kindOf = (jobType: string | null): string =>
  jobType === 'REFRESH' ? 'view refresh' : jobType === 'BACKFILL' ? 'backfill' : (jobType?.toLowerCase() ?? '—');

const millis = (micros: bigint | null) => (micros === null ? undefined : Number(micros / 1000n));

function JobTable({ rows, testId }: { rows: JobRow[]; testId: string }) {
  return (
    <table class="grid jobs" data-testid={testId}>
      <thead>
        <tr>
          <th>status</th>
          <th>job</th>
          <th>kind</th>
          <th>table</th>
          <th>column</th>
          <th>launched</th>
          <th>updated</th>
          <th>progress</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((row) => (
          <tr key={row.jobId} data-job={row.jobId} class={isActive(row) ? 'active' : undefined}>
            <td>
              <StatusBadge status={row.status ?? 'unknown'} />
            </td>
            <td class="mono small">
              <Link to={{ page: 'transaction', id: [row.jobId] }}>{row.jobId}</Link>
            </td>
            <td data-testid="job-kind">{kindOf(row.jobType)}</td>
            <td data-testid="job-table">{row.tableName ?? '—'}</td>
            <td data-testid="job-column">{row.columnName ? <code>{row.columnName}</code> : '—'}</td>
            <td class="mono small time">{formatTime(millis(row.launchedAt))}</td>
            <td class="mono small time">{formatTime(millis(row.updatedAt))}</td>
            <td class="job-progress" data-testid="job-row-progress">
              <RowProgress row={row} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function RowProgress({ row }: { row: JobRow }) {
  const p = row.progress;
  if (!p) return <span class="muted small">{row.status === 'PENDING' ? 'queued' : '—'}</span>;
  if (p.total === 0) return <span class="muted small">{isActive(row) ? 'planning' : 'no rows to fill'}</span>;
  return (
    <>
      <ProgressBar done={p.n} total={p.total} label={`rows of job ${row.jobId} checkpointed`} compact />
      <span class="muted small">
        {formatCount(p.n)} of {formatCount(p.total)} rows
      </span>
    </>
  );
}
