// The web console's files (src/http/console.ts): served at /ui by default on loopback and only when
// asked elsewhere; the page revalidated, the hashed assets kept; every file under a CSP that lets
// the page load nothing from another origin. What the page does is in test/browser/console.test.ts.

import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DIR } from '../../src/app.js';
import { CONFIG_HELP, loadConfig } from '../../src/config.js';
import { CONSOLE_CSP, useConsole } from '../../src/http/console.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { localBackend, type TestRoot } from '../support/backends.js';

describe('console files', () => {
  let root: TestRoot;
  let app: TestApp;
  let off: TestApp;
  let exposed: TestApp;
  let exposedOn: TestApp;

  beforeAll(async () => {
    root = await localBackend.newRoot();
    [app, off, exposed, exposedOn] = await Promise.all([
      startTestApp(root),
      startTestApp(root, { ui: false }),
      startTestApp(root, { host: '0.0.0.0' }),
      startTestApp(root, { host: '0.0.0.0', ui: true }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([app?.close(), off?.close(), exposed?.close(), exposedOn?.close()]);
    await root?.dispose();
  });

  /** The asset paths the page names. */
  const assetsOf = (html: string): string[] => [...html.matchAll(/(?:src|href)="(\/ui\/assets\/[^"]+)"/g)].map((m) => m[1] as string);

  it('serves the page at /ui with no-cache, and its hashed assets as immutable, with their types', async () => {
    for (const url of ['/ui', '/ui/']) {
      const page = await app.call('GET', url);
      expect(page.status, url).toBe(200);
      expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(page.headers['cache-control']).toBe('no-cache');
      expect(page.headers['x-content-type-options']).toBe('nosniff');
      expect(page.headers['referrer-policy']).toBe('no-referrer');
      expect(page.text).toContain('<div id="app">');
    }
    const assets = assetsOf((await app.call('GET', '/ui')).text);
    expect(assets.map((a) => path.extname(a)).sort()).toEqual(['.css', '.js']);
    for (const asset of assets) {
      expect(path.basename(asset)).toMatch(/^app-[A-Z0-9]{8}\.(js|css)$/);
      const res = await app.call('GET', asset);
      expect(res.status, asset).toBe(200);
      expect(res.headers['content-type']).toBe(asset.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8');
      expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['content-security-policy']).toBe(CONSOLE_CSP);
      expect(res.text.length).toBeGreaterThan(1000);
    }
    const missing = await app.call('GET', '/ui/assets/app-NOTTHERE.js');
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ code: 0, status: 404, instance: '/ui/assets/app-NOTTHERE.js' });
    expect(missing.headers['cache-control']).toBeUndefined();
  });

  it("serves the chunks the script loads on demand (the jobs list's Arrow reader), as immutable assets too", async () => {
    const script = assetsOf((await app.call('GET', '/ui')).text).find((a) => a.endsWith('.js')) as string;
    const source = (await app.call('GET', script)).text;
    // esbuild's relative imports: `import("./chunk-X.js")` (on demand) and `from"./chunk-X.js"` / `import"./chunk-X.js"`.
    const chunks = [...new Set([...source.matchAll(/["']\.\/(chunk-[A-Z0-9]{8}\.js)["']/g)].map((m) => m[1] as string))];
    expect(source).toMatch(/import\("\.\/chunk-[A-Z0-9]{8}\.js"\)/);
    for (const chunk of chunks) {
      const res = await app.call('GET', `/ui/assets/${chunk}`);
      expect(res.status, chunk).toBe(200);
      expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
      expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(res.headers['content-security-policy']).toBe(CONSOLE_CSP);
    }
    // The page's own script stays small: the Arrow reader is in a chunk of its own.
    const sizes = await Promise.all(chunks.map(async (c) => (await app.call('GET', `/ui/assets/${c}`)).text.length));
    expect(Math.max(...sizes)).toBeGreaterThan(source.length);
  });

  it('forbids every other origin through its CSP, and names none itself', async () => {
    const page = await app.call('GET', '/ui');
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toBe(CONSOLE_CSP);
    const directives = new Map(
      csp
        .split(';')
        .map((d) => d.trim().split(/\s+/))
        .map(([name, ...sources]) => [name as string, sources]),
    );
    expect(directives.get('default-src')).toEqual(["'none'"]);
    for (const name of ['script-src', 'style-src', 'connect-src']) expect(directives.get(name), name).toEqual(["'self'"]);
    expect(directives.get('frame-ancestors')).toEqual(["'none'"]);
    // No directive lets in a host, a scheme of the network, a wildcard, inline code or eval.
    for (const [name, sources] of directives) {
      for (const source of sources) expect(["'self'", "'none'", 'data:'], `${name} ${source}`).toContain(source);
    }
    expect(directives.get('img-src')).toEqual(["'self'", 'data:']);
    // The page and its stylesheet fetch nothing from elsewhere (no CDN, no web font).
    expect(page.text).not.toMatch(/(src|href)="(https?:)?\/\//);
    const css = (await app.call('GET', assetsOf(page.text).find((a) => a.endsWith('.css')) as string)).text;
    expect(css).not.toMatch(/@import|url\(\s*['"]?(https?:)?\/\/|@font-face/);
  });

  it('is not served when turned off, nor by default on a non-loopback address unless asked for', async () => {
    for (const t of [off, exposed]) {
      for (const url of ['/ui', '/ui/', assetsOf((await app.call('GET', '/ui')).text)[0] as string]) {
        const res = await t.call('GET', url);
        expect(res.status, url).toBe(404);
        expect(res.json).toMatchObject({ code: 0, status: 404 });
        expect(res.headers['content-security-policy']).toBeUndefined();
      }
    }
    expect((await exposedOn.call('GET', '/ui')).status).toBe(200);
    // The API is the same either way.
    expect((await off.call('GET', '/v1/namespace/%24/list')).status).toBe(200);
  });

  it('answers 503 naming the build when the console was not built', async () => {
    const server = Fastify();
    useConsole(server, { dir: mkdtempSync(path.join(os.tmpdir(), 'lance-ns-no-console-')) });
    const res = await server.inject({ method: 'GET', url: '/ui' });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ code: 17, error: expect.stringMatching(/npm run build/) });
    await server.close();
    expect(CONSOLE_DIR).toMatch(/dist[/\\]ui[/\\]?$/);
  });

  it('takes --ui, LANCE_NS_UI and the file key ui; defaults to on only on loopback', () => {
    expect(loadConfig([], {}).ui).toBeUndefined();
    expect(loadConfig(['--ui', 'false'], {}).ui).toBe(false);
    expect(loadConfig(['--ui', 'true', '--host', '0.0.0.0'], {}).ui).toBe(true);
    expect(loadConfig([], { LANCE_NS_UI: 'true' }).ui).toBe(true);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'lance-ns-config-'));
    const file = path.join(dir, 'c.yaml');
    writeFileSync(file, 'host: 0.0.0.0\nui: true\n');
    expect(loadConfig(['--config', file], {}).ui).toBe(true);
    expect(loadConfig(['--config', file, '--ui', 'false'], {}).ui).toBe(false);
    expect(CONFIG_HELP).toMatch(/--ui <true\|false>.*\/ui/);
  });
});
