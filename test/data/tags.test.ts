import { beforeAll, describe, expect, it } from 'vitest';
import { useNamespaceFixture } from '../support/app.js';
import { connectTable, peopleStream } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

interface EngineTag {
  version: number;
  manifestSize: number;
}

describe.each(backends())('tags on $name', (backend) => {
  const { fx, path, post, createTable, engineOptions: options } = useNamespaceFixture(backend);
  let engineOptions: Record<string, string>;
  beforeAll(() => {
    engineOptions = options();
  });

  /** The tags as the engine reads them from the dataset. */
  async function engineTags(location: string): Promise<Record<string, EngineTag>> {
    const table = await connectTable(location, engineOptions);
    try {
      const listed = await (await table.tags()).list();
      return Object.fromEntries(Object.entries(listed).map(([name, t]) => [name, { version: t.version, manifestSize: t.manifestSize }]));
    } finally {
      table.close();
    }
  }

  it('creates, reads, moves and deletes a tag, as the engine sees it', async () => {
    const location = await createTable('t1', 3);
    const created = await post('t1', 'tags/create', { tag: 'release', version: 1 });
    expect(created.status).toBe(200);
    expect(created.json).toEqual({});
    const afterCreate = await engineTags(location);
    expect(afterCreate.release?.version).toBe(1);
    expect(afterCreate.release?.manifestSize).toBeGreaterThan(0);

    const listed = await post('t1', 'tags/list');
    expect(listed.status).toBe(200);
    expect(listed.json.tags).toEqual(afterCreate);
    expect(listed.json.page_token ?? null).toBeNull();
    expect((await fx.t.call('GET', path('t1', 'tags/list'))).json.tags).toEqual(afterCreate);

    const version = await post('t1', 'tags/version', { tag: 'release' });
    expect(version.status).toBe(200);
    expect(version.json).toEqual({ version: 1 });

    const updated = await post('t1', 'tags/update', { tag: 'release', version: 3 });
    expect(updated.status).toBe(200);
    expect((await engineTags(location)).release?.version).toBe(3);
    expect((await post('t1', 'tags/version', { tag: 'release' })).json.version).toBe(3);
    // The tag names a version the engine can read.
    const table = await connectTable(location, engineOptions);
    try {
      await table.checkout('release');
      expect(await table.version()).toBe(3);
      expect(await table.countRows()).toBe(3);
    } finally {
      table.close();
    }

    const deleted = await post('t1', 'tags/delete', { tag: 'release' });
    expect(deleted.status).toBe(200);
    expect(await engineTags(location)).toEqual({});
    expect((await post('t1', 'tags/list')).json.tags).toEqual({});
    // Tags are not versions: the dataset still has its three.
    const versions = await post('t1', 'version/list', undefined, '?descending=true&limit=1');
    expect((versions.json.versions as Array<{ version: number }>)[0]?.version).toBe(3);
  });

  it('answers 409 code 9 for an existing tag, 404 code 11 for a missing version, 400 code 13 for a bad name, changing nothing', async () => {
    const location = await createTable('t2', 2);
    expect((await post('t2', 'tags/create', { tag: 'v1', version: 1 })).status).toBe(200);
    const before = await engineTags(location);
    const exists = await post('t2', 'tags/create', { tag: 'v1', version: 2 });
    expect(exists.status).toBe(409);
    expect(exists.json.code).toBe(9);
    expect(String(exists.json.error)).toContain('already exists');
    const noVersion = await post('t2', 'tags/create', { tag: 'later', version: 7 });
    expect(noVersion.status).toBe(404);
    expect(noVersion.json.code).toBe(11);
    for (const tag of ['a/b', 'has space', '.hidden']) {
      const res = await post('t2', 'tags/create', { tag, version: 1 });
      expect(res.status, tag).toBe(400);
      expect(res.json.code).toBe(13);
    }
    for (const body of [{ tag: '', version: 1 }, { tag: 'x' }, { version: 1 }, { tag: 'x', version: -1 }]) {
      const res = await post('t2', 'tags/create', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.code).toBe(13);
    }
    expect(await engineTags(location)).toEqual(before);
  });

  it('answers 404 code 8 for a missing tag and 404 code 11 when moving to a missing version, changing nothing', async () => {
    const location = await createTable('t3', 2);
    expect((await post('t3', 'tags/create', { tag: 'keep', version: 2 })).status).toBe(200);
    const before = await engineTags(location);
    for (const [op, body] of [
      ['tags/update', { tag: 'nope', version: 1 }],
      ['tags/delete', { tag: 'nope' }],
      ['tags/version', { tag: 'nope' }],
    ] as const) {
      const res = await post('t3', op, body);
      expect(res.status, op).toBe(404);
      expect(res.json.code).toBe(8);
    }
    const noVersion = await post('t3', 'tags/update', { tag: 'keep', version: 99 });
    expect(noVersion.status).toBe(404);
    expect(noVersion.json.code).toBe(11);
    expect(await engineTags(location)).toEqual(before);
  });

  it('lists tags in byte order a page at a time with signed page tokens', async () => {
    const location = await createTable('t4', 3);
    for (const [tag, version] of [
      ['b', 1],
      ['a', 2],
      ['c', 3],
      ['B', 1],
    ] as const) {
      expect((await post('t4', 'tags/create', { tag, version })).status).toBe(200);
    }
    const all = await engineTags(location);
    const first = await post('t4', 'tags/list', undefined, '?limit=2');
    expect(first.json.tags).toEqual({ B: all.B, a: all.a });
    expect(Object.keys(first.json.tags as object)).toEqual(['B', 'a']);
    const token = String(first.json.page_token);
    expect(token).not.toBe('');
    const second = await fx.t.call('GET', path('t4', 'tags/list', `?limit=2&page_token=${encodeURIComponent(token)}`));
    expect(second.json.tags).toEqual({ b: all.b, c: all.c });
    expect(second.json.page_token ?? null).toBeNull();
    // A body carries the same fields (query wins).
    const viaBody = await post('t4', 'tags/list', { limit: 3 });
    expect(Object.keys(viaBody.json.tags as object)).toEqual(['B', 'a', 'b']);
    const zero = await post('t4', 'tags/list', undefined, '?limit=0');
    expect(zero.json.tags).toEqual({});
    // A forged token, or one of another table's listing, is a 400.
    const forged = await post('t4', 'tags/list', undefined, `?page_token=${encodeURIComponent(`${token}x`)}`);
    expect(forged.status).toBe(400);
    expect(forged.json.code).toBe(13);
    await createTable('t5', 1);
    const foreign = await post('t5', 'tags/list', undefined, `?page_token=${encodeURIComponent(token)}`);
    expect(foreign.status).toBe(400);
    expect(foreign.json.code).toBe(13);
  });

  it('answers 404 code 4 for a missing table, 409 code 19 for a declared one, 404 code 22 for a missing branch', async () => {
    const missing = await post('ghost', 'tags/list');
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe(4);
    expect((await post('ghost', 'tags/create', { tag: 'x', version: 1 })).json.code).toBe(4);
    expect((await post('decl', 'declare', {})).status).toBe(200);
    const declared = await post('decl', 'tags/create', { tag: 'x', version: 1 });
    expect(declared.status).toBe(409);
    expect(declared.json.code).toBe(19);
    const location = await createTable('t6', 1);
    const branched = await post('t6', 'tags/create', { tag: 'x', version: 1, branch: 'dev' });
    expect([branched.status, branched.json.code]).toEqual([404, 22]);
    expect(await engineTags(location)).toEqual({});
  });

  it('describes a table at the version a tag points to (DescribeTable `tag`)', async () => {
    await createTable('t7', 3);
    expect((await post('t7', 'tags/create', { tag: 'first', version: 1 })).status).toBe(200);
    const tagged = await post('t7', 'describe', { tag: 'first', load_detailed_metadata: true });
    expect(tagged.status).toBe(200);
    expect(tagged.json.version).toBe(1);
    expect((await post('t7', 'describe', { load_detailed_metadata: true })).json.version).toBe(3);
    const missing = await post('t7', 'describe', { tag: 'nope', load_detailed_metadata: true });
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe(8);
    const both = await post('t7', 'describe', { tag: 'first', version: 2, load_detailed_metadata: true });
    expect(both.status).toBe(400);
    expect(both.json.code).toBe(13);
  });

  it('tags a version of a managed table', async () => {
    expect((await fx.t.call('POST', '/v1/namespace/managed/create', { properties: { managed_versioning: 'true' } })).status).toBe(200);
    const created = await fx.t.call('POST', '/v1/table/managed%24m/create', peopleStream([1, 2]), ARROW);
    expect(created.json.version).toBe(1);
    expect((await fx.t.call('POST', '/v1/table/managed%24m/delete', { predicate: 'id = 1' })).json.version).toBe(2);
    expect((await fx.t.call('POST', '/v1/table/managed%24m/tags/create', { tag: 'first', version: 1 })).status).toBe(200);
    expect((await engineTags(String(created.json.location))).first?.version).toBe(1);
    expect((await fx.t.call('POST', '/v1/table/managed%24m/tags/version', { tag: 'first' })).json.version).toBe(1);
  });
});
