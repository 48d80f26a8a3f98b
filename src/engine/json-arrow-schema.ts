import type * as Arrow from 'apache-arrow';
import type { z } from 'zod';
import type {
  JsonArrowDataType as JsonArrowDataTypeModel,
  JsonArrowField as JsonArrowFieldModel,
  JsonArrowSchema as JsonArrowSchemaModel,
} from '../model/tables.js';
import { arrow } from './arrow.js';

// Arrow schema → the spec's JSON Arrow form (JsonArrowSchema / JsonArrowField / JsonArrowDataType),
// with the type names Lance's own namespace code uses: int8..uint64, float16/32/64, utf8,
// large_utf8, binary, large_binary, fixed_size_binary, decimal{32,64,128,256} (length =
// precision * 1000 + scale), date32/64, time32/64, timestamp, duration, interval, list,
// large_list, fixed_size_list (length = size), struct, map, union; a dictionary is its value type.

// The types are the wire model's (zod, src/model/tables.ts): what this module produces is what
// DescribeTable answers.
export type JsonArrowDataType = z.infer<typeof JsonArrowDataTypeModel>;
export type JsonArrowField = z.infer<typeof JsonArrowFieldModel>;
export type JsonArrowSchema = z.infer<typeof JsonArrowSchemaModel>;

const T = arrow.DataType;

function typeToJson(type: Arrow.DataType): JsonArrowDataType {
  if (T.isDictionary(type)) return typeToJson(type.dictionary);
  if (T.isNull(type)) return { type: 'null' };
  if (T.isBool(type)) return { type: 'bool' };
  if (T.isInt(type)) return { type: `${type.isSigned ? 'int' : 'uint'}${type.bitWidth}` };
  if (T.isFloat(type)) return { type: ['float16', 'float32', 'float64'][type.precision] ?? 'float64' };
  if (T.isDecimal(type)) return { type: `decimal${type.bitWidth}`, length: type.precision * 1000 + type.scale };
  if (T.isUtf8(type)) return { type: 'utf8' };
  if (T.isLargeUtf8(type)) return { type: 'large_utf8' };
  if (T.isBinary(type)) return { type: 'binary' };
  if (T.isLargeBinary(type)) return { type: 'large_binary' };
  if (T.isFixedSizeBinary(type)) return { type: 'fixed_size_binary', length: type.byteWidth };
  if (T.isDate(type)) return { type: type.unit === arrow.DateUnit.DAY ? 'date32' : 'date64' };
  if (T.isTime(type)) return { type: type.bitWidth === 32 ? 'time32' : 'time64' };
  if (T.isTimestamp(type)) return { type: 'timestamp' };
  if (T.isDuration(type)) return { type: 'duration' };
  if (T.isInterval(type)) return { type: 'interval' };
  if (T.isList(type)) return { type: 'list', fields: type.children.map(fieldToJson) };
  if (T.isFixedSizeList(type)) return { type: 'fixed_size_list', fields: type.children.map(fieldToJson), length: type.listSize };
  if (T.isStruct(type)) return { type: 'struct', fields: type.children.map(fieldToJson) };
  if (T.isMap(type)) return { type: 'map', fields: type.children.map(fieldToJson) };
  if (T.isUnion(type)) return { type: 'union' };
  throw new Error(`unsupported Arrow type ${String(type)}`);
}

function metadataOf(map: Map<string, string> | undefined): Record<string, string> | undefined {
  return map && map.size > 0 ? Object.fromEntries(map) : undefined;
}

export function fieldToJson(field: Arrow.Field): JsonArrowField {
  const metadata = metadataOf(field.metadata);
  return { name: field.name, nullable: field.nullable, type: typeToJson(field.type), ...(metadata ? { metadata } : {}) };
}

export function schemaToJson(schema: Arrow.Schema): JsonArrowSchema {
  const metadata = metadataOf(schema.metadata);
  return { fields: schema.fields.map(fieldToJson), ...(metadata ? { metadata } : {}) };
}

// JSON Arrow data type → the form @lancedb/lancedb takes as the target of a column cast. Lance
// names leaf types by its own logical names (float, double, string, large_string,
// timestamp:us:-, decimal:128:p:s, ...), not by the JSON names, so leaf types become those
// strings. Nested types (list, fixed_size_list, struct) cannot be spelled as one name, so they
// become an apache-arrow DataType, which the binding turns into Lance's JSON type itself.

/** A JSON Arrow data type as a request carries it: checked here, field by field, not trusted. */
export interface JsonArrowDataTypeInput {
  type: string;
  fields?: readonly unknown[] | undefined;
  length?: number | undefined;
}

