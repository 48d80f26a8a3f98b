import { createRequire } from 'node:module';

// apache-arrow ships separate ESM and CJS builds; @lancedb/lancedb is CJS and checks `instanceof`
// against the CJS classes, so the service must load the very same (CJS) module instance.
const require = createRequire(import.meta.url);
export const arrow = require('apache-arrow') as typeof import('apache-arrow');

/** `fields` with `extra` metadata (by field name) added to each named field's own. */
export function withFieldMetadata(
  fields: ReadonlyArray<import('apache-arrow').Field>,
  extra: Readonly<Record<string, Record<string, string>>>,
): Array<import('apache-arrow').Field> {
  return fields.map((f) => {
    const more = extra[f.name];
    return more ? new arrow.Field(f.name, f.type, f.nullable, new Map([...f.metadata, ...Object.entries(more)])) : f;
  });
}

/** An Arrow IPC stream of `schema` alone (no batch: an empty one's nested columns would be written without buffers). */
export function schemaOnlyStream(schema: import('apache-arrow').Schema): Buffer {
  const writer = new arrow.RecordBatchStreamWriter();
  writer.reset(undefined, schema);
  writer.close();
  return Buffer.from(writer.toUint8Array(true));
}
