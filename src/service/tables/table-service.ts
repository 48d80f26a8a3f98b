import type {
  CreateTableResponse,
  DeclareTableRequest,
  DeclareTableResponse,
  DescribeTableRequest,
  DescribeTableResponse,
  DropTableResponse,
  ListTablesResponse,
  RegisterTableRequest,
  RegisterTableResponse,
  RenameTableRequest,
  RenameTableResponse,
} from '../../model/tables.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import type { PageRequest } from '../catalog/namespace-service.js';
import type { RequestContext } from '../context/request-context.js';
import { acceptPolicy } from '../maintenance/policy-markers.js';
import { type CoordinatorFor, type CreateTableInput, createTable } from './create-table.js';
import { declareTable } from './declare-table.js';
import { type DescribeFlags, describeTable, tableExists } from './describe-table.js';
import { deregisterTable, dropTable } from './drop-table.js';
import { listAllTables, listTables } from './list-tables.js';
import { registerTable } from './register-table.js';
import { renameTable } from './rename-table.js';

export type { CreateTableInput } from './create-table.js';
export type { DescribeFlags } from './describe-table.js';

// The tables API, one module per operation: declare-table.ts, create-table.ts, register-table.ts,
// describe-table.ts (and TableExists), list-tables.ts, drop-table.ts (and DeregisterTable),
// rename-table.ts. What they share: a name taken for a new table (name-claim.ts), where its data
// lives (table-location.ts, table-state.ts), a table resolved once (resolved-table.ts), and writes
// and drops meeting (table-fences.ts); the listing index hears of every change of a name
// (catalog/listing-index.ts).

type ListRequest = PageRequest & { includeDeclared?: boolean | undefined };

export class TableService {
  constructor(
    private readonly deps: CatalogDeps,
    /** The commit path of a managed table, so that the engine's writes go through it (see TableVersionService.coordinatorFor). */
    private readonly coordinatorFor: CoordinatorFor,
  ) {}

  async declare(ctx: RequestContext, id: string[], request: DeclareTableRequest): Promise<DeclareTableResponse> {
    await acceptPolicy(this.deps.store, { kind: 'table', id }, request.properties);
    return declareTable(this.deps, ctx, id, request);
  }

  async create(ctx: RequestContext, id: string[], input: CreateTableInput): Promise<CreateTableResponse> {
    await acceptPolicy(this.deps.store, { kind: 'table', id }, input.properties);
    return createTable(this.deps, this.coordinatorFor, ctx, id, input);
  }

  async register(ctx: RequestContext, id: string[], request: RegisterTableRequest): Promise<RegisterTableResponse> {
    await acceptPolicy(this.deps.store, { kind: 'table', id }, request.properties);
    return registerTable(this.deps, ctx, id, request);
  }

  describe(ctx: RequestContext, id: string[], request: DescribeTableRequest, flags: DescribeFlags): Promise<DescribeTableResponse> {
    return describeTable(this.deps, ctx, id, request, flags);
  }

  exists(_ctx: RequestContext, id: string[], version: number | null | undefined): Promise<void> {
    return tableExists(this.deps, id, version);
  }

  list(_ctx: RequestContext, ns: string[], page: ListRequest): Promise<ListTablesResponse> {
    return listTables(this.deps, ns, page);
  }

  listAll(_ctx: RequestContext, delimiter: string, page: ListRequest): Promise<ListTablesResponse> {
    return listAllTables(this.deps, delimiter, page);
  }

  drop(_ctx: RequestContext, id: string[]): Promise<DropTableResponse> {
    return dropTable(this.deps, id);
  }

  deregister(_ctx: RequestContext, id: string[]): Promise<DropTableResponse> {
    return deregisterTable(this.deps, id);
  }

  rename(_ctx: RequestContext, id: string[], request: RenameTableRequest): Promise<RenameTableResponse> {
    return renameTable(this.deps, id, request);
  }
}
