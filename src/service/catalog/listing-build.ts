import { randomUUID } from 'node:crypto';
import pLimit from 'p-limit';
import { type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import { childOfPrefix, indexReadyKey, namespaceDirKey } from './layout.js';
import type { IndexEntries } from './listing-entries.js';
import { CHECK_CONCURRENCY, LIST_PAGE } from './listing-reads.js';
import type { ListingSnapshots } from './listing-snapshot.js';

// Namespaces the listing index (listing-index.ts) does not cover yet (written by Lance's own
// directory catalog, or by a version of this service before the index) have no
// `_catalog/index.ready` marker: the first listing settles every child in it once, then puts the
// marker. Children that Lance's directory catalog creates in the same namespace after that are not
// seen until it is rebuilt.

export class IndexBuilder {
  /** Builds running in this process, by namespace: listings that find one index missing at once (a ListAllTables lists a namespace's children and its tables) share one build. */
  private readonly running = new Map<string, Promise<void>>();

  constructor(
    private readonly store: ObjectStore,
    private readonly entries: IndexEntries,
    private readonly snapshots: ListingSnapshots,
  ) {}

  /** Whether the namespace's index covers every child (its ready marker is there). */
  async isReady(ns: string[]): Promise<boolean> {
    return (await this.store.head(indexReadyKey(ns))) !== null;
  }

  /**
   * The ready marker's token (null: no marker, the index is to be built): a new one for each
   * namespace created and each build, so that a listing snapshot made before a drop of the
   * namespace, or before a rebuild, is of another token (listing-snapshot.ts). '' for a marker
   * written before markers held one, or whose bytes a crash lost.
   */
  async readyToken(ns: string[]): Promise<string | null> {
    return (await this.store.get(indexReadyKey(ns)))?.body.toString('utf8') ?? null;
  }

  /** Builds the index of a namespace that has none yet (see the header); safe to run on several replicas at once. */
  build(ns: string[]): Promise<void> {
    const key = namespaceDirKey(ns);
    const running = this.running.get(key);
    if (running) return running;
    const built = this.buildOnce(ns).finally(() => this.running.delete(key));
    this.running.set(key, built);
    return built;
  }

  private async buildOnce(ns: string[]): Promise<void> {
    const dirKey = namespaceDirKey(ns);
    const limit = pLimit(CHECK_CONCURRENCY);
    let startAfter: string | undefined;
    for (;;) {
      const page = await this.store.list(dirKey, { delimiter: '/', maxKeys: LIST_PAGE, ...(startAfter ? { startAfter } : {}) });
      const children = page.commonPrefixes.map((p) => childOfPrefix(dirKey, p)).filter((c) => c !== null);
      // Each under a pending entry of its own, like any change: a rebuild that dies half-way through a
      // settle, racing an operation on the name, leaves the name to be read from its state.
      await Promise.all(children.map((c) => limit(() => this.entries.around(c.kind, { namespace: ns, name: c.name }, async () => undefined))));
      if (!page.nextStartAfter) break;
      startAfter = page.nextStartAfter;
    }
    // Also when there was no child to settle: a snapshot from before a rebuild must not pass.
    await Promise.all([this.snapshots.invalidate(ns, 'table'), this.snapshots.invalidate(ns, 'namespace')]);
    await this.markReady(ns);
  }

  /**
   * Marks a namespace's index complete: a new namespace has no children to index. Not fsynced: a
   * marker lost with the machine costs a listing that indexes the namespace again, and the journal
   * keeps it ahead of the entries written after it (see EMPTY_ENTRY in listing-entries.ts).
   */
  async markReady(ns: string[]): Promise<void> {
    await this.store.put(indexReadyKey(ns), randomUUID(), { ifNoneMatch: '*' }, { durable: false }).catch((e: unknown) => {
      if (!(e instanceof PreconditionFailedError)) throw e;
    });
  }
}
