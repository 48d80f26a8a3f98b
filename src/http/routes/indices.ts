import type { IndexService } from '../../service/data/indices.js';
import type { RouteSpec } from '../route.js';

export function indexRoutes(_service: IndexService): RouteSpec[] {
  return [];
}