/** A type the engine cannot cast to, or a malformed type; the message is for the client. */
export class UnsupportedJsonTypeError extends Error {
  override readonly name = 'UnsupportedJsonTypeError';
}

const INTS: Record<string, () => Arrow.DataType> = {
  int8: () => new arrow.Int8(),
  int16: () => new arrow.Int16(),
  int32: () => new arrow.Int32(),
  int64: () => new arrow.Int64(),
  uint8: () => new arrow.Uint8(),
  uint16: () => new arrow.Uint16(),
  uint32: () => new arrow.Uint32(),
  uint64: () => new arrow.Uint64(),
};

/** Lance logical names of the leaf JSON types that need no parameters. */
const LANCE_LEAF_NAMES: Record<string, string> = {
  null: 'null',
  bool: 'bool',
  boolean: 'bool',
  ...Object.fromEntries(Object.keys(INTS).map((k) => [k, k])),
  float16: 'halffloat',
  float32: 'float',
  float64: 'double',
  utf8: 'string',
  large_utf8: 'large_string',
  binary: 'binary',
  large_binary: 'large_binary',
  date32: 'date32:day',
  date64: 'date64:ms',
  // The JSON form carries no unit or zone; Lance's own JSON → Arrow reading takes microseconds, no zone.
  timestamp: 'timestamp:us:-',
  duration: 'duration:us',
};

/** Types the JSON form names but Lance's namespace schema does not accept as input, or the engine binding cannot express. */
const REFUSED: Record<string, string> = {
  time32: 'the JSON form carries no time unit (Lance does not accept time32/time64 as input)',
  time64: 'the JSON form carries no time unit (Lance does not accept time32/time64 as input)',
  interval: 'Lance does not accept interval as an input type',
  union: 'Lance does not accept union as an input type',
  decimal32: 'the engine supports decimal128 and decimal256 only',
  decimal64: 'the engine supports decimal128 and decimal256 only',
  large_list: 'the engine binding (apache-arrow 18) cannot express large_list',
  map: 'the engine binding cannot cast map columns',
};

/**
 * Lance's logical names of leaf types, taken as input too (Geneva spells a UDF's output type so:
 * "double", "string", "date32:day"), each for the JSON name it stands for.
 */
const LANCE_NAME_ALIASES: Record<string, string> = Object.fromEntries(
  Object.entries(LANCE_LEAF_NAMES)
    .filter(([json, lance]) => json !== lance && !(lance in LANCE_LEAF_NAMES))
    .map(([json, lance]) => [lance, json]),
);

function typeName(type: unknown): string {
  const name: unknown = typeof type === 'object' && type !== null ? (type as { type?: unknown }).type : undefined;
  if (typeof name !== 'string' || name === '') throw new UnsupportedJsonTypeError(`data type ${JSON.stringify(type)} has no "type" name`);
  const lower = name.toLowerCase();
  return LANCE_NAME_ALIASES[lower] ?? lower;
}

const TIME_UNITS: Record<string, Arrow.TimeUnit> = {
  s: arrow.TimeUnit.SECOND,
  ms: arrow.TimeUnit.MILLISECOND,
  us: arrow.TimeUnit.MICROSECOND,
  ns: arrow.TimeUnit.NANOSECOND,
};

/** Lance's `timestamp:<unit>:<zone or ->` (the JSON `timestamp` carries neither), or null for any other name. */
function lanceTimestamp(input: unknown): Arrow.DataType | null {
  const name: unknown = typeof input === 'object' && input !== null ? (input as { type?: unknown }).type : undefined;
  const m = typeof name === 'string' ? /^timestamp:(s|ms|us|ns):(.+)$/i.exec(name) : null;
  if (!m) return null;
  const unit = TIME_UNITS[(m[1] as string).toLowerCase()] as Arrow.TimeUnit;
  const zone = m[2] === '-' ? null : (m[2] as string);
  return new arrow.Timestamp(unit, zone);
}

function requireLength(type: JsonArrowDataTypeInput, name: string): number {
  const length = type.length;
  if (typeof length !== 'number' || !Number.isSafeInteger(length) || length < 0) {
    throw new UnsupportedJsonTypeError(`data type ${name} needs a non-negative integer "length"`);
  }
  return length;
}

/** Precision and scale of a JSON decimal (length = precision * 1000 + scale, as Lance decodes it). */
function decimalOf(type: JsonArrowDataTypeInput, name: string): { precision: number; scale: number } {
  const length = requireLength(type, name);
  const precision = Math.trunc((length + 128) / 1000);
  return { precision, scale: length - precision * 1000 };
}

