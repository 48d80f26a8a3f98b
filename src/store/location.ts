import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ObjectStore } from './object-store.js';

// Where a store is rooted, parsed from a root or table location; no adapter is named here, so the
// service can resolve locations without knowing which adapters exist.

export type StoreLocation = { kind: 'local'; dir: string } | { kind: 's3'; bucket: string; prefix: string };

/**
 * Parses a root or table location: `s3://bucket/prefix`, `file:///abs/path`, or a filesystem path
 * (relative paths resolve against the working directory). Returns null for anything else.
 */
export function parseLocation(location: string): StoreLocation | null {
  const trimmed = location.trim();
  if (trimmed === '') return null;
  const s3 = /^s3a?:\/\/([^/]+)\/?(.*)$/i.exec(trimmed);
  if (s3) {
    const bucket = s3[1] ?? '';
    const prefix = (s3[2] ?? '').replace(/\/+$/, '');
    if (bucket === '' || prefix.split('/').some((p, _i, all) => p === '..' || p === '.' || (p === '' && all.length > 1))) return null;
    return { kind: 's3', bucket, prefix };
  }
  if (/^file:\/\//i.test(trimmed)) {
    try {
      return { kind: 'local', dir: path.resolve(fileURLToPath(trimmed)) };
    } catch {
      return null;
    }
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed)) return null; // another scheme (gs://, az://, http://)
  return { kind: 'local', dir: path.resolve(trimmed) };
}

/** Makes the store rooted at a location (app.ts gives the service one, see Locations). */
export type StoreFactory = (location: StoreLocation) => ObjectStore;
