import { invalidInput } from '../../model/errors.js';
import {
  CreateTableIndexRequest,
  CreateTableIndexResponse,
  CreateTableScalarIndexResponse,
  DropTableIndexQuery,
  DropTableIndexRequest,
  DropTableIndexResponse,
  ListTableIndicesQuery,
  ListTableIndicesRequest,
  ListTableIndicesResponse,
} from '../../model/indices.js';
import type { IndexService } from '../../service/data/indices.js';
import { branchOfQueryOrBody, defineRoute, queryOrBody, type RouteGroup, routeGroup } from '../route.js';

export function indexRoutes(indices: IndexService): RouteGroup {
  return routeGroup('/v1', [
    defineRoute({
      operationId: 'CreateTableIndex',
      summary: 'Create an index on a column (vector, scalar or FTS); the index is built before this returns',
      tag: 'Index',
      paths: ['/table/{id}/create_index'],
      methods: ['POST'],
      body: CreateTableIndexRequest,
      response: CreateTableIndexResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => indices.create(ctx, id, body, { scalarOnly: false }),
    }),
    defineRoute({
      operationId: 'CreateTableScalarIndex',
      summary: 'Create a scalar or FTS index on a column; the index is built before this returns',
      tag: 'Index',
      paths: ['/table/{id}/create_scalar_index'],
      methods: ['POST'],
      body: CreateTableIndexRequest,
      response: CreateTableScalarIndexResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => indices.create(ctx, id, body, { scalarOnly: true }),
    }),
    defineRoute({
      operationId: 'ListTableIndices',
      summary: 'List the indexes of a table (at its latest version, or at `version`)',
      tag: 'Index',
      paths: ['/table/{id}/index/list'],
      methods: ['GET', 'POST'],
      body: ListTableIndicesRequest,
      query: ListTableIndicesQuery,
      response: ListTableIndicesResponse,
      handler: ({ ctx, id, body, query }) => {
        const { page_token, limit, version } = queryOrBody(query, body, ['page_token', 'limit', 'version']);
        const branch = branchOfQueryOrBody(query, body);
        return indices.list(ctx, id, { pageToken: page_token, limit, version, branch });
      },
    }),
    defineRoute({
      operationId: 'DropTableIndex',
      summary: 'Drop an index of a table',
      tag: 'Index',
      paths: ['/table/{id}/index/{index_name}/drop'],
      methods: ['POST'],
      body: DropTableIndexRequest,
      query: DropTableIndexQuery,
      response: DropTableIndexResponse,
      mutation: true,
      handler: ({ ctx, id, body, query, params }) => {
        const name = params.index_name ?? '';
        if (name === '') throw invalidInput('index_name: the path must name the index');
        if (body.index_name && body.index_name !== name) {
          throw invalidInput(`the index_name in the body ${JSON.stringify(body.index_name)} does not match the one in the path ${JSON.stringify(name)}`);
        }
        return indices.drop(ctx, id, name, branchOfQueryOrBody(query, body));
      },
    }),
  ]);
}
