import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { TransactionLog, type TransactionStatus } from '../../src/service/transactions/transaction-log.js';
import { useTestApp } from '../support/app.js';
import { connectTable, peopleStream } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';
import { manifestBytes } from '../support/manifests.js';

describe.each(backends())('transactions on $name', (backend) => {
  const fx = useTestApp(backend);

  /** A transaction record as a job would have it, written straight to the store. */
  async function job(status: TransactionStatus = 'Queued', properties: Record<string, string> = {}): Promise<string> {
    const id = randomUUID();
    const now = new Date().toISOString();
    await new TransactionLog(fx.root.store).create({ id, status, operation: 'test_job', properties, created_at: now, updated_at: now });
    return id;
  }
  const alter = (id: string, actions: unknown[]) => fx.t.call('POST', `/v1/transaction/${encodeURIComponent(id)}/alter`, { actions });
  const status = (s: string) => ({ setStatusAction: { status: s } });
  const set = (key: string, value: string, mode?: string) => ({ setPropertyAction: { key, value, ...(mode ? { mode } : {}) } });
  const unset = (key: string, mode?: string) => ({ unsetPropertyAction: { key, ...(mode ? { mode } : {}) } });

  it('moves Queued → Running → Succeeded, case-insensitively, and a terminal status never changes', async () => {
    const id = await job();
    expect((await fx.t.call('POST', `/v1/transaction/${id}/describe`, {})).json).toEqual({ status: 'Queued', properties: {} });
    expect((await alter(id, [status('RUNNING')])).json).toMatchObject({ status: 'Running' });
    expect((await alter(id, [status('running')])).status).toBe(200); // the same status again is a no-op
    expect((await alter(id, [status('succeeded'), set('result', 'ok')])).json).toEqual({ status: 'Succeeded', properties: { result: 'ok' } });
    for (const to of ['Failed', 'Canceled', 'Running']) {
      const res = await alter(id, [status(to)]);
      expect(res.status, to).toBe(409);
      expect(res.json.code, to).toBe(14);
    }
    const skip = await job();
    expect((await alter(skip, [status('Succeeded')])).json.code).toBe(14); // Queued cannot jump to Succeeded
    expect((await alter(skip, [status('canceled')])).json.status).toBe('Canceled');
    const bad = await alter(skip, [status('Paused')]);
    expect(bad.status).toBe(400);
    expect(bad.json.code).toBe(13);
  });

  it('applies property actions by their modes, all or none', async () => {
    const id = await job('Running', { a: '1' });
    expect((await alter(id, [set('a', '2'), set('b', 'x', 'skip'), unset('c')])).json.properties).toEqual({ a: '2', b: 'x' });
    expect((await alter(id, [set('a', '3', 'Skip')])).json.properties).toEqual({ a: '2', b: 'x' });
    const failed = await alter(id, [set('c', 'new'), set('a', '4', 'fail')]);
    expect(failed.status).toBe(409);
    expect(failed.json.code).toBe(14);
    const failedUnset = await alter(id, [unset('b'), unset('zzz', 'FAIL')]);
    expect(failedUnset.json.code).toBe(14);
    // Neither failed alter changed anything.
    expect((await fx.t.call('POST', `/v1/transaction/${id}/describe`, {})).json.properties).toEqual({ a: '2', b: 'x' });
    expect((await alter(id, [unset('b')])).json.properties).toEqual({ a: '2' });
    const empty = await fx.t.call('POST', `/v1/transaction/${id}/alter`, { actions: [] });
    expect(empty.status).toBe(400);
    const two = await fx.t.call('POST', `/v1/transaction/${id}/alter`, { actions: [{ ...set('x', 'y'), ...unset('a') }] });
    expect(two.status).toBe(400);
  });

  it('takes an action without the field it acts on (the spec leaves each optional) as one that changes nothing', async () => {
    const id = await job('Succeeded', { a: '1' });
    const unchanged = { status: 'Succeeded', properties: { a: '1' } };
    for (const action of [
      { setStatusAction: {} },
      { setStatusAction: { status: null } },
      { setPropertyAction: {} },
      { setPropertyAction: { value: 'v' } },
      { setPropertyAction: { key: 'b' } },
      { setPropertyAction: { key: 'a', value: null, mode: 'Fail' } },
      { unsetPropertyAction: {} },
      { unsetPropertyAction: { key: null, mode: 'Fail' } },
    ]) {
      const res = await alter(id, [action]);
      expect(res.status, JSON.stringify(action)).toBe(200);
      expect(res.json, JSON.stringify(action)).toEqual(unchanged);
    }
    // Beside a whole action, it leaves that one to act alone.
    expect((await alter(id, [{ setStatusAction: {} }, set('b', '2'), { unsetPropertyAction: {} }])).json).toEqual({
      status: 'Succeeded',
      properties: { a: '1', b: '2' },
    });
    expect((await fx.t.call('POST', `/v1/transaction/${id}/describe`, {})).json).toEqual({ status: 'Succeeded', properties: { a: '1', b: '2' } });
    // A field that is there is still checked.
    expect((await alter(id, [{ setPropertyAction: { key: '', value: 'v' } }])).json.code).toBe(13);
    expect((await alter(id, [{ setStatusAction: { status: 'Paused' } }])).json.code).toBe(13);
  });

  it('ends concurrent alters in a state equal to some serial order', async () => {
    const id = await job('Running');
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => alter(id, [set(`own-${i}`, String(i)), set('shared', String(i))])));
    expect(results.every((r) => r.status === 200)).toBe(true);
    const final = (await fx.t.call('POST', `/v1/transaction/${id}/describe`, {})).json.properties as Record<string, string>;
    for (let i = 0; i < 10; i++) expect(final[`own-${i}`]).toBe(String(i));
    expect(Number(final.shared)).toBeGreaterThanOrEqual(0);
    const claims = await Promise.all(Array.from({ length: 10 }, (_, i) => alter(id, [set('owner', String(i), 'Fail')])));
    expect(claims.filter((r) => r.status === 200)).toHaveLength(1);
    expect(claims.filter((r) => r.status === 409).every((r) => r.json.code === 14)).toBe(true);
    const statuses = await Promise.all(['Succeeded', 'Failed', 'Canceled'].map((s) => alter(id, [status(s)])));
    expect(statuses.filter((r) => r.status === 200)).toHaveLength(1);
  });

  it('keeps the status of the service’s own batches and describes unknown ids as 404 code 10', async () => {
    await fx.t.call('POST', '/v1/namespace/tx/create', {});
    await fx.t.call('POST', '/v1/table/tx%24t/declare', {});
    const rel = `_versions/1.manifest-${randomUUID()}`;
    await fx.root.store.put(`tx/t.lance/${rel}`, manifestBytes(1));
    const batch = await fx.t.call('POST', '/v1/table/version/batch-create', { entries: [{ id: ['tx', 't'], version: 1, manifest_path: rel }] });
    const txid = String(batch.json.transaction_id);
    expect((await alter(txid, [set('note', 'checked')])).json).toMatchObject({ status: 'Succeeded', properties: { note: 'checked' } });
    expect((await alter(txid, [status('Failed')])).json.code).toBe(14);
    const missing = await fx.t.call('POST', '/v1/transaction/nope/describe', {});
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe(10);
    expect((await alter('nope', [set('a', 'b')])).json.code).toBe(10);
  });

  it('describes Lance commits by table id and version or transaction uuid, and keeps properties set on them', async () => {
    await fx.t.call('POST', '/v1/namespace/lc/create', {});
    const created = await fx.t.call('POST', '/v1/table/lc%24events/create', peopleStream([1, 2]), { 'content-type': 'application/vnd.apache.arrow.stream' });
    const table = await connectTable(String(created.json.location), fx.root.store.engineStorageOptions());
    await table.add([{ id: 3n, name: 'c' }]);
    table.close();
    const v2 = await fx.t.call('POST', '/v1/transaction/lc%24events%242/describe', {});
    expect(v2.status).toBe(200);
    expect(v2.json).toMatchObject({ status: 'Succeeded', properties: { version: '2', read_version: '1', operation: 'append' } });
    const uuid = String((v2.json.properties as Record<string, string>).uuid);
    expect(uuid).toMatch(/^[0-9a-f-]{36}$/);
    const byUuid = await fx.t.call('POST', `/v1/transaction/lc%24events%24${uuid}/describe`, {});
    expect(byUuid.json).toEqual(v2.json);
    // The form where the body names the table and the path only the commit.
    const bodyForm = await fx.t.call('POST', '/v1/transaction/2/describe', { id: ['lc', 'events'] });
    expect(bodyForm.json).toEqual(v2.json);
    expect((await alter(`lc$events$${uuid}`, [set('reviewed', 'yes')])).json).toMatchObject({
      status: 'Succeeded',
      properties: { reviewed: 'yes', version: '2' },
    });
    expect((await fx.t.call('POST', '/v1/transaction/lc%24events%242/describe', {})).json.properties).toMatchObject({ reviewed: 'yes', uuid });
    expect((await alter('lc$events$2', [status('Failed')])).json.code).toBe(14);
    const v1 = await fx.t.call('POST', '/v1/transaction/lc%24events%241/describe', {});
    expect(v1.json.properties).toMatchObject({ version: '1', read_version: '0' });
    for (const id of ['lc%24events%249', 'lc%24ghost%241', `lc%24events%24${randomUUID()}`]) {
      const res = await fx.t.call('POST', `/v1/transaction/${id}/describe`, {});
      expect(res.status, id).toBe(404);
      expect(res.json.code, id).toBe(10);
    }
  });

  it("describes a branch's Lance commits with the request's branch, by version or uuid, apart from main's", async () => {
    const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };
    await fx.t.call('POST', '/v1/namespace/lb/create', {});
    expect((await fx.t.call('POST', '/v1/table/lb%24events/create', peopleStream([1, 2]), ARROW)).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/lb%24events/branches/create', { name: 'dev/x' })).status).toBe(200);
    // dev/x's version 2 appends, main's version 2 deletes: the same number on two lines of history.
    expect((await fx.t.call('POST', '/v1/table/lb%24events/insert?branch=dev%2Fx', peopleStream([3]), ARROW)).json.version).toBe(2);
    expect((await fx.t.call('POST', '/v1/table/lb%24events/delete', { predicate: 'id = 1' })).json.version).toBe(2);
    const describe = (id: string, body: Record<string, unknown>) => fx.t.call('POST', `/v1/transaction/${id}/describe`, body);
    // The branch's first version is Lance's clone of main's 1, committed in the branch's tree.
    expect((await describe('lb%24events%241', { branch: 'dev/x' })).json).toMatchObject({ properties: { version: '1', operation: 'clone' } });
    const onBranch = await describe('lb%24events%242', { branch: 'dev/x' });
    expect(onBranch.status, onBranch.text).toBe(200);
    expect(onBranch.json).toMatchObject({ status: 'Succeeded', properties: { version: '2', read_version: '1', operation: 'append' } });
    const onMain = await describe('lb%24events%242', {});
    expect(onMain.json).toMatchObject({ properties: { version: '2', operation: 'delete' } });
    for (const main of ['main', '', null]) expect((await describe('lb%24events%242', { branch: main })).json).toEqual(onMain.json);
    const uuid = String((onBranch.json.properties as Record<string, string>).uuid);
    expect(uuid).not.toBe((onMain.json.properties as Record<string, string>).uuid);
    expect((await describe(`lb%24events%24${uuid}`, { branch: 'dev/x' })).json).toEqual(onBranch.json);
    expect((await describe('2', { id: ['lb', 'events'], branch: 'dev/x' })).json).toEqual(onBranch.json);
    // A branch's commit is not main's, nor the other way round.
    expect((await describe(`lb%24events%24${uuid}`, {})).json.code).toBe(10);
    expect((await describe('lb%24events%243', { branch: 'dev/x' })).json.code).toBe(10);
    // Properties set on one line's commit stay on it.
    const altered = await fx.t.call('POST', '/v1/transaction/lb%24events%242/alter', { branch: 'dev/x', actions: [set('reviewed', 'yes')] });
    expect(altered.json).toMatchObject({ status: 'Succeeded', properties: { reviewed: 'yes', operation: 'append' } });
    expect((await describe('lb%24events%242', { branch: 'dev/x' })).json.properties).toMatchObject({ reviewed: 'yes' });
    expect((await describe('lb%24events%242', {})).json.properties).not.toHaveProperty('reviewed');
    // A branch that is not there, or a name Lance refuses.
    const missing = await describe('lb%24events%242', { branch: 'nope' });
    expect([missing.status, missing.json.code]).toEqual([404, 22]);
    const bad = await describe('lb%24events%242', { branch: 'a..b' });
    expect([bad.status, bad.json.code]).toEqual([400, 13]);
  });
});
