import {
  CreateTableTagRequest,
  CreateTableTagResponse,
  DeleteTableTagRequest,
  DeleteTableTagResponse,
  GetTableTagVersionRequest,
  GetTableTagVersionResponse,
  ListTableTagsQuery,
  ListTableTagsRequest,
  ListTableTagsResponse,
  UpdateTableTagRequest,
  UpdateTableTagResponse,
} from '../../model/tags.js';
import type { TagService } from '../../service/data/tags.js';
import { defineRoute, queryOrBody, type RouteGroup, routeGroup } from '../route.js';

export function tagRoutes(tags: TagService): RouteGroup {
  return routeGroup('/v1', [
    defineRoute({
      operationId: 'ListTableTags',
      summary: 'List the tags of a table (name -> version, manifestSize), a page at a time',
      tag: 'Tag',
      paths: ['/table/{id}/tags/list'],
      // Bodyless POST in the spec; older clients send a GET.
      methods: ['GET', 'POST'],
      body: ListTableTagsRequest,
      query: ListTableTagsQuery,
      response: ListTableTagsResponse,
      handler: ({ ctx, id, body, query }) => {
        const { page_token, limit } = queryOrBody(query, body, ['page_token', 'limit']);
        return tags.list(ctx, id, { pageToken: page_token, limit });
      },
    }),
    defineRoute({
      operationId: 'GetTableTagVersion',
      summary: 'The version a tag points to',
      tag: 'Tag',
      paths: ['/table/{id}/tags/version'],
      methods: ['POST'],
      body: GetTableTagVersionRequest,
      response: GetTableTagVersionResponse,
      handler: ({ ctx, id, body }) => tags.version(ctx, id, body),
    }),
    defineRoute({
      operationId: 'CreateTableTag',
      summary: 'Tag a version (409 code 9 if the tag exists)',
      tag: 'Tag',
      paths: ['/table/{id}/tags/create'],
      methods: ['POST'],
      body: CreateTableTagRequest,
      response: CreateTableTagResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => tags.create(ctx, id, body),
    }),
    defineRoute({
      operationId: 'UpdateTableTag',
      summary: 'Point a tag at another version',
      tag: 'Tag',
      paths: ['/table/{id}/tags/update'],
      methods: ['POST'],
      body: UpdateTableTagRequest,
      response: UpdateTableTagResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => tags.update(ctx, id, body),
    }),
    defineRoute({
      operationId: 'DeleteTableTag',
      summary: 'Delete a tag (the tagged version stays)',
      tag: 'Tag',
      paths: ['/table/{id}/tags/delete'],
      methods: ['POST'],
      body: DeleteTableTagRequest,
      response: DeleteTableTagResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => tags.delete(ctx, id, body),
    }),
  ]);
}
