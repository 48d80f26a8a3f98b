import { z } from 'zod';

// Protocol models shared by every resource group. These zod schemas are the single source of the
// request and response types: the HTTP layer validates with them, the service layer is typed by
// them, and the served OpenAPI document is generated from them.

export const Identity = z
  .object({ api_key: z.string().optional(), auth_token: z.string().optional() })
  .meta({ id: 'Identity', description: 'Identity of the caller; header values take precedence.' });

export const Context = z.record(z.string(), z.string()).meta({
  id: 'Context',
  description:
    "Key-value pairs. On a request, the caller's (in REST each entry may also travel as an x-namespace-ctx-<key> header); on an answer, the request's, echoed.",
});

export const Properties = z.record(z.string(), z.string()).meta({ id: 'Properties' });

/** A field a client (Geneva) sends that the service accepts and does not use. */
export const Ignored = (description: string) =>
  z
    .string()
    .nullable()
    .optional()
    .meta({ description: `${description} Accepted and ignored.` });

export const PageToken = z.string().nullable().meta({ id: 'PageToken', description: 'Opaque token; null, missing or empty means the end.' });

export const PageLimit = z.number().int().min(0).nullable().meta({ id: 'PageLimit', description: 'Inclusive upper bound on items returned.' });

/** The `branch` of a request on a table's data (service/branches/branch-refs.ts reads it). */
export const BranchField = z
  .string()
  .nullable()
  .optional()
  .meta({ description: 'Branch to work on: absent, null, "" or "main" is main; a branch that does not exist is a 404 code 22.' });

/** Fields every JSON request body may carry. */
export const RequestBase = {
  identity: Identity.optional(),
  context: Context.optional(),
  id: z.array(z.string()).optional(),
};

/**
 * Fields every JSON response object may carry (the spec gives each one an optional `context`):
 * the request's context, echoed when the client sent one (http/route.ts).
 */
export const ResponseBase = {
  context: Context.optional(),
};

/** Reduces an enum spelling to a key: `ExistOk`, `exist_ok` and `EXIST_OK` all become `existok`. */
const enumKey = (v: string): string => v.replace(/[_-]/g, '').toLowerCase();

/**
 * A case-insensitive string enum (PascalCase or snake_case, as the spec says of every enum). The
 * parsed value is the canonical PascalCase spelling; anything else is an invalid-input error.
 */
export function caseInsensitiveEnum<const T extends readonly [string, ...string[]]>(values: T, description?: string) {
  const byKey = new Map(values.map((v) => [enumKey(v), v] as const));
  return z
    .string()
    .transform((v, ctx): T[number] => {
      const canonical = byKey.get(enumKey(v));
      if (canonical === undefined) {
        ctx.addIssue({ code: 'custom', message: `must be one of ${values.join(', ')} (case-insensitive), got ${JSON.stringify(v)}` });
        return z.NEVER;
      }
      return canonical;
    })
    .meta({ description: `${description ? `${description} ` : ''}One of ${values.join(', ')}; case-insensitive, PascalCase or snake_case.` });
}

/** Query-string boolean: `true`/`false` (any case), `1`/`0`. */
export const QueryBoolean = z.union([z.boolean(), z.string()]).transform((v, ctx) => {
  if (typeof v === 'boolean') return v;
  const s = v.toLowerCase();
  if (s === 'true' || s === '1') return true;
  if (s === 'false' || s === '0' || s === '') return false;
  ctx.addIssue({ code: 'custom', message: `must be true or false, got ${JSON.stringify(v)}` });
  return z.NEVER;
});

/** Query-string integer >= 0. */
export const QueryLimit = z.union([z.number(), z.string()]).transform((v, ctx) => {
  const n = typeof v === 'number' ? v : /^\d+$/.test(v) ? Number(v) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 0) {
    ctx.addIssue({ code: 'custom', message: `must be a non-negative integer, got ${JSON.stringify(v)}` });
    return z.NEVER;
  }
  return n;
});

export const ErrorResponse = z
  .object({
    error: z.string().optional().meta({ description: 'Brief, human-readable message.' }),
    code: z.number().int().min(0).meta({ description: 'Lance namespace error code (0-23); clients classify by it.' }),
    detail: z.string().optional(),
    instance: z.string().optional().meta({ description: 'The request path that failed.' }),
    type: z.string().optional(),
    title: z.string().optional(),
    status: z.number().int().optional(),
    context: Context.optional(),
  })
  .meta({ id: 'ErrorResponse' });

export type ErrorResponse = z.infer<typeof ErrorResponse>;
