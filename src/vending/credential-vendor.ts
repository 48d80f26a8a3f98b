// The port through which the service vends short-lived storage credentials scoped to one table's
// directory (adapters: sts-credential-vendor.ts), and the cache in front of it.

/** What vended credentials may do under their prefix. */
export type DataAccess = 'read' | 'read-write';

/** Where vended credentials reach: the keys under `prefix` of `bucket`, and nothing else. */
export interface CredentialScope {
  bucket: string;
  /** A directory of the bucket: non-empty, ending in '/'. */
  prefix: string;
  access: DataAccess;
  /**
   * Keys under `prefix` that even read-write credentials may not write or delete (the service's
   * own records), as patterns relative to the prefix in which '*' stands for any characters. Each
   * must hold on stores whose '*' stops at the first occurrence of the character after it (radosgw).
   */
  protectedKeys: readonly string[];
}

export interface VendedCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
  expiresAtMillis: number;
}

export interface CredentialVendor {
  vend(scope: CredentialScope): Promise<VendedCredentials>;
  close(): void;
}

/** Characters that IAM resource patterns and policy variables interpret: a prefix holding one cannot be scoped exactly. */
export const POLICY_WILDCARDS = /[*?$]/;

export interface CredentialCacheOptions {
  /** Cached credentials are handed out until this long before they expire. */
  refreshBeforeMs: number;
  /** Scopes remembered at most (least recently used go first). */
  maxEntries?: number;
  now?: () => number;
}

/**
 * Credentials per scope (table directory, access level, protected keys), reused until
 * `refreshBeforeMs` before they expire, so that a burst of describes costs one STS call. Concurrent
 * requests for one scope share one call; a failed call is not remembered.
 */
export class CredentialCache {
  private readonly entries = new Map<string, Promise<VendedCredentials>>();
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(
    private readonly vendor: CredentialVendor,
    private readonly options: CredentialCacheOptions,
  ) {
    this.maxEntries = options.maxEntries ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  async get(scope: CredentialScope): Promise<{ credentials: VendedCredentials; fromCache: boolean }> {
    const key = JSON.stringify([scope.bucket, scope.prefix, scope.access, scope.protectedKeys]);
    const pending = this.entries.get(key);
    if (pending) {
      const credentials = await pending.catch(() => null);
      if (credentials && credentials.expiresAtMillis - this.options.refreshBeforeMs > this.now()) {
        // Most recently used last, so the oldest is dropped first.
        this.entries.delete(key);
        this.entries.set(key, pending);
        return { credentials, fromCache: true };
      }
      if (this.entries.get(key) === pending) this.entries.delete(key);
    }
    const fresh = this.vendor.vend(scope);
    this.entries.set(key, fresh);
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    try {
      return { credentials: await fresh, fromCache: false };
    } catch (e) {
      if (this.entries.get(key) === fresh) this.entries.delete(key);
      throw e;
    }
  }

  close(): void {
    this.entries.clear();
    this.vendor.close();
  }
}
