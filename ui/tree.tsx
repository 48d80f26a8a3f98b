import { useEffect, useState } from 'preact/hooks';
import { api } from './api.js';
import { ErrorBox, Link } from './components.js';

// The namespace tree of the sidebar: a node lists its child namespaces when opened, a page at a
// time (50, then "more" for the next page), so a namespace with thousands of children opens as fast
// as one with ten.

const TREE_PAGE = 50;

export function NamespaceTree({ current }: { current: readonly string[] | null }) {
  return (
    <nav class="tree" aria-label="namespaces" data-testid="tree">
      <TreeNode id={[]} current={current} initiallyOpen />
    </nav>
  );
}

function TreeNode({ id, current, initiallyOpen = false }: { id: string[]; current: readonly string[] | null; initiallyOpen?: boolean }) {
  // The path to the namespace on screen opens by itself, as far as it is listed.
  const onPath = current !== null && id.length < current.length && id.every((p, i) => p === current[i]);
  const [open, setOpen] = useState(initiallyOpen || onPath);
  const selected = current !== null && current.length === id.length && id.every((p, i) => p === current[i]);
  const name = id.length === 0 ? 'root' : (id[id.length - 1] as string);
  return (
    <li class="tree-node">
      <button type="button" class="toggle" aria-expanded={open} aria-label={open ? `close ${name}` : `open ${name}`} onClick={() => setOpen(!open)}>
        {open ? '▾' : '▸'}
      </button>
      <Link to={{ page: 'namespace', id }} class={selected ? 'selected' : undefined}>
        {name}
      </Link>
      {open && <TreeChildren id={id} current={current} />}
    </li>
  );
}

function TreeChildren({ id, current }: { id: string[]; current: readonly string[] | null }) {
  const [pages, setPages] = useState<{ names: string[]; next: string | undefined; loading: boolean; error?: unknown }>({
    names: [],
    next: undefined,
    loading: true,
  });
  const load = async (token: string | undefined) => {
    setPages((p) => ({ ...p, loading: true, error: undefined }));
    try {
      const page = await api.listNamespaces(id, { limit: TREE_PAGE, pageToken: token });
      setPages((p) => ({ names: [...p.names, ...page.namespaces], next: page.page_token || undefined, loading: false }));
    } catch (error) {
      setPages((p) => ({ ...p, loading: false, error }));
    }
  };
  useEffect(() => void load(undefined), []);
  return (
    <ul>
      {pages.names.map((child) => (
        <TreeNode key={child} id={[...id, child]} current={current} />
      ))}
      {pages.loading && <li class="muted small">loading…</li>}
      {pages.error !== undefined && (
        <li>
          <ErrorBox error={pages.error} onRetry={() => void load(pages.next)} />
        </li>
      )}
      {!pages.loading && pages.next !== undefined && (
        <li>
          <button type="button" class="linkish small" onClick={() => void load(pages.next)}>
            more…
          </button>
        </li>
      )}
    </ul>
  );
}
