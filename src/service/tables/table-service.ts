import { randomUUID } from 'node:crypto';
import { type CommitCoordinator, EngineError } from '../../engine/lance-engine.js';
import { claimDatasetCreation } from './dataset-creation.js';
import { engineFailure, onEngine } from '../engine-errors.js';
import { ErrorCode, invalidInput, NamespaceError, unsupported } from '../../model/errors.js';
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
import { PreconditionFailedError } from '../../store/object-store.js';
import type { CatalogDeps } from '../catalog/catalog-deps.js';
import { createInNamespace, displayId, requireNamespace, requireUnlinkedNamespace, type ResolvedNamespace, resolveManagedVersioning, resolveNamespace } from '../catalog/catalog.js';
import { resolveNamespaceCreatingSystem } from '../catalog/system-namespace.js';
import {
  compareNames,
  deregisteredMarkerKey,
  namespaceDirKey,
  namespaceHolding,
  ownTableDirKey,
  reservedMarkerKey,
  type TableRef,
  tableDirKey,
  tableRecordKey,
  tableRefOf,
  validateNamespaceId,
} from '../catalog/layout.js';
import type { StoreDir } from '../catalog/locations.js';
import type { PageRequest } from '../catalog/namespace-service.js';
import { paginate } from '../catalog/page-token.js';
import { encodeRecord, readRecord, TableRecord } from '../catalog/records.js';
import { faultPoint } from '../fault-points.js';
import { keepRenewed, leaseUntil } from '../coordination/leases.js';
import { latestCommitted, type ResolvedTable, resolvedTable, resolveTable, resolveTableWithLatest } from './resolved-table.js';
import { putDeregisterMarker } from './table-fences.js';
import { datasetAt, refuseOtherLocation } from './table-location.js';
import { claimName, placed, settleMarker, tableAlreadyExists } from './name-claim.js';
import { createTable, type CreateTableInput } from './create-table.js';
export type { CreateTableInput } from './create-table.js';
import { declareTable } from './declare-table.js';
import { registerTable } from './register-table.js';
import { renameTable } from './rename-table.js';
import { deregisterTable, dropTable } from './drop-table.js';
import { type DescribeFlags, describeTable, tableExists } from './describe-table.js';
export type { DescribeFlags } from './describe-table.js';
import { listAllTables, listTables } from './list-tables.js';
import { TableVersions } from '../versions/dataset-versions.js';
import type { RequestContext } from '../request-context.js';
import {
  dataDir,
  incarnationOf,
  isTombstone,
  isVisible,
  leftoverDir,
  LinkedTableDir,
  livesInNameDir,
  type NameMarker,
  readTableState,
  recordDir,
  requireVisibleTable,
  retiredMarker,
  tableHasData,
  tableNotFound,
  type TableState,
} from './table-state.js';


export class TableService {
  constructor(
    private readonly deps: CatalogDeps,
    /** The commit path of a managed table, so that the engine's writes go through it (see TableVersionService.coordinatorFor). */
    private readonly coordinatorFor: (ctx: RequestContext, table: ResolvedTable, underWriteLease: boolean) => CommitCoordinator,
  ) {}

  private get store() {
    return this.deps.store;
  }

  declare(ctx: RequestContext, id: string[], request: DeclareTableRequest): Promise<DeclareTableResponse> {
    return declareTable(this.deps, ctx, id, request);
  }

  create(ctx: RequestContext, id: string[], input: CreateTableInput): Promise<CreateTableResponse> {
    return createTable(this.deps, this.coordinatorFor, ctx, id, input);
  }

  register(ctx: RequestContext, id: string[], request: RegisterTableRequest): Promise<RegisterTableResponse> {
    return registerTable(this.deps, ctx, id, request);
  }

  describe(ctx: RequestContext, id: string[], request: DescribeTableRequest, flags: DescribeFlags): Promise<DescribeTableResponse> {
    return describeTable(this.deps, ctx, id, request, flags);
  }

  exists(_ctx: RequestContext, id: string[], version: number | null | undefined): Promise<void> {
    return tableExists(this.deps, id, version);
  }

  list(_ctx: RequestContext, ns: string[], page: PageRequest & { includeDeclared?: boolean | undefined }): Promise<ListTablesResponse> {
    return listTables(this.deps, ns, page);
  }

  listAll(_ctx: RequestContext, delimiter: string, page: PageRequest & { includeDeclared?: boolean | undefined }): Promise<ListTablesResponse> {
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

  // @@END@@
}
