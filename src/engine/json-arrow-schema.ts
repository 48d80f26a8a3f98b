import type * as Arrow from 'apache-arrow';
import { arrow } from './arrow.js';

// Arrow schema → the spec's JSON Arrow form (JsonArrowSchema / JsonArrowField / JsonArrowDataType),
// with the type names Lance's own namespace code uses: int8..uint64, float16/32/64, utf8,
// large_utf8, binary, large_binary, fixed_size_binary, decimal{32,64,128,256} (length =
// precision * 1000 + scale), date32/64, time32/64, timestamp, duration, interval, list,
// large_list, fixed_size_list (length = size), struct, map, union; a dictionary is its value type.

export interface JsonArrowDataType {
  type: string;
  fields?: JsonArrowField[];
  length?: number;
}

export interface JsonArrowField {
  name: string;
  nullable: boolean;
  type: JsonArrowDataType;
  metadata?: Record<string, string>;
}

export interface JsonArrowSchema {
  fields: JsonArrowField[];
  metadata?: Record<string, string>;
}

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
