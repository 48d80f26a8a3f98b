// Only the catalog's own places are reached: a registered location is inside the
// root or under a configured allowed location, a symbolic link cannot lead out of either, and a
// client's storage options never change where the engine connects or with which credentials.

import { symlink } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/app.js';
import { peopleStream, readRows } from '../support/arrow-data.js';
import { backends, localBackend, type TestRoot } from '../support/backends.js';

const ARROW = { 'content-type': 'application/vnd.apache.arrow.stream' };

describe.each(backends())("only the catalog's own places are reached on $name", (backend) => {
  let root: TestRoot;
  let outside: TestRoot;
  let app: TestApp;
  let elsewhere: TestApp;
  /** A Lance dataset in another root: outside `root`. */
  let foreign: string;

  beforeAll(async () => {
    [root, outside] = await Promise.all([backend.newRoot(), backend.newRoot()]);
    [app, elsewhere] = await Promise.all([startTestApp(root), startTestApp(outside)]);
    await app.call('POST', '/v1/namespace/ns/create', {});
    await elsewhere.call('POST', '/v1/namespace/ns/create', {});
    const made = await elsewhere.call('POST', '/v1/table/ns%24t/create', peopleStream([1, 2]), ARROW);
    expect(made.status, made.text).toBe(200);
    foreign = String(made.json.location);
  });
  afterAll(async () => {
    await Promise.all([app?.close(), elsewhere?.close()]);
    await Promise.all([root?.dispose(), outside?.dispose()]);
  });

  it('refuses a location outside the root, and registers it once it is an allowed location', async () => {
    const refused = await app.call('POST', '/v1/table/ns%24reg/register', { location: foreign });
    expect(refused.status, refused.text).toBe(400);
    expect(refused.json.code).toBe(13);
    expect(String(refused.json.error)).toMatch(/outside the catalog root/);
    expect((await app.call('POST', '/v1/table/ns%24reg/exists', {})).status).toBe(404);
    // Climbing out of the root by `..` in an absolute location is the same place.
    const climbing = backend === localBackend ? `${root.root}/ns/../../${path.basename(outside.root)}/ns/t.lance` : `${root.root}/../x`;
    expect((await app.call('POST', '/v1/table/ns%24reg/register', { location: climbing })).status).toBe(400);
    // Another bucket, another scheme.
    for (const location of ['s3://some-other-bucket/t.lance', 'gs://bucket/t.lance', 'http://127.0.0.1:1/t.lance']) {
      const res = await app.call('POST', '/v1/table/ns%24reg/register', { location });
      expect(res.status, location).toBe(400);
      expect(res.json.code, location).toBe(13);
    }
    const allowing = await startTestApp(root, { allowedLocations: [outside.root] });
    try {
      const registered = await allowing.call('POST', '/v1/table/ns%24reg/register', { location: foreign });
      expect(registered.status, registered.text).toBe(200);
      expect((await allowing.call('POST', '/v1/table/ns%24reg/count_rows', {})).json).toEqual({ value: 2 });
      expect((await allowing.call('POST', '/v1/table/ns%24reg/deregister', {})).status).toBe(200);
    } finally {
      await allowing.close();
    }
  });

  it.runIf(backend === localBackend)('refuses a location inside the root that a symbolic link takes outside it', async () => {
    await symlink(foreign, path.join(root.root, 'ns', 'linked'));
    // Relative locations are in the namespace's directory: 'linked' is ns/linked.
    for (const location of ['linked', path.join(root.root, 'ns', 'linked'), `file://${path.join(root.root, 'ns', 'linked')}`, 'linked/data']) {
      const res = await app.call('POST', '/v1/table/ns%24linked/register', { location });
      expect(res.status, location).toBe(400);
      expect(res.json.code, location).toBe(13);
      expect(String(res.json.error), location).toMatch(/symbolic link/);
    }
    expect((await app.call('POST', '/v1/table/ns%24linked/exists', {})).status).toBe(404);
  });

  it("ignores a client's storage options that would change where or as whom the engine connects", async () => {
    // A listener standing in for an attacker's endpoint: it must hear nothing.
    const heard: string[] = [];
    const listener = http.createServer((req, res) => {
      heard.push(`${req.method} ${req.url}`);
      res.writeHead(500).end();
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const { port } = listener.address() as AddressInfo;
    try {
      const options = { aws_endpoint: `http://127.0.0.1:${port}`, aws_access_key_id: 'x', aws_secret_access_key: 'y', allow_http: 'true', timeout: '60s' };
      const res = await app.call('POST', `/v1/table/ns%24opts/create?storage_options=${encodeURIComponent(JSON.stringify(options))}`, peopleStream([7]), ARROW);
      expect(res.status, res.text).toBe(200);
      expect(heard).toEqual([]);
      expect(String(res.json.location)).toBe(root.store.location('ns/opts.lance'));
      expect((await readRows(String(res.json.location), root.store.engineStorageOptions())).map((r) => r.id)).toEqual([7]);
    } finally {
      await new Promise<void>((resolve) => listener.close(() => resolve()));
    }
  });
});
