import { Fragment } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, type TableVersion } from '../api.js';
import { VersionChart, type VersionDetail } from '../chart.js';
import { Breadcrumbs, ErrorBox, Link, Loading, useApi } from '../components.js';
import { formatBytes, formatCount, formatTime } from '../format.js';

// The version timeline of a table: the latest versions a page at a time (ListTableVersions newest
// first, 50 a page, "load more" for the next), so a table with 100,000 versions shows as fast as
// one with ten. For each version on screen, its Lance commit's operation (DescribeTransaction of
// `<table id>$<version>`) and its row count (CountTableRows at that version) are asked for a few
// at a time; the chart plots what has arrived. Each line of history has its timeline: main's, and
// each branch's (ListTableVersions, CountTableRows and DescribeTransaction with `branch`).

export const VERSION_PAGE = 50;
/** Branches offered as other timelines (the first page of ListTableBranches). */
const BRANCH_LINKS = 100;
/** Detail calls in flight at once. */
const DETAIL_CONCURRENCY = 4;

export function VersionsPage({ id, branch }: { id: string[]; branch?: string | undefined }) {
  const [versions, setVersions] = useState<TableVersion[]>([]);
  const [next, setNext] = useState<string | undefined>(undefined);
  const [state, setState] = useState<{ loading: boolean; error?: unknown }>({ loading: true });
  const [details, setDetails] = useState<ReadonlyMap<number, VersionDetail>>(new Map());
  const abort = useRef(new AbortController());
  useEffect(() => () => abort.current.abort(), []);

  const loadPage = async (token: string | undefined) => {
    setState({ loading: true });
    try {
      const page = await api.listVersions(id, { limit: VERSION_PAGE, pageToken: token, signal: abort.current.signal }, branch);
      setVersions((v) => [...v, ...page.versions]);
      setNext(page.page_token || undefined);
      setState({ loading: false });
    } catch (error) {
      if (!abort.current.signal.aborted) setState({ loading: false, error });
    }
  };
  useEffect(() => void loadPage(undefined), []);
  useVersionDetails(id, branch, versions, abort.current.signal, setDetails);

  const name = id[id.length - 1] as string;
  return (
    <section data-testid="versions-page">
      <Breadcrumbs id={id.slice(0, -1)} last={<Link to={{ page: 'table', id }}>{name}</Link>} />
      <h1>
        <span class="kind">versions of</span> {name}
        {branch !== undefined && (
          <>
            {' '}
            <span class="kind">on branch</span> <span data-testid="versions-branch">{branch}</span>
          </>
        )}
      </h1>
      <BranchLinks id={id} branch={branch} />
      <p class="muted small">
        Newest first, {VERSION_PAGE} at a time. {branch !== undefined && <>A branch's history starts at the version it was forked at. </>}
        The operation of each version is what Lance recorded in its transaction file (DescribeTransaction of <code>{`${id.join('$')}$<version>`}</code>
        {branch !== undefined && <> with the branch</>}); rows are CountTableRows at that version; bytes are the size of the version's manifest (the API reports
        data bytes only for the latest version, on the table page).
      </p>
      {versions.length > 0 && <VersionChart versions={versions} details={details} />}
      <ErrorBox error={state.error} onRetry={() => void loadPage(next)} />
      {versions.length > 0 && (
        <table class="grid" data-testid="versions">
          <thead>
            <tr>
              <th class="num">version</th>
              <th>committed</th>
              <th>operation</th>
              <th class="num">rows</th>
              <th class="num">manifest</th>
              <th>metadata</th>
            </tr>
          </thead>
          <tbody>
            {versions.map((v) => {
              const d = details.get(v.version);
              return (
                <tr key={v.version} data-version={v.version}>
                  <td class="num">{v.version}</td>
                  <td class="mono small">{formatTime(v.timestamp_millis)}</td>
                  <td data-testid="operation">
                    {d?.error ? (
                      <span class="error-inline" title={d.error}>
                        unavailable
                      </span>
                    ) : (
                      <Link to={{ page: 'transaction', id: [...id, String(v.version)], branch }}>{d?.operation ?? (d ? 'not recorded' : '…')}</Link>
                    )}
                  </td>
                  <td class="num" data-testid="rows">
                    {d?.rows !== undefined ? formatCount(d.rows) : d?.error ? '—' : '…'}
                  </td>
                  <td class="num">{v.manifest_size !== undefined ? formatBytes(v.manifest_size) : '—'}</td>
                  <td class="small mono">
                    {Object.entries(v.metadata ?? {})
                      .map(([k, val]) => `${k}=${val}`)
                      .join(', ')}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {state.loading && <Loading what="versions" />}
      {!state.loading && versions.length === 0 && !state.error && <p class="muted">No versions (a declared table has none until its first write).</p>}
      <div class="pager">
        <span class="muted" data-testid="versions-shown">
          {formatCount(versions.length)} versions shown{next ? ', older ones follow' : versions.length > 0 ? ', down to the first' : ''}
        </span>
        {next && (
          <button type="button" disabled={state.loading} onClick={() => void loadPage(next)}>
            Load {VERSION_PAGE} more
          </button>
        )}
      </div>
    </section>
  );
}

/** The table's lines of history, main first, each a link to its timeline; the one on screen is not a link. */
function BranchLinks({ id, branch }: { id: string[]; branch: string | undefined }) {
  const listed = useApi((signal) => api.listBranches(id, { limit: BRANCH_LINKS, signal }), []);
  const names = Object.keys(listed.data?.branches ?? {});
  // Only a table with branches has a choice to offer (a failed listing leaves the timeline as it is).
  if (names.length === 0 && branch === undefined) return null;
  const lines: Array<string | undefined> = [undefined, ...[...new Set(branch === undefined ? names : [...names, branch])].sort()];
  return (
    <p class="small" data-testid="version-lines">
      Timeline of:{' '}
      {lines.map((line, i) => (
        <Fragment key={line ?? ''}>
          {i > 0 && ' · '}
          {line === branch ? <strong>{line ?? 'main'}</strong> : <Link to={{ page: 'versions', id, branch: line }}>{line ?? 'main'}</Link>}
        </Fragment>
      ))}
      {listed.data?.page_token ? ' · …' : ''}
    </p>
  );
}

/** Asks for the details of every listed version that has none yet, DETAIL_CONCURRENCY at a time. */
function useVersionDetails(
  id: string[],
  branch: string | undefined,
  versions: TableVersion[],
  signal: AbortSignal,
  setDetails: (f: (d: ReadonlyMap<number, VersionDetail>) => ReadonlyMap<number, VersionDetail>) => void,
) {
  const asked = useRef(new Set<number>());
  const queue = useRef<number[]>([]);
  const running = useRef(0);
  useEffect(() => {
    for (const v of versions) {
      if (asked.current.has(v.version)) continue;
      asked.current.add(v.version);
      queue.current.push(v.version);
    }
    const pump = () => {
      while (running.current < DETAIL_CONCURRENCY && queue.current.length > 0 && !signal.aborted) {
        const version = queue.current.shift() as number;
        running.current++;
        void detailOf(id, branch, version, signal)
          .then((detail) => !signal.aborted && setDetails((d) => new Map(d).set(version, detail)))
          .finally(() => {
            running.current--;
            pump();
          });
      }
    };
    pump();
  }, [versions]);
}

/** A version's row count and its Lance commit's operation (on its line of history); `error` when nothing asked for came. */
async function detailOf(id: string[], branch: string | undefined, version: number, signal: AbortSignal): Promise<VersionDetail> {
  const [rows, transaction] = await Promise.allSettled([
    twice(() => api.countRows(id, version, signal, branch), signal),
    twice(() => api.describeTransaction([...id, String(version)], signal, branch), signal),
  ]);
  const detail: VersionDetail = {};
  if (rows.status === 'fulfilled') detail.rows = rows.value;
  if (transaction.status === 'fulfilled') detail.operation = transaction.value.properties.operation;
  const failures = [rows, transaction].filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => (r.reason as Error).message);
  if (failures.length === 2) detail.error = failures.join('; ');
  return detail;
}

/** `ask`, asked once more if the service or the network failed (a busy service may refuse one of many detail requests); a detail is never asked for again later. */
async function twice<T>(ask: () => Promise<T>, signal: AbortSignal): Promise<T> {
  try {
    return await ask();
  } catch (e) {
    if (signal.aborted || (e instanceof ApiError && e.status < 500)) throw e;
    return ask();
  }
}
