import pLimit from 'p-limit';
import { ErrorCode, invalidInput, NamespaceError } from '../../model/errors.js';
import type {
  CreateNamespaceRequest,
  CreateNamespaceResponse,
  DescribeNamespaceResponse,
  DropNamespaceRequest,
  DropNamespaceResponse,
  ListNamespacesResponse,
} from '../../model/namespaces.js';
import { listAll, PreconditionFailedError } from '../../store/object-store.js';
import type { RequestContext } from '../context/request-context.js';
import { keepRenewed, leaseUntil } from '../coordination/leases.js';
import { acceptPolicy } from '../maintenance/policy-markers.js';
import { nameBeingChanged } from '../tables/name-claim.js';
import { dropDataDir, isVisible, LinkedTableDir, leftoverDir, readTableState, stateWithoutLinks } from '../tables/table-state.js';
import { createInNamespace, displayId, namespaceLink, namespaceNotFound, readNamespace, requireNamespace, requireUnlinkedNamespace } from './catalog.js';
import type { CatalogDeps } from './catalog-deps.js';
import {
  childOfPrefix,
  indexReadyKey,
  isOwnTableDir,
  listingSnapshotKey,
  namespaceCatalogDirKey,
  namespaceDirKey,
  namespaceRecordKey,
  type TableRef,
  validateNamespaceId,
} from './layout.js';
import { encodeRecord, type NamespaceRecord } from './records.js';

const CAS_RETRIES = 10;
const CHECK_CONCURRENCY = 16;
/** How many children a refused Restrict drop names. */
const NAMED_CHILDREN = 5;

/** A namespace as a child of its parent, as the parent's listing index names it. */
const childRefOf = (ns: string[]): TableRef => ({ namespace: ns.slice(0, -1), name: ns[ns.length - 1] ?? '' });

export interface PageRequest {
  pageToken?: string | null | undefined;
  limit?: number | null | undefined;
}

export class NamespaceService {
  constructor(private readonly deps: CatalogDeps) {}

  private get store() {
    return this.deps.store;
  }

  async create(_ctx: RequestContext, ns: string[], request: CreateNamespaceRequest): Promise<CreateNamespaceResponse> {
    validateNamespaceId(ns);
    if (namespaceLink(this.store, ns) !== null) {
      throw invalidInput(
        `namespace ${displayId(ns)} cannot be created: its directory is, or lies under, a symbolic link, and the catalog follows no link below its root`,
      );
    }
    const mode = request.mode ?? 'Create';
    const properties = request.properties ?? {};
    await acceptPolicy(this.store, { kind: 'namespace', id: ns }, properties);
    const key = namespaceRecordKey(ns);
    const fresh: NamespaceRecord = { properties, created_at: new Date().toISOString(), state: 'active' };
    if (ns.length > 0) {
      try {
        // Linearization point: of concurrent creators, exactly one create-if-absent succeeds.
        // The parent's listing index hears of the new namespace (see listing-index.ts).
        await this.deps.listingIndex.around(
          'namespace',
          childRefOf(ns),
          () =>
            createInNamespace(
              this.store,
              ns.slice(0, -1),
              () => this.store.put(key, encodeRecord(fresh), { ifNoneMatch: '*' }),
              () => this.store.delete(key),
            ),
          { visible: true, data: false },
        );
        // A new namespace has no children to index; without the mark its first listing would look.
        await this.deps.listingIndex.markReady(ns);
        return { properties };
      } catch (e) {
        if (!(e instanceof PreconditionFailedError)) throw e;
      }
    }
    // The namespace exists (the root always does).
    for (let attempt = 0; attempt < CAS_RETRIES; attempt++) {
      const existing = await readNamespace(this.store, ns);
      if (!existing) return this.create(_ctx, ns, request); // dropped meanwhile: create afresh
      if (mode === 'Create') {
        throw new NamespaceError(
          ErrorCode.NamespaceAlreadyExists,
          ns.length === 0 ? 'the root namespace already exists' : `namespace ${displayId(ns)} already exists`,
        );
      }
      if (mode === 'ExistOk' && existing.value.state === 'active') return { properties: existing.value.properties };
      // Overwrite replaces the properties; either mode revives a namespace whose drop was abandoned.
      const next: NamespaceRecord = {
        ...existing.value,
        properties: mode === 'Overwrite' ? properties : existing.value.properties,
        state: 'active',
      };
      try {
        await this.store.put(key, encodeRecord(next), existing.etag === '' ? { ifNoneMatch: '*' } : { ifMatch: existing.etag });
        return { properties: next.properties };
      } catch (e) {
        if (!(e instanceof PreconditionFailedError)) throw e;
      }
    }
    throw new NamespaceError(ErrorCode.ConcurrentModification, `namespace ${displayId(ns)} kept changing; retry`);
  }

  async describe(_ctx: RequestContext, ns: string[]): Promise<DescribeNamespaceResponse> {
    validateNamespaceId(ns);
    const record = await requireNamespace(this.store, ns);
    return { properties: record.value.properties };
  }

  async exists(_ctx: RequestContext, ns: string[]): Promise<void> {
    validateNamespaceId(ns);
    await requireNamespace(this.store, ns);
  }

