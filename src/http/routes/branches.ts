import {
  CreateTableBranchRequest,
  CreateTableBranchResponse,
  DeleteTableBranchRequest,
  DeleteTableBranchResponse,
  ListTableBranchesQuery,
  ListTableBranchesRequest,
  ListTableBranchesResponse,
} from '../../model/branches.js';
import type { BranchService } from '../../service/branches/branch-service.js';
import { defineRoute, queryOrBody, type RouteGroup, routeGroup } from '../route.js';

export function branchRoutes(branches: BranchService): RouteGroup {
  return routeGroup('/v1', [
    defineRoute({
      operationId: 'ListTableBranches',
      summary: 'List the branches of a table (name -> BranchContents), a page at a time',
      tag: 'Branch',
      paths: ['/table/{id}/branches/list'],
      // Bodyless POST in the spec; a GET is taken too, as for the other listings.
      methods: ['GET', 'POST'],
      body: ListTableBranchesRequest,
      query: ListTableBranchesQuery,
      response: ListTableBranchesResponse,
      handler: ({ ctx, id, body, query }) => {
        const { page_token, limit } = queryOrBody(query, body, ['page_token', 'limit']);
        return branches.list(ctx, id, { pageToken: page_token, limit });
      },
    }),
    defineRoute({
      operationId: 'CreateTableBranch',
      summary: 'Fork a branch from main or another branch, at its latest or a given version (409 code 23 if the name is taken)',
      tag: 'Branch',
      paths: ['/table/{id}/branches/create'],
      methods: ['POST'],
      body: CreateTableBranchRequest,
      response: CreateTableBranchResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => branches.create(ctx, id, body),
    }),
    defineRoute({
      operationId: 'DeleteTableBranch',
      summary: 'Delete a branch and its history (409 code 19 while other branches were forked from it or a tag points into it)',
      tag: 'Branch',
      paths: ['/table/{id}/branches/delete'],
      methods: ['POST'],
      body: DeleteTableBranchRequest,
      response: DeleteTableBranchResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => branches.delete(ctx, id, body),
    }),
  ]);
}
