import { parseArgs } from 'node:util';
import { z } from 'zod';
import { type ConfigFile, readConfigFile } from './config/file.js';
import { CONFIG_HELP } from './config/help.js';
import { CATALOG, CONFIG_FILE_OPTION, ENGINE, INDEX_WORKERS, LIMITS, OPTION_GROUPS, type Option, S3, SERVER, STORAGE, shapeOf, UDF } from './config/options.js';
import { FILE_SECTIONS } from './config/sections.js';

export { CONFIG_HELP };

// Configuration from command-line options, then environment variables, then the configuration
// file, then defaults. Every option is declared once, in config/options.ts (the file-only sections
// in config/sections.ts); docs/configuration.md is generated from them (`npm run docs`).

const Config = z.object({
  ...shapeOf(SERVER),
  ...shapeOf(STORAGE),
  s3: z.object(shapeOf(S3)),
  ...shapeOf(CATALOG),
  ...shapeOf(LIMITS),
  ...shapeOf(ENGINE),
  ...shapeOf(INDEX_WORKERS),
  udf: z.object(shapeOf(UDF)).refine((u) => u.execution !== 'ray' || u.rayAddress !== undefined, 'udf_execution ray needs ray_address'),
  ...FILE_SECTIONS,
});
export type Config = z.infer<typeof Config>;

type ParsedArgs = Record<string, string | boolean | string[] | undefined>;

/** A comma-separated environment variable as a list (empty entries dropped). */
const list = (v: string): string[] =>
  v
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');

const bool = (v: string | undefined): boolean | undefined => (v === undefined ? undefined : ['1', 'true', 'yes', 'on'].includes(v.toLowerCase()));

/** What was given for an option: its flag, else its first environment variable that is set, else its file key. */
function given(o: Option, args: ParsedArgs, env: NodeJS.ProcessEnv, file: ConfigFile): unknown {
  const flagged = args[o.flag];
  if (flagged !== undefined) return o.kind === 'boolean' && typeof flagged === 'string' ? bool(flagged) : flagged;
  const envName = o.env.find((name) => env[name] !== undefined);
  const text = envName === undefined ? undefined : env[envName];
  if (o.kind === 'list') return text !== undefined ? list(text) : file.list(o.file);
  const value = text ?? file.scalar(o.file);
  return o.kind === 'value' ? value : bool(value);
}

export function loadConfig(argv: string[], env: NodeJS.ProcessEnv): Config {
  const options = OPTION_GROUPS.flatMap((g) => Object.values(g.options));
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      ...Object.fromEntries(options.map((o) => [o.flag, { type: o.kind === 'switch' ? 'boolean' : 'string', multiple: o.kind === 'list' } as const])),
      [CONFIG_FILE_OPTION.flag]: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  const args = values as ParsedArgs;
  if (args.help) {
    process.stdout.write(CONFIG_HELP);
    process.exit(0);
  }
  const configFile = args[CONFIG_FILE_OPTION.flag];
  const file = readConfigFile(typeof configFile === 'string' ? configFile : env[CONFIG_FILE_OPTION.env[0]]);
  const input: Record<string, unknown> = {};
  for (const g of OPTION_GROUPS) {
    const target: Record<string, unknown> = g.at === undefined ? input : {};
    if (g.at !== undefined) input[g.at] = target;
    const entries = Object.entries(g.options);
    for (const [key, o] of entries) target[key] = given(o, args, env, file);
    // Defaults after everything given, as one may derive from another option of its group.
    for (const [key, o] of entries) target[key] ??= typeof o.default === 'function' ? o.default(target) : o.default;
  }
  Object.assign(input, file.sections());
  const parsed = Config.safeParse(input);
  if (!parsed.success) {
    throw new Error(`invalid configuration: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  return parsed.data;
}
