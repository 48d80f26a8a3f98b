// Prints the import circles among the TypeScript modules under a directory (default src/), type-only
// imports included, and exits 1 when there is one. A stand-in for `madge --circular` that needs no
// package: relative `import ... from` and `export ... from` specifiers are followed, others ignored.
//
//   npx tsx scripts/import-cycles.ts [dir]

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(process.argv[2] ?? 'src');
const files = (readdirSync(root, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts')).map((f) => path.join(root, f));
const edges = new Map<string, string[]>();
for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const targets = [...text.matchAll(/^(?:import|export)\s[^;]*?from\s+'(\.[^']+)'/gms)].map((m) =>
    path.resolve(path.dirname(file), (m[1] ?? '').replace(/\.js$/, '.ts')),
  );
  edges.set(
    file,
    targets.filter((t) => files.includes(t)),
  );
}

// Depth-first search; a back edge to a module on the current path closes a circle.
const cycles: string[][] = [];
const state = new Map<string, 'open' | 'done'>();
const stack: string[] = [];
const visit = (file: string): void => {
  state.set(file, 'open');
  stack.push(file);
  for (const next of edges.get(file) ?? []) {
    if (state.get(next) === 'open') cycles.push([...stack.slice(stack.indexOf(next)), next]);
    else if (!state.has(next)) visit(next);
  }
  stack.pop();
  state.set(file, 'done');
};
for (const file of files) if (!state.has(file)) visit(file);

for (const cycle of cycles) process.stdout.write(`${cycle.map((f) => path.relative(root, f)).join(' -> ')}\n`);
process.stdout.write(`${cycles.length} import circle(s) under ${path.relative(process.cwd(), root) || '.'}\n`);
process.exitCode = cycles.length > 0 ? 1 : 0;