function childField(value: unknown, where: string): Arrow.Field {
  if (typeof value !== 'object' || value === null) throw new UnsupportedJsonTypeError(`${where}: a child field must be an object`);
  const field = value as { name?: unknown; nullable?: unknown; type?: unknown };
  if (typeof field.name !== 'string') throw new UnsupportedJsonTypeError(`${where}: a child field needs a string "name"`);
  if (field.nullable !== undefined && typeof field.nullable !== 'boolean') throw new UnsupportedJsonTypeError(`${where}: "nullable" must be a boolean`);
  return new arrow.Field(field.name, jsonTypeToArrow(field.type), field.nullable ?? true);
}

function children(type: JsonArrowDataTypeInput, name: string, exactly?: number): Arrow.Field[] {
  const fields: unknown = type.fields;
  if (!Array.isArray(fields) || (exactly !== undefined && fields.length !== exactly)) {
    throw new UnsupportedJsonTypeError(
      `data type ${name} needs "fields" with ${exactly === undefined ? 'its child fields' : `exactly ${exactly} child field`}`,
    );
  }
  return fields.map((f: unknown) => childField(f, name));
}

/** A JSON Arrow data type as an apache-arrow DataType (the instance @lancedb/lancedb uses). */
export function jsonTypeToArrow(input: unknown): Arrow.DataType {
  const timestamp = lanceTimestamp(input);
  if (timestamp) return timestamp;
  const name = typeName(input);
  const type = input as JsonArrowDataTypeInput;
  const refused = REFUSED[name];
  if (refused !== undefined) throw new UnsupportedJsonTypeError(`data type ${name} is not supported: ${refused}`);
  const int = INTS[name];
  if (int) return int();
  switch (name) {
    case 'null':
      return new arrow.Null();
    case 'bool':
    case 'boolean':
      return new arrow.Bool();
    case 'float16':
      return new arrow.Float16();
    case 'float32':
      return new arrow.Float32();
    case 'float64':
      return new arrow.Float64();
    case 'utf8':
      return new arrow.Utf8();
    case 'large_utf8':
      return new arrow.LargeUtf8();
    case 'binary':
      return new arrow.Binary();
    case 'large_binary':
      return new arrow.LargeBinary();
    case 'fixed_size_binary':
      return new arrow.FixedSizeBinary(requireLength(type, name));
    case 'decimal128':
    case 'decimal256': {
      const { precision, scale } = decimalOf(type, name);
      return new arrow.Decimal(scale, precision, name === 'decimal128' ? 128 : 256);
    }
    case 'date32':
      return new arrow.DateDay();
    case 'date64':
      return new arrow.DateMillisecond();
    case 'timestamp':
      return new arrow.TimestampMicrosecond();
    case 'duration':
      return new arrow.Duration(arrow.TimeUnit.MICROSECOND);
    case 'list':
      return new arrow.List(children(type, name, 1)[0] as Arrow.Field);
    case 'fixed_size_list':
      return new arrow.FixedSizeList(requireLength(type, name), children(type, name, 1)[0] as Arrow.Field);
    case 'struct':
      return new arrow.Struct(children(type, name));
    default:
      throw new UnsupportedJsonTypeError(`unknown data type ${JSON.stringify(type.type)}`);
  }
}

/**
 * The cast target @lancedb/lancedb's alterColumns takes for a JSON Arrow data type: a Lance
 * logical type name for leaf types (float32 → "float", utf8 → "string", timestamp →
 * "timestamp:us:-", decimal128 length 10002 → "decimal:128:10:2", ...), an apache-arrow DataType
 * for list, fixed_size_list and struct. Throws UnsupportedJsonTypeError for anything else.
 */
export function jsonTypeToLanceCast(type: JsonArrowDataTypeInput): string | Arrow.DataType {
  const name = typeName(type);
  const leaf = LANCE_LEAF_NAMES[name];
  if (leaf !== undefined) return leaf;
  switch (name) {
    case 'fixed_size_binary':
      return `fixed_size_binary:${requireLength(type, name)}`;
    case 'decimal128':
    case 'decimal256': {
      const { precision, scale } = decimalOf(type, name);
      return `decimal:${name.slice('decimal'.length)}:${precision}:${scale}`;
    }
    default:
      return jsonTypeToArrow(type);
  }
}

/** A JSON Arrow schema as an apache-arrow Schema (types as jsonTypeToArrow reads them; fields nullable unless said otherwise). */
export function jsonSchemaToArrow(schema: {
  fields: ReadonlyArray<{ name: string; type: unknown; nullable?: boolean | undefined; metadata?: Record<string, string> | undefined }>;
}): Arrow.Schema {
  return new arrow.Schema(
    schema.fields.map(
      (f) => new arrow.Field(f.name, jsonTypeToArrow(f.type), f.nullable ?? true, f.metadata ? new Map(Object.entries(f.metadata)) : undefined),
    ),
  );
}
