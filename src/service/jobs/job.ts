import { z } from 'zod';
import { MaintainTableJob } from '../maintenance/maintenance-job.js';
import { BackfillJob } from './backfill-plan.js';
import { RefreshViewJob } from './refresh-job.js';

// A job as its transaction record keeps it (`job`): one of the kinds a runner works.

/** Every kind of job a runner works: a column's backfill, a materialized view's refresh, a table's maintenance. */
export const Job = z.discriminatedUnion('kind', [BackfillJob, RefreshViewJob, MaintainTableJob]);
export type Job = z.infer<typeof Job>;

/** The jobs Geneva's job table mirrors (a maintenance run is the service's own). */
export type GenevaJob = Exclude<Job, MaintainTableJob>;
