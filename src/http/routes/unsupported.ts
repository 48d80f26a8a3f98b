import { unsupported } from '../../model/errors.js';
import { defineRoute, type HttpMethod, type RouteGroup, routeGroup } from '../route.js';

// Operations of the Lance Namespace spec this service does not implement yet. Each answers the
// spec's 406 Unsupported (code 0) with a message naming the operation, so that clients fail
// clearly instead of on a 404. docs/compatibility.md lists the same operations.

interface Pending {
  operationId: string;
  path: string;
  methods?: HttpMethod[];
  arrowBody?: boolean;
  /** Where the work is planned. */
  plannedIn: string;
}

export const PENDING_OPERATIONS: readonly Pending[] = [];

export function unsupportedRoutes(): RouteGroup {
  const routes = PENDING_OPERATIONS.map((op) =>
    defineRoute({
      operationId: op.operationId,
      summary: `Not implemented yet (406 Unsupported); planned in ${op.plannedIn}`,
      tag: 'Unsupported',
      paths: [op.path],
      methods: op.methods ?? ['POST'],
      arrowBody: op.arrowBody ?? false,
      response: 'unsupported',
      handler: async () => {
        throw unsupported(`${op.operationId} is not implemented by this service yet (planned in ${op.plannedIn})`);
      },
    }),
  );
  return routeGroup('/v1', routes);
}
