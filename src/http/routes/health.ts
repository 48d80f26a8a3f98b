import { z } from 'zod';
import { ErrorCode, NamespaceError } from '../../model/errors.js';
import type { HealthService } from '../../service/health/health-service.js';
import { defineRoute, type RouteGroup, routeGroup } from '../route.js';

const HealthResponse = z.object({ status: z.literal('ok') }).meta({ id: 'HealthResponse' });

export function healthRoutes(health: HealthService): RouteGroup {
  return routeGroup('/health', [
    defineRoute({
      operationId: 'Live',
      summary: 'Liveness: the process serves requests',
      tag: 'Health',
      paths: ['/live'],
      methods: ['GET'],
      response: HealthResponse,
      open: true,
      handler: async () => ({ status: 'ok' }),
    }),
    defineRoute({
      operationId: 'Ready',
      summary: 'Readiness: the root is reachable and writable (503 otherwise)',
      tag: 'Health',
      paths: ['/ready'],
      methods: ['GET'],
      response: HealthResponse,
      open: true,
      handler: async () => {
        const result = await health.ready();
        // The failure goes to the log as the cause (a 503 is logged with it), not into the body.
        if (!result.ok) throw new NamespaceError(ErrorCode.ServiceUnavailable, result.reason, { cause: result.cause });
        return { status: 'ok' };
      },
    }),
  ]);
}
