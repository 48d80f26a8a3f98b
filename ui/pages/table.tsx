import { ApiError, api, type DescribeTableResponse, type IndexContent } from '../api.js';
import { Breadcrumbs, ErrorBox, Link, Loading, listPlaceholder, Pager, PropertiesTable, useApi, usePagedList } from '../components.js';
import { childrenOf, formatBytes, formatCount, formatTime, isNested, type JsonArrowField, typeLabel } from '../format.js';

// A table: where it is, its properties and managed versioning, its maintenance policy and last runs,
// its schema (nested types as a tree), rows and size, indices with their stats, tags and branches. Five API calls (describe, stats, a
// page of indices, of tags, of branches) plus one stats call per index on the page.

const LIST_PAGE = 100;

/** DescribeTable with the detailed metadata, or without it for a table that is only declared (409 code 19). */
async function describe(id: string[], signal: AbortSignal): Promise<DescribeTableResponse> {
  try {
    return await api.describeTable(id, true, signal);
  } catch (e) {
    if (e instanceof ApiError && e.code === 19) return api.describeTable(id, false, signal);
    throw e;
  }
}

export function TablePage({ id }: { id: string[] }) {
  const described = useApi((signal) => describe(id, signal), []);
  const declaredOnly = described.data?.is_only_declared === true;
  const name = id[id.length - 1] as string;
  return (
    <section data-testid="table-page">
      <Breadcrumbs id={id.slice(0, -1)} last={<span>{name}</span>} />
      <h1>
        <span class="kind">table</span> {name}
      </h1>
      <div class="actions">
        <Link to={{ page: 'versions', id }} class="button">
          Version timeline →
        </Link>
      </div>
      {described.loading && <Loading what="the table" />}
      <ErrorBox error={described.error} onRetry={described.reload} />
      {described.data && (
        <>
          <Overview id={id} table={described.data} />
          <h2>Properties</h2>
          <PropertiesTable properties={described.data.properties} />
          {described.data.maintenance && <Maintenance maintenance={described.data.maintenance} />}
          {declaredOnly ? (
            <p class="note">Declared only: the table has no data yet, so no schema, indices or tags.</p>
          ) : (
            <>
              <h2>Schema</h2>
              {described.data.schema ? <Schema fields={described.data.schema.fields} /> : <p class="muted">No schema.</p>}
              {described.data.schema?.metadata && Object.keys(described.data.schema.metadata).length > 0 && (
                <>
                  <h3>Schema metadata</h3>
                  <PropertiesTable properties={described.data.schema.metadata} />
                </>
              )}
              <h2>Indices</h2>
              <Indices id={id} />
              <h2>Tags</h2>
              <Tags id={id} />
              <h2>Branches</h2>
              <Branches id={id} />
            </>
          )}
        </>
      )}
    </section>
  );
}

type TableMaintenance = NonNullable<DescribeTableResponse['maintenance']>;

