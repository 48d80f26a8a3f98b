import { AlterTableBackfillColumnsRequest, AlterTableBackfillColumnsResponse } from '../../model/jobs.js';
import type { JobService } from '../../service/jobs/job-service.js';
import { defineRoute, type RouteGroup, routeGroup } from '../route.js';

export function jobRoutes(jobs: JobService): RouteGroup {
  return routeGroup('/v1', [
    defineRoute({
      operationId: 'AlterTableBackfillColumns',
      summary: 'Start a resumable, checkpointed job that fills a computed or virtual column; the job id is a transaction id',
      tag: 'Table',
      paths: ['/table/{id}/backfill_column'],
      methods: ['POST'],
      body: AlterTableBackfillColumnsRequest,
      response: AlterTableBackfillColumnsResponse,
      successStatus: 202,
      mutation: true,
      handler: ({ ctx, id, body }) => jobs.backfill(ctx, id, body),
    }),
  ]);
}
