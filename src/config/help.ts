import { snakeCase } from './file.js';
import { CONFIG_FILE_OPTION, OPTION_GROUPS, type Option } from './options.js';
import { FILE_SECTIONS } from './sections.js';

// `--help`, made from the option table.

const MiB = 1024 * 1024;

/** An option's default: its value as typed (absent: it has none) and a note on it (sizes in bytes in KiB, MiB or GiB; the words of `defaultText`). */
export function defaultOf(o: Option): { value?: string; note?: string } {
  if (o.defaultText !== undefined) return { note: o.defaultText };
  const value = o.default;
  if (value === undefined || (Array.isArray(value) && value.length === 0)) return {};
  if (typeof value === 'number' && o.flag.endsWith('-bytes') && value >= 1024) {
    const [unit, size] = value >= 1024 * MiB ? (['GiB', 1024 * MiB] as const) : value >= MiB ? (['MiB', MiB] as const) : (['KiB', 1024] as const);
    return { value: String(value), note: `${value / size} ${unit}` };
  }
  return { value: String(value) };
}

/** The flag as it is typed: `--name <arg>`. */
export const flagText = (o: { flag: string; arg?: string }): string => `--${o.flag}${o.arg !== undefined ? ` ${o.arg}` : ''}`;

const COLUMN = 36;
const WIDTH = 110;

/** `parts` joined by `separator` in the column from COLUMN to WIDTH, wrapped without breaking a part. */
function wrap(parts: readonly string[], separator: string): string {
  const lines: string[] = [];
  let line = '';
  for (const part of parts) {
    const width = COLUMN + line.length + separator.length + part.length;
    if (line !== '' && width > WIDTH) {
      lines.push(`${line}${separator.trimEnd()}`);
      line = part;
    } else line = line === '' ? part : `${line}${separator}${part}`;
  }
  lines.push(line);
  return lines.join(`\n${' '.repeat(COLUMN)}`);
}

/** One entry: the flag, its help beside it (below it when the flag is too long), then where else it comes from. */
function entry(flag: string, help: string, sources: readonly string[]): string {
  const head = `  ${flag}`;
  const text = wrap(help.split(' '), ' ');
  const first = head.length + 2 <= COLUMN ? `${head.padEnd(COLUMN)}${text}` : `${head}\n${' '.repeat(COLUMN)}${text}`;
  return `${first}\n${' '.repeat(COLUMN)}${wrap(sources, '; ')}\n`;
}

/** The default as --help says it: `268435456 (256 MiB)`, `none`. */
function defaultText(o: Option): string {
  const { value, note } = defaultOf(o);
  return value !== undefined && note !== undefined ? `${value} (${note})` : (value ?? note ?? 'none');
}

function optionEntry(o: Option): string {
  const env = `env ${o.env.join(', ')}${o.kind === 'list' ? ' (comma-separated)' : ''}`;
  return entry(flagText(o), o.kind === 'list' ? `${o.help} (repeat for more)` : o.help, [env, `file ${o.file}`, `default ${defaultText(o)}`]);
}

/** The two flags outside the option table. */
const CONFIG_FILE_ENTRY = entry(
  flagText(CONFIG_FILE_OPTION),
  `${CONFIG_FILE_OPTION.help}: the options below under their file keys, and the sections ${Object.keys(FILE_SECTIONS).map(snakeCase).join(', ')}`,
  [`env ${CONFIG_FILE_OPTION.env.join(', ')}`],
);
const HELP_ENTRY = `${'  --help'.padEnd(COLUMN)}print this and exit\n`;

export const CONFIG_HELP = [
  'Usage: npm start -- [options]',
  '',
  'Each option is taken from its flag, else from its environment variables (the first one set), else from the',
  'configuration file under its file key, else its default. docs/configuration.md describes every one.',
  '',
  `${CONFIG_FILE_ENTRY}${HELP_ENTRY}`,
  ...OPTION_GROUPS.map((g) => `${g.title}:\n${Object.values(g.options).map(optionEntry).join('')}`),
].join('\n');
