import { randomUUID } from 'node:crypto';
import pLimit from 'p-limit';
import { type ObjectStore, PreconditionFailedError } from '../../store/object-store.js';
import { CATALOG_DIR, childOfPrefix, namespaceDirKey, type TableRef } from '../catalog/layout.js';
import type { Locations } from '../catalog/locations.js';
import { leaseUntil } from '../coordination/leases.js';
import { faultPoint } from '../fault-points.js';
import { incarnationOf, isVisible, readTableState, tableHasData, type TableState } from './table-state.js';

// The listing index of a namespace's tables: a few empty keys per table name under
// `<ns>/_catalog/tables/<name>/`, whose names say what a listing needs, so that one LIST of the
// index answers a page without reading any table's directory:
//
//   v.<incarnation>.d   the table (this incarnation of the name) is visible, declared only
//   v.<incarnation>.t   the table is visible and has data
//   p.<until ms>.<op>   an operation is changing what the name holds (or died doing so)
//
// Invariant: a name without a `p.` entry has exactly the `v.` entry its table's state calls for
// (none when no table is visible). A name with a `p.` entry is read from the table's state itself.
//
// How it holds. Every operation that changes a table's state puts its `p.` entry first, changes
// the state, then sets the `v.` entries (settle) and only then deletes its `p.` entry; a crash
// anywhere leaves the `p.` entry behind. Settling writes (or deletes) the entry and then reads the
// table's state again, repeating until both agree: of two settlers racing, the later write is
// followed by a read that sees the later state, so the last word always matches the state. A `p.`
// entry whose lease ran out belongs to a dead operation (or one too slow to trust): a listing that
// meets it settles the name and deletes it, unless the state shows a live create or drop, whose own
// settle is still to come. A listing therefore reads table state only for names on its page that
// carry a `p.` entry: at most the page.
//
// Data: a declared table that got its first data from a Lance client writing directly (the service
// never told) still has `v.<i>.d`; listings that exclude declared tables check the `_versions/` of
// the declared entries on their page (one LIST each, bounded by the page), and do not record it.
//
// Namespaces the index does not cover yet (written by Lance's own directory catalog, or by a
// version of this service before the index) have no `_catalog/tables.ready` marker: the first
// listing settles every table directory in it once, then puts the marker. Tables that Lance's
// directory catalog creates in the same namespace after that are not seen until it is rebuilt.

const INDEX_DIR = `${CATALOG_DIR}/tables/`;
const READY = `${CATALOG_DIR}/tables.ready`;
const LIST_PAGE = 1000;
const CHECK_CONCURRENCY = 16;
const SETTLE_ROUNDS = 5;

export const indexPrefix = (ns: string[]): string => `${namespaceDirKey(ns)}${INDEX_DIR}`;
const nameDir = (ref: TableRef): string => `${indexPrefix(ref.namespace)}${ref.name}/`;

/** A key-safe form of an incarnation (uuids pass unchanged; records older than incarnations use their creation time). */
function incarnationPart(incarnation: string): string {
  if (incarnation === '') return '-';
  return /^[A-Za-z0-9_-]+$/.test(incarnation) ? incarnation : `b${Buffer.from(incarnation).toString('base64url')}`;
}

interface Truth {
  visible: boolean;
  /** The `v.` entry the state calls for, or null. */
  entry: string | null;
  /** A create or drop is under way: its own settle will come. */
  busy: boolean;
  state: TableState;
}

/** One name's entries in the index, as a page of the index LIST shows them. */
export interface IndexedName {
  name: string;
  entries: string[];
}

export interface ListedName {
  name: string;
}

export class TableIndex {
  constructor(
    private readonly store: ObjectStore,
    private readonly locations: Locations,
    private readonly leaseMs: number,
  ) {}

  /** Announces a change of the name's state; returns the `p.` key to pass to `settle`. */
  async begin(ref: TableRef, op: string = randomUUID()): Promise<string> {
    const key = `${nameDir(ref)}p.${Date.parse(leaseUntil(this.leaseMs))}.${incarnationPart(op)}`;
    await this.store.put(key, '');
    return key;
  }

  /** Makes the name's `v.` entries match its state (see the invariant above), then deletes the given `p.` keys. */
  async settle(ref: TableRef, pending: string[]): Promise<void> {
    faultPoint('index:before-settle');
    let truth = await this.observe(ref);
    for (let round = 0; ; round++) {
      const changed = await this.apply(ref, truth.entry, await this.entriesOf(ref));
      if (!changed) break;
      // Written: read the state again, so that a change made meanwhile is not overwritten unseen.
      const again = await this.observe(ref);
      if (again.entry === truth.entry) break;
      // Kept changing: the `p.` entries stay, and listings read the state.
      if (round === SETTLE_ROUNDS - 1) return;
      truth = again;
    }
    for (const key of pending) await this.store.delete(key);
  }

  /** Settles the name and deletes every `p.` entry of the operation `op` (a batch's transaction, which may be finished by another process). */
  async settleOp(ref: TableRef, op: string): Promise<void> {
    const suffix = `.${incarnationPart(op)}`;
    const pending = (await this.entriesOf(ref)).filter((e) => e.startsWith('p.') && e.endsWith(suffix));
    await this.settle(ref, pending.map((e) => `${nameDir(ref)}${e}`));
  }

  /** Runs `change` between `begin` and `settle`; the settle runs even when the change fails. */
  async around<T>(ref: TableRef, change: () => Promise<T>, op?: string): Promise<T> {
    const pending = await this.begin(ref, op);
    try {
      return await change();
    } finally {
      await this.settle(ref, [pending]).catch(() => undefined); // the `p.` entry stays: listings read the state
    }
  }

