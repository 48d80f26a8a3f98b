import type { z } from 'zod';
import type { ListTableBranchesResponse } from '../src/model/branches.js';
import type { DescribeTableIndexStatsResponse, GetTableStatsResponse } from '../src/model/columns.js';
import type { ListTableIndicesResponse } from '../src/model/indices.js';
import type { DescribeNamespaceResponse, ListNamespacesResponse } from '../src/model/namespaces.js';
import type { QueryTableRequest } from '../src/model/queries.js';
import type { DescribeTableResponse, ListTablesResponse } from '../src/model/tables.js';
import type { ListTableTagsResponse } from '../src/model/tags.js';
import type { TransactionResponse } from '../src/model/transactions.js';
import type { ListTableVersionsResponse } from '../src/model/versions.js';

// The console's only way to the service: its own REST API, same origin, with the credentials the
// user typed in (an API key in x-api-key or a bearer token). The response types are the server's zod
// schemas (type-only imports: nothing of the server is bundled). Nothing is cached: every view asks
// the API again (fetch with cache: 'no-store').

export type Transaction = z.infer<typeof TransactionResponse>;
export type {
  DescribeNamespaceResponse,
  DescribeTableIndexStatsResponse,
  DescribeTableResponse,
  GetTableStatsResponse,
  ListNamespacesResponse,
  ListTableBranchesResponse,
  ListTableIndicesResponse,
  ListTablesResponse,
  ListTableTagsResponse,
  ListTableVersionsResponse,
};
export type TableVersion = ListTableVersionsResponse['versions'][number];
export type IndexContent = ListTableIndicesResponse['indexes'][number];
export type QueryTableBody = z.input<typeof QueryTableRequest>;

/** The spec's error names by code (docs: the error catalogue). */
export const ERROR_NAMES: Record<number, string> = {
  0: 'Unsupported',
  1: 'NamespaceNotFound',
  2: 'NamespaceAlreadyExists',
  3: 'NamespaceNotEmpty',
  4: 'TableNotFound',
  5: 'TableAlreadyExists',
  6: 'TableIndexNotFound',
  7: 'TableIndexAlreadyExists',
  8: 'TableTagNotFound',
  9: 'TableTagAlreadyExists',
  10: 'TransactionNotFound',
  11: 'TableVersionNotFound',
  12: 'TableColumnNotFound',
  13: 'InvalidInput',
  14: 'ConcurrentModification',
  15: 'PermissionDenied',
  16: 'Unauthenticated',
  17: 'ServiceUnavailable',
  18: 'Internal',
  19: 'InvalidTableState',
  20: 'TableSchemaValidationError',
  21: 'Throttling',
  22: 'TableBranchNotFound',
  23: 'TableBranchAlreadyExists',
};

/** An answer other than 2xx, as the API gave it. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    /** The spec's error code; null when the body was not an error body (a proxy's page, a network failure). */
    readonly code: number | null,
    message: string,
    readonly operation: string,
    readonly requestId: string | null,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export type Credentials = { kind: 'api-key' | 'bearer'; secret: string; remember: boolean };

const STORAGE_KEY = 'lance-ns-console-credentials';
let credentials: Credentials | null = readStored();
const listeners = new Set<() => void>();

function readStored(): Credentials | null {
  try {
    const raw = sessionStorage.getItem(STORAGE_KEY);
    if (!raw) return null;
    const parsed = JSON.parse(raw) as Partial<Credentials>;
    if ((parsed.kind === 'api-key' || parsed.kind === 'bearer') && typeof parsed.secret === 'string')
      return { kind: parsed.kind, secret: parsed.secret, remember: true };
  } catch {
    // Storage may be disabled; the credentials then live in memory only.
  }
  return null;
}

export function currentCredentials(): Credentials | null {
  return credentials;
}

/** Sets (or, with null, forgets) the credentials: in memory, and in this tab's sessionStorage when asked to remember. */
export function setCredentials(next: Credentials | null): void {
  credentials = next;
  try {
    if (next?.remember) sessionStorage.setItem(STORAGE_KEY, JSON.stringify({ kind: next.kind, secret: next.secret }));
    else sessionStorage.removeItem(STORAGE_KEY);
  } catch {
    // See readStored.
  }
  for (const listener of listeners) listener();
}

