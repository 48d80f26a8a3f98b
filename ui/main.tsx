import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { currentCredentials, onCredentialsChange } from './api.js';
import { CredentialsPanel } from './credentials.js';
import { NamespacePage } from './pages/namespace.js';
import { SearchPage } from './pages/search.js';
import { TablePage } from './pages/table.js';
import { TransactionPage, TransactionsPage } from './pages/transaction.js';
import { VersionsPage } from './pages/versions.js';
import { href, navigate, type Route, useRoute } from './router.js';
import { NamespaceTree } from './tree.js';
import './style.css';

// The console's shell: a header (search, transactions, credentials), the namespace tree, and the
// page of the current route. A page is keyed by its route and by the credentials in use, so that
// navigating or signing in asks the API afresh.

function Page({ route }: { route: Route }) {
  switch (route.page) {
    case 'namespace':
      return <NamespacePage id={route.id} />;
    case 'table':
      return <TablePage id={route.id} />;
    case 'versions':
      return <VersionsPage id={route.id} branch={route.branch} />;
    case 'transactions':
      return <TransactionsPage />;
    case 'transaction':
      return <TransactionPage id={route.id} branch={route.branch} />;
    case 'search':
      return <SearchPage query={route.query} />;
    case 'not-found':
      return (
        <section>
          <h1>Nothing here</h1>
          <p>
            The console has no page at <code>{route.path}</code>. <a href="#/">Go to the root namespace.</a>
          </p>
        </section>
      );
  }
}

/** The namespace the sidebar highlights: the page's own, or the one holding the page's table. */
function namespaceOf(route: Route): string[] | null {
  if (route.page === 'namespace') return route.id;
  if (route.page === 'table' || route.page === 'versions') return route.id.slice(0, -1);
  return null;
}

function App() {
  const route = useRoute();
  const [signIn, setSignIn] = useState(0);
  const [panel, setPanel] = useState(false);
  const [search, setSearch] = useState(route.page === 'search' ? route.query : '');
  useEffect(() => onCredentialsChange(() => setSignIn((n) => n + 1)), []);
  // The box shows the search on screen (also one opened from a link or the history).
  useEffect(() => {
    if (route.page === 'search') setSearch(route.query);
  }, [route]);
  const credentials = currentCredentials();
  return (
    <div class="shell">
      <header class="top">
        <a class="brand" href="#/">
          Lance Namespace <span class="muted">console</span>
        </a>
        {/* biome-ignore lint/a11y/useSemanticElements: a form with role=search is the search landmark; <search> would wrap it, styles and all */}
        <form
          class="search"
          role="search"
          onSubmit={(e) => {
            e.preventDefault();
            if (search.trim() !== '') navigate({ page: 'search', query: search.trim() });
          }}
        >
          <input
            type="search"
            name="q"
            aria-label="find a table by name"
            placeholder="Find a table by name…"
            value={search}
            onInput={(e) => setSearch((e.target as HTMLInputElement).value)}
          />
        </form>
        <a href={href({ page: 'transactions' })}>Transactions &amp; jobs</a>
        <span class="read-only muted small" title="The console only reads: it calls no operation that changes anything.">
          read-only
        </span>
        <button type="button" class={credentials ? 'signed-in' : undefined} onClick={() => setPanel(!panel)} data-testid="credentials-button">
          {credentials ? (credentials.kind === 'api-key' ? 'API key ✓' : 'Bearer token ✓') : 'Credentials'}
        </button>
      </header>
      {panel && <CredentialsPanel onClose={() => setPanel(false)} />}
      <div class="body">
        <aside class="side">
          <NamespaceTree key={signIn} current={namespaceOf(route)} />
        </aside>
        <main class="main">
          <Page key={`${href(route)}#${signIn}`} route={route} />
        </main>
      </div>
    </div>
  );
}

const root = document.getElementById('app');
if (root) {
  root.textContent = '';
  render(<App />, root);
}
