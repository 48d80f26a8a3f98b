// Times a LIST of one page from a large local directory (a `_versions/` with 100k entries), cold
// (first read after a change) and warm, with and without sizes. Not a test: prints figures.
//   npx tsx scripts/bench-list.ts [entries=100000] [pageSize=100]
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalObjectStore } from '../src/store/local-store.js';
import { timeRuns } from './bench-support.js';

const entries = Number(process.argv[2] ?? 100_000);
const pageSize = Number(process.argv[3] ?? 100);
const root = await fs.mkdtemp(path.join(os.tmpdir(), 'bench-list-'));
const dir = path.join(root, 't.lance', '_versions');
await fs.mkdir(dir, { recursive: true });
// Lance's V2 names: the newest version sorts first.
const name = (v: number) => `${(2n ** 64n - 1n - BigInt(v)).toString().padStart(20, '0')}.manifest`;
for (let i = 0; i < entries; i += 1000) {
  await Promise.all(Array.from({ length: Math.min(1000, entries - i) }, (_, j) => fs.writeFile(path.join(dir, name(i + j)), '')));
}
// Let the directory's mtime age past the store's trust margin, as a directory between commits does.
await new Promise((r) => setTimeout(r, 300));
const store = new LocalObjectStore(root);
const prefix = 't.lance/_versions/';
const middle = `${prefix}${name(Math.floor(entries / 2))}`;
console.log(`${entries} entries, pages of ${pageSize}`);
await timeRuns('first page, cold (directory read and sorted)', 1, () => store.list(prefix, { delimiter: '/', maxKeys: pageSize }));
await timeRuns('first page, warm', 50, () => store.list(prefix, { delimiter: '/', maxKeys: pageSize }));
await timeRuns('page after a startAfter in the middle, warm', 50, () => store.list(prefix, { delimiter: '/', maxKeys: pageSize, startAfter: middle }));
await timeRuns('first page with sizes (stat per entry), warm', 20, () => store.list(prefix, { delimiter: '/', maxKeys: pageSize, details: true }));
await fs.writeFile(path.join(dir, name(entries)), '');
await timeRuns('first page right after one new entry (re-read, merged)', 1, () => store.list(prefix, { delimiter: '/', maxKeys: pageSize }));
await fs.rm(root, { recursive: true, force: true });
