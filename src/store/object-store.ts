// The ObjectStore port: the only way the service touches persistent state. Every race in the
// catalog is settled by one of the two conditional puts below, so each adapter must make them
// atomic, and durable before they return unless the caller said they need not be (PutOptions).

/** An object as a listing names it; with `details` the listing says more (ObjectInfo). */
export interface ListedObject {
  key: string;
}

/** Metadata of a stored object. `etag` is opaque; compare it only for equality. */
export interface ObjectInfo extends ListedObject {
  size: number;
  etag: string;
  lastModified: Date;
}

export interface StoredObject extends ObjectInfo {
  body: Buffer;
}

/** Put only if the key is absent (`ifNoneMatch: '*'`) or only if its current etag matches (`ifMatch`). */
export type PutCondition = { ifNoneMatch: '*' } | { ifMatch: string };

/**
 * What a caller knows of the object it puts, which a store may use to do the put more cheaply.
 * Every adapter may ignore every hint (the memory and S3 adapters ignore them all): the answer of
 * the put and its condition are the same either way, but for the allowances each hint states.
 *
 * Why hints that only a local disk uses are in the port: the service, which sees only the port,
 * is what knows these facts of its objects (a version slot's reservation is released soon; Lance's
 * hint belongs beside its table's versions), and a store that wraps another (InstrumentedStore)
 * hands them on unread. Each is said here as a fact of the object, and as what a store may then
 * answer; what the local store does with it is said in local-store.ts.
 */
export interface PutHints {
  /**
   * The body is the content of this object, read when it had this etag (a staged file committed
   * under its final name). A store may place that object's bytes themselves if it still has that
   * etag and holds the body; the put then reports, for the new key, the etag and modification time
   * that object had. Otherwise the body is written, as without the hint.
   */
  sameAs?: { key: string; etag: string };
  /**
   * The object belongs beside others under its key's prefix (Lance's hint beside its version's
   * manifest, a listing snapshot beside its stamp), which a drop, rename or clean-up may have
   * deleted meanwhile. A store in which a prefix exists by itself (a local disk's directory,
   * which would hold nothing but this object: a table name that looks taken, a namespace that is
   * not empty) may then refuse the put with PreconditionFailedError, a condition that did not
   * hold, rather than make the prefix again; callers treat that as "what it belonged to is gone".
   * (A table renamed onto the old name meanwhile gets the late hint: readers probe past a hint,
   * see TableVersions.latest.)
   */
  besideExisting?: boolean;
  /**
   * With a create-if-absent that need not be durable: the object is deleted again soon (with
   * DeleteOptions.keepDirectory), and another such put follows under the same prefix (a version
   * slot's reservation). A store may then reuse the deleted object's storage for the next one,
   * which allows the torn read that ObjectStore.get describes.
   */
  shortLived?: boolean;
}

/** How a put is done: `durable` and `placeAfter` bind every adapter, the PutHints none. */
export interface PutOptions extends PutHints {
  /**
   * `false`: the caller accepts that a crash of the machine soon after the put undoes it (the key
   * absent, or as it was) or leaves the object unreadable; a crash of the process loses nothing.
   * Only for what is harmless to lose with the machine: a lease whose holder dies with it, a hint
   * readers check. The condition holds either way. A store that is always durable (S3, memory)
   * ignores it; the local one then skips its fsyncs. Default: durable before the put returns.
   */
  durable?: boolean;
  /**
   * The object is placed (made visible under its key) only once this has resolved; if it rejects,
   * nothing is placed and the put rejects with its error. Meanwhile a store may prepare the write
   * out of sight (a local store writes the body and makes it durable), so a write that must follow
   * another one (a version's sidecar follows its manifest) waits for the other's placement, not
   * for its own preparation.
   */
  placeAfter?: Promise<unknown>;
}

/** What a caller knows of a delete, as PutHints: every adapter may ignore it. */
export interface DeleteOptions {
  /**
   * The caller puts under the same prefix again soon (a version slot's reservations), or knows
   * other keys remain under it (a staged manifest beside the version it became): a store in which
   * a prefix exists by itself (a local disk's directory) may keep it, sparing its removal and
   * remaking. A LIST with a delimiter may then show the prefix as a common prefix holding no key.
   */
  keepDirectory?: boolean;
}

export interface ListOptions {
  /** Group keys by the next occurrence of this string after the prefix (only '/' is supported). */
  delimiter?: '/';
  /** Return only keys (and common prefixes) that sort strictly after this key; one ending in '/' also skips all keys under it. */
  startAfter?: string;
  /** Upper bound on objects + common prefixes in one page. */
  maxKeys?: number;
  /**
   * The caller needs each object's size, etag and time: a local store then stats every listed file,
   * which costs a syscall per entry, so only callers that use them ask.
   */
  details?: boolean;
}

export interface ListPage<T extends ListedObject = ListedObject> {
  objects: T[];
  /** With a delimiter: the distinct "directories" one level below the prefix, each ending in '/'. */
  commonPrefixes: string[];
  /** Set when more entries follow; pass it as `startAfter` to continue. */
  nextStartAfter?: string;
}

/** The condition of a conditional put did not hold: the key exists, or its etag changed. */
export class PreconditionFailedError extends Error {
  constructor(
    readonly key: string,
    detail: string,
  ) {
    super(`precondition failed for ${key}: ${detail}`);
    this.name = 'PreconditionFailedError';
  }
}