/** The maintenance policy as resolved for the table (each key: its value and where it comes from), and the last runs. */
function Maintenance({ maintenance }: { maintenance: TableMaintenance }) {
  const count = (n: number | undefined) => (n === undefined ? '—' : formatCount(n));
  return (
    <>
      <h2>Maintenance</h2>
      <table class="grid" data-testid="maintenance-policy">
        <thead>
          <tr>
            <th>policy</th>
            <th>value</th>
            <th>set by</th>
          </tr>
        </thead>
        <tbody>
          {maintenance.policy.map((entry) => (
            <tr key={entry.key} class={entry.from === 'default' ? 'muted' : undefined}>
              <td class="mono">{entry.key}</td>
              <td class="mono">{entry.value}</td>
              <td>
                {entry.from === 'namespace' && entry.namespace ? (
                  <Link to={{ page: 'namespace', id: entry.namespace }}>namespace {entry.namespace.length === 0 ? '(root)' : entry.namespace.join('.')}</Link>
                ) : entry.from === 'table' ? (
                  'this table'
                ) : (
                  'default'
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <h3>Last runs</h3>
      {maintenance.last_runs.length === 0 ? (
        <p class="muted" data-testid="maintenance-runs">
          No run yet.
        </p>
      ) : (
        <table class="grid" data-testid="maintenance-runs">
          <thead>
            <tr>
              <th>ended</th>
              <th>status</th>
              <th>steps</th>
              <th class="num">fragments</th>
              <th class="num">rows rewritten</th>
              <th class="num">rows indexed</th>
              <th class="num">versions removed</th>
              <th class="num">version</th>
              <th>run</th>
            </tr>
          </thead>
          <tbody>
            {maintenance.last_runs.map((run) => (
              <tr key={run.job_id} title={run.error}>
                <td>{formatTime(Date.parse(run.finished_at))}</td>
                <td>{run.status}</td>
                <td>{run.steps.join(', ')}</td>
                <td class="num">{run.fragments_before === undefined ? '—' : `${formatCount(run.fragments_before)} → ${count(run.fragments_after)}`}</td>
                <td class="num">{count(run.rows_rewritten)}</td>
                <td class="num">{count(run.rows_indexed)}</td>
                <td class="num">{count(run.versions_removed)}</td>
                <td class="num">{run.version ?? '—'}</td>
                <td class="mono">
                  <Link to={{ page: 'transaction', id: [run.job_id] }}>{run.job_id.slice(0, 8)}</Link>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function Overview({ id, table }: { id: string[]; table: DescribeTableResponse }) {
  const declaredOnly = table.is_only_declared === true;
  const stats = useApi((signal) => (declaredOnly ? Promise.resolve(null) : api.tableStats(id, signal)), [declaredOnly]);
  const s = stats.data;
  return (
    <>
      <div class="cards" data-testid="overview">
        <Card label="version" value={table.version !== undefined ? String(table.version) : '—'} />
        <Card label="rows" value={s ? formatCount(s.num_rows) : stats.loading && !declaredOnly ? '…' : '—'} testid="rows" />
        <Card
          label="size"
          value={s ? formatBytes(s.total_bytes) : stats.loading && !declaredOnly ? '…' : '—'}
          testid="size"
          title="data, index and overlay files (GetTableStats total_bytes)"
        />
        <Card label="fragments" value={table.stats ? formatCount(table.stats.num_fragments) : '—'} />
        <Card label="deleted rows" value={table.stats ? formatCount(table.stats.num_deleted_rows) : '—'} />
        <Card label="managed versioning" value={table.managed_versioning ? 'on' : 'off'} testid="managed-versioning" />
      </div>
      <ErrorBox error={stats.error} onRetry={stats.reload} />
      <table class="kv">
        <tbody>
          <tr>
            <th>location</th>
            <td class="mono" data-testid="location">
              {table.location}
            </td>
          </tr>
          {table.table_uri && table.table_uri !== table.location && (
            <tr>
              <th>table uri</th>
              <td class="mono">{table.table_uri}</td>
            </tr>
          )}
          {s && (
            <tr>
              <th>rows per fragment</th>
              <td>
                min {formatCount(s.fragment_stats.lengths.min)}, median {formatCount(s.fragment_stats.lengths.p50)}, max{' '}
                {formatCount(s.fragment_stats.lengths.max)}; {formatCount(s.fragment_stats.num_small_fragments)} small
              </td>
            </tr>
          )}
          {table.is_only_declared !== undefined && table.is_only_declared !== null && (
            <tr>
              <th>state</th>
              <td>{table.is_only_declared ? 'declared (no data yet)' : 'has data'}</td>
            </tr>
          )}
        </tbody>
      </table>
    </>
  );
}

function Card({ label, value, testid, title }: { label: string; value: string; testid?: string; title?: string }) {
  return (
    <div class="card" data-testid={testid ? `card-${testid}` : undefined} title={title}>
      <div class="card-value">{value}</div>
      <div class="card-label">{label}</div>
    </div>
  );
}

/** The schema as a tree: a struct's fields (also a list's struct items) are rows under it, indented. */
function Schema({ fields }: { fields: JsonArrowField[] }) {
  const rows: Array<{ field: JsonArrowField; depth: number; path: string }> = [];
  const walk = (list: JsonArrowField[], depth: number, prefix: string) => {
    for (const field of list) {
      const path = `${prefix}${field.name}`;
      rows.push({ field, depth, path });
      if (isNested(field.type)) walk(childrenOf(field.type), depth + 1, `${path}.`);
    }
  };
  walk(fields, 0, '');
  return (
    <table class="grid schema" data-testid="schema">
      <thead>
        <tr>
          <th>column</th>
          <th>type</th>
          <th>nullable</th>
          <th>metadata</th>
        </tr>
      </thead>
      <tbody>
        {rows.map(({ field, depth, path }) => (
          <tr key={path} data-path={path}>
            <td class="mono" style={{ paddingLeft: `${0.5 + depth * 1.25}rem` }}>
              {depth > 0 && <span class="branch">└ </span>}
              {field.name}
            </td>
            <td class="mono type">{typeLabel(field.type)}</td>
            <td>{field.nullable ? 'yes' : 'no'}</td>
            <td class="small">
              {Object.entries(field.metadata ?? {}).map(([k, v]) => (
                <span key={k} class="chip mono" title={`${k}=${v}`}>
                  {k}={v.length > 60 ? `${v.slice(0, 60)}…` : v}
                </span>
              ))}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Indices({ id }: { id: string[] }) {
  const list = usePagedList(async (token, signal) => {
    const page = await api.listIndices(id, { limit: LIST_PAGE, pageToken: token, signal });
    return { items: page.indexes, pageToken: page.page_token ?? undefined };
  });
  const placeholder = listPlaceholder(list, 'indices');
  if (placeholder) return placeholder;
  return (
    <>
      <table class="grid" data-testid="indices">
        <thead>
          <tr>
            <th>name</th>
            <th>columns</th>
            <th>type</th>
            <th class="num">indexed rows</th>
            <th class="num">unindexed rows</th>
            <th class="num">size</th>
            <th>distance</th>
            <th class="num">segments</th>
          </tr>
        </thead>
        <tbody>
          {list.items.map((index) => (
            <IndexRow key={index.index_name} id={id} index={index} />
          ))}
        </tbody>
      </table>
      <Pager list={list} what="indices" />
    </>
  );
}

function IndexRow({ id, index }: { id: string[]; index: IndexContent }) {
  const stats = useApi((signal) => api.indexStats(id, index.index_name, signal), []);
  const s = stats.data;
  const count = (n: number | null | undefined) => (n === undefined || n === null ? '—' : formatCount(n));
  return (
    <tr data-index={index.index_name}>
      <td class="mono">{index.index_name}</td>
      <td class="mono">{index.columns.join(', ')}</td>
      <td>{s?.index_type ?? index.index_type ?? '—'}</td>
      <td class="num">{count(s?.num_indexed_rows ?? index.num_indexed_rows)}</td>
      <td class="num">{count(s?.num_unindexed_rows ?? index.num_unindexed_rows)}</td>
      <td class="num">{index.size_bytes !== undefined && index.size_bytes !== null ? formatBytes(index.size_bytes) : '—'}</td>
      <td>
        {stats.error ? (
          <span class="error-inline" title={(stats.error as Error).message}>
            stats failed
          </span>
        ) : (
          (s?.distance_type ?? '—')
        )}
      </td>
      <td class="num">{count(s?.num_indices ?? index.num_segments)}</td>
    </tr>
  );
}

function Tags({ id }: { id: string[] }) {
  const list = usePagedList(async (token, signal) => {
    const page = await api.listTags(id, { limit: LIST_PAGE, pageToken: token, signal });
    const items = Object.entries(page.tags).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return { items, pageToken: page.page_token ?? undefined };
  });
  const placeholder = listPlaceholder(list, 'tags');
  if (placeholder) return placeholder;
  return (
    <>
      <table class="grid" data-testid="tags">
        <thead>
          <tr>
            <th>tag</th>
            <th>branch</th>
            <th class="num">version</th>
            <th class="num">manifest size</th>
          </tr>
        </thead>
        <tbody>
          {list.items.map(([name, tag]) => (
            <tr key={name}>
              <td class="mono">{name}</td>
              <td class="mono">{tag.branch ?? 'main'}</td>
              <td class="num">{tag.branch ? tag.version : <Link to={{ page: 'transaction', id: [...id, String(tag.version)] }}>{tag.version}</Link>}</td>
              <td class="num">{formatBytes(tag.manifestSize)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <Pager list={list} what="tags" />
    </>
  );
}

/** The table's branches (Lance's own): where each was forked from, when, and its first manifest's size; each links to its version timeline. */
function Branches({ id }: { id: string[] }) {
  const list = usePagedList(async (token, signal) => {
    const page = await api.listBranches(id, { limit: LIST_PAGE, pageToken: token, signal });
    return { items: Object.entries(page.branches), pageToken: page.page_token ?? undefined };
  });
  const placeholder = listPlaceholder(list, 'branches');
  if (placeholder) return placeholder;
  return (
    <>
      <table class="grid" data-testid="branches">
        <thead>
          <tr>
            <th>branch</th>
            <th>forked from</th>
            <th class="num">at version</th>
            <th>created</th>
            <th class="num">manifest size</th>
          </tr>
        </thead>
        <tbody>
          {list.items.map(([name, branch]) => (
            <tr key={name}>
              <td class="mono">
                <Link to={{ page: 'versions', id, branch: name }}>{name}</Link>
              </td>
              <td class="mono">{branch.parentBranch ?? 'main'}</td>
              <td class="num">{branch.parentVersion}</td>
              <td>{formatTime(branch.createAt * 1000)}</td>
              <td class="num">{formatBytes(branch.manifestSize)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <Pager list={list} what="branches" />
    </>
  );
}
