import {
  BatchCommitTablesRequest,
  BatchCommitTablesResponse,
  BatchCreateTableVersionsRequest,
  BatchCreateTableVersionsResponse,
  BatchDeleteTableVersionsRequest,
  BatchDeleteTableVersionsResponse,
  CreateTableVersionRequest,
  CreateTableVersionResponse,
  DescribeTableVersionRequest,
  DescribeTableVersionResponse,
  ListTableVersionsQuery,
  ListTableVersionsRequest,
  ListTableVersionsResponse,
} from '../../model/versions.js';
import type { TableVersionService } from '../../service/versions/table-version-service.js';
import { branchOfQueryOrBody, defineRoute, queryOrBody, type RouteGroup, routeGroup } from '../route.js';

export function versionRoutes(versions: TableVersionService): RouteGroup {
  return routeGroup('/v1', [
    defineRoute({
      operationId: 'CreateTableVersion',
      summary: 'Commit a staged manifest as the next version of a table (put-if-not-exists; 409 code 14 on a lost race)',
      tag: 'Table',
      paths: ['/table/{id}/version/create'],
      methods: ['POST'],
      body: CreateTableVersionRequest,
      response: CreateTableVersionResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => versions.create(ctx, id, body),
    }),
    defineRoute({
      operationId: 'DescribeTableVersion',
      summary: 'Describe one version of a table (the latest when version is absent)',
      tag: 'Table',
      paths: ['/table/{id}/version/describe'],
      methods: ['POST'],
      body: DescribeTableVersionRequest,
      response: DescribeTableVersionResponse,
      handler: ({ ctx, id, body }) => versions.describe(ctx, id, body.version, body.branch),
    }),
    defineRoute({
      operationId: 'ListTableVersions',
      summary: 'List the versions of a table (descending, limit, page_token)',
      tag: 'Table',
      paths: ['/table/{id}/version/list'],
      methods: ['GET', 'POST'],
      body: ListTableVersionsRequest,
      query: ListTableVersionsQuery,
      response: ListTableVersionsResponse,
      handler: ({ ctx, id, body, query }) => {
        const { page_token, limit, descending } = queryOrBody(query, body, ['page_token', 'limit', 'descending']);
        const branch = branchOfQueryOrBody(query, body);
        return versions.list(ctx, id, { pageToken: page_token, limit, descending, branch });
      },
    }),
    defineRoute({
      operationId: 'BatchDeleteTableVersions',
      summary: 'Delete the version records (manifests) in [start, end) ranges; end -1 means through the latest',
      tag: 'Table',
      paths: ['/table/{id}/version/delete', '/table/{id}/version/batch-delete'],
      methods: ['POST'],
      body: BatchDeleteTableVersionsRequest,
      response: BatchDeleteTableVersionsResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => versions.batchDelete(ctx, id, body),
    }),
    defineRoute({
      operationId: 'BatchCreateTableVersions',
      summary: 'Commit versions of several tables atomically (all or none)',
      tag: 'Table',
      paths: ['/table/version/batch-create'],
      methods: ['POST'],
      body: BatchCreateTableVersionsRequest,
      response: BatchCreateTableVersionsResponse,
      boundedList: { field: 'entries', limit: 'maxBatchEntries' },
      mutation: true,
      handler: ({ ctx, body }) => versions.batchCreate(ctx, body.entries),
    }),
    defineRoute({
      operationId: 'BatchCommitTables',
      summary: 'Apply declare, create-version, delete-versions and deregister operations on several tables atomically',
      tag: 'Table',
      paths: ['/table/batch-commit'],
      methods: ['POST'],
      body: BatchCommitTablesRequest,
      response: BatchCommitTablesResponse,
      boundedList: { field: 'operations', limit: 'maxBatchOperations' },
      mutation: true,
      vends: true,
      handler: ({ ctx, body }) => versions.batchCommit(ctx, body.operations),
    }),
  ]);
}
