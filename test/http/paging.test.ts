import { beforeAll, describe, expect, it } from 'vitest';
import { useNamespaceFixture } from '../support/app.js';
import { peopleStream } from '../support/arrow-data.js';
import { localBackend } from '../support/backends.js';

// Paging ends: a client that follows page tokens until there is none must stop, whatever limit it
// asks for. `limit=0` is an empty page without a token, as the reference server answers (pylance
// 14's RestAdapter over DirectoryNamespace); it used to hand a token back, so such a client looped
// forever.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
/** More pages than any listing here has items: a client still following tokens after this loops. */
const MAX_PAGES = 20;

interface Listing {
  name: string;
  /** Calls the listing with `limit` and, when given, `page_token`. */
  call: (limit: number, pageToken?: string) => Promise<{ status: number; text: string; json: Record<string, unknown> }>;
  /** The items of one answer. */
  items: (json: Record<string, unknown>) => unknown[];
}

describe('paging with limit=0', () => {
  const { fx, path, post } = useNamespaceFixture(localBackend);
  const q = (limit: number, pageToken?: string) => `?limit=${limit}${pageToken !== undefined ? `&page_token=${encodeURIComponent(pageToken)}` : ''}`;
  const list = (json: Record<string, unknown>, field: string) => (json[field] as unknown[] | undefined) ?? [];
  const listings: Listing[] = [
    { name: 'ListNamespaces', call: (l, t) => fx.t.call('GET', `/v1/namespace/ns/list${q(l, t)}`), items: (j) => list(j, 'namespaces') },
    {
      name: 'ListNamespaces (POST body)',
      call: (l, t) => fx.t.call('POST', '/v1/namespace/ns/list', { limit: l, ...(t !== undefined ? { page_token: t } : {}) }),
      items: (j) => list(j, 'namespaces'),
    },
    { name: 'ListTables', call: (l, t) => fx.t.call('GET', `/v1/namespace/ns/table/list${q(l, t)}`), items: (j) => list(j, 'tables') },
    { name: 'ListAllTables', call: (l, t) => fx.t.call('GET', `/v1/table${q(l, t)}`), items: (j) => list(j, 'tables') },
    { name: 'ListTableVersions', call: (l, t) => post('t', 'version/list', undefined, q(l, t)), items: (j) => list(j, 'versions') },
    {
      name: 'ListTableVersions (descending)',
      call: (l, t) => post('t', 'version/list', undefined, `${q(l, t)}&descending=true`),
      items: (j) => list(j, 'versions'),
    },
    { name: 'ListTableTags', call: (l, t) => post('t', 'tags/list', undefined, q(l, t)), items: (j) => Object.keys((j.tags as object | undefined) ?? {}) },
    {
      name: 'ListTableIndices',
      call: (l, t) => post('t', 'index/list', { limit: l, ...(t !== undefined ? { page_token: t } : {}) }),
      items: (j) => list(j, 'indexes'),
    },
    { name: 'ListTableIndices (GET)', call: (l, t) => fx.t.call('GET', path('t', 'index/list', q(l, t))), items: (j) => list(j, 'indexes') },
  ];

  beforeAll(async () => {
    // Two of everything, so that a page of one has a next page.
    for (const child of ['c1', 'c2']) expect((await fx.t.call('POST', `/v1/namespace/ns%24${child}/create`, {})).status).toBe(200);
    for (const table of ['t', 'u']) expect((await fx.t.call('POST', path(table, 'create'), peopleStream([1, 2, 3]), ARROW)).status).toBe(200);
    expect((await post('t', 'delete', { predicate: 'id = 1' })).status).toBe(200);
    for (const tag of ['a', 'b']) expect((await post('t', 'tags/create', { tag, version: 1 })).status).toBe(200);
    for (const column of ['id', 'name']) expect((await post('t', 'create_scalar_index', { column, index_type: 'BTREE' })).status).toBe(200);
  }, 60_000);

  it.for(listings)('$name answers an empty page without a token, first and after a token', async (listing) => {
    const first = await listing.call(1);
    expect(first.status, first.text).toBe(200);
    expect(listing.items(first.json)).toHaveLength(1);
    const token = first.json.page_token;
    expect(typeof token === 'string' && token !== '', `a page of 1 of ${listing.name} has a next page`).toBe(true);

    for (const pageToken of [undefined, String(token)]) {
      const zero = await listing.call(0, pageToken);
      expect(zero.status, zero.text).toBe(200);
      expect(listing.items(zero.json)).toEqual([]);
      expect(zero.json.page_token ?? null, `${listing.name} limit=0 ${pageToken ? 'after a token' : 'first'}`).toBeNull();
    }

    // A client following tokens with limit=0 stops at once.
    let pages = 0;
    let next: string | undefined;
    do {
      const res = await listing.call(0, next);
      expect(res.status, res.text).toBe(200);
      const given = res.json.page_token;
      next = typeof given === 'string' && given !== '' ? given : undefined;
      pages++;
    } while (next !== undefined && pages < MAX_PAGES);
    expect(pages).toBe(1);
  });

  it('still checks what limit=0 names: a missing namespace or table is 404, a forged token 400', async () => {
    expect((await fx.t.call('GET', '/v1/namespace/nope/list?limit=0')).status).toBe(404);
    expect((await fx.t.call('GET', '/v1/namespace/nope/table/list?limit=0')).status).toBe(404);
    expect((await post('nope', 'version/list', undefined, '?limit=0')).status).toBe(404);
    const forged = await fx.t.call('GET', '/v1/namespace/ns/list?limit=0&page_token=forged.token');
    expect(forged.status).toBe(400);
    expect(forged.json.code).toBe(13);
  });
});
