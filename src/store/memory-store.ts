import {
  compareKeys,
  InvalidKeyError,
  type ListOptions,
  type ListPage,
  type ObjectInfo,
  type ObjectStore,
  PreconditionFailedError,
  type PutCondition,
  type PutOptions,
  type StoredObject,
} from './object-store.js';

// In-memory adapter, for testing the service protocols in milliseconds. It keeps the common
// contract of the port (test/store/object-store.contract.test.ts), not the quirks of either real
// store. No method awaits anything: each reads and writes the map in one synchronous step, so each
// call is atomic, and of racing conditional puts exactly one wins, as on S3.

const DEFAULT_MAX_KEYS = 1000;

interface Entry {
  /** Never handed out: callers get copies, so they cannot change stored bytes. */
  body: Buffer;
  etag: string;
  lastModifiedMs: number;
}

let storeCount = 0;

export class MemoryObjectStore implements ObjectStore {
  readonly rootUri: string;
  readonly listsWholeDirectory = false;
  private readonly objects = new Map<string, Entry>();
  /** Numbers the writes, so that every write makes a new etag (even of identical bytes). */
  private writes = 0;

  /** `name` is the host of the root URI (`memory://name`); by default a fresh one per store. */
  constructor(name = `store-${++storeCount}`) {
    this.rootUri = `memory://${name}`;
  }

  location(key: string): string {
    return key === '' ? this.rootUri : `${this.rootUri}/${key.replace(/\/$/, '')}`;
  }

  /** As on S3: the key itself, the host (`name`) being the bucket. */
  objectPath(key: string): string {
    return key.replace(/\/$/, '');
  }

  uri(key: string): string {
    return this.location(key);
  }

  engineStorageOptions(): Record<string, string> {
    return {};
  }

  clientStorageOptions(): Record<string, string> {
    return {};
  }

  async close(): Promise<void> {}

  private static info(key: string, entry: Entry): ObjectInfo {
    return { key, size: entry.body.length, etag: entry.etag, lastModified: new Date(entry.lastModifiedMs) };
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const entry = this.objects.get(checkKey(key));
    return entry ? MemoryObjectStore.info(key, entry) : null;
  }

  async get(key: string): Promise<StoredObject | null> {
    const entry = this.objects.get(checkKey(key));
    return entry ? { ...MemoryObjectStore.info(key, entry), body: Buffer.from(entry.body) } : null;
  }

  async put(key: string, body: Buffer | string, condition?: PutCondition, options?: PutOptions): Promise<ObjectInfo> {
    // A string makes a fresh buffer already; a caller's buffer is copied, as the caller may reuse it.
    const bytes = Buffer.from(body);
    const checked = checkKey(key);
    if (options?.placeAfter) await options.placeAfter;
    return this.place(checked, bytes, condition);
  }

  /** Stores `body` (owned by the store from now on) if `condition` holds. */
  private place(key: string, body: Buffer, condition?: PutCondition): ObjectInfo {
    const current = this.objects.get(key);
    if (condition && 'ifNoneMatch' in condition && current) throw new PreconditionFailedError(key, 'object exists');
    if (condition && 'ifMatch' in condition) {
      if (!current) throw new PreconditionFailedError(key, 'object does not exist');
      if (current.etag !== condition.ifMatch) throw new PreconditionFailedError(key, 'etag changed');
    }
    const entry: Entry = { body, etag: `"m${(++this.writes).toString(16)}"`, lastModifiedMs: Date.now() };
    this.objects.set(key, entry);
    return MemoryObjectStore.info(key, entry);
  }

  async copy(fromKey: string, toKey: string, condition?: { ifNoneMatch: '*' }): Promise<ObjectInfo> {
    const source = this.objects.get(checkKey(fromKey));
    if (!source) throw Object.assign(new Error(`no such object: ${fromKey}`), { code: 'ENOENT' });
    // Stored bodies are never changed in place, so the copy can share the bytes.
    return this.place(checkKey(toKey), source.body, condition);
  }

