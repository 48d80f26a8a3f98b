import { beforeAll, describe, expect, it } from 'vitest';
import { arrow } from '../../src/engine/arrow.js';
import { committedVersions, useNamespaceFixture } from '../support/app.js';
import { connectTable, peopleStream, readRows } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

/** An Arrow IPC stream of rows {id: int64, name: utf8} with the names given. */
function namedStream(rows: Array<[number, string]>): Buffer {
  const table = new arrow.Table({
    id: arrow.vectorFromArray(BigInt64Array.from(rows.map(([id]) => BigInt(id)))),
    name: arrow.vectorFromArray(
      rows.map(([, name]) => name),
      new arrow.Utf8(),
    ),
  });
  return Buffer.from(arrow.tableToIPC(table, 'stream'));
}

/** An Arrow IPC stream with a column the people tables do not have. */
function otherStream(): Buffer {
  return Buffer.from(arrow.tableToIPC(new arrow.Table({ x: arrow.vectorFromArray(Int32Array.from([1, 2])) }), 'stream'));
}

describe.each(backends())('row operations on $name', (backend) => {
  const { fx, path, post, engineOptions: options } = useNamespaceFixture(backend);
  let engineOptions: Record<string, string>;
  beforeAll(() => {
    engineOptions = options();
  });
  /** Creates ns$<table> with rows 1..n named name-<id>; returns its location. */
  async function createTable(table: string, n: number): Promise<string> {
    const res = await fx.t.call('POST', path(table, 'create'), peopleStream(Array.from({ length: n }, (_, i) => i + 1)), ARROW);
    expect(res.status).toBe(200);
    return String(res.json.location);
  }
  const rowsOf = (location: string) => readRows(location, engineOptions);
  async function engineVersion(location: string): Promise<number> {
    const table = await connectTable(location, engineOptions);
    try {
      return await table.version();
    } finally {
      table.close();
    }
  }
  /** The dataset's latest version and rows, to check that a refused operation changed nothing. */
  const snapshot = async (location: string) => ({ version: await engineVersion(location), rows: await rowsOf(location) });

  describe('UpdateTable', () => {
    it('updates exactly the rows the predicate selects and records the properties', async () => {
      const location = await createTable('upd', 6);
      const res = await post('upd', 'update', { updates: [['name', "concat(name, '-x')"]], predicate: 'id <= 3', properties: { owner: 'ana' } });
      expect(res.status).toBe(200);
      expect(res.json.updated_rows).toBe(3);
      expect(res.json.version).toBe(await engineVersion(location));
      expect(res.json.version).toBe(2);
      expect(res.json.properties).toEqual({ owner: 'ana' });
      expect(await rowsOf(location)).toEqual([
        { id: 1, name: 'name-1-x' },
        { id: 2, name: 'name-2-x' },
        { id: 3, name: 'name-3-x' },
        { id: 4, name: 'name-4' },
        { id: 5, name: 'name-5' },
        { id: 6, name: 'name-6' },
      ]);
      // Properties are merged into the table record and described.
      const again = await post('upd', 'update', { updates: [['id', 'id + 10']], properties: { team: 'b' } });
      expect(again.json).toMatchObject({ updated_rows: 6, version: 3, properties: { owner: 'ana', team: 'b' } });
      expect((await rowsOf(location)).map((r) => r.id)).toEqual([11, 12, 13, 14, 15, 16]);
      expect((await post('upd', 'describe', {})).json.properties).toEqual({ owner: 'ana', team: 'b' });
      const record = await fx.root.store.get('ns/upd.lance/.lance-table.json');
      expect(JSON.parse(String(record?.body)).properties).toEqual({ owner: 'ana', team: 'b' });
    });

    it('refuses unknown columns (404 code 12), bad SQL (400 code 13) and malformed updates, changing nothing', async () => {
      const location = await createTable('upderr', 3);
      const before = await snapshot(location);
      const unknownColumn = await post('upderr', 'update', { updates: [['nope', '1']], properties: { p: '1' } });
      expect(unknownColumn.status).toBe(404);
      expect(unknownColumn.json.code).toBe(12);
      expect(String(unknownColumn.json.error)).toContain("Column 'nope' does not exist");
      const unknownInExpression = await post('upderr', 'update', { updates: [['name', 'nope']] });
      expect(unknownInExpression.json.code).toBe(12);
      const unknownInPredicate = await post('upderr', 'update', { updates: [['name', "'x'"]], predicate: 'nope = 1' });
      expect(unknownInPredicate.status).toBe(404);
      expect(unknownInPredicate.json.code).toBe(12);
      const badSql = await post('upderr', 'update', { updates: [['name', "'x' +* "]] });
      expect(badSql.status).toBe(400);
      expect(badSql.json.code).toBe(13);
      expect(String(badSql.json.error)).toContain('sql parser error');
      expect(String(badSql.json.error)).not.toContain('.rs:');
      const badPredicate = await post('upderr', 'update', { updates: [['name', "'x'"]], predicate: 'id = = 1' });
      expect(badPredicate.status).toBe(400);
      expect(badPredicate.json.code).toBe(13);
      const badCast = await post('upderr', 'update', { updates: [['id', "'abc'"]] });
      expect(badCast.status).toBe(400);
      expect(badCast.json.code).toBe(13);
      for (const updates of [
        [],
        [['name']],
        [
          ['name', "'a'"],
          ['name', "'b'"],
        ],
      ]) {
        const res = await post('upderr', 'update', { updates });
        expect(res.status, JSON.stringify(updates)).toBe(400);
        expect(res.json.code).toBe(13);
      }
      expect((await post('upderr', 'update', {})).json.code).toBe(13);
      expect((await post('upderr', 'update', { updates: [['name', "'x'"]], predicate: ' ' })).json.code).toBe(13);
      expect(await snapshot(location)).toEqual(before);
      expect((await post('upderr', 'describe', {})).json.properties).toEqual({});
    });
  });

  describe('DeleteFromTable', () => {
    it('deletes exactly the rows the predicate selects', async () => {
      const location = await createTable('del', 6);
      const res = await post('del', 'delete', { predicate: 'id > 4 OR id = 1' });
      expect(res.status).toBe(200);
      expect(res.json.version).toBe(await engineVersion(location));
      expect(res.json.version).toBe(2);
      expect((await rowsOf(location)).map((r) => r.id)).toEqual([2, 3, 4]);
      // A predicate that selects nothing still commits a version, as Lance does.
      const none = await post('del', 'delete', { predicate: 'id = 999' });
      expect(none.json.version).toBe(3);
      expect(await engineVersion(location)).toBe(3);
      expect((await rowsOf(location)).map((r) => r.id)).toEqual([2, 3, 4]);
    });

    it('refuses an unknown column (404 code 12), bad SQL or no predicate (400 code 13), changing nothing', async () => {
      const location = await createTable('delerr', 3);
      const before = await snapshot(location);
      const unknownColumn = await post('delerr', 'delete', { predicate: 'nope = 1' });
      expect(unknownColumn.status).toBe(404);
      expect(unknownColumn.json.code).toBe(12);
      expect(String(unknownColumn.json.error)).toContain('No field named nope');
      const badSql = await post('delerr', 'delete', { predicate: 'id = = 1' });
      expect(badSql.status).toBe(400);
      expect(badSql.json.code).toBe(13);
      expect(String(badSql.json.error)).toContain('sql parser error');
      for (const body of [{}, { predicate: '' }, { predicate: '  ' }]) {
        const res = await post('delerr', 'delete', body);
        expect(res.status).toBe(400);
        expect(res.json.code).toBe(13);
      }
      expect(await snapshot(location)).toEqual(before);
    });
  });

  describe('InsertIntoTable', () => {
    it('appends by default and overwrites with mode=overwrite (any case)', async () => {
      const location = await createTable('ins', 2);
      const appended = await fx.t.call(
        'POST',
        path('ins', 'insert'),
        namedStream([
          [7, 'seven'],
          [8, 'eight'],
        ]),
        ARROW,
      );
      expect(appended.status).toBe(200);
      expect(appended.json).toEqual({ num_inserted_rows: 2, version: 2 });
      expect(await engineVersion(location)).toBe(2);
      expect(await rowsOf(location)).toEqual([
        { id: 1, name: 'name-1' },
        { id: 2, name: 'name-2' },
        { id: 7, name: 'seven' },
        { id: 8, name: 'eight' },
      ]);
      const explicitAppend = await fx.t.call('POST', path('ins', 'insert', '?mode=Append'), namedStream([[9, 'nine']]), ARROW);
      expect(explicitAppend.json).toEqual({ num_inserted_rows: 1, version: 3 });
      const overwritten = await fx.t.call('POST', path('ins', 'insert', '?mode=overwrite'), namedStream([[5, 'five']]), ARROW);
      expect(overwritten.json).toEqual({ num_inserted_rows: 1, version: 4 });
      expect(await engineVersion(location)).toBe(4);
      expect(await rowsOf(location)).toEqual([{ id: 5, name: 'five' }]);
    });

    it('refuses a bad mode, a body that is not Arrow, and rows that do not fit the schema, changing nothing', async () => {
      const location = await createTable('inserr', 2);
      const before = await snapshot(location);
      const badMode = await fx.t.call('POST', path('inserr', 'insert', '?mode=upsert'), namedStream([[3, 'c']]), ARROW);
      expect(badMode.status).toBe(400);
      expect(badMode.json.code).toBe(13);
      const empty = await fx.t.call('POST', path('inserr', 'insert'), Buffer.alloc(0), ARROW);
      expect(empty.status).toBe(400);
      expect(empty.json.code).toBe(13);
      const garbage = await fx.t.call('POST', path('inserr', 'insert'), Buffer.from('not arrow'), ARROW);
      expect(garbage.status).toBe(400);
      expect(garbage.json.code).toBe(13);
      const wrongSchema = await fx.t.call('POST', path('inserr', 'insert'), otherStream(), ARROW);
      expect(wrongSchema.status).toBe(400);
      expect(wrongSchema.json.code).toBe(13);
      expect(await snapshot(location)).toEqual(before);
    });

    it('creates the dataset of a declared table and removes its declared marker', async () => {
      expect((await post('declins', 'declare', { properties: { kept: 'yes' } })).status).toBe(200);
      const res = await fx.t.call(
        'POST',
        path('declins', 'insert'),
        namedStream([
          [1, 'one'],
          [2, 'two'],
          [3, 'three'],
        ]),
        ARROW,
      );
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ num_inserted_rows: 3, version: 1 });
      const location = fx.root.store.location('ns/declins.lance');
      expect(await engineVersion(location)).toBe(1);
      expect((await rowsOf(location)).map((r) => r.name)).toEqual(['one', 'two', 'three']);
      expect(await fx.root.store.head('ns/declins.lance/.lance-reserved')).toBeNull();
      expect((await post('declins', 'describe', {}, '?check_declared=true')).json).toMatchObject({ is_only_declared: false, properties: { kept: 'yes' } });
      // From now on it is a table like any other.
      expect((await fx.t.call('POST', path('declins', 'insert'), namedStream([[4, 'four']]), ARROW)).json).toEqual({ num_inserted_rows: 1, version: 2 });
    });
  });

  it('never loses an acknowledged insert when several race to create a declared table’s dataset', async () => {
    // Lance alone would let the loser of version 1 commit its create as an overwrite of the winner.
    expect((await post('declrace', 'declare', {})).status).toBe(200);
    const ids = [1, 2, 3, 4];
    const results = await Promise.all(ids.map((i) => fx.t.call('POST', path('declrace', 'insert'), namedStream([[i, `n${i}`]]), ARROW)));
    const landed = ids.filter((_, k) => results[k]?.status === 200);
    for (const res of results.filter((r) => r.status !== 200)) {
      // Only while another request holds the creation: the dataset is about to exist; retry.
      expect(res.status).toBe(409);
      expect(res.json.code).toBe(14);
    }
    expect(landed.length).toBeGreaterThanOrEqual(1);
    expect(
      results
        .filter((r) => r.status === 200)
        .map((r) => Number(r.json.version))
        .sort(),
    ).toEqual(landed.map((_, k) => k + 1));
    const location = fx.root.store.location('ns/declrace.lance');
    expect(await engineVersion(location)).toBe(landed.length);
    expect((await rowsOf(location)).map((r) => r.id)).toEqual(landed);
    expect(await fx.root.store.head('ns/declrace.lance/.lance-reserved')).toBeNull();
    expect(await fx.root.store.head('ns/declrace.lance/_catalog/dataset-create.json')).toBeNull();
    // Once the dataset exists, inserts append with no claim at all.
    const late = await Promise.all([5, 6].map((i) => fx.t.call('POST', path('declrace', 'insert'), namedStream([[i, `n${i}`]]), ARROW)));
    expect(late.map((r) => r.status)).toEqual([200, 200]);
    expect((await rowsOf(location)).map((r) => r.id)).toEqual([...landed, 5, 6]);
  });

  it('takes over a creation claim a crashed request left behind once its lease has run out', async () => {
    expect((await post('declstale', 'declare', {})).status).toBe(200);
    const claimKey = 'ns/declstale.lance/_catalog/dataset-create.json';
    await fx.root.store.put(claimKey, JSON.stringify({ request_id: 'live', lease_until: new Date(Date.now() + 3_600_000).toISOString() }));
    const blocked = await fx.t.call('POST', path('declstale', 'insert'), namedStream([[1, 'a']]), ARROW);
    expect(blocked.status).toBe(409);
    expect(blocked.json.code).toBe(14);
    expect(await fx.root.store.head('ns/declstale.lance/.lance-reserved')).not.toBeNull();
    await fx.root.store.put(claimKey, JSON.stringify({ request_id: 'dead', lease_until: new Date(Date.now() - 1).toISOString() }));
    const res = await fx.t.call('POST', path('declstale', 'insert'), namedStream([[1, 'a']]), ARROW);
    expect(res.json).toEqual({ num_inserted_rows: 1, version: 1 });
    expect(await fx.root.store.head(claimKey)).toBeNull();
    expect(await rowsOf(fx.root.store.location('ns/declstale.lance'))).toEqual([{ id: 1, name: 'a' }]);
  });

  describe('MergeInsertIntoTable', () => {
    const merge = (table: string, query: string, body: Buffer) => fx.t.call('POST', path(table, 'merge_insert', query), body, ARROW);

    it('updates matched rows, inserts new ones and deletes unmatched ones as asked', async () => {
      const location = await createTable('mrg', 4);
      const upsert = await merge(
        'mrg',
        '?on=id&when_matched_update_all=true&when_not_matched_insert_all=true',
        namedStream([
          [3, 'three'],
          [4, 'four'],
          [5, 'five'],
        ]),
      );
      expect(upsert.status).toBe(200);
      expect(upsert.json).toEqual({ num_updated_rows: 2, num_inserted_rows: 1, num_deleted_rows: 0, version: 2 });
      expect(await engineVersion(location)).toBe(2);
      expect(await rowsOf(location)).toEqual([
        { id: 1, name: 'name-1' },
        { id: 2, name: 'name-2' },
        { id: 3, name: 'three' },
        { id: 4, name: 'four' },
        { id: 5, name: 'five' },
      ]);
      // Filtered update: only the matched rows where the condition holds.
      const filtered = await merge(
        'mrg',
        `?on=id&when_matched_update_all_filt=${encodeURIComponent('target.id = 1')}`,
        namedStream([
          [1, 'uno'],
          [2, 'dos'],
        ]),
      );
      expect(filtered.json).toEqual({ num_updated_rows: 1, num_inserted_rows: 0, num_deleted_rows: 0, version: 3 });
      expect((await rowsOf(location)).map((r) => r.name)).toEqual(['uno', 'name-2', 'three', 'four', 'five']);
      // Delete the rows the source does not have, where the condition holds.
      const deleted = await merge(
        'mrg',
        `?on=id&when_matched_update_all=TRUE&when_not_matched_by_source_delete_filt=${encodeURIComponent('id > 3')}&timeout=30s&use_index=false`,
        namedStream([[2, 'zwei']]),
      );
      expect(deleted.json).toEqual({ num_updated_rows: 1, num_inserted_rows: 0, num_deleted_rows: 2, version: 4 });
      expect(await engineVersion(location)).toBe(4);
      expect(await rowsOf(location)).toEqual([
        { id: 1, name: 'uno' },
        { id: 2, name: 'zwei' },
        { id: 3, name: 'three' },
      ]);
      const wipe = await merge('mrg', '?on=id&when_not_matched_by_source_delete=true', namedStream([[3, 'x']]));
      expect(wipe.json).toEqual({ num_updated_rows: 0, num_inserted_rows: 0, num_deleted_rows: 2, version: 5 });
      expect(await rowsOf(location)).toEqual([{ id: 3, name: 'three' }]);
    });

    it('refuses a missing or unknown key, a merge that does nothing, bad SQL and bad options, changing nothing', async () => {
      const location = await createTable('mrgerr', 3);
      const before = await snapshot(location);
      const data = namedStream([
        [1, 'a'],
        [9, 'z'],
      ]);
      const noOn = await merge('mrgerr', '?when_matched_update_all=true', data);
      expect(noOn.status).toBe(400);
      expect(noOn.json.code).toBe(13);
      expect(String(noOn.json.error)).toContain('on');
      const unknownKey = await merge('mrgerr', '?on=nope&when_matched_update_all=true', data);
      expect(unknownKey.status).toBe(404);
      expect(unknownKey.json.code).toBe(12);
      const nothing = await merge('mrgerr', '?on=id', data);
      expect(nothing.status).toBe(400);
      expect(nothing.json.code).toBe(13);
      const unknownInFilter = await merge('mrgerr', `?on=id&when_matched_update_all_filt=${encodeURIComponent('target.nope = 1')}`, data);
      expect(unknownInFilter.status).toBe(404);
      expect(unknownInFilter.json.code).toBe(12);
      const badFilter = await merge('mrgerr', `?on=id&when_matched_update_all_filt=${encodeURIComponent('target.id = = 1')}`, data);
      expect(badFilter.status).toBe(400);
      expect(badFilter.json.code).toBe(13);
      expect(String(badFilter.json.error)).toContain('sql parser error');
      const duplicateKeys = await merge(
        'mrgerr',
        '?on=id&when_matched_update_all=true',
        namedStream([
          [2, 'a'],
          [2, 'b'],
        ]),
      );
      expect(duplicateKeys.status).toBe(400);
      expect(duplicateKeys.json.code).toBe(13);
      const wrongSchema = await merge('mrgerr', '?on=id&when_not_matched_insert_all=true', otherStream());
      expect(wrongSchema.status).toBe(400);
      expect(wrongSchema.json.code).toBe(13);
      for (const query of [
        '?on=id&when_matched_update_all=maybe',
        '?on=id&when_matched_update_all=true&timeout=soon',
        '?on=id&when_matched_update_all=true&timeout=0s',
      ]) {
        const res = await merge('mrgerr', query, data);
        expect(res.status, query).toBe(400);
        expect(res.json.code).toBe(13);
      }
      // A merge that runs out of its time bound is unavailable (503 code 17) and commits nothing.
      const timedOut = await merge('mrgerr', '?on=id&when_not_matched_insert_all=true&timeout=1ms', data);
      expect(timedOut.status).toBe(503);
      expect(timedOut.json.code).toBe(17);
      expect(await snapshot(location)).toEqual(before);
    });

    it('creates the dataset of a declared table from the merged rows', async () => {
      expect((await post('declmrg', 'declare', {})).status).toBe(200);
      expect((await merge('declmrg', '?on=nope&when_not_matched_insert_all=true', namedStream([[1, 'a']]))).json.code).toBe(12);
      expect(await fx.root.store.head('ns/declmrg.lance/.lance-reserved')).not.toBeNull();
      const res = await merge(
        'declmrg',
        '?on=id&when_matched_update_all=true&when_not_matched_insert_all=true',
        namedStream([
          [1, 'a'],
          [2, 'b'],
        ]),
      );
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ num_updated_rows: 0, num_inserted_rows: 2, num_deleted_rows: 0, version: 1 });
      const location = fx.root.store.location('ns/declmrg.lance');
      expect(await engineVersion(location)).toBe(1);
      expect(await rowsOf(location)).toEqual([
        { id: 1, name: 'a' },
        { id: 2, name: 'b' },
      ]);
      expect(await fx.root.store.head('ns/declmrg.lance/.lance-reserved')).toBeNull();
      // Without inserts, a merge into a declared table makes it an empty table of the stream's schema.
      expect((await post('declmrg2', 'declare', {})).status).toBe(200);
      const updateOnly = await merge('declmrg2', '?on=id&when_matched_update_all=true', namedStream([[1, 'a']]));
      expect(updateOnly.json).toEqual({ num_updated_rows: 0, num_inserted_rows: 0, num_deleted_rows: 0, version: 1 });
      expect(await rowsOf(fx.root.store.location('ns/declmrg2.lance'))).toEqual([]);
    });
  });

  describe('CountTableRows', () => {
    it('counts rows as a bare integer, by predicate and at a version, over POST and GET', async () => {
      const location = await createTable('cnt', 5);
      expect((await post('cnt', 'delete', { predicate: 'id = 5' })).json.version).toBe(2);
      const all = await post('cnt', 'count_rows', {});
      expect(all.status).toBe(200);
      expect(all.text).toBe('4');
      const table = await connectTable(location, engineOptions);
      try {
        expect(Number(all.text)).toBe(await table.countRows());
        expect(Number((await post('cnt', 'count_rows', { predicate: 'id >= 3' })).text)).toBe(await table.countRows('id >= 3'));
      } finally {
        table.close();
      }
      expect((await post('cnt', 'count_rows', { predicate: 'id >= 3' })).text).toBe('2');
      expect((await post('cnt', 'count_rows', { version: 1 })).text).toBe('5');
      expect((await post('cnt', 'count_rows', { version: 1, predicate: 'id >= 3' })).text).toBe('3');
      expect((await fx.t.call('POST', path('cnt', 'count_rows'))).text).toBe('4');
      expect((await fx.t.call('GET', path('cnt', 'count_rows'))).text).toBe('4');
      expect((await fx.t.call('GET', path('cnt', 'count_rows', `?predicate=${encodeURIComponent('id < 3')}&version=1`))).text).toBe('2');
    });

    it('answers 404 code 11 for a missing version, 12 for an unknown column, 400 code 13 for bad SQL', async () => {
      await createTable('cnterr', 2);
      const noVersion = await post('cnterr', 'count_rows', { version: 9 });
      expect(noVersion.status).toBe(404);
      expect(noVersion.json.code).toBe(11);
      const unknownColumn = await post('cnterr', 'count_rows', { predicate: 'nope > 1' });
      expect(unknownColumn.status).toBe(404);
      expect(unknownColumn.json.code).toBe(12);
      const badSql = await post('cnterr', 'count_rows', { predicate: 'id >' });
      expect(badSql.status).toBe(400);
      expect(badSql.json.code).toBe(13);
    });
  });

  describe('RestoreTable', () => {
    it('commits a new version with the content of the one restored', async () => {
      const location = await createTable('rst', 3);
      await post('rst', 'delete', { predicate: 'id = 1' });
      await post('rst', 'update', { updates: [['name', "'changed'"]] });
      expect(await engineVersion(location)).toBe(3);
      const res = await post('rst', 'restore', { version: 1 });
      expect(res.status).toBe(200);
      expect(res.json).toEqual({});
      expect(await engineVersion(location)).toBe(4);
      expect(await rowsOf(location)).toEqual([
        { id: 1, name: 'name-1' },
        { id: 2, name: 'name-2' },
        { id: 3, name: 'name-3' },
      ]);
      const versions = await fx.t.call('POST', path('rst', 'version/list', '?descending=true&limit=1'));
      expect((versions.json.versions as Array<{ version: number }>)[0]?.version).toBe(4);
    });

    it('answers 404 code 11 for a version that does not exist, changing nothing', async () => {
      const location = await createTable('rsterr', 2);
      const before = await snapshot(location);
      const res = await post('rsterr', 'restore', { version: 9 });
      expect(res.status).toBe(404);
      expect(res.json.code).toBe(11);
      expect((await post('rsterr', 'restore', {})).json.code).toBe(13);
      expect((await post('rsterr', 'restore', { version: -1 })).json.code).toBe(13);
      expect(await snapshot(location)).toEqual(before);
    });
  });

  it('answers 404 code 4 for a missing table, 409 code 19 for a declared one, 404 code 22 for a missing branch', async () => {
    const missing = await post('ghost', 'update', { updates: [['name', "'x'"]] });
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe(4);
    expect((await fx.t.call('POST', path('ghost', 'insert'), namedStream([[1, 'a']]), ARROW)).json.code).toBe(4);
    expect((await post('ghost', 'count_rows', {})).json.code).toBe(4);
    // The writes announced themselves in the name's directory first (table-fences.ts): nothing of it stays.
    expect((await fx.root.store.list('ns/', { delimiter: '/' })).commonPrefixes).not.toContain('ns/ghost.lance/');
    expect(await fx.root.store.list('ns/ghost.lance/')).toEqual({ objects: [], commonPrefixes: [] });
    expect((await post('declonly', 'declare', {})).status).toBe(200);
    for (const [op, body] of [
      ['update', { updates: [['name', "'x'"]] }],
      ['delete', { predicate: 'true' }],
      ['count_rows', {}],
      ['restore', { version: 1 }],
    ] as const) {
      const res = await post('declonly', op, body);
      expect(res.status, op).toBe(409);
      expect(res.json.code).toBe(19);
    }
    const location = await createTable('branchy', 2);
    const before = await snapshot(location);
    const branched = await post('branchy', 'update', { updates: [['name', "'x'"]], branch: 'dev' });
    expect([branched.status, branched.json.code]).toEqual([404, 22]);
    expect((await fx.t.call('POST', path('branchy', 'insert', '?branch=dev'), namedStream([[1, 'a']]), ARROW)).status).toBe(404);
    expect(await snapshot(location)).toEqual(before);
  });

  it('commits the writes of a managed table through the service (each version counted)', async () => {
    const before = await committedVersions(fx.t);
    expect((await fx.t.call('POST', '/v1/namespace/managed/create', { properties: { managed_versioning: 'true' } })).status).toBe(200);
    const created = await fx.t.call('POST', '/v1/table/managed%24m/create', peopleStream([1, 2, 3]), ARROW);
    expect(created.json.version).toBe(1);
    const location = String(created.json.location);
    const mpath = (op: string, query = '') => `/v1/table/managed%24m/${op}${query}`;
    const updated = await fx.t.call('POST', mpath('update'), { updates: [['name', "'u'"]], predicate: 'id = 1' });
    expect(updated.json).toMatchObject({ updated_rows: 1, version: 2 });
    const inserted = await fx.t.call('POST', mpath('insert'), namedStream([[4, 'd']]), ARROW);
    expect(inserted.json).toEqual({ num_inserted_rows: 1, version: 3 });
    const merged = await fx.t.call('POST', mpath('merge_insert', '?on=id&when_matched_update_all=true'), namedStream([[2, 'm']]), ARROW);
    expect(merged.json).toMatchObject({ num_updated_rows: 1, version: 4 });
    const deleted = await fx.t.call('POST', mpath('delete'), { predicate: 'id = 3' });
    expect(deleted.json.version).toBe(5);
    expect((await fx.t.call('POST', mpath('restore'), { version: 1 })).status).toBe(200);
    expect(await engineVersion(location)).toBe(6);
    expect((await committedVersions(fx.t)) - before).toBe(6);
    expect((await fx.root.store.list('managed/m.lance/_versions/', {})).objects.filter((o) => o.key.includes('.manifest-'))).toEqual([]);
    expect((await rowsOf(location)).map((r) => r.id)).toEqual([1, 2, 3]);
    // CreateTable over it in overwrite mode commits through the service too.
    const overwritten = await fx.t.call('POST', mpath('create', '?mode=overwrite'), peopleStream([7, 8]), ARROW);
    expect(overwritten.json.version).toBe(7);
    expect((await committedVersions(fx.t)) - before).toBe(7);
    expect((await rowsOf(location)).map((r) => r.id)).toEqual([7, 8]);
  });
});
