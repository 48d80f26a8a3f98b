import type { TagService } from '../../service/data/tags.js';
import type { RouteSpec } from '../route.js';

export function tagRoutes(_service: TagService): RouteSpec[] {
  return [];
}
