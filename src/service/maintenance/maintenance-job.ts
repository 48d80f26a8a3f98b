import { z } from 'zod';

// A maintenance run as its transaction record keeps it (`job`, operation `maintain_table`): which
// steps were due when the scheduler started it and which are done. See maintenance-run.ts.

export const MaintenanceStep = z.enum(['compact', 'optimize_indices', 'cleanup']);
export type MaintenanceStep = z.infer<typeof MaintenanceStep>;

export const MaintainTableJob = z.object({
  kind: z.literal('maintain_table'),
  table_id: z.array(z.string()),
  steps: z.array(MaintenanceStep),
  steps_done: z.array(MaintenanceStep).default([]),
  attempts: z.number().int().min(0).default(0),
  owner: z.string().optional(),
  lease_until: z.string().optional(),
});
export type MaintainTableJob = z.infer<typeof MaintainTableJob>;