  /** Deletes the stale `v.` entries and puts the wanted one; says whether anything changed. */
  private async apply(ref: TableRef, wanted: string | null, entries: string[]): Promise<boolean> {
    const dir = nameDir(ref);
    let changed = false;
    for (const e of entries) {
      if (e.startsWith('v.') && e !== wanted) {
        await this.store.delete(`${dir}${e}`);
        changed = true;
      }
    }
    if (wanted !== null && !entries.includes(wanted)) {
      await this.store.put(`${dir}${wanted}`, '');
      changed = true;
    }
    return changed;
  }

  private async entriesOf(ref: TableRef): Promise<string[]> {
    const dir = nameDir(ref);
    const entries: string[] = [];
    let startAfter: string | undefined;
    for (;;) {
      const page = await this.store.list(dir, { maxKeys: LIST_PAGE, ...(startAfter ? { startAfter } : {}) });
      entries.push(...page.objects.map((o) => o.key.slice(dir.length)));
      if (!page.nextStartAfter) return entries;
      startAfter = page.nextStartAfter;
    }
  }

  private async observe(ref: TableRef): Promise<Truth> {
    return this.truthOf(await readTableState(this.store, ref));
  }

  private async truthOf(state: TableState): Promise<Truth> {
    const visible = isVisible(state);
    const busy = state.creating?.live === true || state.dropUnderWay;
    if (!visible) return { visible, entry: null, busy, state };
    const data = await tableHasData(this.locations, state);
    return { visible, entry: `v.${incarnationPart(incarnationOf(state) ?? '')}.${data ? 't' : 'd'}`, busy, state };
  }

  /**
   * Table names of `ns` after `after`, in byte order, with what the index says of each, for as
   * long as `more` asks. Pages through the index; never reads a table's state.
   */
  async *names(ns: string[], after: string | undefined): AsyncGenerator<IndexedName> {
    await this.ensureReady(ns);
    const prefix = indexPrefix(ns);
    let startAfter = after !== undefined && after !== '' ? `${prefix}${after}/` : undefined;
    let current: IndexedName | null = null;
    for (;;) {
      const page = await this.store.list(prefix, { maxKeys: LIST_PAGE, ...(startAfter ? { startAfter } : {}) });
      for (const o of page.objects) {
        const rest = o.key.slice(prefix.length);
        const slash = rest.indexOf('/');
        if (slash <= 0) continue;
        const name = rest.slice(0, slash);
        if (current && current.name !== name) {
          yield current;
          current = null;
        }
        current ??= { name, entries: [] };
        current.entries.push(rest.slice(slash + 1));
      }
      if (!page.nextStartAfter) break;
      startAfter = page.nextStartAfter;
    }
    if (current) yield current;
  }

  /**
   * Which of the indexed names are tables to list (all visible ones, or only those with data),
   * in order. Names with a `p.` entry are read from their state (and settled when the entry is
   * dead); declared entries are checked for data only when `includeDeclared` is false.
   */
  async visible(ns: string[], names: IndexedName[], includeDeclared: boolean): Promise<string[]> {
    const limit = pLimit(CHECK_CONCURRENCY);
    const keep = await Promise.all(
      names.map((n) =>
        limit(async () => {
          const ref = { namespace: ns, name: n.name };
          const pending = n.entries.filter((e) => e.startsWith('p.'));
          if (pending.length > 0) {
            const truth = await this.observe(ref);
            const dead = pending.filter((p) => Number(p.split('.')[1]) <= Date.now());
            if (dead.length === pending.length && !truth.busy) {
              await this.settle(ref, dead.map((p) => `${nameDir(ref)}${p}`)).catch(() => undefined);
            }
            return truth.visible && (includeDeclared || truth.entry?.endsWith('.t') === true);
          }
          const shown = n.entries.filter((e) => e.startsWith('v.'));
          if (shown.length === 0) return false;
          if (includeDeclared || shown.some((e) => e.endsWith('.t'))) return true;
          // Declared here; a Lance client may have written its first data directly since.
          const state = await readTableState(this.store, ref);
          return isVisible(state) && (await tableHasData(this.locations, state));
        }),
      ),
    );
    return names.filter((_, i) => keep[i]).map((n) => n.name);
  }

  /** Builds the index of a namespace that has none yet (see the header); safe to run on several replicas at once. */
  private async ensureReady(ns: string[]): Promise<void> {
    const ready = `${namespaceDirKey(ns)}${READY}`;
    if (await this.store.head(ready)) return;
    const dirKey = namespaceDirKey(ns);
    const limit = pLimit(CHECK_CONCURRENCY);
    let startAfter: string | undefined;
    for (;;) {
      const page = await this.store.list(dirKey, { delimiter: '/', maxKeys: LIST_PAGE, ...(startAfter ? { startAfter } : {}) });
      const tables = page.commonPrefixes.map((p) => childOfPrefix(dirKey, p)).filter((c) => c?.kind === 'table');
      await Promise.all(tables.map((c) => limit(() => this.settle({ namespace: ns, name: c?.name ?? '' }, []))));
      if (!page.nextStartAfter) break;
      startAfter = page.nextStartAfter;
    }
    await this.markReady(ns);
  }

  /** Marks a namespace's index complete: a new namespace has nothing to index. */
  async markReady(ns: string[]): Promise<void> {
    await this.store.put(`${namespaceDirKey(ns)}${READY}`, '', { ifNoneMatch: '*' }).catch((e: unknown) => {
      if (!(e instanceof PreconditionFailedError)) throw e;
    });
  }
}
