import type { ObjectStore } from '../../store/object-store.js';
import type { ChildKind, TableRef } from './layout.js';
import { IndexBuilder } from './listing-build.js';
import { SnapshotCatchUp } from './listing-catch-up.js';
import { IndexEntries, type Made } from './listing-entries.js';
import { type IndexPage, IndexPages } from './listing-pages.js';
import { ListingSnapshots } from './listing-snapshot.js';
import type { Locations } from './locations.js';

// The listing index of a namespace's children: empty keys under `<ns>/_catalog/` (built in
// layout.ts) whose names say what a listing needs, so that a LIST of the index answers a page
// without reading any child's record or directory. One directory per child name in each folder, so
// that a delimited LIST names them in order (on a local disk without reading each one):
//
//   tables/<name>/v                   a table of this name is visible
//   data/<name>/t                     ... and has data (absent: declared only, as far as the index knows)
//   namespaces/<name>/v               a child namespace of this name exists
//   pending/<name>/<until>.<op>       an operation is changing what the table name holds (or died doing so)
//   namespace-pending/<name>/<until>.<op>   the same for a child namespace
//
// Names are ordered as their keys are: by the bytes of `<name>/` (compareNames).
//
// Its rooms: listing-entries.ts keeps a name's entries matching its child's state (the pending
// entries, and the invariant that makes the index safe to read); listing-pages.ts answers pages
// from it, through listing-reads.ts (LISTs of the index) and listing-snapshot.ts (the index in one
// object, which listing-catch-up.ts brings up to date by the index's log of changes); listing-build.ts
// indexes a namespace the index does not cover yet.

/** One per process (built in app.ts, see catalog-deps.ts), so that every service reads and keeps the same snapshots. */
export class ListingIndex {
  private readonly entries: IndexEntries;
  private readonly builder: IndexBuilder;
  private readonly pages: IndexPages;

  constructor(store: ObjectStore, locations: Locations, leaseMs: number) {
    const snapshots = new ListingSnapshots(store);
    // The entries compact the log through the catch-up, which reads the ready marker through the builder, which settles through the entries.
    let catchUp: SnapshotCatchUp | undefined;
    this.entries = new IndexEntries(store, locations, leaseMs, snapshots, async (kind, ns) => catchUp?.compactIfLong(kind, ns));
    this.builder = new IndexBuilder(store, this.entries, snapshots);
    catchUp = new SnapshotCatchUp(store, snapshots, this.builder);
    this.pages = new IndexPages(store, this.entries, this.builder, snapshots, catchUp);
  }

  /** Announces a change of the name's state; returns the pending key to pass to `settle` (listing-entries.ts). */
  begin(kind: ChildKind, ref: TableRef, op?: string): Promise<string> {
    return this.entries.begin(kind, ref, op);
  }

  /** Makes the name's entries match its state, then deletes the given pending keys (listing-entries.ts). */
  settle(kind: ChildKind, ref: TableRef, pending: string[], made?: Made): Promise<void> {
    return this.entries.settle(kind, ref, pending, made);
  }

  /** Settles the name and deletes every pending entry of the operation `op` (listing-entries.ts). */
  settleOp(kind: ChildKind, ref: TableRef, op: string): Promise<void> {
    return this.entries.settleOp(kind, ref, op);
  }

  /** Runs `change` between `begin` and `settle`; the settle runs even when the change fails (listing-entries.ts). */
  around<T>(kind: ChildKind, ref: TableRef, change: () => Promise<T>, made?: Made): Promise<T> {
    return this.entries.around(kind, ref, change, made);
  }

  /** One page of a ListTables or ListNamespaces (listing-pages.ts). */
  listPage(...args: Parameters<IndexPages['listPage']>): Promise<{ names: string[]; pageToken: string | null }> {
    return this.pages.listPage(...args);
  }

  /** Up to `want` child names of `ns` after `after`, in compareNames order (listing-pages.ts). */
  page(...args: Parameters<IndexPages['page']>): Promise<IndexPage> {
    return this.pages.page(...args);
  }

  /** Resolves once what settles left for after their answer (the log's compaction) has ended. */
  settled(): Promise<void> {
    return this.entries.settled();
  }

  /** Marks a namespace's index complete: a new namespace has no children to index (listing-build.ts). */
  markReady(ns: string[]): Promise<void> {
    return this.builder.markReady(ns);
  }
}
