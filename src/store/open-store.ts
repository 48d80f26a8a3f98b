import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LocalObjectStore } from './local-store.js';
import type { ObjectStore } from './object-store.js';
import { S3ObjectStore, type S3StoreConfig } from './s3-store.js';

/** How to reach S3 (endpoint, region, credentials); the bucket and prefix come from the location. */
export type S3Connection = Omit<S3StoreConfig, 'bucket' | 'prefix'>;

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

/** Opens a store rooted at a parsed location. */
export async function openStore(location: StoreLocation, s3: S3Connection, options: { createBucket?: boolean } = {}): Promise<ObjectStore> {
  if (location.kind === 'local') {
    const store = new LocalObjectStore(location.dir);
    await store.init();
    return store;
  }
  const store = new S3ObjectStore({ ...s3, bucket: location.bucket, prefix: location.prefix });
  if (options.createBucket) await store.ensureBucket();
  return store;
}
