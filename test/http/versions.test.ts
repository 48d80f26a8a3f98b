import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { manifestFileName, parseManifestFileName } from '../../src/engine/lance-format/manifest-names.js';
import { listAll } from '../../src/store/object-store.js';
import { committedVersions, useTestApp } from '../support/app.js';
import { backends } from '../support/backends.js';
import { manifestBytes } from '../support/manifests.js';

// Table versions over HTTP: the service as commit coordinator. Manifests here are minimal Lance
// manifest files: the service checks only that a staged manifest parses and names its version.

describe.each(backends())('table versions on $name', (backend) => {
  const fx = useTestApp(backend);
  let counter = 0;

  /** A declared table in its own namespace; returns helpers bound to it. */
  async function table() {
    const ns = `v${++counter}`;
    await fx.t.call('POST', `/v1/namespace/${ns}/create`, {});
    expect((await fx.t.call('POST', `/v1/table/${ns}%24t/declare`, {})).status).toBe(200);
    const dir = `${ns}/t.lance/`;
    const path = `/v1/table/${ns}%24t`;
    /** Stages bytes the way a Lance writer does, returns the path relative to the table. */
    const stage = async (version: number, body = manifestBytes(version)) => {
      const rel = `_versions/${version}.manifest-${randomUUID()}`;
      await fx.root.store.put(`${dir}${rel}`, body);
      return { rel, body };
    };
    const commit = async (version: number, extra: Record<string, unknown> = {}) => {
      const { rel } = await stage(version);
      return fx.t.call('POST', `${path}/version/create`, { version, manifest_path: rel, ...extra });
    };
    return { ns, dir, path, stage, commit };
  }

  it('commits a staged manifest as the next version, under the V2 name by default', async () => {
    const t = await table();
    const staged = await t.stage(1);
    const res = await fx.t.call('POST', `${t.path}/version/create`, {
      version: 1,
      manifest_path: fx.root.store.objectPath(`${t.dir}${staged.rel}`),
      metadata: { writer: 'test' },
      e_tag: 'client-etag',
      manifest_size: 14,
    });
    expect(res.status).toBe(200);
    const finalKey = `${t.dir}_versions/${manifestFileName(1, 'V2')}`;
    expect(res.json.version).toMatchObject({
      version: 1,
      manifest_path: fx.root.store.objectPath(finalKey),
      manifest_size: 14,
      e_tag: 'client-etag',
      metadata: { writer: 'test' },
    });
    expect((await fx.root.store.get(finalKey))?.body.equals(staged.body)).toBe(true);
    await fx.t.app.settled(); // the staged file is deleted after the answer
    expect(await fx.root.store.head(`${t.dir}${staged.rel}`)).toBeNull();
    expect(await fx.root.store.head(`${t.dir}.lance-reserved`)).toBeNull();
    expect((await fx.t.call('POST', `${t.path}/describe?check_declared=true`, {})).json.is_only_declared).toBe(false);
    const described = await fx.t.call('POST', `${t.path}/version/describe`, { version: 1 });
    expect(described.json.version).toEqual(res.json.version);
  });

  it('treats the same request again as a retry and other bytes for a taken version as a conflict', async () => {
    const t = await table();
    const bytes = manifestBytes(1);
    const staged = await t.stage(1, bytes);
    const body = { version: 1, manifest_path: staged.rel, manifest_size: bytes.length };
    expect((await fx.t.call('POST', `${t.path}/version/create`, body)).status).toBe(200);
    const retry = await fx.t.call('POST', `${t.path}/version/create`, body);
    expect(retry.status).toBe(200);
    expect(retry.json.version).toMatchObject({ version: 1 });
    const again = await t.stage(1, bytes);
    expect((await fx.t.call('POST', `${t.path}/version/create`, { version: 1, manifest_path: again.rel })).status).toBe(200);
    const other = await t.commit(1);
    expect(other.status).toBe(409);
    expect(other.json.code).toBe(14);
    expect((await fx.root.store.get(`${t.dir}_versions/${manifestFileName(1, 'V2')}`))?.body.equals(bytes)).toBe(true);
  });

  it('only accepts the next version, so the history has no gaps', async () => {
    const t = await table();
    const skip = await t.commit(2);
    expect(skip.status).toBe(409);
    expect(skip.json.code).toBe(14);
    for (let v = 1; v <= 3; v++) expect((await t.commit(v)).status).toBe(200);
    expect((await t.commit(5)).json.code).toBe(14);
    const list = await fx.t.call('GET', `${t.path}/version/list`);
    expect((list.json.versions as Array<{ version: number }>).map((v) => v.version)).toEqual([1, 2, 3]);
  });

  it('refuses staged paths outside the table directory and missing staged files', async () => {
    const t = await table();
    await fx.t.call('POST', `/v1/table/${t.ns}%24other/declare`, {});
    const elsewhere = `${t.ns}/other.lance/_versions/1.manifest-x`;
    await fx.root.store.put(elsewhere, 'x');
    for (const manifest_path of [
      fx.root.store.objectPath(elsewhere),
      '../other.lance/_versions/1.manifest-x',
      '_versions/../../other.lance/x',
      '/etc/passwd',
      'data/../../x',
    ]) {
      const res = await fx.t.call('POST', `${t.path}/version/create`, { version: 1, manifest_path });
      expect(res.status, manifest_path).toBe(400);
      expect(res.json.code, manifest_path).toBe(13);
    }
    const missing = await fx.t.call('POST', `${t.path}/version/create`, { version: 1, manifest_path: '_versions/1.manifest-nothing' });
    expect(missing.status).toBe(400);
    expect((await fx.t.call('GET', `${t.path}/version/list`)).json.versions).toEqual([]);
    const noTable = await fx.t.call('POST', `/v1/table/${t.ns}%24ghost/version/create`, { version: 1, manifest_path: '_versions/x' });
    expect(noTable.status).toBe(404);
    expect(noTable.json.code).toBe(4);
  });

  it('follows the naming scheme the table uses: V1 once it has V1 names', async () => {
    const t = await table();
    const first = await t.commit(1, { naming_scheme: 'v1' });
    expect(String((first.json.version as { manifest_path: string }).manifest_path)).toMatch(/_versions\/1\.manifest$/);
    const second = await t.commit(2);
    expect(String((second.json.version as { manifest_path: string }).manifest_path)).toMatch(/_versions\/2\.manifest$/);
    const third = await t.commit(3, { naming_scheme: 'V2' });
    expect(String((third.json.version as { manifest_path: string }).manifest_path)).toMatch(/_versions\/18446744073709551612\.manifest$/);
    const latest = await fx.t.call('POST', `${t.path}/version/list?descending=true&limit=1`);
    expect((latest.json.versions as Array<{ version: number }>).map((v) => v.version)).toEqual([3]);
    expect((await fx.t.call('POST', `${t.path}/version/describe`, {})).json.version).toMatchObject({ version: 3 });
    const bad = await t.commit(4, { naming_scheme: 'V3' });
    expect(bad.status).toBe(400);
    // Back to V1 after V2 is refused (the V1 name would sort where a LIST of the latest never looks), and changes nothing.
    const back = await t.commit(4, { naming_scheme: 'V1' });
    expect(back.status).toBe(400);
    expect(back.json.code).toBe(13);
    expect(String(back.json.error)).toMatch(/names its versions V2/);
    expect((await fx.t.call('POST', `${t.path}/version/describe`, {})).json.version).toMatchObject({ version: 3 });
    expect((await t.commit(4)).status).toBe(200);
  });

  it('lists versions ascending or descending with pages, on GET and bodyless POST', async () => {
    const t = await table();
    for (let v = 1; v <= 7; v++) expect((await t.commit(v)).status).toBe(200);
    const all = await fx.t.call('POST', `${t.path}/version/list`);
    expect((all.json.versions as Array<{ version: number }>).map((v) => v.version)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    for (const descending of [true, false]) {
      const seen: number[] = [];
      let token: unknown = null;
      do {
        const q = `?descending=${descending}&limit=3${token ? `&page_token=${encodeURIComponent(String(token))}` : ''}`;
        const res = await fx.t.call('GET', `${t.path}/version/list${q}`);
        const page = (res.json.versions as Array<{ version: number }>).map((v) => v.version);
        expect(page.length).toBeLessThanOrEqual(3);
        seen.push(...page);
        token = res.json.page_token;
      } while (token);
      expect(seen).toEqual(descending ? [7, 6, 5, 4, 3, 2, 1] : [1, 2, 3, 4, 5, 6, 7]);
    }
    const latest = await fx.t.call('POST', `${t.path}/version/list?descending=true&limit=1`);
    const next = await fx.t.call('POST', `${t.path}/version/list?descending=true&limit=1&page_token=${encodeURIComponent(String(latest.json.page_token))}`);
    expect((next.json.versions as Array<{ version: number }>).map((v) => v.version)).toEqual([6]);
    const missing = await fx.t.call('POST', `${t.path}/version/describe`, { version: 99 });
    expect(missing.status).toBe(404);
    expect(missing.json.code).toBe(11);
    // A branch the table does not have (branches: branch-versions.test.ts).
    const branch = await fx.t.call('POST', `${t.path}/version/list?branch=dev`);
    expect([branch.status, branch.json.code]).toEqual([404, 22]);
  });

  it('deletes version records in [start, end) ranges, -1 meaning through the latest', async () => {
    const t = await table();
    for (let v = 1; v <= 6; v++) await t.commit(v);
    const res = await fx.t.call('POST', `${t.path}/version/delete`, {
      ranges: [
        { start_version: 1, end_version: 3 },
        { start_version: 5, end_version: 6 },
      ],
    });
    expect(res.json).toEqual({ deleted_count: 3 });
    expect(((await fx.t.call('GET', `${t.path}/version/list`)).json.versions as Array<{ version: number }>).map((v) => v.version)).toEqual([3, 4, 6]);
    const bad = await fx.t.call('POST', `${t.path}/version/delete`, { ranges: [{ start_version: 5, end_version: 2 }] });
    expect(bad.status).toBe(400);
    const rest = await fx.t.call('POST', `${t.path}/version/delete`, { ranges: [{ start_version: 4, end_version: -1 }] });
    expect(rest.json).toEqual({ deleted_count: 2 });
    expect(((await fx.t.call('GET', `${t.path}/version/list`)).json.versions as Array<{ version: number }>).map((v) => v.version)).toEqual([3]);
  });

  it('of 20 concurrent writers of the next version exactly one wins; the others get 409 code 14', async () => {
    const t = await table();
    await t.commit(1);
    const staged = await Promise.all(Array.from({ length: 20 }, () => t.stage(2)));
    const results = await Promise.all(staged.map((s) => fx.t.call('POST', `${t.path}/version/create`, { version: 2, manifest_path: s.rel })));
    const ok = results.filter((r) => r.status === 200);
    expect(ok).toHaveLength(1);
    expect(results.filter((r) => r.status === 409).every((r) => r.json.code === 14)).toBe(true);
    const winner = staged[results.findIndex((r) => r.status === 200)];
    expect((await fx.root.store.get(`${t.dir}_versions/${manifestFileName(2, 'V2')}`))?.body.equals(winner?.body ?? Buffer.alloc(0))).toBe(true);
    expect((await fx.root.store.list(`${t.dir}_catalog/reservations/`, {})).objects).toEqual([]);
  });

  it('commits versions of several tables atomically and the transaction can be described', async () => {
    const a = await table();
    const b = await table();
    await a.commit(1);
    const sa = await a.stage(2);
    const sb = await b.stage(1);
    const res = await fx.t.call('POST', '/v1/table/version/batch-create', {
      entries: [
        { id: [a.ns, 't'], version: 2, manifest_path: sa.rel, metadata: { k: 'a' } },
        { id: [b.ns, 't'], version: 1, manifest_path: sb.rel },
      ],
    });
    expect(res.status).toBe(200);
    expect((res.json.versions as Array<{ version: number }>).map((v) => v.version)).toEqual([2, 1]);
    const txn = await fx.t.call('POST', `/v1/transaction/${res.json.transaction_id}/describe`, {});
    expect(txn.json).toMatchObject({ status: 'Succeeded', properties: { operation: 'batch_create_table_versions' } });
    expect((await fx.t.call('POST', `${a.path}/version/describe`, {})).json.version).toMatchObject({ version: 2, metadata: { k: 'a' } });
    expect(await fx.root.store.head(`${a.dir}${sa.rel}`)).toBeNull();
    // One entry that is not the next version: nothing is committed.
    const sa3 = await a.stage(3);
    const sb5 = await b.stage(5);
    const bad = await fx.t.call('POST', '/v1/table/version/batch-create', {
      entries: [
        { id: [a.ns, 't'], version: 3, manifest_path: sa3.rel },
        { id: [b.ns, 't'], version: 5, manifest_path: sb5.rel },
      ],
    });
    expect(bad.status).toBe(409);
    expect(bad.json.code).toBe(14);
    expect((await fx.t.call('POST', `${a.path}/version/describe`, {})).json.version).toMatchObject({ version: 2 });
    for (const t of [a, b]) expect((await fx.root.store.list(`${t.dir}_catalog/reservations/`, {})).objects).toEqual([]);
    expect((await fx.t.call('POST', `${a.path}/version/create`, { version: 3, manifest_path: sa3.rel })).status).toBe(200);
    const unknown = await fx.t.call('POST', '/v1/transaction/no-such-transaction/describe', {});
    expect(unknown.status).toBe(404);
    expect(unknown.json.code).toBe(10);
  });

  it('never lets two overlapping concurrent batches both commit the same slot', async () => {
    const [t0, t1, t2] = [await table(), await table(), await table()] as const;
    const tables = [t0, t1, t2];
    // Every pair of batches overlaps on one table.
    const pairs = [
      [t0, t1],
      [t1, t2],
      [t2, t0],
    ];
    for (let round = 0; round < 4; round++) {
      const version = round + 1;
      const batches = await Promise.all(
        pairs.map(async (pair) => {
          const entries = await Promise.all(pair.map(async (t) => ({ id: [t.ns, 't'], version, manifest_path: (await t.stage(version)).rel })));
          return fx.t.call('POST', '/v1/table/version/batch-create', { entries });
        }),
      );
      const winners = batches.filter((r) => r.status === 200);
      expect(winners.length).toBeLessThanOrEqual(1);
      const winningPair = pairs[batches.findIndex((r) => r.status === 200)] ?? [];
      for (const r of batches.filter((r) => r.status !== 200)) expect(r.json.code).toBe(14);
      // Every table holds the version iff a winning batch included it; nothing half-done.
      for (const [i, t] of tables.entries()) {
        const has = (await fx.t.call('POST', `${t.path}/version/describe`, { version })).status === 200;
        const inWinner = winningPair.includes(t);
        expect(has, `table ${i} version ${version}`).toBe(inWinner);
        // Bring every table to `version` so the next round starts level.
        if (!has) expect((await t.commit(version)).status).toBe(200);
      }
    }
  });
});

describe.each(backends())('batch commit of tables on $name', (backend) => {
  const fx = useTestApp(backend);

  const stage = async (dir: string, version: number) => {
    const rel = `_versions/${version}.manifest-${randomUUID()}`;
    await fx.root.store.put(`${dir}${rel}`, manifestBytes(version));
    return rel;
  };

  it('declares, commits, deletes versions and deregisters in one atomic step', async () => {
    await fx.t.call('POST', '/v1/namespace/bc/create', {});
    await fx.t.call('POST', '/v1/table/bc%24old/declare', {});
    for (let v = 1; v <= 3; v++) {
      const rel = await stage('bc/old.lance/', v);
      expect((await fx.t.call('POST', '/v1/table/bc%24old/version/create', { version: v, manifest_path: rel })).status).toBe(200);
    }
    await fx.t.call('POST', '/v1/table/bc%24gone/declare', {});
    const newRel = await stage('bc/fresh.lance/', 1);
    const oldRel = await stage('bc/old.lance/', 4);
    const res = await fx.t.call('POST', '/v1/table/batch-commit', {
      operations: [
        { declare_table: { id: ['bc', 'fresh'], properties: { k: 'v' } } },
        { create_table_version: { id: ['bc', 'fresh'], version: 1, manifest_path: newRel } },
        { create_table_version: { id: ['bc', 'old'], version: 4, manifest_path: oldRel } },
        { delete_table_versions: { id: ['bc', 'old'], ranges: [{ start_version: 1, end_version: 3 }] } },
        { deregister_table: { id: ['bc', 'gone'] } },
      ],
    });
    expect(res.status).toBe(200);
    const results = res.json.results as Array<Record<string, Record<string, unknown>>>;
    expect(results.map((r) => Object.keys(r)[0])).toEqual([
      'declare_table',
      'create_table_version',
      'create_table_version',
      'delete_table_versions',
      'deregister_table',
    ]);
    expect(results[0]?.declare_table).toMatchObject({ properties: { k: 'v' }, managed_versioning: false });
    expect(results[3]?.delete_table_versions).toEqual({ deleted_count: 2 });
    expect((await fx.t.call('POST', '/v1/table/bc%24fresh/describe', {})).json.properties).toEqual({ k: 'v' });
    expect(((await fx.t.call('GET', '/v1/table/bc%24fresh/version/list')).json.versions as Array<{ version: number }>).map((v) => v.version)).toEqual([1]);
    expect(((await fx.t.call('GET', '/v1/table/bc%24old/version/list')).json.versions as Array<{ version: number }>).map((v) => v.version)).toEqual([3, 4]);
    expect((await fx.t.call('POST', '/v1/table/bc%24gone/exists', {})).status).toBe(404);
    const txn = await fx.t.call('POST', `/v1/transaction/${res.json.transaction_id}/describe`, {});
    expect(txn.json).toMatchObject({ status: 'Succeeded', properties: { operation: 'batch_commit_tables' } });
  });

  it('applies nothing when one operation fails, and frees what it claimed', async () => {
    await fx.t.call('POST', '/v1/namespace/bf/create', {});
    await fx.t.call('POST', '/v1/table/bf%24taken/declare', {});
    await fx.t.call('POST', '/v1/table/bf%24keep/declare', {});
    const rel = await stage('bf/newbie.lance/', 1);
    const res = await fx.t.call('POST', '/v1/table/batch-commit', {
      operations: [
        { declare_table: { id: ['bf', 'newbie'] } },
        { create_table_version: { id: ['bf', 'newbie'], version: 1, manifest_path: rel } },
        { deregister_table: { id: ['bf', 'keep'] } },
        { declare_table: { id: ['bf', 'taken'] } },
      ],
    });
    expect(res.status).toBe(409);
    expect(res.json.code).toBe(5);
    expect((await fx.t.call('POST', '/v1/table/bf%24newbie/exists', {})).status).toBe(404);
    expect((await fx.t.call('POST', '/v1/table/bf%24keep/exists', {})).status).toBe(200);
    expect(await fx.root.store.head('bf/newbie.lance/.lance-table.json')).toBeNull();
    expect((await fx.root.store.list('bf/newbie.lance/_catalog/', {})).objects).toEqual([]);
    // The name is free again.
    expect((await fx.t.call('POST', '/v1/table/bf%24newbie/declare', {})).status).toBe(200);
    const bad = await fx.t.call('POST', '/v1/table/batch-commit', {
      operations: [{ declare_table: { id: ['bf', 'x'] }, deregister_table: { id: ['bf', 'keep'] } }],
    });
    expect(bad.status).toBe(400);
    expect(bad.json.code).toBe(13);
  });
});

describe.each(backends())('the service’s own writes to managed tables on $name', (backend) => {
  const fx = useTestApp(backend);

  it('commit through the same version path as clients (counted as commits, every staged manifest consumed)', async () => {
    const { peopleStream, readRows } = await import('../support/arrow-data.js');
    const before = await committedVersions(fx.t);
    await fx.t.call('POST', '/v1/namespace/own/create', { properties: { managed_versioning: 'true' } });
    const arrow = { 'content-type': 'application/vnd.apache.arrow.stream' };
    const created = await fx.t.call('POST', '/v1/table/own%24t/create', peopleStream([1, 2]), arrow);
    expect(created.status).toBe(200);
    expect(created.json.version).toBe(1);
    const overwritten = await fx.t.call('POST', '/v1/table/own%24t/create?mode=overwrite', peopleStream([3]), arrow);
    expect(overwritten.json.version).toBe(2);
    expect((await committedVersions(fx.t)) - before).toBe(2);
    expect((await fx.root.store.list('own/t.lance/_versions/', {})).objects.filter((o) => o.key.includes('.manifest-'))).toEqual([]);
    expect((await readRows(String(created.json.location), fx.root.store.engineStorageOptions())).map((r) => r.id)).toEqual([3]);
  });
});

describe.each(backends())('CreateTableVersion consumes only staged manifests on $name', (backend) => {
  const fx = useTestApp(backend);
  const arrow = { 'content-type': 'application/vnd.apache.arrow.stream' };

  it('answers 400 code 13 for any other file, deletes and writes nothing, and the table stays readable', async () => {
    const { peopleStream, readRows } = await import('../support/arrow-data.js');
    await fx.t.call('POST', '/v1/namespace/sg/create', {});
    expect((await fx.t.call('POST', '/v1/table/sg%24t/declare', { properties: { k: 'v' } })).status).toBe(200);
    const inserted = await fx.t.call('POST', '/v1/table/sg%24t/insert', peopleStream([1, 2, 3]), arrow);
    expect(inserted.status, inserted.text).toBe(200);
    await fx.t.app.settled(); // what the insert's commit left for after its answer
    const dir = 'sg/t.lance/';
    const location = fx.root.store.location(dir.slice(0, -1));
    const keys = (await listAll(fx.root.store, dir)).objects.map((o) => o.key);
    const versionsDir = `${dir}_versions/`;
    const committed = keys.find((k) => k.startsWith(versionsDir) && parseManifestFileName(k.slice(versionsDir.length))?.version === 1);
    const dataFile = keys.find((k) => k.startsWith(`${dir}data/`));
    if (!committed || !dataFile) throw new Error(`no committed manifest or data file among ${keys.join(', ')}`);
    expect(keys).toContain(`${dir}.lance-table.json`);
    const committedBytes = (await fx.root.store.get(committed))?.body ?? Buffer.alloc(0);
    const index = `${dir}_indices/${randomUUID()}/index.idx`;
    await fx.root.store.put(index, manifestBytes(2));
    const garbage = `${versionsDir}2.manifest-${randomUUID()}`;
    await fx.root.store.put(garbage, 'not a manifest');
    const wrongVersion = `${versionsDir}2.manifest-${randomUUID()}`;
    await fx.root.store.put(wrongVersion, committedBytes);
    const detached = `${versionsDir}d${Date.now()}.manifest`;
    await fx.root.store.put(detached, manifestBytes(2));

    const cases: Array<[string, string, number]> = [
      ['a data file', dataFile, 2],
      ['the committed manifest, as the next version', committed, 2],
      ['the committed manifest, as its own version', committed, 1],
      ['the V1 name of version 1', `${versionsDir}${manifestFileName(1, 'V1')}`, 1],
      ['the V2 name of version 1', `${versionsDir}${manifestFileName(1, 'V2')}`, 1],
      ['the V1 name of version 1, as the next version', `${versionsDir}${manifestFileName(1, 'V1')}`, 2],
      ['the table record', `${dir}.lance-table.json`, 2],
      ['a file in _indices/', index, 2],
      ['a detached manifest', detached, 2],
      ['the latest-version hint', `${versionsDir}latest_version_hint.json`, 2],
      ['a staged file with garbage bytes', garbage, 2],
      ['a staged manifest of another version', wrongVersion, 2],
    ];
    const before = new Map<string, Buffer | null>();
    for (const [, key] of cases) before.set(key, (await fx.root.store.get(key))?.body ?? null);
    const newStaged = `_versions/1.manifest-${randomUUID()}`;
    await fx.root.store.put(`sg/fresh.lance/${newStaged}`, 'garbage');
    const allKeys = async () => (await listAll(fx.root.store, '')).objects.map((o) => o.key).sort();
    const everything = await allKeys();
    for (const [what, key, version] of cases) {
      for (const manifest_path of [fx.root.store.objectPath(key), key.slice(dir.length)]) {
        const res = await fx.t.call('POST', '/v1/table/sg%24t/version/create', { version, manifest_path });
        expect(res.status, `${what} (${manifest_path}): ${res.text}`).toBe(400);
        expect(res.json.code, what).toBe(13);
      }
      const after = (await fx.root.store.get(key))?.body ?? null;
      expect(after === null ? null : after.equals(before.get(key) ?? Buffer.alloc(0)), `${what} is unchanged`).toBe(before.get(key) === null ? null : true);
    }
    // The batch paths check the same before they write a record or claim anything.
    const batch = await fx.t.call('POST', '/v1/table/version/batch-create', {
      entries: [{ id: ['sg', 't'], version: 2, manifest_path: dataFile.slice(dir.length) }],
    });
    expect(batch.status, batch.text).toBe(400);
    expect(batch.json.code).toBe(13);
    const commit = await fx.t.call('POST', '/v1/table/batch-commit', {
      operations: [
        { declare_table: { id: ['sg', 'fresh'] } },
        { create_table_version: { id: ['sg', 'fresh'], version: 1, manifest_path: newStaged } },
        { create_table_version: { id: ['sg', 't'], version: 2, manifest_path: wrongVersion.slice(dir.length) } },
      ],
    });
    expect(commit.status, commit.text).toBe(400);
    expect(commit.json.code).toBe(13);
    // Nothing was written anywhere: no transaction record, reservation, table record or version.
    expect(await allKeys()).toEqual([...everything].sort());
    expect((await fx.t.call('POST', '/v1/table/sg%24fresh/exists', {})).status).toBe(404);
    expect(((await fx.t.call('GET', '/v1/table/sg%24t/version/list')).json.versions as Array<{ version: number }>).map((v) => v.version)).toEqual([1]);
    expect((await readRows(location, fx.root.store.engineStorageOptions())).map((r) => r.id)).toEqual([1, 2, 3]);
    expect((await fx.t.call('POST', '/v1/table/sg%24t/describe', {})).json.properties).toEqual({ k: 'v' });
    // A real staged manifest of the right version is still committed, and only it is consumed.
    const good = `${versionsDir}2.manifest-${randomUUID()}`;
    await fx.root.store.put(good, manifestBytes(2));
    expect((await fx.t.call('POST', '/v1/table/sg%24t/version/create', { version: 2, manifest_path: good.slice(dir.length) })).status).toBe(200);
    // Deleted after the answer (service/versions/after-answer.ts).
    await fx.t.app.settled();
    expect(await fx.root.store.head(good)).toBeNull();
  });
});
