import type { ColumnService } from '../../service/data/columns.js';
import type { RouteSpec } from '../route.js';

export function columnRoutes(_service: ColumnService): RouteSpec[] {
  return [];
}
