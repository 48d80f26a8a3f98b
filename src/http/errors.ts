import { ZodError } from 'zod';
import type { ErrorResponse } from '../model/common.js';
import { ErrorCode } from '../model/errors.js';
import { namespaceErrorOf } from '../service/errors/engine-errors.js';

// One mapping from every error to the spec's error body and HTTP status: the service's failures
// arrive as NamespaceError (store and engine errors that reached here unmapped are translated by
// the service's namespaceErrorOf), the framework's by their Fastify code. Clients classify only by `code`;
// `type` and `status` follow the spec's problem-details examples, `title` names the code.

/**
 * Each spec error code (lance-namespace-errors.md): its HTTP status and the title its answers
 * carry, named after the code (the spec's example title where its status has only that code).
 */
const PROBLEM_OF_CODE: Record<number, { status: number; title: string }> = {
  0: { status: 406, title: 'The server does not support this operation' },
  1: { status: 404, title: 'Namespace not found' },
  2: { status: 409, title: 'Namespace already exists' },
  3: { status: 409, title: 'Namespace not empty' },
  4: { status: 404, title: 'Table not found' },
  5: { status: 409, title: 'Table already exists' },
  6: { status: 404, title: 'Table index not found' },
  7: { status: 409, title: 'Table index already exists' },
  8: { status: 404, title: 'Table tag not found' },
  9: { status: 409, title: 'Table tag already exists' },
  10: { status: 404, title: 'Transaction not found' },
  11: { status: 404, title: 'Table version not found' },
  12: { status: 404, title: 'Table column not found' },
  13: { status: 400, title: 'Malformed request' },
  14: { status: 409, title: 'The namespace has been concurrently modified' },
  15: { status: 403, title: 'Not authorized to make this request' },
  16: { status: 401, title: 'No valid authentication credentials for the operation' },
  17: { status: 503, title: 'Service unavailable' },
  18: { status: 500, title: 'Internal Server Error' },
  19: { status: 409, title: 'Invalid table state' },
  20: { status: 400, title: 'Table schema validation failed' },
  21: { status: 429, title: 'Too many requests' },
  22: { status: 404, title: 'Table branch not found' },
  23: { status: 409, title: 'Table branch already exists' },
};

/** The spec's problem `type` of each status. */
const TYPE_OF_STATUS: Record<number, string> = {
  400: '/errors/bad-request',
  401: '/errors/unauthorized-request',
  403: '/errors/forbidden-request',
  404: '/errors/not-found-error',
  405: '/errors/method-not-allowed',
  406: '/errors/unsupported-operation',
  408: '/errors/bad-request',
  409: '/errors/conflict',
  413: '/errors/bad-request',
  414: '/errors/bad-request',
  415: '/errors/bad-request',
  429: '/errors/throttled',
  431: '/errors/bad-request',
  500: '/errors/server-error',
  503: '/errors/service-unavailable',
};

/** Titles of the statuses no code has as its own, which the framework answers with code 13 or 0 (and an unknown route's 404). */
const TITLE_OF_STATUS: Record<number, string> = {
  404: 'Not found',
  405: 'Method not allowed on this route',
  408: 'Request timeout',
  413: 'Request body too large',
  414: 'Request path too long',
  415: 'Unsupported media type',
  431: 'Request headers too large',
};

export const httpStatusOfCode = (code: number): number => PROBLEM_OF_CODE[code]?.status ?? 500;

export interface WireError {
  status: number;
  body: ErrorResponse;
}

export function wireError(status: number, code: number, message: string, instance: string, detail?: string): WireError {
  const ofCode = PROBLEM_OF_CODE[code];
  const title = (ofCode?.status === status ? ofCode.title : TITLE_OF_STATUS[status]) ?? ofCode?.title ?? 'Error';
  return {
    status,
    body: { error: message, code, ...(detail ? { detail } : {}), instance, type: TYPE_OF_STATUS[status] ?? '/errors/server-error', title, status },
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

/** `text` as a regular expression that matches it literally. */
export const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Removes internals from a message that goes into a body: the root's absolute path and URI (the
 * rest of the path, relative to the root, stays and is what the client named) and the engine's
 * build paths. The full message stays in the log.
 *
 * A form of the root is cut only where it is a whole location prefix: it starts the message or
 * follows a separator (not a letter, digit or path character), and a '/' or the end of a location
 * follows it. So `s3://b/cat` is cut from `s3://b/cat/ns/t.lance` but not from `location`,
 * `catalog` or `s3://b/catalog`. A root named on its own becomes '.'. The engine's object path of
 * the root (no scheme, no leading '/': `cat`, `tmp/x`) says nothing on its own, so it is cut only
 * before a '/' and never inside quotes, where the service echoes what the client sent.
 */
export function messageScrubber(rootForms: readonly string[]): (message: string) => string {
  const forms = [...new Set(rootForms.map((f) => f.replace(/\/+$/, '')).filter((f) => f.length > 1))].sort((a, b) => b.length - a.length);
  const isAbsolute = (form: string): boolean => form.startsWith('/') || /^[a-z][a-z0-9+.-]*:\/\//i.test(form);
  const alternation = (list: string[]): string => list.map(escapeRegExp).join('|');
  const absolute = forms.filter(isAbsolute);
  const relative = forms.filter((f) => !isAbsolute(f));
  const parts = [
    ...(absolute.length > 0 ? [`(?<=^|[\\s"'\`(\\[{<=,;:])(${alternation(absolute)})(?:(\\/)|(?=[\\s"'\`)\\]}>,;:?#]|\\.(?:\\s|$)|$))`] : []),
    ...(relative.length > 0 ? [`(?<=^|[\\s(\\[{<=,;:])(?:${alternation(relative)})\\/`] : []),
  ];
  const root = parts.length > 0 ? new RegExp(parts.join('|'), 'g') : null;
  return (message) => {
    const out = message.replace(RUST_SOURCE, '');
    // A root named on its own is '.'; before a '/' it goes with the '/'.
    return root
      ? out.replace(root, (_match, named: string | undefined, slash: string | undefined) => (named !== undefined && slash === undefined ? '.' : ''))
      : out;
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