/** The key cannot name an object in this store (too long for it, or not a valid key): the caller's input is at fault. */
export class InvalidKeyError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'InvalidKeyError';
  }
}

/** The store could not be reached or kept failing after bounded retries. */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}

/**
 * Keys are '/'-separated paths relative to the store's root; they never start with '/'.
 * `location(key)` turns a key into the form the Lance engine and clients open
 * (an absolute path on local disk, `s3://bucket/...` on S3).
 */
export interface ObjectStore {
  /** URI of the store root, e.g. `file:///data` or `s3://bucket/prefix`. */
  readonly rootUri: string;
  /**
   * True when a LIST may cost time in proportion to the whole directory rather than to the page
   * (a local directory changed since it was last read is read and sorted again), so callers prefer
   * point lookups there.
   */
  readonly listsWholeDirectory: boolean;
  /**
   * A get that races the key's delete may answer with bytes that were never the key's, torn or
   * whole, with the etag of the deleted object or of the other one: a store may reuse the storage
   * of a deleted short-lived object (PutHints.shortLived) for the next one, which may be under
   * another key (the local store does). Such an answer stands for an absent key: its etag is
   * not one the key shows, and a body that does not parse must not be taken for what it holds now.
   */
  get(key: string): Promise<StoredObject | null>;
  head(key: string): Promise<ObjectInfo | null>;
  put(key: string, body: Buffer | string, condition?: PutCondition, options?: PutOptions): Promise<ObjectInfo>;
  /** Copy within the store; with `ifNoneMatch` the destination must be absent. */
  copy(fromKey: string, toKey: string, condition?: { ifNoneMatch: '*' }): Promise<ObjectInfo>;
  list(prefix: string, options: ListOptions & { details: true }): Promise<ListPage<ObjectInfo>>;
  list(prefix: string, options?: ListOptions): Promise<ListPage>;
  /** Deleting an absent key is not an error. */
  delete(key: string, options?: DeleteOptions): Promise<void>;
  /**
   * Deletes every key under the prefix ('' for all, else ending in '/') but those in `keep`;
   * returns how many went. A prefix that is a symbolic link (linkOnPath) loses the link only.
   */
  deletePrefix(prefix: string, options?: { keep?: string[] }): Promise<number>;
  /**
   * Atomically renames a directory (both arguments end in '/'); PreconditionFailedError when the
   * destination exists. Only stores with a real rename implement it (object stores do not).
   */
  renameDir?(fromPrefix: string, toPrefix: string): Promise<void>;
  /**
   * Only a store whose keys are paths of a file system (a local disk) has symbolic links, and
   * defines this: the key ('' or ending in '/') of the first directory on the path of `key`,
   * below the root, that is a link (`key` itself included); null when none is.
   */
  linkOnPath?(key: string): string | null;
  /**
   * Defined with linkOnPath: the keys (each ending in '/') of the entries of the directory
   * `dirKey` ('' or ending in '/') that are symbolic links, whatever they lead to (none for a
   * directory that does not exist). Listings never show a link; this names them, from the same
   * read of the directory, for a caller that must reach through none. The path to the directory
   * is not looked at (linkOnPath is).
   */
  linksIn?(dirKey: string): string[];
  /** Location of a key as the Lance engine opens it. */
  location(key: string): string;
  /**
   * A key as Lance's object_store names paths, which is how clients send manifest paths: on a local
   * disk the absolute path without its leading '/', on S3 the key within the bucket.
   */
  objectPath(key: string): string;
  /** Location as a complete URI (`file://...` or `s3://...`). */
  uri(key: string): string;
  /** Options the Lance engine needs to open locations in this store (endpoint, region, keys). */
  engineStorageOptions(): Record<string, string>;
  /** Options safe to hand to clients: never secrets. */
  clientStorageOptions(): Record<string, string>;
  /** Releases connections; the store must not be used afterwards. */
  close(): Promise<void>;
}

/** Lists every entry under a prefix, following pages. Use only where the result is known to be small. */
export async function listAll(store: ObjectStore, prefix: string, options: ListOptions & { details: true }): Promise<ListPage<ObjectInfo>>;
export async function listAll(store: ObjectStore, prefix: string, options?: ListOptions): Promise<ListPage>;
export async function listAll(store: ObjectStore, prefix: string, options: ListOptions = {}): Promise<ListPage> {
  const objects: ListedObject[] = [];
  const commonPrefixes: string[] = [];
  let startAfter = options.startAfter;
  for (;;) {
    const page = await store.list(prefix, { ...options, ...(startAfter !== undefined ? { startAfter } : {}) });
    objects.push(...page.objects);
    commonPrefixes.push(...page.commonPrefixes);
    if (!page.nextStartAfter) return { objects, commonPrefixes };
    startAfter = page.nextStartAfter;
  }
}

/**
 * Byte-wise UTF-8 order, the order S3 lists keys in, without encoding: UTF-8 byte order is code
 * point order, and UTF-16 code unit order differs from it only between a surrogate (D800-DFFF,
 * part of a code point above U+FFFF) and a unit in E000-FFFF, so those two ranges swap places.
 */
export function compareKeys(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x - y;
  }
  return a.length - b.length;
}
