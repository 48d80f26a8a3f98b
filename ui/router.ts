import { useEffect, useState } from 'preact/hooks';

// Routes live in the URL's fragment (#/table/sales/orders), so the server serves one page and
// never sees them. Ids are their parts, each percent-encoded, joined by '/' (no name holds one).
// Credentials never go into a URL.

export type Route =
  | { page: 'namespace'; id: string[] }
  | { page: 'table'; id: string[] }
  | { page: 'versions'; id: string[]; branch?: string | undefined }
  | { page: 'transactions' }
  | { page: 'transaction'; id: string[]; branch?: string | undefined }
  | { page: 'search'; query: string }
  | { page: 'not-found'; path: string };

const encodeId = (id: readonly string[]): string => id.map(encodeURIComponent).join('/');
const branchQuery = (branch: string | undefined): string => (branch === undefined ? '' : `?branch=${encodeURIComponent(branch)}`);

function decodeId(rest: string): string[] | null {
  try {
    return rest === '' ? [] : rest.split('/').map(decodeURIComponent);
  } catch {
    return null;
  }
}

export function href(route: Route): string {
  switch (route.page) {
    case 'namespace':
      return route.id.length === 0 ? '#/' : `#/ns/${encodeId(route.id)}`;
    case 'table':
      return `#/table/${encodeId(route.id)}`;
    case 'versions':
      return `#/versions/${encodeId(route.id)}${branchQuery(route.branch)}`;
    case 'transactions':
      return '#/transactions';
    case 'transaction':
      return `#/transaction/${encodeId(route.id)}${branchQuery(route.branch)}`;
    case 'search':
      return `#/search?q=${encodeURIComponent(route.query)}`;
    case 'not-found':
      return `#${route.path}`;
  }
}

export function parseRoute(hash: string): Route {
  const path = hash.replace(/^#/, '') || '/';
  const [head, query = ''] = path.split('?', 2) as [string, string?];
  if (head === '/' || head === '/ns' || head === '/ns/') return { page: 'namespace', id: [] };
  if (head === '/transactions') return { page: 'transactions' };
  if (head === '/search') return { page: 'search', query: new URLSearchParams(query).get('q') ?? '' };
  const match = /^\/(ns|table|versions|transaction)\/(.+)$/.exec(head);
  const id = match ? decodeId(match[2] as string) : null;
  if (match && id?.every((part) => part !== '')) {
    if (match[1] === 'versions' || match[1] === 'transaction') {
      // A branch's timeline, or a Lance commit on a branch (absent: main's).
      const branch = new URLSearchParams(query).get('branch');
      return branch ? { page: match[1], id, branch } : { page: match[1], id };
    }
    const page = match[1] === 'ns' ? 'namespace' : 'table';
    return { page, id };
  }
  return { page: 'not-found', path };
}

/** The current route, following the fragment. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

export function navigate(route: Route): void {
  location.hash = href(route);
}
