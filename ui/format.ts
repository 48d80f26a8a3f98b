import type { DescribeTableResponse } from './api.js';

export type JsonArrowField = NonNullable<DescribeTableResponse['schema']>['fields'][number];
export type JsonArrowType = JsonArrowField['type'];

const numberFormat = new Intl.NumberFormat('en');

export const formatCount = (n: number): string => numberFormat.format(n);

/** A microsecond time as a SQL literal (UTC, to the microsecond: a page bound of the jobs list must be exact). */
export function timestampLiteral(micros: bigint): string {
  let millis = micros / 1000n;
  let rest = micros % 1000n;
  // BigInt division truncates towards zero: a time before 1970 borrows a millisecond.
  if (rest < 0n) {
    millis -= 1n;
    rest += 1000n;
  }
  const iso = new Date(Number(millis)).toISOString().replace('Z', `${String(rest).padStart(3, '0')}Z`);
  return `TIMESTAMP '${iso}'`;
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(value < 10 ? 2 : value < 100 ? 1 : 0)} ${units[unit]}`;
}

/** A time in ISO form (UTC, to the second): unambiguous whatever the reader's locale. */
export function formatTime(millis: number | undefined): string {
  if (millis === undefined) return '—';
  return new Date(millis)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d{3}Z$/, 'Z');
}

/**
 * A JSON Arrow type as one line: `int64`, `list<float32>`, `fixed_size_list<float32>[128]`,
 * `list<struct>` (a struct's fields are shown as rows of their own), `decimal128(10, 2)`.
 */
export function typeLabel(type: JsonArrowType): string {
  const fields = type.fields ?? [];
  const child = fields[0];
  switch (type.type) {
    case 'list':
    case 'large_list':
      return child ? `${type.type}<${typeLabel(child.type)}>` : type.type;
    case 'fixed_size_list':
      return `fixed_size_list<${child ? typeLabel(child.type) : '?'}>[${type.length ?? '?'}]`;
    case 'fixed_size_binary':
      return `fixed_size_binary[${type.length ?? '?'}]`;
    case 'decimal128':
    case 'decimal256':
      // The service carries precision and scale as precision * 1000 + scale.
      return type.length === undefined ? type.type : `${type.type}(${Math.floor(type.length / 1000)}, ${type.length % 1000})`;
    default:
      return type.type;
  }
}

/** Whether the type's children are shown as rows of their own (a struct, a map, a list of those). */
export function isNested(type: JsonArrowType): boolean {
  if (type.type === 'struct' || type.type === 'map') return true;
  const child = type.fields?.[0];
  return (type.type === 'list' || type.type === 'large_list' || type.type === 'fixed_size_list') && child !== undefined && isNested(child.type);
}

/** The fields shown under a nested type: a struct's or map's own, a list's items' (the item field itself is left out). */
export function childrenOf(type: JsonArrowType): JsonArrowField[] {
  if (type.type === 'struct' || type.type === 'map') return type.fields ?? [];
  const item = type.fields?.[0];
  return item && isNested(item.type) ? childrenOf(item.type) : [];
}

/** Parses a table id stored as JSON (a job's `table` property); null when it is not one. */
export function parseTableId(json: string | undefined): string[] | null {
  if (json === undefined) return null;
  try {
    const value: unknown = JSON.parse(json);
    return Array.isArray(value) && value.length > 0 && value.every((p) => typeof p === 'string') ? (value as string[]) : null;
  } catch {
    return null;
  }
}

export const displayId = (id: readonly string[]): string => (id.length === 0 ? '(root)' : id.join('.'));
