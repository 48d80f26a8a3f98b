import { z } from 'zod';
import { ErrorCode, NamespaceError } from '../model/errors.js';
import type { ObjectStore } from '../store/object-store.js';

// JSON records the catalog keeps in the store, read together with their etag so that every
// change can be a replace-if-unchanged of exactly the version that was read.

export const NamespaceRecord = z.object({
  properties: z.record(z.string(), z.string()).default({}),
  created_at: z.string().optional(),
  /** `dropping`: a drop is under way; no child may be created (see namespaces.ts). */
  state: z.enum(['active', 'dropping']).default('active'),
});
export type NamespaceRecord = z.infer<typeof NamespaceRecord>;

export const TableRecord = z.object({
  properties: z.record(z.string(), z.string()).default({}),
  created_at: z.string().optional(),
  /** Set for a registered table whose data lives elsewhere; absent means the table's own directory. */
  location: z.string().optional(),
  /** Resolved when the table was created (see resolveManagedVersioning); absent for older records. */
  managed_versioning: z.boolean().optional(),
  /** Declared by this batch commit; the table exists only once that transaction is committed. */
  pending_transaction: z.string().optional(),
});
export type TableRecord = z.infer<typeof TableRecord>;

export interface Versioned<T> {
  value: T;
  etag: string;
}

/** Reads a record; an empty file is the schema's default (Lance writes empty namespace markers). */
export async function readRecord<T>(store: ObjectStore, key: string, schema: z.ZodType<T>): Promise<Versioned<T> | null> {
  const object = await store.get(key);
  if (!object) return null;
  const text = object.body.toString('utf8').trim();
  let json: unknown = {};
  if (text !== '') {
    try {
      json = JSON.parse(text);
    } catch (e) {
      throw new NamespaceError(ErrorCode.Internal, `catalog record ${key} is not valid JSON`, { cause: e });
    }
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new NamespaceError(ErrorCode.Internal, `catalog record ${key} is malformed: ${parsed.error.message}`);
  return { value: parsed.data, etag: object.etag };
}

export const encodeRecord = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;
