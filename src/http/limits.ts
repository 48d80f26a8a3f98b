import type { FastifyReply, FastifyRequest } from 'fastify';
import { invalidInput } from '../model/errors.js';

/** Bounds on what one request may cost (documented in docs/compatibility.md, Limits). */
export interface RequestLimits {
  /** Entries of one string map (properties, metadata, storage options, context). */
  maxMapEntries: number;
  /** UTF-8 bytes of one string map's keys and values together. */
  maxMapBytes: number;
  /** Arrow bodies above this many bytes (or of unknown length) are large... */
  largeBodyBytes: number;
  /** ...and at most this many are received at once; more are a 503 (code 17). */
  maxConcurrentLargeBodies: number;
  /** Operations of one BatchCommitTables. */
  maxBatchOperations: number;
  /** Entries of one BatchCreateTableVersions. */
  maxBatchEntries: number;
}

/** A list of a request body bounded by one of the limits (a batch's operations). */
export interface BoundedList {
  field: string;
  limit: 'maxBatchOperations' | 'maxBatchEntries';
}

/** The fields that hold string maps a client can make as large as the body allows. */
const MAP_FIELDS = new Set(['properties', 'metadata', 'storage_options', 'context']);
const MAX_MAP_SEARCH_DEPTH = 4;

/**
 * Refuses string maps past the limits before the body is validated or anything is stored: a map
 * of a million entries costs seconds in every later read of its record. Looks for the map fields
 * down to a small depth (batch operations nest them).
 */
export function checkMapLimits(value: unknown, limits: RequestLimits, where = '', depth = 0): void {
  if (typeof value !== 'object' || value === null || depth > MAX_MAP_SEARCH_DEPTH) return;
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) checkMapLimits(item, limits, `${where}[${i}]`, depth + 1);
    return;
  }
  for (const [field, inner] of Object.entries(value)) {
    const path = where === '' ? field : `${where}.${field}`;
    if (MAP_FIELDS.has(field) && typeof inner === 'object' && inner !== null && !Array.isArray(inner))
      checkMapSize(inner as Record<string, unknown>, limits, path);
    else checkMapLimits(inner, limits, path, depth + 1);
  }
}

/**
 * Refuses a list past its limit before the body is validated or anything is written: a batch is
 * applied in one request, under one lease, and its every item costs store round trips.
 */
export function checkListLimit(body: unknown, bounded: BoundedList, limits: RequestLimits): void {
  const list = typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[bounded.field] : undefined;
  const max = limits[bounded.limit];
  if (Array.isArray(list) && list.length > max) throw invalidInput(`${bounded.field}: at most ${max} are allowed in one request, got ${list.length}`);
}

function checkMapSize(map: Record<string, unknown>, limits: RequestLimits, path: string): void {
  let entries = 0;
  let bytes = 0;
  // for-in stops at the first entry past a limit; Object.entries would first copy every entry.
  for (const key in map) {
    const v = map[key];
    entries += 1;
    bytes += Buffer.byteLength(key) + (typeof v === 'string' ? Buffer.byteLength(v) : 0);
    if (entries > limits.maxMapEntries) throw invalidInput(`${path}: at most ${limits.maxMapEntries} entries are allowed`);
    if (bytes > limits.maxMapBytes) throw invalidInput(`${path}: at most ${limits.maxMapBytes} bytes of keys and values are allowed`);
  }
}

/** Counts the large bodies being received; a slot is taken when a request starts and given back when its response ends. */
export class LargeBodySlots {
  private inUse = 0;

  constructor(private readonly limits: RequestLimits) {}

  /** True when the request may go on (a slot was taken for it if its body is large). */
  admit(request: FastifyRequest, reply: FastifyReply): boolean {
    const length = Number(request.headers['content-length'] ?? Number.NaN);
    // Chunked bodies have no length up front: count them as large.
    const large = Number.isNaN(length) ? request.headers['transfer-encoding'] !== undefined : length > this.limits.largeBodyBytes;
    if (!large) return true;
    if (this.inUse >= this.limits.maxConcurrentLargeBodies) return false;
    this.inUse += 1;
    let released = false;
    reply.raw.once('close', () => {
      if (!released) this.inUse -= 1;
      released = true;
    });
    return true;
  }
}
