import { z } from 'zod';

// A response serializer compiled from a zod schema: it checks the value against the schema and
// writes its JSON in one walk, without building zod's parsed copy first (a page of 10,000 table
// names was parsed into a second array only to be stringified). Its contract, which the tests
// hold it to: when it returns text, zod's parse of the value succeeds and that text is exactly
// JSON.stringify of zod's output (the schema's keys, in the schema's order; unknown keys dropped).
// It declines (NO_FAST_PATH) wherever it is not sure of that (a failing value, a class instance, a
// kind of schema it does not know), and the caller then parses with zod itself, which also words
// the error. Schemas with checks (min, int, ...), transforms, defaults, unions and the like are
// handed to zod node by node, so only the common shapes are written here.

/** The serializer could not vouch for the value: parse it with zod. */
export const NO_FAST_PATH: unique symbol = Symbol('no fast path');

/** JSON text of a value, `undefined` for a value JSON leaves out (an absent optional field), or NO_FAST_PATH. */
type Writer = (value: unknown) => string | undefined | typeof NO_FAST_PATH;

const isPlainObject = (value: unknown): value is Record<string, unknown> => {
  if (typeof value !== 'object' || value === null) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
};

/** Checks added to the node (min, int, ...), or a node that is itself one (z.int(), z.email(), ...). */
function hasChecks(schema: z.ZodType): boolean {
  const def = schema.def as unknown as { checks?: unknown[]; check?: unknown; format?: unknown };
  return (def.checks?.length ?? 0) > 0 || def.check !== undefined || def.format !== undefined;
}

/** The node parsed by zod itself: its output, stringified. */
const byZod =
  (schema: z.ZodType): Writer =>
  (value) => {
    const parsed = schema.safeParse(value);
    if (!parsed.success) return NO_FAST_PATH;
    return parsed.data === undefined ? undefined : JSON.stringify(parsed.data);
  };

const writeString: Writer = (value) => (typeof value === 'string' ? JSON.stringify(value) : NO_FAST_PATH);

/** An array of strings is checked, then stringified whole (much faster than element by element). */
const writeStringArray: Writer = (value) => {
  if (!Array.isArray(value)) return NO_FAST_PATH;
  for (let i = 0; i < value.length; i++) if (typeof value[i] !== 'string') return NO_FAST_PATH;
  return JSON.stringify(value);
};

function arrayWriter(element: Writer): Writer {
  return (value) => {
    if (!Array.isArray(value)) return NO_FAST_PATH;
    const parts = new Array<string>(value.length);
    for (let i = 0; i < value.length; i++) {
      const part = element(value[i]);
      if (part === NO_FAST_PATH) return NO_FAST_PATH;
      parts[i] = part ?? 'null';
    }
    return `[${parts.join(',')}]`;
  };
}

function objectWriter(fields: [string, Writer][]): Writer {
  const named = fields.map(([key, write]) => ({ prefix: `${JSON.stringify(key)}:`, key, write }));
  return (value) => {
    if (!isPlainObject(value)) return NO_FAST_PATH;
    let out = '';
    for (const { prefix, key, write } of named) {
      const part = write(value[key]);
      if (part === NO_FAST_PATH) return NO_FAST_PATH;
      if (part !== undefined) out += out === '' ? prefix + part : `,${prefix}${part}`;
    }
    return `{${out}}`;
  };
}

function recordWriter(write: Writer): Writer {
  return (value) => {
    if (!isPlainObject(value)) return NO_FAST_PATH;
    let out = '';
    for (const key of Object.keys(value)) {
      // zod's output cannot hold this key as a property: let zod say what becomes of it.
      if (key === '__proto__') return NO_FAST_PATH;
      const part = write(value[key]);
      if (part === NO_FAST_PATH) return NO_FAST_PATH;
      if (part !== undefined) out += `${out === '' ? '' : ','}${JSON.stringify(key)}:${part}`;
    }
    return `{${out}}`;
  };
}

function compile(schema: z.ZodType, seen: Map<z.ZodType, Writer>): Writer {
  const known = seen.get(schema);
  if (known) return known;
  // A schema that contains itself (through a getter in a shape) meets this entry on the way down.
  let writer: Writer | undefined;
  seen.set(schema, (value) => (writer as Writer)(value));
  // Checks are zod's to apply: the node goes to zod whole.
  writer = hasChecks(schema) ? byZod(schema) : compileKind(schema, seen);
  seen.set(schema, writer);
  return writer;
}

function compileKind(schema: z.ZodType, seen: Map<z.ZodType, Writer>): Writer {
  if (schema instanceof z.ZodString) return writeString;
  if (schema instanceof z.ZodNumber) return (value) => (typeof value === 'number' && Number.isFinite(value) ? JSON.stringify(value) : NO_FAST_PATH);
  if (schema instanceof z.ZodBoolean) return (value) => (typeof value === 'boolean' ? String(value) : NO_FAST_PATH);
  if (schema instanceof z.ZodNull) return (value) => (value === null ? 'null' : NO_FAST_PATH);
  if (schema instanceof z.ZodUnknown || schema instanceof z.ZodAny) return (value) => JSON.stringify(value);
  if (schema instanceof z.ZodOptional) {
    const inner = compile(schema.unwrap() as z.ZodType, seen);
    return (value) => (value === undefined ? undefined : inner(value));
  }
  if (schema instanceof z.ZodNullable) {
    const inner = compile(schema.unwrap() as z.ZodType, seen);
    return (value) => (value === null ? 'null' : inner(value));
  }
  if (schema instanceof z.ZodArray) {
    const element = schema.element as z.ZodType;
    return element instanceof z.ZodString && !hasChecks(element) ? writeStringArray : arrayWriter(compile(element, seen));
  }
  // Only the default object, which drops unknown keys (a loose or strict one goes to zod).
  if (schema instanceof z.ZodObject && schema.def.catchall === undefined) {
    return objectWriter(Object.entries(schema.shape as Record<string, z.ZodType>).map(([key, field]) => [key, compile(field, seen)]));
  }
  if (schema instanceof z.ZodRecord) {
    const keyType = schema.keyType as z.ZodType;
    if (keyType instanceof z.ZodString && !hasChecks(keyType)) return recordWriter(compile(schema.valueType as z.ZodType, seen));
  }
  if (schema instanceof z.ZodEnum) {
    const values = new Set<unknown>(schema.options);
    return (value) => (values.has(value) ? JSON.stringify(value) : NO_FAST_PATH);
  }
  if (schema instanceof z.ZodLiteral) {
    const values = schema.values as Set<unknown>;
    const jsonable = (value: unknown) =>
      value === null || typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));
    return (value) => (values.has(value) && jsonable(value) ? JSON.stringify(value) : NO_FAST_PATH);
  }
  return byZod(schema);
}

/** The serializer of `schema`: JSON text of a value it vouches for (see the header), else NO_FAST_PATH. */
export function compileResponseWriter(schema: z.ZodType): (value: unknown) => string | typeof NO_FAST_PATH {
  const write = compile(schema, new Map());
  return (value) => write(value) ?? NO_FAST_PATH;
}
