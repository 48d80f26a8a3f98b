import { z } from 'zod';
import {
  CreateTableQuery,
  CreateTableResponse,
  DeclareTableRequest,
  DeclareTableResponse,
  DescribeTableQuery,
  DescribeTableRequest,
  DescribeTableResponse,
  DropTableResponse,
  ListTablesQuery,
  ListTablesRequest,
  ListTablesResponse,
  RegisterTableRequest,
  RegisterTableResponse,
  RenameTableRequest,
  RenameTableResponse,
  TableExistsRequest,
  TableIdRequest,
} from '../../model/tables.js';
import type { TableService } from '../../service/tables/table-service.js';
import { defineRoute, queryOrBody, type RouteGroup, routeGroup } from '../route.js';

type ListTablesQuery = z.output<typeof ListTablesQuery>;
type ListTablesBody = z.output<typeof ListTablesRequest>;

/** Paging arguments of the table lists. */
function listArgs(query: ListTablesQuery, body: ListTablesBody) {
  const { page_token, limit, include_declared } = queryOrBody(query, body, ['page_token', 'limit', 'include_declared']);
  return { pageToken: page_token, limit, includeDeclared: include_declared };
}

export function tableRoutes(tables: TableService): RouteGroup {
  return routeGroup('/v1', [
    defineRoute({
      operationId: 'ListTables',
      summary: 'List the tables directly in a namespace',
      tag: 'Table',
      paths: ['/namespace/{id}/table/list'],
      methods: ['GET', 'POST'],
      body: ListTablesRequest,
      query: ListTablesQuery,
      response: ListTablesResponse,
      handler: ({ ctx, id, body, query }) => tables.list(ctx, id, listArgs(query, body)),
    }),
    defineRoute({
      operationId: 'ListAllTables',
      summary: 'List every table of every namespace, as full ids joined by the delimiter',
      tag: 'Table',
      paths: ['/table'],
      methods: ['GET', 'POST'],
      body: ListTablesRequest,
      query: ListTablesQuery,
      response: ListTablesResponse,
      filteredListing: 'table-ids',
      handler: ({ ctx, delimiter, body, query }) => tables.listAll(ctx, delimiter, listArgs(query, body)),
    }),
    defineRoute({
      operationId: 'DeclareTable',
      summary: 'Declare a table without data (writes the .lance-reserved marker)',
      tag: 'Table',
      paths: ['/table/{id}/declare', '/table/{id}/create-empty'],
      methods: ['POST'],
      body: DeclareTableRequest,
      response: DeclareTableResponse,
      mutation: true,
      vends: true,
      handler: ({ ctx, id, body }) => tables.declare(ctx, id, body),
    }),
    defineRoute({
      operationId: 'CreateTable',
      summary: 'Create a table from an Arrow IPC stream (an empty stream makes an empty table)',
      tag: 'Table',
      paths: ['/table/{id}/create'],
      methods: ['POST'],
      arrowBody: true,
      query: CreateTableQuery,
      response: CreateTableResponse,
      mutation: true,
      vends: true,
      handler: ({ ctx, id, query, raw }) =>
        tables.create(ctx, id, {
          mode: query.mode,
          location: query.location,
          properties: query.properties,
          storageOptions: query.storage_options,
          arrowIpcStream: raw,
        }),
    }),
    defineRoute({
      operationId: 'RegisterTable',
      summary: 'Register an existing Lance dataset at a location under a table id',
      tag: 'Table',
      paths: ['/table/{id}/register'],
      methods: ['POST'],
      body: RegisterTableRequest,
      response: RegisterTableResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => tables.register(ctx, id, body),
    }),
    defineRoute({
      operationId: 'DescribeTable',
      summary: 'Describe a table (location, properties, managed_versioning; more on request)',
      tag: 'Table',
      paths: ['/table/{id}/describe'],
      methods: ['POST'],
      body: DescribeTableRequest,
      query: DescribeTableQuery,
      response: DescribeTableResponse,
      vends: true,
      handler: ({ ctx, id, body, query }) => {
        const flags = queryOrBody(query, body, ['with_table_uri', 'load_detailed_metadata', 'check_declared']);
        return tables.describe(ctx, id, body, {
          withTableUri: flags.with_table_uri ?? false,
          loadDetailedMetadata: flags.load_detailed_metadata ?? false,
          checkDeclared: flags.check_declared ?? false,
        });
      },
    }),
    defineRoute({
      operationId: 'TableExists',
      summary: 'Check that a table exists: 200 with no body, or 404',
      tag: 'Table',
      paths: ['/table/{id}/exists'],
      methods: ['POST'],
      body: TableExistsRequest,
      response: 'empty',
      handler: ({ ctx, id, body }) => tables.exists(ctx, id, body.version),
    }),
    defineRoute({
      operationId: 'DropTable',
      summary: 'Drop a table and delete its data',
      tag: 'Table',
      paths: ['/table/{id}/drop'],
      methods: ['POST'],
      body: TableIdRequest,
      response: DropTableResponse,
      mutation: true,
      handler: ({ ctx, id }) => tables.drop(ctx, id),
    }),
    defineRoute({
      operationId: 'DeregisterTable',
      summary: 'Deregister a table: hide it, keep its data where it is, and free its name',
      tag: 'Table',
      paths: ['/table/{id}/deregister'],
      methods: ['POST'],
      body: TableIdRequest,
      response: DropTableResponse,
      mutation: true,
      handler: ({ ctx, id }) => tables.deregister(ctx, id),
    }),
    defineRoute({
      operationId: 'RenameTable',
      summary: 'Rename or move a table (atomic on a local root; 406 on an object store)',
      tag: 'Table',
      paths: ['/table/{id}/rename'],
      methods: ['POST'],
      body: RenameTableRequest,
      response: RenameTableResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => tables.rename(ctx, id, body),
    }),
  ]);
}
