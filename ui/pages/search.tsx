import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorBox, TableLink } from '../components.js';
import { formatCount } from '../format.js';

// Finding a table by name. The API has no name filter, so the console reads ListAllTables a page
// at a time (1,000 ids a page, in the catalog's stable order) and keeps the ids whose text holds
// the query; it stops after SCAN_PAGES pages and offers to read on.

const SEARCH_PAGE = 1000;
const SCAN_PAGES = 10;
const MAX_SHOWN = 200;

export function SearchPage({ query }: { query: string }) {
  const needle = query.trim().toLowerCase();
  const [state, setState] = useState<{ matches: string[][]; read: number; next: string | undefined; done: boolean; running: boolean; error?: unknown }>({
    matches: [],
    read: 0,
    next: undefined,
    done: false,
    running: false,
  });
  const abort = useRef(new AbortController());
  useEffect(() => () => abort.current.abort(), []);

  const scan = async (from: string | undefined) => {
    const signal = abort.current.signal;
    let token = from;
    setState((s) => ({ ...s, running: true, error: undefined }));
    try {
      for (let pages = 0; pages < SCAN_PAGES; pages++) {
        const page = await api.listAllTables({ limit: SEARCH_PAGE, pageToken: token, signal });
        const found = page.tables.filter((id) => id.join('.').toLowerCase().includes(needle));
        token = page.pageToken;
        if (signal.aborted) return;
        setState((s) => ({
          matches: [...s.matches, ...found],
          read: s.read + page.tables.length,
          next: token,
          done: token === undefined,
          running: token !== undefined && pages < SCAN_PAGES - 1,
        }));
        if (token === undefined) return;
      }
    } catch (error) {
      if (!signal.aborted) setState((s) => ({ ...s, running: false, error }));
    }
  };
  useEffect(() => {
    if (needle !== '') void scan(undefined);
  }, []);

  if (needle === '') return <p class="muted">Type part of a table's name in the search box.</p>;
  return (
    <section data-testid="search-page">
      <h1>
        Tables matching <q>{query.trim()}</q>
      </h1>
      <p class="muted small">
        The API cannot filter tables by name: the console reads the list of every table (ListAllTables, {formatCount(SEARCH_PAGE)} a page) and keeps those whose
        namespace or name contains the text, ignoring case. It reads at most {formatCount(SEARCH_PAGE * SCAN_PAGES)} tables at a time.
      </p>
      <p data-testid="search-status">
        {state.running ? 'Searching… ' : ''}
        Read {formatCount(state.read)} tables{state.done ? ' (all of them)' : ''}; {formatCount(state.matches.length)} match.
      </p>
      <ErrorBox error={state.error} onRetry={() => void scan(state.next)} />
      {state.matches.length > 0 && (
        <ul class="children" data-testid="search-results">
          {state.matches.slice(0, MAX_SHOWN).map((id) => (
            <li key={id.join('\u001f')}>
              <TableLink id={id} />
            </li>
          ))}
        </ul>
      )}
      {state.matches.length > MAX_SHOWN && <p class="muted">Only the first {MAX_SHOWN} matches are shown: type more of the name.</p>}
      {!state.running && !state.done && state.next !== undefined && state.matches.length <= MAX_SHOWN && (
        <button type="button" onClick={() => void scan(state.next)}>
          Read the next {formatCount(SEARCH_PAGE * SCAN_PAGES)} tables
        </button>
      )}
    </section>
  );
}
