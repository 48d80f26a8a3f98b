import { z } from 'zod';
import { PageLimit, PageToken, QueryLimit, RequestBase, ResponseBase } from './common.js';

// Branches of a table: Lance's own lines of history of a dataset (`_refs/branches/`, `tree/<name>/`).

const BranchName = z.string().meta({
  description:
    "Branch name as Lance accepts it: '/'-separated segments of letters, digits, '.', '-' and '_'; no '..', no empty segment, not ending in '.lock', not 'main'.",
});

export const BranchContents = z
  .object({
    parentBranch: z.string().optional().meta({ description: 'Branch this branch was created from; absent when created from main.' }),
    parentVersion: z.number().int().min(0),
    createAt: z.number().int().min(0).meta({ description: 'Unix time in seconds when the branch was created.' }),
    manifestSize: z.number().int().min(0),
    metadata: z.record(z.string(), z.string()).optional(),
  })
  .meta({ id: 'BranchContents' });
export type BranchContents = z.infer<typeof BranchContents>;

/** ListTableBranches has no body in REST; page_token and limit travel in the query string. */
export const ListTableBranchesQuery = z.object({
  page_token: z.string().optional(),
  limit: QueryLimit.optional(),
});

export const ListTableBranchesRequest = z
  .object({ ...RequestBase, page_token: PageToken.optional(), limit: PageLimit.optional() })
  .meta({ id: 'ListTableBranchesRequest' });

export const ListTableBranchesResponse = z
  .object({ ...ResponseBase, branches: z.record(z.string(), BranchContents), page_token: PageToken.optional() })
  .meta({ id: 'ListTableBranchesResponse' });
export type ListTableBranchesResponse = z.infer<typeof ListTableBranchesResponse>;

export const CreateTableBranchRequest = z
  .object({
    ...RequestBase,
    name: BranchName,
    from_branch: z.string().nullable().optional().meta({ description: 'Branch to fork from; absent, null, "" or "main" is main.' }),
    from_version: z.number().int().min(0).nullable().optional().meta({ description: 'Version of the source to fork from; its latest when absent.' }),
  })
  .meta({ id: 'CreateTableBranchRequest' });
export type CreateTableBranchRequest = z.infer<typeof CreateTableBranchRequest>;

export const CreateTableBranchResponse = z.object({ ...ResponseBase, transaction_id: z.string().optional() }).meta({ id: 'CreateTableBranchResponse' });
export type CreateTableBranchResponse = z.infer<typeof CreateTableBranchResponse>;

export const DeleteTableBranchRequest = z.object({ ...RequestBase, name: BranchName }).meta({ id: 'DeleteTableBranchRequest' });
export type DeleteTableBranchRequest = z.infer<typeof DeleteTableBranchRequest>;

export const DeleteTableBranchResponse = z.object({ ...ResponseBase, transaction_id: z.string().optional() }).meta({ id: 'DeleteTableBranchResponse' });
export type DeleteTableBranchResponse = z.infer<typeof DeleteTableBranchResponse>;
