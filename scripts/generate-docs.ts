import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { configurationPage, PAGE, README, readmeOptions, withReadmeOptions } from './lib/configuration-page.js';

// `npm run docs`: writes docs/configuration.md and the README's table of the options changed first
// from the option table (src/config/options.ts, src/config/sections.ts).

const root = path.join(import.meta.dirname, '..');
writeFileSync(path.join(root, PAGE), configurationPage());
const readme = path.join(root, README);
writeFileSync(readme, withReadmeOptions(readFileSync(readme, 'utf8'), readmeOptions()));
console.log(`wrote ${PAGE} and the options of ${README}`);
