import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configurationPage, EXAMPLE_FILE, PAGE, README, README_BEGIN, README_END, readmeOptions } from '../../scripts/lib/configuration-page.js';
import { FILE_KEYS } from '../../src/config/file.js';
import { CONFIG_FILE_OPTION, OPTION_GROUPS } from '../../src/config/options.js';
import { CONFIG_HELP, loadConfig } from '../../src/config.js';

const repo = path.join(import.meta.dirname, '../..');
const read = (file: string): string => readFileSync(path.join(repo, file), 'utf8');
const REGENERATE = 'is not what the option table (src/config/options.ts, src/config/sections.ts) generates: run `npm run docs` and commit the result';

describe('the configuration reference', () => {
  it('docs/configuration.md is what the option table generates', () => {
    expect(read(PAGE), `${PAGE} ${REGENERATE}`).toBe(configurationPage());
  });

  it("the README's table of the options changed first is too", () => {
    const readme = read(README);
    const block = readme.slice(readme.indexOf(README_BEGIN), readme.indexOf(README_END) + README_END.length);
    expect(block, `the table of options in ${README} ${REGENERATE}`).toBe(readmeOptions());
  });

  it("the page's example configuration file loads", () => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'lance-ns-example-')), 'config.yaml');
    writeFileSync(file, EXAMPLE_FILE);
    const config = loadConfig(['--config', file], {});
    expect(config).toMatchObject({ root: 's3://lance/catalog', managedVersioning: true, rateLimit: { requestsPerSecond: 50, burst: 100 } });
    expect(config.auth?.oauth2?.clients).toEqual([expect.objectContaining({ clientId: 'etl', principal: 'etl' })]);
    expect(Object.keys(config.authorization?.roles ?? {})).toEqual(['admin', 'sales-writer']);
  });

  it('no two options share a flag, an environment variable or a file key (the later would silently shadow the earlier)', () => {
    const options = OPTION_GROUPS.flatMap((g) => Object.values(g.options));
    const repeated = (names: string[]) => names.filter((name, i) => names.indexOf(name) !== i);
    expect(repeated([...options.map((o) => o.flag), CONFIG_FILE_OPTION.flag, 'help'])).toEqual([]);
    expect(repeated([...options.flatMap((o) => o.env), ...CONFIG_FILE_OPTION.env])).toEqual([]);
    expect(repeated([...FILE_KEYS])).toEqual([]);
  });

  it('--help names every flag, environment variable and file key of the table', () => {
    for (const o of OPTION_GROUPS.flatMap((g) => Object.values(g.options))) {
      expect(CONFIG_HELP).toContain(`--${o.flag} `);
      for (const name of o.env) expect(CONFIG_HELP).toContain(name);
      expect(CONFIG_HELP).toContain(`file ${o.file};`);
    }
  });
});
