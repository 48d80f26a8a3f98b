import {
  CreateMaterializedViewRequest,
  CreateMaterializedViewResponse,
  RefreshMaterializedViewRequest,
  RefreshMaterializedViewResponse,
} from '../../model/views.js';
import type { MaterializedViewService } from '../../service/views/view-service.js';
import { defineRoute, type RouteGroup, routeGroup } from '../route.js';

export function viewRoutes(views: MaterializedViewService): RouteGroup {
  return routeGroup('/v1', [
    defineRoute({
      operationId: 'CreateMaterializedView',
      summary:
        'Create a materialized view as a table: kind query (a filter and projection of a source table, with optional Python UDF columns), chunker or udtf (Geneva)',
      tag: 'MaterializedView',
      paths: ['/materialized_view/{id}/create'],
      methods: ['POST'],
      body: CreateMaterializedViewRequest,
      response: CreateMaterializedViewResponse,
      successStatus: 201,
      mutation: true,
      handler: ({ ctx, id, body }) => views.create(ctx, id, body),
    }),
    defineRoute({
      operationId: 'RefreshMaterializedView',
      summary: 'Start a job that recomputes a materialized view from its source; the job id is a transaction id',
      tag: 'MaterializedView',
      paths: ['/materialized_view/{id}/refresh'],
      methods: ['POST'],
      body: RefreshMaterializedViewRequest,
      response: RefreshMaterializedViewResponse,
      successStatus: 202,
      mutation: true,
      handler: ({ ctx, id, body }) => views.refresh(ctx, id, body),
    }),
  ]);
}