export function onCredentialsChange(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** A delimiter no part of `id` holds: `$` (the default) when it can, else the unit separator (names never hold control characters). */
export function delimiterFor(id: readonly string[]): string {
  return id.some((part) => part.includes('$')) ? '\u001f' : '$';
}

/** The `{id}` path segment of `id` ([] is the root namespace) and the query that names its delimiter. */
function idPath(id: readonly string[]): { segment: string; query: Record<string, string> } {
  const delimiter = delimiterFor(id);
  return {
    segment: encodeURIComponent(id.length === 0 ? delimiter : id.join(delimiter)),
    query: delimiter === '$' ? {} : { delimiter },
  };
}

type Query = Record<string, string | number | boolean | undefined>;

/** Sends one API request; an answer other than 2xx is thrown as the API gave it (ApiError). */
async function send(
  operation: string,
  method: 'GET' | 'POST',
  path: string,
  query: Query,
  body: unknown,
  signal: AbortSignal | undefined,
  accept: string,
): Promise<Response> {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value));
  const headers: Record<string, string> = { accept };
  if (credentials?.kind === 'api-key') headers['x-api-key'] = credentials.secret;
  if (credentials?.kind === 'bearer') headers.authorization = `Bearer ${credentials.secret}`;
  if (method === 'POST') headers['content-type'] = 'application/json';
  const url = `${path}${params.size > 0 ? `?${params}` : ''}`;
  let response: Response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: method === 'POST' ? JSON.stringify(body ?? {}) : undefined,
      cache: 'no-store',
      signal,
      credentials: 'omit',
    });
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new ApiError(0, null, `the service did not answer: ${(e as Error).message}`, operation, null);
  }
  if (!response.ok) {
    const err = (parseJson(await response.text()) ?? {}) as { code?: unknown; error?: unknown };
    const code = typeof err.code === 'number' ? err.code : null;
    const message = typeof err.error === 'string' ? err.error : `HTTP ${response.status} ${response.statusText}`.trim();
    throw new ApiError(response.status, code, message, operation, response.headers.get('x-request-id'));
  }
  return response;
}

