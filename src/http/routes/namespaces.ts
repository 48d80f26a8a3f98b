import {
  CreateNamespaceRequest,
  CreateNamespaceResponse,
  DescribeNamespaceRequest,
  DescribeNamespaceResponse,
  DropNamespaceRequest,
  DropNamespaceResponse,
  ListNamespacesQuery,
  ListNamespacesRequest,
  ListNamespacesResponse,
  NamespaceExistsRequest,
} from '../../model/namespaces.js';
import type { NamespaceService } from '../../service/catalog/namespace-service.js';
import { defineRoute, queryOrBody, type RouteGroup, routeGroup } from '../route.js';

export function namespaceRoutes(namespaces: NamespaceService): RouteGroup {
  return routeGroup('/v1', [
    defineRoute({
      operationId: 'CreateNamespace',
      summary: 'Create a namespace (modes Create, ExistOk, Overwrite)',
      tag: 'Namespace',
      paths: ['/namespace/{id}/create'],
      methods: ['POST'],
      body: CreateNamespaceRequest,
      response: CreateNamespaceResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => namespaces.create(ctx, id, body),
    }),
    defineRoute({
      operationId: 'ListNamespaces',
      summary: 'List the child namespaces of a namespace',
      tag: 'Namespace',
      paths: ['/namespace/{id}/list'],
      methods: ['GET', 'POST'],
      body: ListNamespacesRequest,
      query: ListNamespacesQuery,
      response: ListNamespacesResponse,
      filteredListing: 'child-namespaces',
      handler: ({ ctx, id, body, query }) => {
        const { page_token, limit } = queryOrBody(query, body, ['page_token', 'limit']);
        return namespaces.list(ctx, id, { pageToken: page_token, limit });
      },
    }),
    defineRoute({
      operationId: 'DescribeNamespace',
      summary: 'Describe a namespace (its properties)',
      tag: 'Namespace',
      paths: ['/namespace/{id}/describe'],
      methods: ['POST'],
      body: DescribeNamespaceRequest,
      response: DescribeNamespaceResponse,
      handler: ({ ctx, id }) => namespaces.describe(ctx, id),
    }),
    defineRoute({
      operationId: 'NamespaceExists',
      summary: 'Check that a namespace exists: 200 with no body, or 404',
      tag: 'Namespace',
      paths: ['/namespace/{id}/exists'],
      methods: ['POST'],
      body: NamespaceExistsRequest,
      response: 'empty',
      handler: ({ ctx, id }) => namespaces.exists(ctx, id),
    }),
    defineRoute({
      operationId: 'DropNamespace',
      summary: 'Drop a namespace (behavior Restrict or Cascade; mode Fail or Skip)',
      tag: 'Namespace',
      paths: ['/namespace/{id}/drop'],
      methods: ['POST'],
      body: DropNamespaceRequest,
      response: DropNamespaceResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => namespaces.drop(ctx, id, body),
    }),
  ]);
}
