import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
import { invalidInput } from '../model/errors.js';
import { describeZodError } from './errors.js';
import { compileResponseWriter, NO_FAST_PATH } from './zod-serializer.js';

// Fastify validates and serializes with the routes' zod schemas (zod 4) instead of JSON Schema
// compilers: one set of schemas is the request check, the response contract and the OpenAPI
// document.

/** A handler's answer that does not match its response schema: a bug, answered 500 and logged; the answer never goes out. */
export class ResponseSchemaError extends Error {
  constructor(route: string, error: z.ZodError) {
    super(`the response of ${route} does not match its schema: ${describeZodError(error, 'response').replace(/^invalid response: /, '')}`);
    this.name = 'ResponseSchemaError';
  }
}

/** Parses `value` with a request schema; a failure is a 400 code 13 naming the fields. */
export function parseRequestPart<S extends z.ZodType>(schema: S, value: unknown, where: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw invalidInput(describeZodError(parsed.error, where));
  return parsed.data;
}

const PART_NAMES: Record<string, string> = { body: 'request body', querystring: 'query parameters', params: 'path parameters', headers: 'headers' };

export function useZodCompilers(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) => {
    const zod = schema as z.ZodType;
    const where = PART_NAMES[httpPart ?? ''] ?? httpPart ?? 'request';
    return (data: unknown) => {
      try {
        // No body (or JSON null) is the empty request.
        return { value: parseRequestPart(zod, httpPart === 'body' && (data === null || data === undefined) ? {} : data, where) };
      } catch (e) {
        return { error: e as Error };
      }
    };
  });
  app.setSerializerCompiler(({ schema, method, url, httpStatus }) => {
    const zod = schema as z.ZodType;
    const route = `${method} ${url} (${httpStatus})`;
    const write = compileResponseWriter(zod);
    return (data: unknown) => {
      // Checked and written in one walk; what that walk cannot vouch for, zod parses (and words the error).
      const text = write(data);
      if (text !== NO_FAST_PATH) return text;
      const parsed = zod.safeParse(data);
      if (!parsed.success) throw new ResponseSchemaError(route, parsed.error);
      return JSON.stringify(parsed.data);
    };
  });
}
