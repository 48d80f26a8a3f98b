import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { transactionRecordKey } from '../../src/service/catalog/layout.js';
import { useTestApp } from '../support/app.js';
import { peopleStream } from '../support/arrow-data.js';
import { localBackend } from '../support/backends.js';

// The properties set on a Lance commit (AlterTransaction) belong to that commit: not to a commit
// of a table or branch made again under the same name, nor to another table whose id spells
// this table's id and a branch (transaction-service.ts, overlayIdOf).
describe('transaction overlays by branch', () => {
  const fx = useTestApp(localBackend);
  const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

  it("a property set on one table's commit does not show on another table's branch commit", async () => {
    expect((await fx.t.call('POST', '/v1/namespace/lb/create', {})).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/lb%24events/create', peopleStream([1, 2]), ARROW)).status).toBe(200);
    // A namespace of the same id as the table, holding a table named "1".
    const ns = await fx.t.call('POST', '/v1/namespace/lb%24events/create', {});
    expect(ns.status, ns.text).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/lb%24events%241/create', peopleStream([7]), ARROW)).status).toBe(200);
    // Branch "2" of lb.events; its version 1 is Lance's clone of main's 1.
    expect((await fx.t.call('POST', '/v1/table/lb%24events/branches/create', { name: '2' })).status).toBe(200);
    // Table lb.events.1's commit 2 (an append).
    expect((await fx.t.call('POST', '/v1/table/lb%24events%241/insert', peopleStream([8]), ARROW)).json.version).toBe(2);

    const altered = await fx.t.call('POST', '/v1/transaction/lb%24events%241%242/alter', {
      actions: [{ setPropertyAction: { key: 'reviewed', value: 'yes' } }],
    });
    expect(altered.status, altered.text).toBe(200);
    const other = await fx.t.call('POST', '/v1/transaction/lb%24events%241/describe', { branch: '2' });
    expect(other.status, other.text).toBe(200);
    // Before: lb.events.1's commit 2 (version 2, operation append, reviewed: yes).
    expect(other.json.properties).toMatchObject({ operation: 'clone' });
    expect(other.json.properties).not.toHaveProperty('reviewed');
  });
});

describe('transaction overlays across a branch delete and re-fork', () => {
  const fx = useTestApp(localBackend);
  const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

  it("the commit of a new branch of an old name does not answer with the old branch's commit", async () => {
    expect((await fx.t.call('POST', '/v1/namespace/lb/create', {})).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/lb%24ev/create', peopleStream([1, 2]), ARROW)).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/lb%24ev/branches/create', { name: 'dev' })).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/lb%24ev/insert?branch=dev', peopleStream([3]), ARROW)).json.version).toBe(2);
    const old = await fx.t.call('POST', '/v1/transaction/lb%24ev%242/alter', {
      branch: 'dev',
      actions: [{ setPropertyAction: { key: 'reviewed', value: 'yes' } }],
    });
    expect(old.json).toMatchObject({ properties: { operation: 'append', reviewed: 'yes' } });
    const del = await fx.t.call('POST', '/v1/table/lb%24ev/branches/delete', { name: 'dev' });
    expect(del.status, del.text).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/lb%24ev/branches/create', { name: 'dev' })).status).toBe(200);
    const d = await fx.t.call('POST', '/v1/table/lb%24ev/delete', { predicate: 'id = 1', branch: 'dev' });
    expect(d.json.version, d.text).toBe(2);
    const now = await fx.t.call('POST', '/v1/transaction/lb%24ev%242/describe', { branch: 'dev' });
    // Before: the old branch's commit (operation append, its uuid, reviewed: yes).
    expect(now.json.properties).toMatchObject({ version: '2', operation: 'delete' });
    expect(now.json.properties).not.toHaveProperty('reviewed');
  });
});

describe('transaction overlays across a drop and re-create', () => {
  const fx = useTestApp(localBackend);
  const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

  it("the new table's commit 1 is not the old one's", async () => {
    expect((await fx.t.call('POST', '/v1/namespace/lb/create', {})).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/lb%24ev/create', peopleStream([1, 2]), ARROW)).status).toBe(200);
    const old = await fx.t.call('POST', '/v1/transaction/lb%24ev%241/alter', { actions: [{ setPropertyAction: { key: 'reviewed', value: 'yes' } }] });
    expect(old.status, old.text).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/lb%24ev/drop', {})).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/lb%24ev/create', peopleStream([5]), ARROW)).status).toBe(200);
    const now = await fx.t.call('POST', '/v1/transaction/lb%24ev%241/describe', {});
    expect(now.json.properties).not.toHaveProperty('reviewed');
    expect((now.json.properties as Record<string, string>).uuid).not.toBe((old.json.properties as Record<string, string>).uuid);
  });
});

describe('transaction overlays written before the commit identity keyed them', () => {
  const fx = useTestApp(localBackend);
  const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
  // The id such a record had: the table id and the version, one flat list.
  const legacyId = (parts: string[]) => `lance-${createHash('sha256').update(JSON.stringify(parts)).digest('base64url').slice(0, 32)}`;

  it('are still read for the same commit of main, and not for a commit made later under that version', async () => {
    expect((await fx.t.call('POST', '/v1/namespace/lb/create', {})).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/lb%24ev/create', peopleStream([1, 2]), ARROW)).status).toBe(200);
    const commit = (await fx.t.call('POST', '/v1/transaction/lb%24ev%241/describe', {})).json.properties as Record<string, string>;
    const at = new Date().toISOString();
    const record = (properties: Record<string, string>) =>
      JSON.stringify({ id: legacyId(['lb', 'ev', '1']), status: 'Succeeded', operation: 'lance_commit', properties, created_at: at, updated_at: at });
    await fx.root.store.put(transactionRecordKey(legacyId(['lb', 'ev', '1'])), record({ ...commit, reviewed: 'yes' }));
    const same = await fx.t.call('POST', '/v1/transaction/lb%24ev%241/describe', {});
    expect(same.json.properties).toMatchObject({ uuid: commit.uuid, reviewed: 'yes' });
    // A record of another commit under the same table id and version (a table since dropped) is not.
    await fx.root.store.put(transactionRecordKey(legacyId(['lb', 'ev', '1'])), record({ ...commit, uuid: 'another', reviewed: 'yes' }));
    const other = await fx.t.call('POST', '/v1/transaction/lb%24ev%241/describe', {});
    expect(other.json.properties).toMatchObject({ uuid: commit.uuid });
    expect(other.json.properties).not.toHaveProperty('reviewed');
  });
});
