import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// The helpers the services share keep state a reader would otherwise have to prove consistent
// across copies (the listing index's snapshot cache): each is built in one place, once per
// process (catalogDeps, called by app.ts), and handed down in CatalogDeps.

const src = path.join(import.meta.dirname, '../../src');
const files = (readdirSync(src, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts'));
/** The files of src/ whose code (comments aside) matches `pattern`. */
const filesWith = (pattern: RegExp): string[] =>
  files.filter((f) => pattern.test(readFileSync(path.join(src, f), 'utf8').replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, ''))).map((f) => f.split(path.sep).join('/'));

describe('the helpers the services share', () => {
  it('TableFences and ListingIndex are built by catalogDeps only, and catalogDeps is called by app.ts only', () => {
    expect(filesWith(/new TableFences\(/)).toEqual(['service/catalog/catalog-deps.ts']);
    expect(filesWith(/new ListingIndex\(/)).toEqual(['service/catalog/catalog-deps.ts']);
    expect(filesWith(/\bcatalogDeps\(/).sort()).toEqual(['app.ts', 'service/catalog/catalog-deps.ts']);
  });

  it("the listing index's snapshot cache is built by the ListingIndex only", () => {
    expect(filesWith(/new ListingSnapshots\(/)).toEqual(['service/catalog/listing-index.ts']);
  });
});
