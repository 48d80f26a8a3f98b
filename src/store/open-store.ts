import { LocalObjectStore } from './local-store.js';
import type { StoreLocation } from './location.js';
import type { ObjectStore } from './object-store.js';
import { S3ObjectStore, type S3StoreConfig } from './s3/s3-store.js';

/** How to reach S3 (endpoint, region, credentials); the bucket and prefix come from the location. */
export type S3Connection = Omit<S3StoreConfig, 'bucket' | 'prefix'>;

export { parseLocation, type StoreFactory, type StoreLocation } from './location.js';

/** The store rooted at a parsed location, as it is (nothing created). */
export function storeAt(location: StoreLocation, s3: S3Connection): ObjectStore {
  return location.kind === 'local' ? new LocalObjectStore(location.dir) : new S3ObjectStore({ ...s3, bucket: location.bucket, prefix: location.prefix });
}

/** Opens a store rooted at a parsed location: the local directory or (if asked) the bucket is created. */
export async function openStore(location: StoreLocation, s3: S3Connection, options: { createBucket?: boolean } = {}): Promise<ObjectStore> {
  const store = storeAt(location, s3);
  if (store instanceof LocalObjectStore) await store.init();
  else if (options.createBucket && store instanceof S3ObjectStore) await store.ensureBucket();
  return store;
}
