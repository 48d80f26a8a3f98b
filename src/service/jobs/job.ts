import { z } from 'zod';
import { BackfillJob } from './backfill-plan.js';
import { RefreshViewJob } from './refresh-job.js';

// A job as its transaction record keeps it (`job`): one of the kinds a runner works.

/** Every kind of job a runner works: a column's backfill, a materialized view's refresh. */
export const Job = z.discriminatedUnion('kind', [BackfillJob, RefreshViewJob]);
export type Job = z.infer<typeof Job>;
