import { ZodError } from 'zod';
import { EngineError } from '../engine/lance-engine.js';
import type { ErrorResponse } from '../model/common.js';
import { ErrorCode, NamespaceError } from '../model/errors.js';
import { PreconditionFailedError, StoreUnavailableError } from '../store/object-store.js';

// One mapping from every error the service can raise to the spec's error body and HTTP status.
// Clients classify only by `code`; `type`/`title`/`status` follow the spec's problem-details examples.

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
  406: { type: '/errors/unsupported-operation', title: 'The server does not support this operation' },
  409: { type: '/errors/conflict', title: 'The namespace has been concurrently modified' },
  413: { type: '/errors/bad-request', title: 'Request body too large' },
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

/** Maps any thrown value to the wire error; `internal` is true for failures worth logging as errors. */
export function toWireError(error: unknown, instance: string): WireError & { internal: boolean } {
  if (error instanceof NamespaceError) {
    const status = httpStatusOfCode(error.code);
    return { ...wireError(status, error.code, error.message, instance, error.detail), internal: status >= 500 };
  }
  if (error instanceof ZodError) {
    return { ...wireError(400, ErrorCode.InvalidInput, describeZodError(error, 'request'), instance), internal: false };
  }
  if (error instanceof StoreUnavailableError) {
    return { ...wireError(503, ErrorCode.ServiceUnavailable, `the object store is unavailable: ${error.message}`, instance), internal: true };
  }
  if (error instanceof PreconditionFailedError) {
    return { ...wireError(409, ErrorCode.ConcurrentModification, `concurrent modification: ${error.message}`, instance), internal: false };
  }
  if (error instanceof EngineError) {
    return { ...wireError(500, ErrorCode.Internal, `Lance engine error: ${error.message}`, instance), internal: true };
  }
  const fastifyError = (typeof error === 'object' && error !== null ? error : {}) as FastifyLikeError;
  if (fastifyError.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return { ...wireError(413, ErrorCode.InvalidInput, 'request body is too large', instance), internal: false };
  }
  if (fastifyError.statusCode !== undefined && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500) {
    return { ...wireError(400, ErrorCode.InvalidInput, fastifyError.message ?? 'bad request', instance), internal: false };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { ...wireError(500, ErrorCode.Internal, `internal error: ${message}`, instance), internal: true };
}
