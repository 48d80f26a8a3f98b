import { z } from 'zod';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import type { ObjectStore, StoredObject } from '../../store/object-store.js';

// JSON records the catalog keeps in the store, read together with their etag so that every
// change can be a replace-if-unchanged of exactly the version that was read.

export const NamespaceRecord = z.object({
  properties: z.record(z.string(), z.string()).default({}),
  created_at: z.string().optional(),
  /** `dropping`: a drop is under way; no child may be created (see namespace-service.ts). */
  state: z.enum(['active', 'dropping']).default('active'),
  /** While `dropping`: the drop's lease; a mark whose lease ran out was left by a dead drop and means nothing. */
  dropping_until: z.string().optional(),
});
export type NamespaceRecord = z.infer<typeof NamespaceRecord>;

export const TableRecord = z.object({
  properties: z.record(z.string(), z.string()).default({}),
  created_at: z.string().optional(),
  /** Set for a registered table whose data lives elsewhere; absent means the table's own directory. */
  location: z.string().optional(),
  /**
   * The table's own directory (a key under the root) when it is not the name's directory, which
   * holds a deregistered table's data (see table-state.ts); the table's drop deletes it.
   */
  dir: z.string().optional(),
  /** Resolved when the table was created (see resolveManagedVersioning); absent for older records. */
  managed_versioning: z.boolean().optional(),
  /** Declared by this batch commit; the table exists only once that transaction is committed. */
  pending_transaction: z.string().optional(),
  /**
   * Set while a CreateTable writes the table's first data: the name is held, the table does not
   * exist yet. Renewed while the create runs; once `lease_until` passes, another request may take
   * the name over and clean up what the dead create left.
   */
  creating: z.object({ request_id: z.string(), lease_until: z.string() }).optional(),
  /** Tells this table from an earlier one of the same name (a writer must not commit across a drop and re-create). */
  incarnation: z.string().optional(),
});
export type TableRecord = z.infer<typeof TableRecord>;

export interface Versioned<T> {
  value: T;
  etag: string;
}

/** Reads a record; an empty file is the schema's default (Lance writes empty namespace markers). */
export async function readRecord<T>(store: ObjectStore, key: string, schema: z.ZodType<T>): Promise<Versioned<T> | null> {
  const object = await store.get(key);
  return object && parseRecord(object, schema);
}

/** A record read as `object` (see readRecord); NamespaceError when it does not parse. */
export function parseRecord<T>(object: StoredObject, schema: z.ZodType<T>): Versioned<T> {
  const { key } = object;
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
