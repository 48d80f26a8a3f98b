import { ErrorCode, NamespaceError } from '../model/errors.js';
import type { Principal, Privilege } from '../service/context/request-context.js';
import type { FilteredListing, RouteConfig } from './route.js';

// What a principal may do. Roles grant a privilege on a namespace subtree (a namespace and
// everything under it; the empty path is the whole catalog); principals hold roles. Privileges
// nest: manage includes write, write includes read. Every operation needs one privilege on one
// namespace (OPERATIONS below): a namespace operation on the namespace itself, a table operation
// on the table's namespace, the operations that span the catalog (batches, transactions) on the
// root. Missing it is 403 code 15, decided as soon as the principal and the path id are known,
// before the body is read (a rename's destination, in the body, is checked once it is parsed).
// Listings show only what the caller may read (filterListing, for the routes declared with a
// filteredListing). Routes declared open (health) need no privilege. Without an authorization
// configuration every authenticated principal may do everything.

const RANK: Record<Privilege, number> = { read: 1, write: 2, manage: 3 };

export interface Grant {
  namespace: string[];
  privilege: Privilege;
}

export interface AuthorizationOptions {
  roles: Record<string, Grant[]>;
  /** The roles of each principal (by its id). */
  principals: Record<string, string[]>;
}

/**
 * Where an operation's privilege is checked: the path's namespace, the path's table's namespace,
 * the catalog root, or the namespace of each table the body names (the batches, checked once the
 * body is parsed).
 */
type Target = 'namespace' | 'table' | 'root' | 'body';

/** A place a body names and the privilege it needs there (`namespace`: the id is a namespace's, else a table's). */
interface BodyPlace {
  id: string[];
  privilege: Privilege;
  namespace: boolean;
}

interface Operation {
  privilege: Privilege;
  target: Target;
  /** The places its body names that it changes, checked once the body is parsed (checkBody). */
  inBody?: (body: unknown) => BodyPlace[];
}

/** The privilege each operation needs, and on what (docs/security.md's table is this one). */
export const OPERATIONS: Readonly<Record<string, Operation>> = {
  // read
  ListNamespaces: { privilege: 'read', target: 'namespace' },
  DescribeNamespace: { privilege: 'read', target: 'namespace' },
  NamespaceExists: { privilege: 'read', target: 'namespace' },
  ListTables: { privilege: 'read', target: 'namespace' },
  ListAllTables: { privilege: 'read', target: 'root' },
  DescribeTable: { privilege: 'read', target: 'table' },
  TableExists: { privilege: 'read', target: 'table' },
  CountTableRows: { privilege: 'read', target: 'table' },
  QueryTable: { privilege: 'read', target: 'table' },
  ExplainTableQueryPlan: { privilege: 'read', target: 'table' },
  AnalyzeTableQueryPlan: { privilege: 'read', target: 'table' },
  GetTableStats: { privilege: 'read', target: 'table' },
  ListTableVersions: { privilege: 'read', target: 'table' },
  DescribeTableVersion: { privilege: 'read', target: 'table' },
  ListTableIndices: { privilege: 'read', target: 'table' },
  DescribeTableIndexStats: { privilege: 'read', target: 'table' },
  ListTableTags: { privilege: 'read', target: 'table' },
  GetTableTagVersion: { privilege: 'read', target: 'table' },
  ListTableBranches: { privilege: 'read', target: 'table' },
  DescribeTransaction: { privilege: 'read', target: 'root' },
  // write: data, versions, columns, indices, tags, and creating tables
  DeclareTable: { privilege: 'write', target: 'table' },
  CreateTable: { privilege: 'write', target: 'table' },
  InsertIntoTable: { privilege: 'write', target: 'table' },
  UpdateTable: { privilege: 'write', target: 'table' },
  DeleteFromTable: { privilege: 'write', target: 'table' },
  MergeInsertIntoTable: { privilege: 'write', target: 'table' },
  CreateTableVersion: { privilege: 'write', target: 'table' },
  RestoreTable: { privilege: 'write', target: 'table' },
  AlterTableAddColumns: { privilege: 'write', target: 'table' },
  AlterTableAlterColumns: { privilege: 'write', target: 'table' },
  AlterTableDropColumns: { privilege: 'write', target: 'table' },
  AlterTableBackfillColumns: { privilege: 'write', target: 'table' },
  UpdateFieldMetadata: { privilege: 'write', target: 'table' },
  UpdateTableSchemaMetadata: { privilege: 'write', target: 'table' },
  CreateTableIndex: { privilege: 'write', target: 'table' },
  CreateTableScalarIndex: { privilege: 'write', target: 'table' },
  DropTableIndex: { privilege: 'write', target: 'table' },
  CreateTableTag: { privilege: 'write', target: 'table' },
  UpdateTableTag: { privilege: 'write', target: 'table' },
  DeleteTableTag: { privilege: 'write', target: 'table' },
  CreateTableBranch: { privilege: 'write', target: 'table' },
  DeleteTableBranch: { privilege: 'write', target: 'table' },
  CreateMaterializedView: { privilege: 'write', target: 'table' },
  RefreshMaterializedView: { privilege: 'write', target: 'table' },
  BatchCreateTableVersions: { privilege: 'write', target: 'body', inBody: batchEntries },
  AlterTransaction: { privilege: 'write', target: 'root' },
  // manage: the catalog's structure
  CreateNamespace: { privilege: 'manage', target: 'namespace' },
  DropNamespace: { privilege: 'manage', target: 'namespace' },
  RegisterTable: { privilege: 'manage', target: 'table' },
  DropTable: { privilege: 'manage', target: 'table' },
  DeregisterTable: { privilege: 'manage', target: 'table' },
  RenameTable: { privilege: 'manage', target: 'table', inBody: renameDestination },
  BatchDeleteTableVersions: { privilege: 'manage', target: 'table' },
  // Each operation on its table: declare and create_table_version need write, delete_table_versions and deregister_table manage.
  BatchCommitTables: { privilege: 'write', target: 'body', inBody: batchOperations },
};