function parseJson(text: string): unknown {
  try {
    return text === '' ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

async function call<T>(operation: string, method: 'GET' | 'POST', path: string, query: Query = {}, body?: unknown, signal?: AbortSignal): Promise<T> {
  const response = await send(operation, method, path, query, body, signal, 'application/json');
  return parseJson(await response.text()) as T;
}

/** One page of a list: at most `limit` items and the token of the next page. */
export interface PageArgs {
  limit: number;
  pageToken?: string | undefined;
  signal?: AbortSignal | undefined;
}

export const api = {
  listNamespaces(id: readonly string[], { limit, pageToken, signal }: PageArgs): Promise<ListNamespacesResponse> {
    const { segment, query } = idPath(id);
    return call('ListNamespaces', 'GET', `/v1/namespace/${segment}/list`, { ...query, limit, page_token: pageToken }, undefined, signal);
  },
  describeNamespace(id: readonly string[], signal?: AbortSignal): Promise<DescribeNamespaceResponse> {
    const { segment, query } = idPath(id);
    return call('DescribeNamespace', 'POST', `/v1/namespace/${segment}/describe`, query, {}, signal);
  },
  listTables(id: readonly string[], { limit, pageToken, signal }: PageArgs): Promise<ListTablesResponse> {
    const { segment, query } = idPath(id);
    return call(
      'ListTables',
      'GET',
      `/v1/namespace/${segment}/table/list`,
      { ...query, limit, page_token: pageToken, include_declared: true },
      undefined,
      signal,
    );
  },
  /** Every table of the catalog, as ids split on the unit separator (no name holds one). */
  async listAllTables({ limit, pageToken, signal }: PageArgs): Promise<{ tables: string[][]; pageToken: string | undefined }> {
    const page = await call<ListTablesResponse>(
      'ListAllTables',
      'GET',
      '/v1/table',
      { delimiter: '\u001f', limit, page_token: pageToken, include_declared: true },
      undefined,
      signal,
    );
    return { tables: page.tables.map((t) => t.split('\u001f')), pageToken: page.page_token ?? undefined };
  },
  describeTable(id: readonly string[], detailed: boolean, signal?: AbortSignal): Promise<DescribeTableResponse> {
    const { segment, query } = idPath(id);
    return call(
      'DescribeTable',
      'POST',
      `/v1/table/${segment}/describe`,
      { ...query, with_table_uri: true, check_declared: true, load_detailed_metadata: detailed, with_maintenance: true },
      {},
      signal,
    );
  },
  tableStats(id: readonly string[], signal?: AbortSignal): Promise<GetTableStatsResponse> {
    const { segment, query } = idPath(id);
    return call('GetTableStats', 'POST', `/v1/table/${segment}/stats`, query, {}, signal);
  },
  listIndices(id: readonly string[], { limit, pageToken, signal }: PageArgs): Promise<ListTableIndicesResponse> {
    const { segment, query } = idPath(id);
    return call('ListTableIndices', 'GET', `/v1/table/${segment}/index/list`, { ...query, limit, page_token: pageToken }, undefined, signal);
  },
  indexStats(id: readonly string[], index: string, signal?: AbortSignal): Promise<DescribeTableIndexStatsResponse> {
    const { segment, query } = idPath(id);
    return call('DescribeTableIndexStats', 'POST', `/v1/table/${segment}/index/${encodeURIComponent(index)}/stats`, query, {}, signal);
  },
  listTags(id: readonly string[], { limit, pageToken, signal }: PageArgs): Promise<ListTableTagsResponse> {
    const { segment, query } = idPath(id);
    return call('ListTableTags', 'GET', `/v1/table/${segment}/tags/list`, { ...query, limit, page_token: pageToken }, undefined, signal);
  },
  listBranches(id: readonly string[], { limit, pageToken, signal }: PageArgs): Promise<ListTableBranchesResponse> {
    const { segment, query } = idPath(id);
    return call('ListTableBranches', 'GET', `/v1/table/${segment}/branches/list`, { ...query, limit, page_token: pageToken }, undefined, signal);
  },
  /** Versions of `branch` (main when absent) newest first. */
  listVersions(id: readonly string[], { limit, pageToken, signal }: PageArgs, branch?: string): Promise<ListTableVersionsResponse> {
    const { segment, query } = idPath(id);
    return call(
      'ListTableVersions',
      'GET',
      `/v1/table/${segment}/version/list`,
      { ...query, limit, page_token: pageToken, descending: true, branch },
      undefined,
      signal,
    );
  },
  /** The rows of `version` of `branch` (main when absent). */
  countRows(id: readonly string[], version: number, signal?: AbortSignal, branch?: string): Promise<number> {
    const { segment, query } = idPath(id);
    return call('CountTableRows', 'POST', `/v1/table/${segment}/count_rows`, query, branch === undefined ? { version } : { version, branch }, signal);
  },
  /** QueryTable: the rows as the Arrow IPC file the API answers. */
  async queryTable(id: readonly string[], body: QueryTableBody, signal?: AbortSignal): Promise<ArrayBuffer> {
    const { segment, query } = idPath(id);
    const response = await send('QueryTable', 'POST', `/v1/table/${segment}/query`, query, body, signal, 'application/vnd.apache.arrow.file');
    return response.arrayBuffer();
  },
  /** A transaction: the service's own (a job, a batch) by its id, or a Lance commit as [...table id, version]. */
  /** DescribeTransaction; `branch`: a Lance commit's line of history (a field of the service's, not the spec's). */
  describeTransaction(id: readonly string[], signal?: AbortSignal, branch?: string): Promise<Transaction> {
    const { segment, query } = idPath(id);
    return call('DescribeTransaction', 'POST', `/v1/transaction/${segment}/describe`, query, branch === undefined ? {} : { branch }, signal);
  },
};
