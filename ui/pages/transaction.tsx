import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorBox, Link, Loading, ProgressBar, PropertiesTable, StatusBadge, TableLink, usePolled } from '../components.js';
import { formatCount, parseTableId } from '../format.js';
import { navigate } from '../router.js';
import { JobsList } from './jobs.js';

// Transactions and jobs. Jobs (backfills, view refreshes) are listed from Geneva's job table (pages/jobs.tsx); the API
// describes one transaction by its id (DescribeTransaction) and has no list of the others: their ids
// come from the answers that start them (a batch's transaction_id) and, for every Lance commit, from
// the version timeline (`<table id>$<version>`). A Queued or Running one is asked again every
// POLL_MS until it ends, which moves its progress bar.

export const POLL_MS = 1000;
const ENDED = new Set(['Succeeded', 'Failed', 'Canceled']);

export function TransactionsPage() {
  const [value, setValue] = useState('');
  const submit = (e: Event) => {
    e.preventDefault();
    const id = value
      .trim()
      .split('$')
      .filter((p) => p !== '');
    if (id.length > 0) navigate({ page: 'transaction', id });
  };
  return (
    <section data-testid="transactions-page">
      <h1>Transactions and jobs</h1>
      <p>
        A backfill job is a transaction: its id is the <code>job_id</code> that <code>backfill_column</code> answered, and its page shows its live progress.
        Batch commits answer a <code>transaction_id</code>; each version of a table is the Lance commit <code>{'<table id>$<version>'}</code>, linked from the
        table's version timeline.
      </p>
      <JobsList />
      <h2>Describe a transaction</h2>
      <form class="lookup" onSubmit={submit}>
        <label for="transaction-id">Transaction or job id</label>
        <input
          id="transaction-id"
          name="transaction-id"
          value={value}
          onInput={(e) => setValue((e.target as HTMLInputElement).value)}
          placeholder="e.g. 0b6f…-… or sales$orders$12"
          size={48}
        />
        <button type="submit">Describe</button>
      </form>
      <p class="muted small">The API lists no transactions other than jobs: the console describes the one you name.</p>
    </section>
  );
}

/** A transaction by its id; `branch`: the line of history of a Lance commit (absent: main). */
export function TransactionPage({ id, branch }: { id: string[]; branch?: string | undefined }) {
  const state = usePolled(
    (signal) => api.describeTransaction(id, signal, branch),
    (data) => !ENDED.has(data.status),
    POLL_MS,
    [],
  );
  const { data } = state;
  const props = data?.properties ?? {};
  // The table: a job's `table` property, or the leading parts of a Lance commit's id.
  const lanceCommit = id.length > 1;
  const table = parseTableId(props.table) ?? (lanceCommit ? id.slice(0, -1) : null);
  const live = data !== undefined && !ENDED.has(data.status);
  return (
    <section data-testid="transaction-page">
      <nav class="crumbs">
        <Link to={{ page: 'transactions' }}>transactions</Link>
        <span class="sep">/</span>
        <span class="mono">{id.join('$')}</span>
      </nav>
      <h1>
        <span class="kind">{kindOf(props, lanceCommit)}</span> <span class="mono">{id.join('$')}</span>
        {branch !== undefined && (
          <>
            {' '}
            <span class="kind">on branch</span> <span data-testid="transaction-branch">{branch}</span>
          </>
        )}
      </h1>
      <ErrorBox error={state.error} onRetry={state.reload} />
      {!data && !state.error && <Loading what="the transaction" />}
      {data && (
        <>
          <div class="status-line">
            <StatusBadge status={data.status} />
            {props.operation && (
              <span class="chip" data-testid="operation">
                {props.operation}
              </span>
            )}
            {live ? (
              <span class="muted small" data-testid="live">
                live: asked again every {POLL_MS / 1000} s, last at {state.at?.toLocaleTimeString('en-GB')}
              </span>
            ) : (
              <span class="muted small">ended: not asked again</span>
            )}
          </div>
          {table && (
            <p>
              table <TableLink id={table} />
              {props.column && (
                <>
                  , column <code>{props.column}</code>
                </>
              )}
              {props.version && lanceCommit && (
                <>
                  , version {props.version} (<Link to={{ page: 'versions', id: table, branch }}>timeline</Link>)
                </>
              )}
            </p>
          )}
          {props.rows_done !== undefined && <JobProgress properties={props} status={data.status} table={table} />}
          {props.error && (
            <div class="error" data-testid="job-error">
              <strong>The job failed:</strong> {props.error}
            </div>
          )}
          <h2>Properties</h2>
          <PropertiesTable properties={props} />
        </>
      )}
    </section>
  );
}

/** What the transaction is, for its heading: a job the service runs, a Lance commit, or another transaction. */
function kindOf(props: Record<string, string>, lanceCommit: boolean): string {
  // A refresh's properties name its source and version (DescribeTransaction does not carry the operation).
  if (props.source !== undefined && props.src_version !== undefined) return 'view refresh job';
  if (props.column !== undefined && props.rows_done !== undefined) return 'backfill job';
  return lanceCommit ? 'Lance commit' : 'transaction';
}

function JobProgress({ properties, status, table }: { properties: Record<string, string>; status: string; table: string[] | null }) {
  const rowsDone = Number(properties.rows_done ?? 0);
  const rowsTotal = properties.rows_total !== undefined ? Number(properties.rows_total) : undefined;
  const chunksDone = properties.chunks_done !== undefined ? Number(properties.chunks_done) : undefined;
  const chunksTotal = properties.chunks_total !== undefined ? Number(properties.chunks_total) : undefined;
  return (
    <div class="job" data-testid="job-progress">
      {rowsTotal !== undefined ? (
        <ProgressBar done={rowsDone} total={rowsTotal} label="rows filled" />
      ) : (
        <div class="muted">{status === 'Queued' ? 'Queued: no runner has taken it yet.' : 'Planning its chunks…'}</div>
      )}
      <div class="job-figures" data-testid="job-figures">
        rows {formatCount(rowsDone)}
        {rowsTotal !== undefined && ` of ${formatCount(rowsTotal)}`}
        {chunksTotal !== undefined && `, chunks ${formatCount(chunksDone ?? 0)} of ${formatCount(chunksTotal)}`}
        {properties.last_committed_version !== undefined && (
          <>
            , last committed version{' '}
            {table ? (
              <Link to={{ page: 'transaction', id: [...table, properties.last_committed_version] }}>{properties.last_committed_version}</Link>
            ) : (
              properties.last_committed_version
            )}
          </>
        )}
      </div>
    </div>
  );
}
