import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

// Bundles the web console (ui/, TypeScript + preact) into dist/ui/: index.html and content-hashed
// assets under assets/, which src/http/console.ts serves at /ui. Run by `npm run build` and by the
// test setup (test/support/global-setup.ts); it takes well under a second. What a page imports
// dynamically (the Arrow reader of the jobs list, ui/job-rows.ts) is a chunk of its own, loaded
// only when that page is shown: apache-arrow is three times the size of the rest of the console.

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const CONSOLE_OUT = path.join(repo, 'dist', 'ui');

export interface ConsoleBuild {
  outDir: string;
  /** Asset file names (under assets/): the page's script, its style, then the chunks the script loads on demand. */
  assets: string[];
  bytes: number;
  /** Bytes of the page's script and style (what every page loads). */
  pageBytes: number;
}

const page = (script: string, style: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Lance Namespace console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/ui/assets/${style}">
<script type="module" src="/ui/assets/${script}"></script>
</head>
<body>
<div id="app"><noscript>The console needs JavaScript.</noscript></div>
</body>
</html>
`;

/** Builds the console into `outDir` (default dist/ui/); files of earlier builds that the new page does not name are removed. */
export async function buildConsole(outDir = CONSOLE_OUT): Promise<ConsoleBuild> {
  const result = await build({
    absWorkingDir: repo,
    entryPoints: { app: 'ui/main.tsx' },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: true,
    legalComments: 'none',
    entryNames: '[name]-[hash]',
    chunkNames: 'chunk-[hash]',
    splitting: true,
    outdir: path.join(outDir, 'assets'),
    write: false,
    logLevel: 'silent',
  });
  const assets = result.outputFiles.map((f) => ({ name: path.basename(f.path), contents: f.contents }));
  const script = assets.find((a) => a.name.startsWith('app-') && a.name.endsWith('.js'));
  const style = assets.find((a) => a.name.endsWith('.css'));
  const chunks = assets.filter((a) => a.name.startsWith('chunk-') && a.name.endsWith('.js'));
  if (!script || !style || chunks.length + 2 !== assets.length) {
    throw new Error(`the console build made ${assets.map((a) => a.name).join(', ')}: expected app-*.js, one .css and chunk-*.js`);
  }
  const assetDir = path.join(outDir, 'assets');
  await mkdir(assetDir, { recursive: true });
  // Assets first (their names are their content), the page that names them last, each file
  // written aside and renamed into place: a server reading the directory meanwhile (a test app
  // starting while another run builds) sees the old build or the new one, whole.
  const put = async (file: string, contents: Uint8Array | string) => {
    const staged = path.join(path.dirname(file), `.${path.basename(file)}-${process.pid}`);
    await writeFile(staged, contents);
    await rename(staged, file);
  };
  for (const a of assets) await put(path.join(assetDir, a.name), a.contents);
  await put(path.join(outDir, 'index.html'), page(script.name, style.name));
  const keep = new Set(assets.map((a) => a.name));
  // Earlier builds' assets (and what a killed build left aside) go; a page being served names only its own.
  for (const name of await readdir(assetDir)) if (!keep.has(name) && !name.startsWith('.')) await rm(path.join(assetDir, name), { force: true });
  return {
    outDir,
    assets: [script.name, style.name, ...chunks.map((c) => c.name)],
    bytes: assets.reduce((n, a) => n + a.contents.length, 0),
    pageBytes: script.contents.length + style.contents.length,
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = performance.now();
  const built = await buildConsole(process.argv[2] ? path.resolve(process.argv[2]) : undefined);
  const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
  console.log(
    `console: ${built.assets.join(', ')} (${kib(built.bytes)}, of which the page loads ${kib(built.pageBytes)}) in ${path.relative(repo, built.outDir)} (${Math.round(performance.now() - started)} ms)`,
  );
}
