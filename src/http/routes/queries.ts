import { AnalyzeTableQueryPlanRequest, ExplainTableQueryPlanRequest, QueryPlanText, QueryTableRequest } from '../../model/queries.js';
import type { QueryService } from '../../service/data/queries.js';
import { defineRoute, type RouteGroup, routeGroup } from '../route.js';

export function queryRoutes(queries: QueryService): RouteGroup {
  return routeGroup('/v1', [
    defineRoute({
      operationId: 'QueryTable',
      summary: 'Query a table (vector, full-text, hybrid or filter); the result is an Arrow IPC file',
      tag: 'Data',
      paths: ['/table/{id}/query'],
      methods: ['POST'],
      body: QueryTableRequest,
      response: 'arrow-file',
      handler: ({ ctx, id, body }) => queries.query(ctx, id, body),
    }),
    defineRoute({
      operationId: 'ExplainTableQueryPlan',
      summary: 'The execution plan of a query, as a JSON string',
      tag: 'Data',
      paths: ['/table/{id}/explain_plan'],
      methods: ['POST'],
      body: ExplainTableQueryPlanRequest,
      response: QueryPlanText,
      handler: ({ ctx, id, body }) => queries.explain(ctx, id, body),
    }),
    defineRoute({
      operationId: 'AnalyzeTableQueryPlan',
      summary: 'Run a query (fields flat in the body) and return its plan with execution metrics, as a JSON string',
      tag: 'Data',
      paths: ['/table/{id}/analyze_plan'],
      methods: ['POST'],
      body: AnalyzeTableQueryPlanRequest,
      response: QueryPlanText,
      handler: ({ ctx, id, body }) => queries.analyze(ctx, id, body),
    }),
  ]);
}