  /** The objects under `prefix`, in byte order (UTF-8, as S3 lists keys); only these are sorted. */
  private sortedUnder(prefix: string): Array<{ key: string; bytes: Buffer; entry: Entry }> {
    const found: Array<{ key: string; bytes: Buffer; entry: Entry }> = [];
    for (const [key, entry] of this.objects) if (key.startsWith(prefix)) found.push({ key, bytes: Buffer.from(key), entry });
    return found.sort((a, b) => Buffer.compare(a.bytes, b.bytes));
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListPage<ObjectInfo>> {
    const after = options.startAfter;
    const afterBytes = after === undefined ? undefined : Buffer.from(after);
    // A startAfter ending in '/' also skips everything under it, as the other adapters do.
    const skippedDir = after?.endsWith('/') ? after : undefined;
    const maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
    const objects: ObjectInfo[] = [];
    const commonPrefixes: string[] = [];
    let last: string | undefined;
    for (const { key, bytes, entry } of this.sortedUnder(prefix)) {
      if (afterBytes !== undefined && Buffer.compare(bytes, afterBytes) <= 0) continue;
      if (skippedDir !== undefined && key.startsWith(skippedDir)) continue;
      const slash = options.delimiter === '/' ? key.indexOf('/', prefix.length) : -1;
      // Keys sharing a directory are adjacent in byte order, and the directory sorts where its first key does.
      const name = slash >= 0 ? key.slice(0, slash + 1) : key;
      if (name === last) continue;
      // A directory at or before startAfter was listed already, though later keys lie under it.
      if (slash >= 0 && after !== undefined && compareKeys(name, after) <= 0) continue;
      if (objects.length + commonPrefixes.length === maxKeys) return { objects, commonPrefixes, ...(last !== undefined ? { nextStartAfter: last } : {}) };
      if (slash >= 0) commonPrefixes.push(name);
      else objects.push(MemoryObjectStore.info(key, entry));
      last = name;
    }
    return { objects, commonPrefixes };
  }

  async delete(key: string): Promise<void> {
    this.objects.delete(checkKey(key));
  }

  async deletePrefix(prefix: string, options: { keep?: string[] } = {}): Promise<number> {
    if (prefix !== '' && !prefix.endsWith('/')) throw new Error(`deletePrefix needs '' or a prefix ending in '/': ${prefix}`);
    const keep = new Set(options.keep ?? []);
    let count = 0;
    for (const key of [...this.objects.keys()]) {
      if (key.startsWith(prefix) && !keep.has(key)) {
        this.objects.delete(key);
        count++;
      }
    }
    return count;
  }

  /** Atomic like the local store's rename(2): the keys move in one step, with their etags. */
  async renameDir(fromPrefix: string, toPrefix: string): Promise<void> {
    if (!fromPrefix.endsWith('/') || !toPrefix.endsWith('/')) throw new Error(`renameDir needs prefixes ending in '/': ${fromPrefix} ${toPrefix}`);
    if (toPrefix.startsWith(fromPrefix)) throw new Error(`cannot rename ${fromPrefix} into itself (${toPrefix})`);
    const all = [...this.objects];
    if (all.some(([key]) => key.startsWith(toPrefix))) throw new PreconditionFailedError(toPrefix, 'destination exists');
    const moving = all.filter(([key]) => key.startsWith(fromPrefix));
    if (moving.length === 0) throw Object.assign(new Error(`no such directory: ${fromPrefix}`), { code: 'ENOENT' });
    for (const [key, entry] of moving) {
      this.objects.delete(key);
      this.objects.set(`${toPrefix}${key.slice(fromPrefix.length)}`, entry);
    }
  }
}

/** Keys are relative: refused when empty or absolute, as no other adapter can store them either. */
function checkKey(key: string): string {
  if (key === '' || key.startsWith('/')) throw new InvalidKeyError(`invalid store key: ${JSON.stringify(key)}`);
  return key;
}