const denied = (principal: Principal, operationId: string, namespace: string[], privilege: Privilege): NamespaceError =>
  new NamespaceError(
    ErrorCode.PermissionDenied,
    `${principal.id} may not ${operationId} in ${namespace.length === 0 ? 'the catalog root' : `namespace ${JSON.stringify(namespace)}`}: it needs ${privilege}`,
  );

const isId = (value: unknown): value is string[] => Array.isArray(value) && value.every((p) => typeof p === 'string');
const field = (value: unknown, key: string): unknown => (typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined);

/** What a batch operation of BatchCommitTables needs on its table. */
const COMMIT_OPERATIONS: Readonly<Record<string, Privilege>> = {
  declare_table: 'write',
  create_table_version: 'write',
  delete_table_versions: 'manage',
  deregister_table: 'manage',
};

const list = (body: unknown, key: string): unknown[] => {
  const value = field(body, key);
  return Array.isArray(value) ? value : [];
};

/** A rename's destination namespace (manage). */
function renameDestination(body: unknown): BodyPlace[] {
  const destination = field(body, 'new_namespace_id');
  return isId(destination) ? [{ id: destination, privilege: 'manage', namespace: true }] : [];
}

/** The table of each entry of a BatchCreateTableVersions (write). */
function batchEntries(body: unknown): BodyPlace[] {
  return list(body, 'entries').flatMap((entry) => {
    const id = field(entry, 'id');
    return isId(id) ? [{ id, privilege: 'write' as const, namespace: false }] : [];
  });
}

/** The table of each operation of a BatchCommitTables (the privilege of its kind). */
function batchOperations(body: unknown): BodyPlace[] {
  return list(body, 'operations').flatMap((op) =>
    Object.entries(COMMIT_OPERATIONS).flatMap(([kind, privilege]) => {
      const id = field(field(op, kind), 'id');
      return isId(id) ? [{ id, privilege, namespace: false }] : [];
    }),
  );
}

/** What the checks read of a route's declaration (route.ts). */
type RouteFacts = Pick<RouteConfig, 'operationId' | 'open' | 'filteredListing'>;

const under = (path: string[], subtree: string[]): boolean => subtree.length <= path.length && subtree.every((part, i) => path[i] === part);

export class Authorizer {
  private readonly grants: Map<string, Grant[]>;

  constructor(options: AuthorizationOptions) {
    this.grants = new Map(Object.entries(options.principals).map(([principal, roles]) => [principal, roles.flatMap((role) => options.roles[role] ?? [])]));
  }

  /** Whether `principal` holds `privilege` (or more) on `namespace`. */
  may(principal: Principal, privilege: Privilege, namespace: string[]): boolean {
    return (this.grants.get(principal.id) ?? []).some((g) => RANK[g.privilege] >= RANK[privilege] && under(namespace, g.namespace));
  }

  /** Whether `principal` can see `namespace` in a listing: it may read it, or holds a grant somewhere below it. */
  sees(principal: Principal, namespace: string[]): boolean {
    return this.may(principal, 'read', namespace) || (this.grants.get(principal.id) ?? []).some((g) => under(g.namespace, namespace));
  }

  /** 403 code 15 unless `principal` may run `route`'s operation on the path id `pathId` (decided before the body is read). */
  check(principal: Principal, route: RouteFacts, pathId: string[]): void {
    if (route.open) return;
    const { operationId, filteredListing } = route;
    const operation = OPERATIONS[operationId];
    // An operation nobody mapped is refused rather than let through.
    if (!operation) throw new NamespaceError(ErrorCode.PermissionDenied, `${operationId} is not authorized for anyone`);
    // The tables a batch names are known once its body is parsed (checkBody).
    if (operation.target === 'body') return;
    const namespace = operation.target === 'root' ? [] : operation.target === 'table' ? pathId.slice(0, -1) : pathId;
    // Listings of namespaces are allowed to whoever sees the parent, and of all tables to anyone;
    // they show only what the caller may see (filterListing).
    const allowed =
      filteredListing === 'table-ids'
        ? true
        : filteredListing === 'child-namespaces'
          ? this.sees(principal, namespace)
          : this.may(principal, operation.privilege, namespace);
    if (!allowed) throw denied(principal, operationId, namespace, operation.privilege);
  }

  /**
   * 403 code 15 when the body names a place the operation changes that `principal` may not change:
   * a rename's destination (manage), or a table of a batch (the privilege of its operation, on the
   * table's namespace). What does not have the shape the route's schema takes is left to it (400).
   */
  checkBody(principal: Principal, operationId: string, body: unknown): void {
    for (const { id, privilege, namespace } of OPERATIONS[operationId]?.inBody?.(body) ?? []) {
      const where = namespace ? id : id.slice(0, -1);
      if (!this.may(principal, privilege, where)) throw denied(principal, operationId, where, privilege);
    }
  }

  /** The names of a listing's page that `principal` may see: child namespaces of `parent`, or tables as full ids. */
  filterListing(principal: Principal, listing: FilteredListing, parent: string[], names: string[], delimiter: string): string[] {
    if (listing === 'child-namespaces') return this.may(principal, 'read', parent) ? names : names.filter((n) => this.sees(principal, [...parent, n]));
    return names.filter((id) => this.may(principal, 'read', id.split(delimiter).slice(0, -1)));
  }
}
