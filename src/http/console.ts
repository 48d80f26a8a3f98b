import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { wireError } from './errors.js';

// The read-only web console at /ui: static files that scripts/build-ui.ts bundled from ui/ into
// dist/ui/ (index.html and content-hashed assets). The page talks only to the REST API of this same
// origin, with the credentials its user types in, so it shows what any client would see and can do
// no more than the credentials allow. This module only serves the files: nothing of the console runs
// in the server.

export interface ConsoleOptions {
  /** The built console (index.html, assets/). */
  dir: string;
}

/** Where the console may load anything from: this origin only (no CDN, no external fonts, no inline script). */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

interface StaticFile {
  body: Buffer;
  type: string;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

/** Reads the built console into memory (it is small); null when it was not built. */
function readConsole(dir: string): { index: Buffer; assets: Map<string, StaticFile> } | null {
  const indexPath = path.join(dir, 'index.html');
  if (!existsSync(indexPath)) return null;
  const assets = new Map<string, StaticFile>();
  const assetDir = path.join(dir, 'assets');
  for (const name of existsSync(assetDir) ? readdirSync(assetDir) : []) {
    const type = TYPES[path.extname(name)];
    if (type) assets.set(name, { body: readFileSync(path.join(assetDir, name)), type });
  }
  return { index: readFileSync(indexPath), assets };
}

function securityHeaders(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', CONSOLE_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('x-frame-options', 'DENY');
}

/** Serves the console at /ui (the page) and /ui/assets/* (its bundle). */
export function useConsole(app: FastifyInstance, options: ConsoleOptions): void {
  const built = readConsole(options.dir);
  app.get('/ui', async (_request, reply) => {
    if (!built) {
      const { status, body } = wireError(503, 17, 'the console is not built: run `npm run build` (it bundles ui/ into dist/ui/)', '/ui');
      return reply.code(status).type('application/json').send(body);
    }
    // The page is tiny and names the current bundle: always revalidated, so a new build shows at once.
    return securityHeaders(reply)
      .header('cache-control', 'no-cache')
      .type(TYPES['.html'] as string)
      .send(built.index);
  });
  app.get<{ Params: { file: string } }>('/ui/assets/:file', async (request, reply) => {
    const file = built?.assets.get(request.params.file);
    if (!file) {
      const path = request.url.split('?')[0] ?? request.url;
      const { status, body } = wireError(404, 0, `no such console file: ${path}`, path);
      return reply.code(status).type('application/json').send(body);
    }
    // Asset names carry a hash of their content: they never change, so browsers keep them.
    return securityHeaders(reply).header('cache-control', 'public, max-age=31536000, immutable').type(file.type).send(file.body);
  });
}
