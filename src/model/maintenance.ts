import { z } from 'zod';

// Table maintenance as DescribeTable shows it with `with_maintenance` (a service extension): the
// policy as resolved for the table, key by key with where each value comes from, and its last runs.

/** What one finished maintenance run did. */
export const MaintenanceRunSummary = z
  .object({
    job_id: z.string().meta({ description: "The run's transaction id (DescribeTransaction)." }),
    status: z.string(),
    finished_at: z.string(),
    version: z.number().int().nullable().meta({ description: "The table's latest version when the run ended." }),
    steps: z.array(z.string()),
    fragments_before: z.number().int().optional(),
    fragments_after: z.number().int().optional(),
    rows_rewritten: z.number().int().optional(),
    bytes_rewritten: z.number().int().optional(),
    indices_updated: z.number().int().optional(),
    rows_indexed: z.number().int().optional(),
    versions_removed: z.number().int().optional(),
    bytes_removed: z.number().int().optional(),
    kept: z.array(z.number().int()).optional().meta({ description: 'Versions old enough to go that the cleanup kept for a tag or a branch.' }),
    error: z.string().optional(),
  })
  .meta({ id: 'MaintenanceRunSummary' });
export type MaintenanceRunSummary = z.infer<typeof MaintenanceRunSummary>;

export const MaintenancePolicyEntry = z
  .object({
    key: z.string(),
    value: z.string(),
    from: z.enum(['table', 'namespace', 'default']),
    namespace: z.array(z.string()).optional().meta({ description: 'The namespace whose property it is, when `from` is namespace.' }),
  })
  .meta({ id: 'MaintenancePolicyEntry' });
export type MaintenancePolicyEntry = z.infer<typeof MaintenancePolicyEntry>;

export const TableMaintenance = z
  .object({
    policy: z.array(MaintenancePolicyEntry),
    last_runs: z.array(MaintenanceRunSummary).meta({ description: 'The last runs, newest first (at most 10).' }),
  })
  .meta({ id: 'TableMaintenance' });
export type TableMaintenance = z.infer<typeof TableMaintenance>;
