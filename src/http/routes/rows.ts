import type { RowService } from '../../service/data/rows.js';
import type { RouteSpec } from '../route.js';

export function rowRoutes(_service: RowService): RouteSpec[] {
  return [];
}
