import type { QueryService } from '../../service/data/queries.js';
import type { RouteSpec } from '../route.js';

export function queryRoutes(_service: QueryService): RouteSpec[] {
  return [];
}
