import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { Breadcrumbs, ErrorBox, Link, Loading, listPlaceholder, type PagedList, Pager, PropertiesTable, useApi, usePagedList } from '../components.js';
import { formatCount } from '../format.js';

// A namespace: its properties, how many namespaces and tables it holds, and both lists a page at a
// time (the API's page tokens), so that one with 10,000 tables costs a page of 100 to show.

export const PAGE_SIZE = 100;
/** Counting asks for pages this large (the API's limit is an upper bound it may lower). */
const COUNT_PAGE_SIZE = 1000;

type Lister = (token: string | undefined, limit: number, signal: AbortSignal) => Promise<{ items: string[]; pageToken: string | undefined }>;

export function NamespacePage({ id }: { id: string[] }) {
  const described = useApi((signal) => api.describeNamespace(id, signal), []);
  const listNamespaces: Lister = async (token, limit, signal) => {
    const page = await api.listNamespaces(id, { limit, pageToken: token, signal });
    return { items: page.namespaces, pageToken: page.page_token ?? undefined };
  };
  const listTables: Lister = async (token, limit, signal) => {
    const page = await api.listTables(id, { limit, pageToken: token, signal });
    return { items: page.tables, pageToken: page.page_token ?? undefined };
  };
  const namespaces = usePagedList((token, signal) => listNamespaces(token, PAGE_SIZE, signal));
  const tables = usePagedList((token, signal) => listTables(token, PAGE_SIZE, signal));
  const name = id.length === 0 ? 'Root namespace' : (id[id.length - 1] as string);
  return (
    <section data-testid="namespace-page">
      <Breadcrumbs id={id} />
      <h1>
        <span class="kind">namespace</span> {name}
      </h1>
      <div class="counts" data-testid="counts">
        <Count label="namespaces" list={namespaces} lister={listNamespaces} />
        <Count label="tables" list={tables} lister={listTables} />
      </div>
      <h2>Properties</h2>
      {described.loading ? <Loading what="properties" /> : <ErrorBox error={described.error} onRetry={described.reload} />}
      {described.data && <PropertiesTable properties={described.data.properties} />}
      <h2>Namespaces</h2>
      <ChildList list={namespaces} what="namespaces" render={(child) => <Link to={{ page: 'namespace', id: [...id, child] }}>{child}</Link>} />
      <h2>Tables</h2>
      <ChildList list={tables} what="tables" render={(child) => <Link to={{ page: 'table', id: [...id, child] }}>{child}</Link>} />
    </section>
  );
}

function ChildList({ list, what, render }: { list: PagedList<string>; what: string; render: (name: string) => ComponentChildren }) {
  const placeholder = listPlaceholder(list, what);
  if (placeholder) return placeholder;
  return (
    <>
      <ul class="children" data-testid={`list-${what}`}>
        {list.items.map((name) => (
          <li key={name}>{render(name)}</li>
        ))}
      </ul>
      <Pager list={list} what={what} />
    </>
  );
}

/**
 * How many children there are. The last page answers it; before it the API has no count, and
 * counting means reading every page: that is left to a button.
 */
function Count({ label, list, lister }: { label: string; list: PagedList<string>; lister: Lister }) {
  const [counting, setCounting] = useState<{ counted: number; done: boolean; error?: unknown } | null>(null);
  const controller = useRef<AbortController | null>(null);
  useEffect(() => () => controller.current?.abort(), []);
  const countAll = async () => {
    controller.current?.abort();
    const c = new AbortController();
    controller.current = c;
    let counted = 0;
    let token: string | undefined;
    setCounting({ counted, done: false });
    try {
      do {
        const page = await lister(token, COUNT_PAGE_SIZE, c.signal);
        counted += page.items.length;
        token = page.pageToken || undefined;
        if (!c.signal.aborted) setCounting({ counted, done: token === undefined });
      } while (token !== undefined && !c.signal.aborted);
    } catch (error) {
      if (!c.signal.aborted) setCounting({ counted, done: false, error });
    }
  };
  let value: string;
  if (counting?.done) value = formatCount(counting.counted);
  else if (list.loading && list.index === 0) value = '…';
  // The last page tells the exact count; an earlier one that there are more than it has seen.
  else if (!list.hasNext) value = formatCount(list.offset + list.items.length);
  else value = `more than ${formatCount(list.offset + list.items.length)}`;
  return (
    <div class="count" data-testid={`count-${label}`}>
      <span class="count-value">{value}</span> <span class="muted">{label}</span>
      {!counting?.done && list.hasNext && (
        <>
          {' '}
          {counting && !counting.error ? (
            <span class="muted small">
              counting… {formatCount(counting.counted)}{' '}
              <button
                type="button"
                class="linkish"
                onClick={() => {
                  controller.current?.abort();
                  setCounting(null);
                }}
              >
                stop
              </button>
            </span>
          ) : (
            <button type="button" class="linkish" onClick={countAll} title={`reads every page of ${label} (${COUNT_PAGE_SIZE} a page)`}>
              count all
            </button>
          )}
        </>
      )}
      {counting?.error !== undefined && <ErrorBox error={counting.error} />}
    </div>
  );
}
