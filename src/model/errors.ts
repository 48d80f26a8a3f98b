// Lance namespace error codes (spec ErrorResponse.code). The HTTP status of each code lives in the
// HTTP layer; services only ever throw NamespaceError with one of these codes.

export const ErrorCode = {
  Unsupported: 0,
  NamespaceNotFound: 1,
  NamespaceAlreadyExists: 2,
  NamespaceNotEmpty: 3,
  TableNotFound: 4,
  TableAlreadyExists: 5,
  TableIndexNotFound: 6,
  TableIndexAlreadyExists: 7,
  TableTagNotFound: 8,
  TableTagAlreadyExists: 9,
  TransactionNotFound: 10,
  TableVersionNotFound: 11,
  TableColumnNotFound: 12,
  InvalidInput: 13,
  ConcurrentModification: 14,
  PermissionDenied: 15,
  Unauthenticated: 16,
  ServiceUnavailable: 17,
  Internal: 18,
  InvalidTableState: 19,
  TableSchemaValidationError: 20,
  Throttling: 21,
  TableBranchNotFound: 22,
  TableBranchAlreadyExists: 23,
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export class NamespaceError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown; detail?: string },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'NamespaceError';
    this.detail = options?.detail;
  }
  readonly detail: string | undefined;
}

export const invalidInput = (message: string, cause?: unknown) => new NamespaceError(ErrorCode.InvalidInput, message, { cause });
export const unsupported = (message: string) => new NamespaceError(ErrorCode.Unsupported, message);
