import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../support/app.js';
import { backends } from '../support/backends.js';
import { rawRequest } from '../support/raw-http.js';

describe.each(backends())('namespaces on $name', (backend) => {
  const fx = useTestApp(backend);

  it('creates a namespace with properties, describes it and reports it exists', async () => {
    const created = await fx.t.call('POST', '/v1/namespace/props/create', { properties: { owner: 'ann', tier: 'gold' } });
    expect(created.status).toBe(200);
    expect(created.json).toEqual({ properties: { owner: 'ann', tier: 'gold' } });
    expect((await fx.t.call('POST', '/v1/namespace/props/describe', {})).json).toEqual({ properties: { owner: 'ann', tier: 'gold' } });
    const exists = await fx.t.call('POST', '/v1/namespace/props/exists', {});
    expect(exists.status).toBe(200);
    expect(exists.text).toBe('');
    const missing = await fx.t.call('POST', '/v1/namespace/nope/exists', {});
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe(1);
    // The record is Lance's `.lance-namespace` marker, so Lance's own directory catalog sees it too.
    expect(await fx.root.store.head('props/.lance-namespace')).not.toBeNull();
  });

  it('honours the create modes Create, ExistOk and Overwrite (any case)', async () => {
    expect((await fx.t.call('POST', '/v1/namespace/modes/create', { properties: { v: '1' } })).status).toBe(200);
    const again = await fx.t.call('POST', '/v1/namespace/modes/create', { mode: 'create', properties: { v: '2' } });
    expect(again.status).toBe(409);
    expect(again.json.code).toBe(2);
    const existOk = await fx.t.call('POST', '/v1/namespace/modes/create', { mode: 'exist_ok', properties: { v: '3' } });
    expect(existOk.json).toEqual({ properties: { v: '1' } });
    const overwrite = await fx.t.call('POST', '/v1/namespace/modes/create', { mode: 'OVERWRITE', properties: { v: '4' } });
    expect(overwrite.json).toEqual({ properties: { v: '4' } });
    expect((await fx.t.call('POST', '/v1/namespace/modes/describe', {})).json).toEqual({ properties: { v: '4' } });
    const bad = await fx.t.call('POST', '/v1/namespace/modes/create', { mode: 'Sometimes' });
    expect(bad.status).toBe(400);
    expect(bad.json.code).toBe(13);
    expect(String(bad.json.error)).toContain('mode');
  });

  it('nests namespaces to any depth and needs the parent to exist', async () => {
    const orphan = await fx.t.call('POST', '/v1/namespace/missing%24child/create', {});
    expect(orphan.status).toBe(404);
    expect(orphan.json.code).toBe(1);
    for (const id of ['deep', 'deep$a', 'deep$a$b', 'deep$a$b$c', 'deep$a$b$c$d']) {
      expect((await fx.t.call('POST', `/v1/namespace/${encodeURIComponent(id)}/create`, {})).status).toBe(200);
    }
    expect((await fx.t.call('GET', '/v1/namespace/deep%24a%24b%24c/list')).json).toEqual({ namespaces: ['d'], page_token: null });
    expect((await fx.t.call('POST', '/v1/namespace/deep%24a%24b%24c%24d/exists', {})).status).toBe(200);
  });

  it('treats the delimiter alone as the root namespace', async () => {
    const root = await fx.t.call('POST', '/v1/namespace/%24/describe', {});
    expect(root.status).toBe(200);
    expect(root.json).toEqual({ properties: {} });
    expect((await fx.t.call('POST', '/v1/namespace/%24/exists', {})).status).toBe(200);
    const create = await fx.t.call('POST', '/v1/namespace/%24/create', {});
    expect(create.status).toBe(409);
    expect(create.json.code).toBe(2);
    const drop = await fx.t.call('POST', '/v1/namespace/%24/drop', {});
    expect(drop.status).toBe(400);
    expect(drop.json.code).toBe(13);
    // With another delimiter, that delimiter is the root.
    expect((await fx.t.call('POST', '/v1/namespace/%40/describe?delimiter=%40', {})).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/namespace/deep@a/exists?delimiter=@', {})).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/namespace/%24/create', { mode: 'Overwrite', properties: { site: 'x' } })).json).toEqual({
      properties: { site: 'x' },
    });
    expect((await fx.t.call('POST', '/v1/namespace/%24/describe', {})).json).toEqual({ properties: { site: 'x' } });
  });

  it('lists children with pagination by opaque tokens, on GET and POST', async () => {
    await fx.t.call('POST', '/v1/namespace/pg/create', {});
    const names = ['a', 'b', 'c', 'd', 'e'];
    for (const n of names) await fx.t.call('POST', `/v1/namespace/pg%24${n}/create`, {});
    await fx.t.call('POST', '/v1/table/pg%24tbl/declare', {}); // tables are not namespaces
    const seen: string[] = [];
    let token: string | null = null;
    let pages = 0;
    do {
      const query: string = token ? `?limit=2&page_token=${encodeURIComponent(token)}` : '?limit=2';
      const res = await fx.t.call(pages % 2 === 0 ? 'GET' : 'POST', `/v1/namespace/pg/list${query}`);
      expect(res.status).toBe(200);
      const page = res.json.namespaces as string[];
      expect(page.length).toBeLessThanOrEqual(2);
      seen.push(...page);
      token = (res.json.page_token as string | null) ?? null;
      pages++;
    } while (token);
    expect(seen).toEqual(names);
    expect(pages).toBe(3);
    const all = await fx.t.call('GET', '/v1/namespace/pg/list');
    expect(all.json).toEqual({ namespaces: names, page_token: null });
  });

  it('rejects forged page tokens and negative limits', async () => {
    await fx.t.call('POST', '/v1/namespace/tok/create', {});
    for (const token of ['garbage', 'eyJhIjoxfQ.AAAA', '']) {
      const res = await fx.t.call('GET', `/v1/namespace/tok/list?page_token=${encodeURIComponent(token)}`);
      if (token === '') expect(res.status).toBe(200);
      else {
        expect(res.status).toBe(400);
        expect(res.json.code).toBe(13);
      }
    }
    const negative = await fx.t.call('GET', '/v1/namespace/tok/list?limit=-1');
    expect(negative.status).toBe(400);
    expect(String(negative.json.error)).toContain('limit');
    // A token of one listing does not continue another.
    await fx.t.call('POST', '/v1/namespace/tok%24x/create', {});
    await fx.t.call('POST', '/v1/namespace/tok%24y/create', {});
    const first = await fx.t.call('GET', '/v1/namespace/tok/list?limit=1');
    const other = await fx.t.call('GET', `/v1/namespace/pg/list?page_token=${encodeURIComponent(String(first.json.page_token))}`);
    expect(other.status).toBe(400);
  });

  it('drops with Restrict (refuses children), Cascade (removes them), Skip and Fail', async () => {
    await fx.t.call('POST', '/v1/namespace/dr/create', { properties: { k: 'v' } });
    await fx.t.call('POST', '/v1/namespace/dr%24inner/create', {});
    await fx.t.call('POST', '/v1/table/dr%24inner%24t/declare', {});
    const restrict = await fx.t.call('POST', '/v1/namespace/dr/drop', {});
    expect(restrict.status).toBe(409);
    expect(restrict.json.code).toBe(3);
    expect((await fx.t.call('POST', '/v1/namespace/dr/describe', {})).json).toEqual({ properties: { k: 'v' } });
    // Still accepts children after a refused drop.
    expect((await fx.t.call('POST', '/v1/namespace/dr%24other/create', {})).status).toBe(200);
    const cascade = await fx.t.call('POST', '/v1/namespace/dr/drop', { behavior: 'cascade' });
    expect(cascade.status).toBe(200);
    expect(cascade.json).toEqual({ properties: { k: 'v' } });
    expect((await fx.t.call('POST', '/v1/namespace/dr/exists', {})).status).toBe(404);
    expect((await fx.t.call('POST', '/v1/table/dr%24inner%24t/exists', {})).status).toBe(404);
    expect((await fx.root.store.list('dr/')).objects).toEqual([]);
    const fail = await fx.t.call('POST', '/v1/namespace/dr/drop', { mode: 'Fail' });
    expect(fail.status).toBe(404);
    expect(fail.json.code).toBe(1);
    expect((await fx.t.call('POST', '/v1/namespace/dr/drop', { mode: 'SKIP' })).status).toBe(200);
  });

  it('refuses bad names with 400 code 13 and writes nothing', async () => {
    const before = (await fx.root.store.list('', {})).objects.length;
    for (const id of ['.hidden', 'a%2Fb', 'a%5Cb', 'ctl%01x', 'x.lance', '_catalog', 'a'.repeat(300), 'a%24%24b']) {
      const res = await fx.t.call('POST', `/v1/namespace/${id}/create`, {});
      expect(res.status, id).toBe(400);
      expect(res.json.code, id).toBe(13);
    }
    // Dot segments must travel unnormalized, as a real client may send them.
    await fx.t.app.server.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(fx.t.app.server.server.address() as AddressInfo).port}`;
    for (const id of ['..', '%2E%2E', '.', 'a$..', 'a%24%2E%2E%24b']) {
      const res = await rawRequest(url, 'POST', `/v1/namespace/${id}/create`, '{}');
      expect(res.status, id).toBe(400);
      expect(res.json.code, id).toBe(13);
    }
    expect((await fx.root.store.list('', {})).objects.length).toBe(before);
  });
});
