import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError, ERROR_NAMES } from './api.js';
import { displayId } from './format.js';
import { href, type Route } from './router.js';

/** The state of one API answer a view waits for. */
export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload(): void;
}

/**
 * Runs `load` when `deps` change (and on reload), aborting the previous call: a view shows the
 * answer to its latest question only.
 */
export function useApi<T>(load: (signal: AbortSignal) => Promise<T>, deps: readonly unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({ data: undefined, error: undefined, loading: true });
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    const controller = new AbortController();
    setState({ data: undefined, error: undefined, loading: true });
    load(controller.signal).then(
      (data) => !controller.signal.aborted && setState({ data, error: undefined, loading: false }),
      (error: unknown) => !controller.signal.aborted && setState({ data: undefined, error, loading: false }),
    );
    return () => controller.abort();
  }, [...deps, generation]);
  return { ...state, reload: useCallback(() => setGeneration((g) => g + 1), []) };
}

/** The latest answer of a view that asks again while what it shows is live, and when it was received. */
export interface Polled<T> {
  data: T | undefined;
  error: unknown;
  at: Date | undefined;
  reload(): void;
}

/**
 * Runs `load` when `deps` change (and on reload), then again every `everyMs` while `again` holds
 * for its answer; an error stops it (and is shown until a reload). While it is asked again, the
 * answer on screen stays, so a live view does not flicker; new deps start from nothing.
 */
export function usePolled<T>(load: (signal: AbortSignal) => Promise<T>, again: (data: T) => boolean, everyMs: number, deps: readonly unknown[]): Polled<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; at?: Date }>({});
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    setState({});
    const poll = async () => {
      try {
        const data = await load(controller.signal);
        if (controller.signal.aborted) return;
        setState({ data, at: new Date() });
        if (again(data)) timer = setTimeout(() => void poll(), everyMs);
      } catch (error) {
        if (!controller.signal.aborted) setState((s) => ({ ...s, error }));
      }
    };
    void poll();
    return () => {
      controller.abort();
      if (timer !== undefined) clearTimeout(timer);
    };
  }, [...deps, generation]);
  const reload = useCallback(() => setGeneration((g) => g + 1), []);
  return { data: state.data, error: state.error, at: state.at, reload };
}

/** A list the API pages with tokens: one page on screen, forward by token, back through the tokens seen. */
export interface PagedList<T> {
  items: T[];
  /** 0-based index of the page on screen. */
  index: number;
  /** How many items the pages before it held. */
  offset: number;
  hasNext: boolean;
  next(): void;
  previous(): void;
  error: unknown;
  loading: boolean;
  reload(): void;
}

/** The pages of one list; the view that uses it is keyed by what it lists, so that another list starts afresh. */
export function usePagedList<T>(
  fetchPage: (token: string | undefined, signal: AbortSignal) => Promise<{ items: T[]; pageToken: string | undefined }>,
): PagedList<T> {
  // Page i starts at tokens[i] (undefined for the first) and after offsets[i] items (a page may hold fewer than the limit).
  const [tokens, setTokens] = useState<Array<string | undefined>>([undefined]);
  const [offsets, setOffsets] = useState<number[]>([0]);
  const [index, setIndex] = useState(0);
  const page = useApi((signal) => fetchPage(tokens[index], signal), [index, tokens[index]]);
  const nextToken = page.data?.pageToken;
  const items = page.data?.items ?? [];
  return {
    items,
    index,
    offset: offsets[index] ?? 0,
    hasNext: nextToken !== undefined && nextToken !== '',
    next: () => {
      if (!nextToken) return;
      setTokens((t) => [...t.slice(0, index + 1), nextToken]);
      setOffsets((o) => [...o.slice(0, index + 1), (o[index] ?? 0) + items.length]);
      setIndex(index + 1);
    },
    previous: () => setIndex(Math.max(0, index - 1)),
    error: page.error,
    loading: page.loading,
    reload: page.reload,
  };
}

/** What a paged list shows in place of its items: its error, that it is loading, or that it has none; null once it has some. */
export function listPlaceholder(list: PagedList<unknown>, what: string): ComponentChildren | null {
  if (list.error) return <ErrorBox error={list.error} onRetry={list.reload} />;
  if (list.loading && list.items.length === 0) return <Loading what={what} />;
  if (list.items.length === 0) return <p class="muted">No {what}.</p>;
  return null;
}