  /** Child namespace names of `ns`, in the listing index's order (see compareNames): a page of the index, not of the directory. */
  async list(_ctx: RequestContext, ns: string[], page: PageRequest): Promise<ListNamespacesResponse> {
    validateNamespaceId(ns);
    // Before the index is read (and settled) at all: nothing through a link.
    requireUnlinkedNamespace(this.store, ns);
    const { names, pageToken } = await this.deps.listingIndex.listPage('namespace', ns, page, this.deps.pageTokens, () =>
      requireNamespace(this.store, ns, true),
    );
    return { namespaces: names, page_token: pageToken };
  }

  /**
   * Drops a namespace. Restrict (the default) refuses a namespace with any child; Cascade removes
   * every child, tables' data included. Mode Skip makes a missing namespace a success.
   * The namespace is first marked `dropping`, with a lease renewed while the drop runs, so that
   * creators wait for its outcome (see createInNamespace); a failed Restrict drop puts back the
   * record it replaced. What dropped tables and dead creates left behind is no child: it goes with
   * the namespace. Deregistered tables are no children either, and their data stays where it is,
   * as Lance's own directory catalog leaves it (see tables/table-state.ts): registering it again
   * (in this namespace created anew, or anywhere) brings it back. Nor is a symbolic link in the
   * namespace's directory, or a table a link keeps the catalog out of (tables/table-state.ts,
   * LinkedTableDir), which no other answer shows either: in both modes the links go, never what
   * they lead to, and such a table's directory goes as what a dropped table left does.
   */
  async drop(ctx: RequestContext, ns: string[], request: DropNamespaceRequest): Promise<DropNamespaceResponse> {
    validateNamespaceId(ns);
    if (ns.length === 0) throw invalidInput('the root namespace cannot be dropped');
    // The parent's listing index hears of the outcome (see listing-index.ts).
    return this.deps.listingIndex.around('namespace', childRefOf(ns), () => this.dropNamespace(ctx, ns, request), { visible: false, data: false });
  }

  private async dropNamespace(_ctx: RequestContext, ns: string[], request: DropNamespaceRequest): Promise<DropNamespaceResponse> {
    const mode = request.mode ?? 'Fail';
    // A namespace reached through a symbolic link is none (see namespaceLink): nothing is deleted through it.
    if (namespaceLink(this.store, ns) !== null) {
      if (mode === 'Skip') return {};
      throw namespaceNotFound(ns);
    }
    const behavior = request.behavior ?? 'Restrict';
    const key = namespaceRecordKey(ns);
    const { leaseMs } = this.deps.settings;
    for (let attempt = 0; attempt < CAS_RETRIES; attempt++) {
      const existing = await readNamespace(this.store, ns);
      if (!existing) {
        if (mode === 'Skip') return {};
        throw namespaceNotFound(ns);
      }
      const mark = () => encodeRecord({ ...existing.value, state: 'dropping', dropping_until: leaseUntil(leaseMs) });
      let etag: string;
      const stampedAt = Date.now();
      try {
        etag = (await this.store.put(key, mark(), { ifMatch: existing.etag })).etag;
      } catch (e) {
        if (e instanceof PreconditionFailedError) continue; // changed meanwhile: read again
        throw e;
      }
      const renewal = keepRenewed(
        leaseMs,
        async () => {
          etag = (await this.store.put(key, mark(), { ifMatch: etag })).etag;
        },
        stampedAt,
      );
      try {
        const children = await this.childrenOf(ns);
        if (children.length > 0 && behavior === 'Restrict') {
          throw new NamespaceError(
            ErrorCode.NamespaceNotEmpty,
            `namespace ${displayId(ns)} is not empty: it contains ${children.slice(0, NAMED_CHILDREN).join(', ')}${children.length > NAMED_CHILDREN ? ', ...' : ''}`,
          );
        }
        const dirKey = namespaceDirKey(ns);
        // Listed again: leftovers, and in Cascade every child, including any created since.
        const remaining = await listAll(this.store, dirKey, { delimiter: '/' });
        // The namespace's own catalog state goes last: dropping its children writes there (listing-index.ts).
        const catalogPrefix = namespaceCatalogDirKey(ns);
        const prefixes = [...remaining.commonPrefixes.filter((p) => p !== catalogPrefix), ...remaining.commonPrefixes.filter((p) => p === catalogPrefix)];
        for (const prefix of prefixes) {
          // Tables' own directories go with their tables' drops (deregistered ones stay).
          if (isOwnTableDir(dirKey, prefix)) continue;
          const child = childOfPrefix(dirKey, prefix);
          // A child namespace is dropped through the same protocol, so that creators inside it see
          // its own mark; a table through the table drop's, so that writes under way end first.
          if (child?.kind === 'namespace') await this.drop(_ctx, [...ns, child.name], { mode: 'Skip', behavior: 'Cascade' });
          if (child?.kind === 'table' && !(await this.dropTableData({ namespace: ns, name: child.name }))) continue;
          // Of the catalog, the listing snapshots and the ready marker first: a drop that stops
          // part-way (a store that deletes in key order and fails, a crash during a recursive
          // delete) leaves no snapshot to catch up from a log it cut short, and an index built again.
          if (prefix === catalogPrefix) for (const k of catalogFirstKeys(ns)) await this.store.delete(k);
          await this.store.deletePrefix(prefix);
        }
        for (const o of remaining.objects) if (o.key !== key) await this.store.delete(o.key);
        // Links in the directory are no children (nor listed): they go, never what they lead to.
        for (const link of this.store.linksIn?.(dirKey) ?? []) await this.store.deletePrefix(link);
        await renewal.stop();
        await this.store.delete(key);
        return { properties: existing.value.properties };
      } catch (e) {
        // The namespace stays (a Cascade drop may have dropped some children by then): the record
        // it replaced goes back, so that creators waiting for the outcome go on at once (should
        // that fail too, the mark means nothing once its lease has run out).
        await renewal.stop().catch(() => undefined);
        await this.store.put(key, encodeRecord(existing.value), { ifMatch: etag }).catch(() => undefined);
        throw e;
      } finally {
        await renewal.stop().catch(() => undefined);
      }
    }
    throw new NamespaceError(ErrorCode.ConcurrentModification, `namespace ${displayId(ns)} kept changing during the drop; retry`);
  }

