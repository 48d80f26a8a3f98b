import { describe, expect, it } from 'vitest';
import { encodeRecord } from '../../src/service/catalog/records.js';
import { tally, useTestApp } from '../support/app.js';
import { peopleStream } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';

// Races settled in the store: these try to break the create-if-absent and drop-vs-create
// invariants with many concurrent callers, on every backend.

describe.each(backends())('races on $name', (backend) => {
  const fx = useTestApp(backend);

  it('50 concurrent creates of one namespace: exactly one succeeds, the rest get 409 code 2', async () => {
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => fx.t.call('POST', '/v1/namespace/contested/create', { properties: { who: String(i) } })),
    );
    expect(tally(results.map((r) => r.status))).toEqual({ 200: 1, 409: 49 });
    expect(results.filter((r) => r.status === 409).every((r) => r.json.code === 2)).toBe(true);
    const winner = results.find((r) => r.status === 200);
    expect((await fx.t.call('POST', '/v1/namespace/contested/describe', {})).json).toEqual(winner?.json);
  });

  it('50 concurrent declares of one table: exactly one succeeds, the rest get 409 code 5', async () => {
    await fx.t.call('POST', '/v1/namespace/tr/create', {});
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => fx.t.call('POST', '/v1/table/tr%24one/declare', { properties: { who: String(i) } })),
    );
    expect(tally(results.map((r) => r.status))).toEqual({ 200: 1, 409: 49 });
    expect(results.filter((r) => r.status === 409).every((r) => r.json.code === 5)).toBe(true);
    const winner = results.find((r) => r.status === 200);
    expect((await fx.t.call('POST', '/v1/table/tr%24one/describe', {})).json.properties).toEqual(winner?.json.properties);
  });

  it('concurrent creates of one table with data: exactly one succeeds and its rows are the table', async () => {
    await fx.t.call('POST', '/v1/namespace/tc/create', {});
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        fx.t.call('POST', '/v1/table/tc%24one/create', peopleStream([i * 10, i * 10 + 1]), { 'content-type': 'application/vnd.apache.arrow.stream' }),
      ),
    );
    expect(tally(results.map((r) => r.status))).toEqual({ 200: 1, 409: 11 });
    const described = await fx.t.call('POST', '/v1/table/tc%24one/describe?load_detailed_metadata=true', {});
    expect(described.json.version).toBe(1);
  });

  it('concurrent creates filling one declared table: exactly one writes, no rows are silently replaced', async () => {
    await fx.t.call('POST', '/v1/namespace/td/create', {});
    await fx.t.call('POST', '/v1/table/td%24one/declare', {});
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        fx.t.call('POST', '/v1/table/td%24one/create', peopleStream([i * 10, i * 10 + 1]), { 'content-type': 'application/vnd.apache.arrow.stream' }),
      ),
    );
    expect(tally(results.map((r) => r.status))).toEqual({ 200: 1, 409: 7 });
    const winner = results.findIndex((r) => r.status === 200);
    const described = await fx.t.call('POST', '/v1/table/td%24one/describe?load_detailed_metadata=true', {});
    expect(described.json.version).toBe(1);
    const { readRows } = await import('../support/arrow-data.js');
    expect((await readRows(String(described.json.location), fx.root.store.engineStorageOptions())).map((r) => r.id)).toEqual([winner * 10, winner * 10 + 1]);
  });

  it('a Restrict drop racing table creation never leaves a table in a dropped namespace', async () => {
    for (let round = 0; round < 8; round++) {
      const ns = `race${round}`;
      expect((await fx.t.call('POST', `/v1/namespace/${ns}/create`, {})).status).toBe(200);
      const creates = Array.from({ length: 4 }, (_, i) => fx.t.call('POST', `/v1/table/${ns}%24t${i}/declare`, {}));
      const nested = fx.t.call('POST', `/v1/namespace/${ns}%24child/create`, {});
      const drop = fx.t.call('POST', `/v1/namespace/${ns}/drop`, {});
      const [dropRes, nestedRes, ...createRes] = await Promise.all([drop, nested, ...creates]);
      const nsExists = (await fx.t.call('POST', `/v1/namespace/${ns}/exists`, {})).status === 200;
      const leftovers = await fx.root.store.list(`${ns}/`, {});
      if (dropRes?.status === 200) {
        expect(nsExists).toBe(false);
        expect(leftovers.objects.map((o) => o.key)).toEqual([]);
        for (const r of [nestedRes, ...createRes]) expect(r?.status === 404 || r?.status === 409 || r?.status === 200).toBe(true);
        // Any child that answered 200 was undone only if the drop won; none may exist now.
        for (let i = 0; i < 4; i++) expect((await fx.t.call('POST', `/v1/table/${ns}%24t${i}/exists`, {})).status).toBe(404);
      } else {
        expect(dropRes?.status).toBe(409);
        expect(dropRes?.json.code).toBe(3);
        expect(nsExists).toBe(true);
        // Every create that succeeded is still there.
        for (let i = 0; i < 4; i++) {
          const exists = (await fx.t.call('POST', `/v1/table/${ns}%24t${i}/exists`, {})).status;
          if (createRes[i]?.status === 200) expect(exists).toBe(200);
        }
        // The namespace accepts children again.
        expect((await fx.t.call('POST', `/v1/table/${ns}%24after/declare`, {})).status).toBe(200);
      }
    }
  });

  it('a drop that died after marking the namespace holds up creators only until its lease ends, and the next drop finishes', async () => {
    await fx.t.call('POST', '/v1/namespace/stuck/create', { properties: { a: 'b' } });
    // What a drop leaves when it is killed right after its first step: a mark whose lease runs out soon.
    const until = Date.now() + 400;
    await fx.root.store.put(
      'stuck/.lance-namespace',
      encodeRecord({ properties: { a: 'b' }, state: 'dropping', dropping_until: new Date(until).toISOString() }),
    );
    const child = await fx.t.call('POST', '/v1/table/stuck%24t/declare', {});
    // The creator waited for the drop's outcome; the dead drop decided nothing, so the child stays.
    expect(child.status, child.text).toBe(200);
    expect(Date.now()).toBeGreaterThanOrEqual(until);
    expect((await fx.t.call('POST', '/v1/namespace/stuck/exists', {})).status).toBe(200);
    const refused = await fx.t.call('POST', '/v1/namespace/stuck/drop', {});
    expect(refused.status).toBe(409);
    expect(refused.json.error).toContain('table t');
    expect((await fx.t.call('POST', '/v1/table/stuck%24t/drop', {})).status).toBe(200);
    // The dropped table's tombstone is no child: the namespace drops, and takes it along.
    expect((await fx.t.call('POST', '/v1/namespace/stuck/drop', {})).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/namespace/stuck/exists', {})).status).toBe(404);
    expect((await fx.root.store.list('stuck/', {})).objects).toEqual([]);
    // ExistOk revives an abandoned drop instead.
    await fx.t.call('POST', '/v1/namespace/stuck2/create', {});
    await fx.root.store.put('stuck2/.lance-namespace', encodeRecord({ properties: {}, state: 'dropping' }));
    expect((await fx.t.call('POST', '/v1/namespace/stuck2/create', { mode: 'ExistOk' })).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/stuck2%24t/declare', {})).status).toBe(200);
  });

  it('a directory marked deregistered by Lance or an earlier version, without a record, is no table: its name is free and its files stay', async () => {
    await fx.t.call('POST', '/v1/namespace/half/create', {});
    await fx.t.call('POST', '/v1/table/half%24t/create', peopleStream([1, 2]), { 'content-type': 'application/vnd.apache.arrow.stream' });
    // Lance's own directory catalog (or a version of this service before the marker had a body) left it so.
    await fx.root.store.put('half/t.lance/.lance-deregistered', '');
    await fx.root.store.delete('half/t.lance/.lance-table.json');
    const before = (await fx.root.store.list('half/t.lance/', {})).objects.map((o) => o.key);
    expect((await fx.t.call('POST', '/v1/table/half%24t/exists', {})).status).toBe(404);
    expect((await fx.t.call('POST', '/v1/table/half%24t/drop')).status).toBe(404);
    const again = await fx.t.call('POST', '/v1/table/half%24t/create', peopleStream([3]), { 'content-type': 'application/vnd.apache.arrow.stream' });
    expect(again.status, again.text).toBe(200);
    expect(again.json.location).not.toBe(fx.root.store.location('half/t.lance'));
    expect((await fx.root.store.list('half/t.lance/', {})).objects.map((o) => o.key).filter((k) => !k.endsWith('.lance-table.json'))).toEqual(before);
    // The namespace drops around it: the files stay where they are.
    expect((await fx.t.call('POST', '/v1/table/half%24t/drop')).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/namespace/half/drop', {})).status).toBe(200);
    expect((await fx.root.store.list('half/t.lance/', {})).objects.map((o) => o.key).filter((k) => !k.endsWith('.lance-table.json'))).toEqual(before);
  });
});
