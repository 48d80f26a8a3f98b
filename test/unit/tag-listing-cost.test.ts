import { describe, expect, it } from 'vitest';
import { tagRefKey } from '../../src/service/branches/branch-refs.js';
import { PageTokens } from '../../src/service/catalog/page-token.js';
import type { RequestContext } from '../../src/service/context/request-context.js';
import type { DataTables } from '../../src/service/data/data-tables.js';
import { TagService } from '../../src/service/data/tags.js';
import { MemoryObjectStore } from '../../src/store/memory-store.js';
import { readLog } from '../support/store-double.js';

// What ListTableTags and GetTableTagVersion cost the store, beside resolving the table: the tags'
// refs are read by the service alone (the engine's listing read every tag of the table, and the
// service then each tag of the page again for the branch it points into): one LIST sized to the
// page and one GET per tag of the page; one GET for one tag. The HTTP behaviour is in data/tags.test.ts.

const ctx: RequestContext = { requestId: 't', principal: null, context: {} };

/** A tag's ref exactly as @lancedb/lancedb 0.39 writes it (probed). */
const lanceTag = (version: number, branch: string | null = null) =>
  JSON.stringify(
    { branch, version, createdAt: '2026-11-27T19:04:09.842885637Z', updatedAt: '2026-11-27T19:04:09.842885637Z', manifestSize: 373, metadata: {} },
    null,
    2,
  );

async function service(count: number) {
  const { store, reads } = readLog(new MemoryObjectStore());
  const dir = { store, key: 'ns/t.lance/', owned: true };
  for (let i = 0; i < count; i++) await store.put(tagRefKey(dir, `t${String(i).padStart(3, '0')}`), Buffer.from(lanceTag(i + 1, i % 2 === 0 ? null : 'dev')));
  const refuse = () => {
    throw new Error('the engine was asked: it reads every tag of the table');
  };
  const tables = {
    catalog: { pageTokens: new PageTokens('secret') },
    engine: { tags: { list: refuse, version: refuse } },
    readTable: async (_ctx: unknown, _id: unknown, read: (table: unknown) => unknown) => read({ id: ['ns', 't'], dir, at: {} }),
  } as unknown as DataTables;
  reads.length = 0;
  return { tags: new TagService(tables), reads };
}

describe('the store calls of a tag listing and a tag lookup', () => {
  it('ListTableTags: one LIST sized to the page and one GET per tag of the page, whatever the number of tags', async () => {
    const { tags, reads } = await service(200);
    const first = await tags.list(ctx, ['ns', 't'], { limit: 10 });
    expect(Object.keys(first.tags)).toEqual(Array.from({ length: 10 }, (_, i) => `t00${i}`));
    expect(first.tags.t000).toEqual({ version: 1, manifestSize: 373 });
    expect(first.tags.t001).toEqual({ branch: 'dev', version: 2, manifestSize: 373 });
    expect(reads.filter((r) => r.startsWith('list '))).toEqual(['list ns/t.lance/_refs/tags/']);
    expect(reads.filter((r) => !r.startsWith('list '))).toHaveLength(10);
    reads.length = 0;
    const second = await tags.list(ctx, ['ns', 't'], { limit: 10, pageToken: first.page_token ?? undefined });
    expect(Object.keys(second.tags)[0]).toBe('t010');
    expect(reads).toHaveLength(11);
    reads.length = 0;
    // Without a limit: every tag (at most a page of 1,000), the same one LIST and a GET each.
    const all = await tags.list(ctx, ['ns', 't'], {});
    expect(Object.keys(all.tags)).toHaveLength(200);
    expect(all.page_token).toBeNull();
    expect(reads).toHaveLength(201);
  });

  it('GetTableTagVersion: one GET, of the tag; a missing tag is 404 code 8', async () => {
    const { tags, reads } = await service(200);
    expect(await tags.version(ctx, ['ns', 't'], { tag: 't001' })).toEqual({ version: 2, branch: 'dev' });
    expect(await tags.version(ctx, ['ns', 't'], { tag: 't000' })).toEqual({ version: 1 });
    expect(reads).toEqual(['ns/t.lance/_refs/tags/t001.json', 'ns/t.lance/_refs/tags/t000.json']);
    await expect(tags.version(ctx, ['ns', 't'], { tag: 'nope' })).rejects.toMatchObject({ code: 8 });
  });
});
