import { ZodError } from 'zod';
import type { ErrorResponse } from '../model/common.js';
import { ErrorCode } from '../model/errors.js';
import { namespaceErrorOf } from '../service/engine-errors.js';

// One mapping from every error to the spec's error body and HTTP status: the service's failures
// arrive as NamespaceError (store and engine errors that reached here unmapped are translated by
// the service's namespaceErrorOf), the framework's by their Fastify code. Clients classify only by `code`; `type`/`title`/`status` follow the spec's problem-details examples.

const STATUS_OF_CODE: Record<number, number> = {
  0: 406,
  1: 404,
  2: 409,
  3: 409,
  4: 404,
  5: 409,
  6: 404,
  7: 409,
  8: 404,
  9: 409,
  10: 404,
  11: 404,
  12: 404,
  13: 400,
  14: 409,
  15: 403,
  16: 401,
  17: 503,
  18: 500,
  19: 409,
  20: 400,
  21: 429,
  22: 404,
  23: 409,
};

const PROBLEM_OF_STATUS: Record<number, { type: string; title: string }> = {
  400: { type: '/errors/bad-request', title: 'Malformed request' },
  401: { type: '/errors/unauthorized-request', title: 'No valid authentication credentials for the operation' },
  403: { type: '/errors/forbidden-request', title: 'Not authorized to make this request' },
  404: { type: '/errors/not-found-error', title: 'Not found Error' },
  405: { type: '/errors/method-not-allowed', title: 'Method not allowed on this route' },
  408: { type: '/errors/bad-request', title: 'Request timeout' },
  406: { type: '/errors/unsupported-operation', title: 'The server does not support this operation' },
  409: { type: '/errors/conflict', title: 'The namespace has been concurrently modified' },
  413: { type: '/errors/bad-request', title: 'Request body too large' },
  414: { type: '/errors/bad-request', title: 'Request path too long' },
  415: { type: '/errors/bad-request', title: 'Unsupported media type' },
  431: { type: '/errors/bad-request', title: 'Request headers too large' },
  429: { type: '/errors/throttled', title: 'Too many requests' },
  503: { type: '/errors/service-unavailable', title: 'Slow down' },
  500: { type: '/errors/server-error', title: 'Internal Server Error' },
};

export const httpStatusOfCode = (code: number): number => STATUS_OF_CODE[code] ?? 500;

export interface WireError {
  status: number;
  body: ErrorResponse;
}

export function wireError(status: number, code: number, message: string, instance: string, detail?: string): WireError {
  const problem = PROBLEM_OF_STATUS[status] ?? PROBLEM_OF_STATUS[500] ?? { type: '', title: '' };
  return {
    status,
    body: { error: message, code, ...(detail ? { detail } : {}), instance, type: problem.type, title: problem.title, status },
  };
}

/** Describes a zod failure by the fields it names, e.g. `mode: must be one of ...`. */
export function describeZodError(error: ZodError, where: string): string {
  const issues = error.issues.slice(0, 5).map((issue) => {
    const field = issue.path.length > 0 ? issue.path.map(String).join('.') : where;
    return `${field}: ${issue.message}`;
  });
  return `invalid ${where}: ${issues.join('; ')}${error.issues.length > 5 ? '; ...' : ''}`;
}

interface FastifyLikeError {
  code?: string;
  statusCode?: number;
  message?: string;
}

/**
 * Framework (Fastify and Node HTTP parser) errors keep their 4xx status where it says more than a
 * plain 400; all are invalid input (code 13). Their messages are replaced: some quote the whole URL.
 */
const FRAMEWORK_ERRORS: Record<string, { status: number; message: string }> = {
  FST_ERR_BAD_URL: { status: 400, message: 'the request path is not valid percent-encoded UTF-8' },
  FST_ERR_MAX_PARAM_LENGTH: { status: 414, message: 'a path parameter is too long' },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, message: 'request body is too large' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415, message: 'unsupported content type' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, message: 'the content length does not match the body' },
  HPE_HEADER_OVERFLOW: { status: 431, message: 'the request headers are too large' },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, message: 'the request did not arrive in time' },
};

/** Rust source locations of the engine's build (`/home/runner/work/.../table.rs:123:45`, `.cargo/registry/...`). */
const RUST_SOURCE = /,?\s*(?:at\s+)?\S*\/[^\s/]+\.rs(?::\d+){0,2}/g;

/**
 * Removes internals from a message that goes into a body: the root's absolute path and URI (the
 * rest of the path, relative to the root, stays and is what the client named) and the engine's
 * build paths. The full message stays in the log.
 */
export function messageScrubber(rootForms: readonly string[]): (message: string) => string {
  const forms = [...new Set(rootForms.map((f) => f.replace(/\/+$/, '')).filter((f) => f.length > 1))].sort((a, b) => b.length - a.length);
  return (message) => {
    let out = message.replace(RUST_SOURCE, '');
    for (const form of forms) out = out.split(`${form}/`).join('').split(form).join('.');
    return out;
  };
}

const noScrub = (message: string): string => message;

/**
 * Maps any thrown value to the wire error; `internal` is true for failures worth logging as errors.
 * `scrub` removes internal paths from messages (see messageScrubber); the cause is logged in full.
 */
export function toWireError(error: unknown, instance: string, scrub: (message: string) => string = noScrub): WireError & { internal: boolean } {
  const failure = namespaceErrorOf(error);
  if (failure) {
    const status = httpStatusOfCode(failure.code);
    const detail = failure.detail === undefined ? undefined : scrub(failure.detail);
    return { ...wireError(status, failure.code, scrub(failure.message), instance, detail), internal: status >= 500 };
  }
  if (error instanceof ZodError) {
    return { ...wireError(400, ErrorCode.InvalidInput, describeZodError(error, 'request'), instance), internal: false };
  }
  const fastifyError = (typeof error === 'object' && error !== null ? error : {}) as FastifyLikeError;
  const known = fastifyError.code === undefined ? undefined : FRAMEWORK_ERRORS[fastifyError.code];
  if (known) return { ...wireError(known.status, ErrorCode.InvalidInput, known.message, instance), internal: false };
  if (fastifyError.statusCode !== undefined && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500) {
    return { ...wireError(400, ErrorCode.InvalidInput, scrub(fastifyError.message ?? 'bad request'), instance), internal: false };
  }
  // Unknown failures say nothing about themselves: the request id (a response header) finds them in the log.
  return { ...wireError(500, ErrorCode.Internal, 'internal error; the service log has the cause under this request id', instance), internal: true };
}
