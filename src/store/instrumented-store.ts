import type { Metrics, StoreOutcome } from '../metrics/metrics.js';
import {
  type DeleteOptions,
  type ListOptions,
  type ListPage,
  type ObjectInfo,
  type ObjectStore,
  PreconditionFailedError,
  type PutCondition,
  type PutOptions,
  type StoredObject,
} from './object-store.js';

// A store that reports each call's operation, outcome and time to the metrics port, and otherwise
// is the store it wraps (app.ts wraps every store the service uses).

/**
 * A lost condition is contention, never an error: an operator alerts on `error`. A put withdrawn by
 * its caller (it rejects with the very reason its PutOptions.placeAfter rejected with) asked
 * nothing of the store: its caller's reason was counted where it arose, if it was a failure.
 */
function outcomeOf(e: unknown, withdrawal?: { reason: unknown }): StoreOutcome {
  if (e instanceof PreconditionFailedError) return 'precondition_failed';
  return withdrawal && withdrawal.reason === e ? 'withdrawn' : 'error';
}

export class InstrumentedStore implements ObjectStore {
  readonly renameDir?: (fromPrefix: string, toPrefix: string) => Promise<void>;
  /** Looks at the file system, not store calls: not reported. */
  readonly linkOnPath?: (key: string) => string | null;
  readonly linksIn?: (dirKey: string) => string[];

  constructor(
    private readonly inner: ObjectStore,
    private readonly metrics: Metrics,
  ) {
    const rename = inner.renameDir?.bind(inner);
    if (rename) this.renameDir = (from, to) => this.timed('rename', () => rename(from, to));
    const linkOnPath = inner.linkOnPath?.bind(inner);
    if (linkOnPath) this.linkOnPath = linkOnPath;
    const linksIn = inner.linksIn?.bind(inner);
    if (linksIn) this.linksIn = linksIn;
  }

  get rootUri(): string {
    return this.inner.rootUri;
  }

  get listsWholeDirectory(): boolean {
    return this.inner.listsWholeDirectory;
  }

  /** Runs one call, reporting it; `absent` tells a null answer (nothing at the key) apart, `failed` names a failure's outcome. */
  private async timed<T>(
    operation: string,
    call: () => Promise<T>,
    absent?: (value: T) => boolean,
    failed: (e: unknown) => StoreOutcome = outcomeOf,
  ): Promise<T> {
    const start = performance.now();
    try {
      const value = await call();
      this.metrics.storeCall(operation, absent?.(value) ? 'not_found' : 'ok', (performance.now() - start) / 1000);
      return value;
    } catch (e) {
      this.metrics.storeCall(operation, failed(e), (performance.now() - start) / 1000);
      throw e;
    }
  }

  get(key: string): Promise<StoredObject | null> {
    return this.timed(
      'get',
      () => this.inner.get(key),
      (v) => v === null,
    );
  }

  head(key: string): Promise<ObjectInfo | null> {
    return this.timed(
      'head',
      () => this.inner.head(key),
      (v) => v === null,
    );
  }

  put(key: string, body: Buffer | string, condition?: PutCondition, options?: PutOptions): Promise<ObjectInfo> {
    let withdrawal: { reason: unknown } | undefined;
    // Noted before the store awaits it, so before the put rejects.
    options?.placeAfter?.catch((reason: unknown) => {
      withdrawal = { reason };
    });
    return this.timed(
      'put',
      () => this.inner.put(key, body, condition, options),
      undefined,
      (e) => outcomeOf(e, withdrawal),
    );
  }

  copy(fromKey: string, toKey: string, condition?: { ifNoneMatch: '*' }): Promise<ObjectInfo> {
    return this.timed('copy', () => this.inner.copy(fromKey, toKey, condition));
  }

  list(prefix: string, options: ListOptions & { details: true }): Promise<ListPage<ObjectInfo>>;
  list(prefix: string, options?: ListOptions): Promise<ListPage>;
  list(prefix: string, options?: ListOptions): Promise<ListPage> {
    return this.timed('list', () => this.inner.list(prefix, options));
  }

  delete(key: string, options?: DeleteOptions): Promise<void> {
    return this.timed('delete', () => this.inner.delete(key, options));
  }

  deletePrefix(prefix: string, options?: { keep?: string[] }): Promise<number> {
    return this.timed('delete_prefix', () => this.inner.deletePrefix(prefix, options));
  }

  location(key: string): string {
    return this.inner.location(key);
  }

  objectPath(key: string): string {
    return this.inner.objectPath(key);
  }

  uri(key: string): string {
    return this.inner.uri(key);
  }

  engineStorageOptions(): Record<string, string> {
    return this.inner.engineStorageOptions();
  }

  clientStorageOptions(): Record<string, string> {
    return this.inner.clientStorageOptions();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