  /**
   * The children of a namespace as a Restrict drop sees them (the first few; none means empty):
   * namespaces, tables that exist or are being created, and anything the catalog does not know
   * (counted, to be safe). Table directories that hold no table (dropped, or abandoned by a dead
   * create) are leftovers, not children.
   */
  private async childrenOf(ns: string[]): Promise<string[]> {
    const dirKey = namespaceDirKey(ns);
    const listing = await listAll(this.store, dirKey, { delimiter: '/' });
    const children: string[] = listing.objects
      .map((o) => o.key)
      .filter((k) => k !== namespaceRecordKey(ns))
      .map((k) => k.slice(dirKey.length));
    const limit = pLimit(CHECK_CONCURRENCY);
    // Table directories are read a batch at a time, until a few children are known.
    for (let i = 0; i < listing.commonPrefixes.length && children.length < NAMED_CHILDREN; i += CHECK_CONCURRENCY) {
      const found = await Promise.all(
        listing.commonPrefixes.slice(i, i + CHECK_CONCURRENCY).map((prefix) =>
          limit(async () => {
            const child = childOfPrefix(dirKey, prefix);
            if (prefix === namespaceCatalogDirKey(ns)) return null; // the namespace's own catalog state (its table index)
            if (isOwnTableDir(dirKey, prefix)) return null; // a table's own directory: the table, if any, is seen by its name
            if (child?.kind !== 'table') return child ? `namespace ${child.name}` : prefix.slice(dirKey.length);
            // A name whose table a symbolic link keeps the catalog out of holds no table (see LinkedTableDir).
            const state = await readTableState(this.store, { namespace: ns, name: child.name }).catch((e: unknown) => {
              if (e instanceof LinkedTableDir) return null;
              throw e;
            });
            return state !== null && (isVisible(state) || state.creating?.live === true || state.held) ? `table ${child.name}` : null;
          }),
        ),
      );
      children.push(...found.filter((c) => c !== null));
    }
    return children;
  }

  /**
   * Drops what one table name of a namespace being dropped holds (its table in Cascade; in either
   * mode what dropped tables and dead creates left, and a table a symbolic link keeps the catalog
   * out of, whose links go first, as in DropTable): its writes under way end first. Returns
   * whether the name's directory may go too: not when it holds a deregistered table's data.
   * A create under way is fenced as a table is (its claim, its data and its own directory go with
   * the drop, and its last replace fails), in a retired directory too. A name whose marker another
   * request holds (see tables/table-state.ts) fails the namespace drop with 409: that request may
   * itself wait for this drop's outcome (createInNamespace), and deletes the marker once done.
   */
  private async dropTableData(ref: TableRef): Promise<boolean> {
    for (let attempt = 0; attempt < CAS_RETRIES; attempt++) {
      const state = await stateWithoutLinks(this.store, ref);
      if (state.held) throw nameBeingChanged([...ref.namespace, ref.name]);
      if (state.retired && !isVisible(state) && !state.creating?.live) {
        const leftovers = leftoverDir(state);
        if (leftovers !== null) await this.store.deletePrefix(leftovers);
        return false;
      }
      const begun = await this.deps.fences.beginDrop(state);
      // Another drop or a deregister came first: read again.
      if (!begun) continue;
      await this.deps.fences.finishDrop(state, dropDataDir(this.deps.locations, state), begun);
      return !state.retired;
    }
    throw new NamespaceError(
      ErrorCode.ConcurrentModification,
      `table ${displayId([...ref.namespace, ref.name])} kept changing during the namespace drop; retry`,
    );
  }
}

/** The keys of a namespace's catalog its drop deletes before the rest (see dropNamespace). */
const catalogFirstKeys = (ns: string[]): string[] => [listingSnapshotKey(ns, 'table'), listingSnapshotKey(ns, 'namespace'), indexReadyKey(ns)];
