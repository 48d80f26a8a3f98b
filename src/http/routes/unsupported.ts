import { unsupported } from '../../model/errors.js';
import { defineRoute, type HttpMethod, type RouteSpec } from '../route.js';

// Operations of the Lance Namespace spec this service does not implement yet. Each answers the
// spec's 406 Unsupported (code 0) with a message naming the operation, so that clients fail
// clearly instead of on a 404. The README lists the same operations.

interface Pending {
  operationId: string;
  path: string;
  methods?: HttpMethod[];
  arrowBody?: boolean;
  /** Where the work is planned. */
  plannedIn: string;
}

const DATA = 'the data-operations milestone';
const TXN = 'the transactions milestone';

export const PENDING_OPERATIONS: readonly Pending[] = [
  { operationId: 'RestoreTable', path: '/v1/table/{id}/restore', plannedIn: DATA },
  { operationId: 'UpdateTableSchemaMetadata', path: '/v1/table/{id}/schema_metadata/update', plannedIn: DATA },
  { operationId: 'AlterTableAlterColumns', path: '/v1/table/{id}/alter_columns', plannedIn: DATA },
  { operationId: 'UpdateFieldMetadata', path: '/v1/table/{id}/update_field_metadata', plannedIn: DATA },
  { operationId: 'AlterTableDropColumns', path: '/v1/table/{id}/drop_columns', plannedIn: DATA },
  { operationId: 'AlterTableAddColumns', path: '/v1/table/{id}/add_columns', plannedIn: DATA },
  { operationId: 'GetTableStats', path: '/v1/table/{id}/stats', methods: ['GET', 'POST'], plannedIn: DATA },
  { operationId: 'InsertIntoTable', path: '/v1/table/{id}/insert', arrowBody: true, plannedIn: DATA },
  { operationId: 'MergeInsertIntoTable', path: '/v1/table/{id}/merge_insert', arrowBody: true, plannedIn: DATA },
  { operationId: 'UpdateTable', path: '/v1/table/{id}/update', plannedIn: DATA },
  { operationId: 'DeleteFromTable', path: '/v1/table/{id}/delete', plannedIn: DATA },
  { operationId: 'QueryTable', path: '/v1/table/{id}/query', plannedIn: DATA },
  { operationId: 'CountTableRows', path: '/v1/table/{id}/count_rows', methods: ['GET', 'POST'], plannedIn: DATA },
  { operationId: 'ExplainTableQueryPlan', path: '/v1/table/{id}/explain_plan', plannedIn: DATA },
  { operationId: 'AnalyzeTableQueryPlan', path: '/v1/table/{id}/analyze_plan', plannedIn: DATA },
  { operationId: 'CreateTableIndex', path: '/v1/table/{id}/create_index', plannedIn: DATA },
  { operationId: 'CreateTableScalarIndex', path: '/v1/table/{id}/create_scalar_index', plannedIn: DATA },
  { operationId: 'ListTableIndices', path: '/v1/table/{id}/index/list', methods: ['GET', 'POST'], plannedIn: DATA },
  { operationId: 'DescribeTableIndexStats', path: '/v1/table/{id}/index/{index_name}/stats', methods: ['GET', 'POST'], plannedIn: DATA },
  { operationId: 'DropTableIndex', path: '/v1/table/{id}/index/{index_name}/drop', plannedIn: DATA },
  { operationId: 'ListTableTags', path: '/v1/table/{id}/tags/list', methods: ['GET', 'POST'], plannedIn: DATA },
  { operationId: 'GetTableTagVersion', path: '/v1/table/{id}/tags/version', plannedIn: DATA },
  { operationId: 'CreateTableTag', path: '/v1/table/{id}/tags/create', plannedIn: DATA },
  { operationId: 'DeleteTableTag', path: '/v1/table/{id}/tags/delete', plannedIn: DATA },
  { operationId: 'UpdateTableTag', path: '/v1/table/{id}/tags/update', plannedIn: DATA },
  { operationId: 'ListTableBranches', path: '/v1/table/{id}/branches/list', methods: ['GET', 'POST'], plannedIn: DATA },
  { operationId: 'CreateTableBranch', path: '/v1/table/{id}/branches/create', plannedIn: DATA },
  { operationId: 'DeleteTableBranch', path: '/v1/table/{id}/branches/delete', plannedIn: DATA },
  { operationId: 'AlterTableBackfillColumns', path: '/v1/table/{id}/backfill_column', plannedIn: TXN },
  { operationId: 'AlterTransaction', path: '/v1/transaction/{id}/alter', plannedIn: TXN },
  { operationId: 'RefreshMaterializedView', path: '/v1/materialized_view/{id}/refresh', plannedIn: 'a later milestone' },
  { operationId: 'CreateMaterializedView', path: '/v1/materialized_view/{id}/create', plannedIn: 'a later milestone' },
];

export function unsupportedRoutes(): RouteSpec[] {
  return PENDING_OPERATIONS.map((op) =>
    defineRoute({
      operationId: op.operationId,
      summary: `Not implemented yet (406 Unsupported); planned in ${op.plannedIn}`,
      tag: 'Unsupported',
      paths: [op.path],
      methods: op.methods ?? ['POST'],
      arrowBody: op.arrowBody ?? false,
      response: 'empty',
      handler: async () => {
        throw unsupported(`${op.operationId} is not implemented by this service yet (planned in ${op.plannedIn})`);
      },
    }),
  );
}
