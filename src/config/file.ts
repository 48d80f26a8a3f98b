import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { OPTION_GROUPS } from './options.js';
import { FILE_SECTIONS, isMapping } from './sections.js';

/** What a configuration file holds: the options under their file keys, and the file-only sections. */
export interface ConfigFile {
  /** A scalar option's value as text; undefined when the file does not give it. */
  scalar(key: string): string | undefined;
  /** A list option's values (a single value is a list of one). */
  list(key: string): string[];
  /** The sections under their Config names, with the keys in them as the Config spells them. */
  sections(): Record<string, unknown>;
}

export const snakeCase = (name: string): string => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const camelCase = (key: string): string => key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/** The parts of a JSON Schema that say where the keys of an object are names (properties) and where they are data (records). */
export interface JsonSchema {
  type?: string;
  description?: string;
  default?: unknown;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: JsonSchema | boolean;
  items?: JsonSchema;
  [constraint: string]: unknown;
}

/** A section's schema as JSON Schema, for what the file may hold (its input, before defaults). */
export const sectionJsonSchema = (schema: z.ZodType): JsonSchema => z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;

/** Every top-level key of the file, in the order of the option table. */
export const FILE_KEYS: readonly string[] = [
  ...OPTION_GROUPS.flatMap((g) => Object.values(g.options).map((o) => o.file)),
  ...Object.keys(FILE_SECTIONS).map(snakeCase),
];

/** Reads a YAML or JSON configuration file (JSON is YAML); unknown keys are refused, so that a misspelt one is not silently ignored. */
export function readConfigFile(file: string | undefined): ConfigFile {
  let data: Record<string, unknown> = {};
  if (file !== undefined) {
    let parsed: unknown;
    try {
      parsed = parseYaml(readFileSync(file, 'utf8'));
    } catch (e) {
      throw new Error(`cannot read the configuration file ${file}: ${(e as Error).message}`);
    }
    if (parsed !== null && parsed !== undefined && !isMapping(parsed)) throw new Error(`the configuration file ${file} must hold a mapping of options`);
    data = parsed ?? {};
  }
  /** Refuses the keys of `value` that are not `known`, naming where they are. */
  const refuseUnknown = (where: string, value: object, known: readonly string[]): void => {
    const unknown = Object.keys(value).filter((k) => !known.includes(k));
    if (unknown.length > 0)
      throw new Error(
        `unknown keys ${where ? `under ${where} ` : ''}in the configuration file ${file ?? ''}: ${unknown.join(', ')} (known: ${known.join(', ')})`,
      );
  };
  /**
   * `value` as the Config spells it: the keys of every object `schema` gives properties for turned
   * from snake_case to camelCase (others refused), records' keys (role names, principals, JWK
   * members) kept as written. A key set to null is absent, as YAML's `key:` with no value means.
   */
  const inConfigNames = (value: unknown, schema: JsonSchema, where: string): unknown => {
    const { properties, additionalProperties, items } = schema;
    if (properties !== undefined && isMapping(value)) {
      refuseUnknown(where, value, Object.keys(properties).map(snakeCase));
      return Object.fromEntries(
        Object.entries(value)
          .filter(([, v]) => v !== null && v !== undefined)
          .map(([k, v]) => [camelCase(k), inConfigNames(v, properties[camelCase(k)] ?? {}, `${where}.${k}`)]),
      );
    }
    if (typeof additionalProperties === 'object' && isMapping(value)) {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, inConfigNames(v, additionalProperties, `${where}.${k}`)]));
    }
    if (items !== undefined && Array.isArray(value)) return value.map((v, i) => inConfigNames(v, items, `${where}[${i}]`));
    return value;
  };
  refuseUnknown('', data, FILE_KEYS);
  return {
    scalar: (key) => {
      const value = data[key];
      return value === undefined || value === null ? undefined : String(value);
    },
    list: (key) => {
      const value = data[key];
      return value === undefined || value === null ? [] : Array.isArray(value) ? value.map(String) : [String(value)];
    },
    sections: () =>
      Object.fromEntries(
        Object.entries(FILE_SECTIONS).map(([name, schema]) => {
          const value = data[snakeCase(name)];
          return [name, value === undefined || value === null ? undefined : inConfigNames(value, sectionJsonSchema(schema), snakeCase(name))];
        }),
      ),
  };
}
