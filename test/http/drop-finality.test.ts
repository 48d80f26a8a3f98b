import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { startTestApp, useNamespaceFixture } from '../support/app.js';
import { peopleStream, readRows } from '../support/arrow-data.js';
import { backends } from '../support/backends.js';
import { manifestBytes } from '../support/manifests.js';

// An acknowledged drop is final. Writes already in flight when DropTable
// arrives either land before the drop (and go with the table) or fail; none of them may make the
// table visible again afterwards, and the name can then be created afresh holding only the new
// table's rows. The old code revived the table in most rounds: a commit landing after the drop
// left `_versions/` in an unrecorded directory, which was taken for a table written by Lance.

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

describe.each(backends())('drop vs. in-flight writes on $name', (backend) => {
  const rounds = backend.name === 'local' ? 30 : 10;
  const { fx } = useNamespaceFixture(backend);

  it('writes on one replica, the drop on another: the drop waits for them and stays final', async () => {
    const other = await startTestApp(fx.root);
    try {
      await fx.t.call('POST', '/v1/namespace/replicas/create', {});
      const path = (table: string, op: string) => `/v1/table/replicas%24${table}/${op}`;
      for (let round = 0; round < rounds / 2; round++) {
        const table = `t${round}`;
        expect((await fx.t.call('POST', path(table, 'create'), peopleStream([0, 1]), ARROW)).status).toBe(200);
        const writes = [
          fx.t.call('POST', path(table, 'insert'), peopleStream([10, 11]), ARROW),
          fx.t.call('POST', path(table, 'update'), { updates: [['name', "concat(name, '-u')"]] }),
        ];
        const drop = await other.call('POST', path(table, 'drop'), {});
        expect(drop.status, drop.text).toBe(200);
        for (const w of await Promise.all(writes)) expect([200, 404, 409], w.text).toContain(w.status);
        expect((await fx.t.call('POST', path(table, 'exists'), {})).status).toBe(404);
        expect((await other.call('GET', '/v1/namespace/replicas/table/list')).json.tables).not.toContain(table);
        const again = await other.call('POST', path(table, 'create'), peopleStream([5]), ARROW);
        expect(again.status, again.text).toBe(200);
        expect((await readRows(String(again.json.location), fx.root.store.engineStorageOptions())).map((r) => r.id)).toEqual([5]);
      }
    } finally {
      await other.close();
    }
  });

  it('writes on a branch and branch forks on one replica, the drop on another: the drop waits for them, takes the branches, and stays final', async () => {
    const other = await startTestApp(fx.root);
    try {
      await fx.t.call('POST', '/v1/namespace/branchy/create', {});
      const path = (table: string, op: string) => `/v1/table/branchy%24${table}/${op}`;
      for (let round = 0; round < rounds / 2; round++) {
        const table = `t${round}`;
        expect((await fx.t.call('POST', path(table, 'create'), peopleStream([0, 1]), ARROW)).status).toBe(200);
        expect((await fx.t.call('POST', path(table, 'branches/create'), { name: 'dev' })).status).toBe(200);
        const writes = [
          fx.t.call('POST', `${path(table, 'insert')}?branch=dev`, peopleStream([10, 11]), ARROW),
          fx.t.call('POST', path(table, 'update'), { branch: 'dev', updates: [['name', "concat(name, '-u')"]] }),
          fx.t.call('POST', path(table, 'branches/create'), { name: 'dev2', from_branch: 'dev' }),
        ];
        const drop = await other.call('POST', path(table, 'drop'), {});
        expect(drop.status, drop.text).toBe(200);
        for (const w of await Promise.all(writes)) expect([200, 404, 409], w.text).toContain(w.status);
        expect((await fx.t.call('POST', path(table, 'exists'), {})).status).toBe(404);
        const again = await other.call('POST', path(table, 'create'), peopleStream([5]), ARROW);
        expect(again.status, again.text).toBe(200);
        expect((await fx.t.call('POST', path(table, 'branches/list'), {})).json.branches).toEqual({});
        expect((await fx.root.store.list(`branchy/${table}.lance/tree/`)).objects).toEqual([]);
        expect((await readRows(String(again.json.location), fx.root.store.engineStorageOptions())).map((r) => r.id)).toEqual([5]);
      }
    } finally {
      await other.close();
    }
  });

  it('CreateTableVersion racing a drop (a Lance client committing a managed table): never a revived table', async () => {
    await fx.t.call('POST', '/v1/namespace/commits/create', { properties: { managed_versioning: 'true' } });
    const path = (table: string, op: string) => `/v1/table/commits%24${table}/${op}`;
    const revived: number[] = [];
    for (let round = 0; round < rounds; round++) {
      const table = `t${round}`;
      expect((await fx.t.call('POST', path(table, 'declare'), {})).status).toBe(200);
      const staged = `_versions/1.manifest-${randomUUID()}`;
      await fx.root.store.put(`commits/${table}.lance/${staged}`, manifestBytes(1));
      const [commit, drop] = await Promise.all([
        fx.t.call('POST', path(table, 'version/create'), { version: 1, manifest_path: staged }),
        fx.t.call('POST', path(table, 'drop'), {}),
      ]);
      expect([200, 400, 404, 409], commit.text).toContain(commit.status);
      expect(drop.status, drop.text).toBe(200);
      if ((await fx.t.call('POST', path(table, 'describe'), {})).status !== 404) revived.push(round);
      // Declared afresh, the name holds no version of the dropped table.
      expect((await fx.t.call('POST', path(table, 'declare'), {})).status).toBe(200);
      expect((await fx.t.call('POST', path(table, 'version/list'), {})).json.versions).toEqual([]);
    }
    expect(revived, 'rounds in which the dropped table was visible again').toEqual([]);
  });

  it("a batch commit declares a dropped table's name afresh, and clears what the drop left", async () => {
    await fx.t.call('POST', '/v1/namespace/again/create', {});
    expect((await fx.t.call('POST', '/v1/table/again%24t/create', peopleStream([1]), ARROW)).status).toBe(200);
    expect((await fx.t.call('POST', '/v1/table/again%24t/drop', {})).status).toBe(200);
    const batch = await fx.t.call('POST', '/v1/table/batch-commit', { operations: [{ declare_table: { id: ['again', 't'], properties: { k: 'v' } } }] });
    expect(batch.status, batch.text).toBe(200);
    const described = await fx.t.call('POST', '/v1/table/again%24t/describe?check_declared=true', {});
    expect(described.status, described.text).toBe(200);
    expect(described.json).toMatchObject({ is_only_declared: true, properties: { k: 'v' } });
    expect(await fx.root.store.head('again/t.lance/.lance-deregistered')).toBeNull();
  });

  for (const managed of [false, true]) {
    it(`${rounds} rounds${managed ? ', managed versioning' : ''}: a dropped table stays dropped and its name holds only the new table`, async () => {
      // Managed versioning comes from the namespace's property.
      const ns = managed ? 'managed' : 'plain';
      const made = await fx.t.call('POST', `/v1/namespace/${ns}/create`, { properties: { managed_versioning: String(managed) } });
      expect(made.status, made.text).toBe(200);
      const path = (table: string, op: string) => `/v1/table/${ns}%24${table}/${op}`;
      const post = (table: string, op: string, body: unknown = {}) => fx.t.call('POST', path(table, op), body);
      const revived: number[] = [];
      for (let round = 0; round < rounds; round++) {
        const table = `t${round}`;
        const created = await fx.t.call('POST', path(table, 'create'), peopleStream([0, 1, 2, 3]), ARROW);
        expect(created.status, created.text).toBe(200);
        const writes = [
          fx.t.call('POST', path(table, 'insert'), peopleStream([10, 11]), ARROW),
          post(table, 'update', { updates: [['name', "concat(name, '-u')"]], predicate: 'id < 2' }),
          fx.t.call('POST', path(table, 'insert'), peopleStream([20]), ARROW),
          post(table, 'delete', { predicate: 'id = 3' }),
        ];
        const drop = await post(table, 'drop');
        const outcomes = await Promise.all(writes);
        for (const w of outcomes) expect([200, 404, 409], w.text).toContain(w.status);
        expect(drop.status, drop.text).toBe(200);
        const described = await post(table, 'describe');
        const listed = await fx.t.call('GET', `/v1/namespace/${ns}/table/list`);
        if (described.status !== 404 || (listed.json.tables as string[]).includes(table)) revived.push(round);
        // The name is free again, and then holds only the new table's rows.
        const again = await fx.t.call('POST', path(table, 'create'), peopleStream([100, 101]), ARROW);
        expect(again.status, again.text).toBe(200);
        expect(again.json.version).toBe(1);
        const rows = await readRows(String(again.json.location), fx.root.store.engineStorageOptions());
        expect(rows.map((r) => r.id)).toEqual([100, 101]);
      }
      expect(revived, 'rounds in which the dropped table was visible again').toEqual([]);
    });
  }
});