export function Link({ to, children, class: className }: { to: Route; children: ComponentChildren; class?: string }) {
  return (
    <a href={href(to)} class={className}>
      {children}
    </a>
  );
}

/** An API error as the API gave it: status, code (and its name), message, the request id to find it in the logs. */
export function ErrorBox({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  if (error === undefined || error === null) return null;
  if (error instanceof DOMException && error.name === 'AbortError') return null;
  const e = error instanceof ApiError ? error : null;
  return (
    <div class="error" role="alert" data-testid="api-error">
      <div class="error-head">
        {e ? (
          <>
            <strong>{e.operation} failed</strong>
            {e.status > 0 && <span class="chip">HTTP {e.status}</span>}
            {e.code !== null && (
              <span class="chip" data-testid="error-code">
                code {e.code} {ERROR_NAMES[e.code] ?? ''}
              </span>
            )}
          </>
        ) : (
          <strong>Something failed</strong>
        )}
      </div>
      <div class="error-message" data-testid="error-message">
        {error instanceof Error ? error.message : String(error)}
      </div>
      {e?.code === 16 && <div class="hint">This service needs credentials: give an API key or a bearer token under “Credentials” at the top right.</div>}
      {e?.code === 15 && <div class="hint">The credentials given do not allow this.</div>}
      {e?.requestId && <div class="muted small">request id {e.requestId}</div>}
      {onRetry && (
        <button type="button" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return <div class="loading muted">Loading {what}…</div>;
}

export function PropertiesTable({ properties, empty = 'No properties.' }: { properties: Record<string, string> | null | undefined; empty?: string }) {
  const entries = Object.entries(properties ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (entries.length === 0) return <p class="muted">{empty}</p>;
  return (
    <table class="kv" data-testid="properties">
      <tbody>
        {entries.map(([key, value]) => (
          <tr key={key}>
            <th>{key}</th>
            <td class="mono">{value}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function Breadcrumbs({ id, last }: { id: readonly string[]; last?: ComponentChildren }) {
  return (
    <nav class="crumbs" aria-label="breadcrumbs">
      <Link to={{ page: 'namespace', id: [] }}>root</Link>
      {id.map((part, i) => (
        <span key={i}>
          <span class="sep">/</span>
          {i === id.length - 1 && last === undefined ? <span>{part}</span> : <Link to={{ page: 'namespace', id: id.slice(0, i + 1) }}>{part}</Link>}
        </span>
      ))}
      {last !== undefined && (
        <span>
          <span class="sep">/</span>
          {last}
        </span>
      )}
    </nav>
  );
}

export function Pager({ list, what }: { list: PagedList<unknown>; what: string }) {
  if (list.index === 0 && !list.hasNext) return null;
  const from = list.offset + 1;
  return (
    <div class="pager" data-testid={`pager-${what}`}>
      <button type="button" disabled={list.index === 0 || list.loading} onClick={list.previous}>
        ← Previous
      </button>
      <span class="muted">
        {what} {from}–{from + list.items.length - 1} (page {list.index + 1}
        {list.hasNext ? ', more follow' : ', the last'})
      </span>
      <button type="button" disabled={!list.hasNext || list.loading} onClick={list.next}>
        Next →
      </button>
    </div>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return (
    <span class={`status status-${status.toLowerCase()}`} data-testid="status">
      {status}
    </span>
  );
}

export function ProgressBar({ done, total, label, compact = false }: { done: number; total: number; label: string; compact?: boolean }) {
  const fraction = total > 0 ? Math.min(1, done / total) : 0;
  const percent = Math.floor(fraction * 1000) / 10;
  return (
    <div
      class={compact ? 'progress compact' : 'progress'}
      role="progressbar"
      aria-label={label}
      aria-valuemin={0}
      aria-valuemax={total}
      aria-valuenow={done}
      data-testid="progress"
    >
      <div class="progress-fill" style={{ width: `${percent}%` }} />
      <span class="progress-text">{percent}%</span>
    </div>
  );
}

export const TableLink = ({ id }: { id: readonly string[] }) => <Link to={{ page: 'table', id: [...id] }}>{displayId(id)}</Link>;
