import { z } from 'zod';
import { BranchField, PageLimit, PageToken, QueryLimit, RequestBase, ResponseBase } from './common.js';

// Tags of a table: named pointers to versions, kept by Lance under `_refs/tags/` of the dataset.

const Version = z.number().int().min(0);
/** A tag is a file `_refs/tags/<name>.json`: its name must fit a file name (255 bytes) on every store. */
const MAX_TAG_NAME_BYTES = 200;
const TagName = z
  .string()
  .min(1)
  .refine((name) => Buffer.byteLength(name) <= MAX_TAG_NAME_BYTES, { message: `must be at most ${MAX_TAG_NAME_BYTES} bytes` })
  .meta({ description: `Tag name: letters, digits, '.', '-' and '_', not starting with '.'; at most ${MAX_TAG_NAME_BYTES} bytes.` });

export const TagContents = z
  .object({
    branch: z.string().optional().meta({ description: 'Branch the tag was created on; absent for the main branch.' }),
    version: Version,
    manifestSize: z.number().int().min(0),
  })
  .meta({ id: 'TagContents' });
export type TagContents = z.infer<typeof TagContents>;

/** ListTableTags has no body in REST; page_token and limit travel in the query string. */
export const ListTableTagsQuery = z.object({
  page_token: z.string().optional(),
  limit: QueryLimit.optional(),
});

export const ListTableTagsRequest = z
  .object({ ...RequestBase, page_token: PageToken.optional(), limit: PageLimit.optional() })
  .meta({ id: 'ListTableTagsRequest' });

export const ListTableTagsResponse = z
  .object({ ...ResponseBase, tags: z.record(z.string(), TagContents), page_token: PageToken.optional() })
  .meta({ id: 'ListTableTagsResponse' });
export type ListTableTagsResponse = z.infer<typeof ListTableTagsResponse>;

export const GetTableTagVersionRequest = z.object({ ...RequestBase, tag: TagName }).meta({ id: 'GetTableTagVersionRequest' });
export type GetTableTagVersionRequest = z.infer<typeof GetTableTagVersionRequest>;

export const GetTableTagVersionResponse = z
  .object({ ...ResponseBase, version: Version, branch: z.string().optional() })
  .meta({ id: 'GetTableTagVersionResponse' });
export type GetTableTagVersionResponse = z.infer<typeof GetTableTagVersionResponse>;

export const CreateTableTagRequest = z.object({ ...RequestBase, tag: TagName, version: Version, branch: BranchField }).meta({ id: 'CreateTableTagRequest' });
export type CreateTableTagRequest = z.infer<typeof CreateTableTagRequest>;

export const CreateTableTagResponse = z.object({ ...ResponseBase, transaction_id: z.string().optional() }).meta({ id: 'CreateTableTagResponse' });
export type CreateTableTagResponse = z.infer<typeof CreateTableTagResponse>;

export const UpdateTableTagRequest = z.object({ ...RequestBase, tag: TagName, version: Version, branch: BranchField }).meta({ id: 'UpdateTableTagRequest' });
export type UpdateTableTagRequest = z.infer<typeof UpdateTableTagRequest>;

export const UpdateTableTagResponse = z.object({ ...ResponseBase, transaction_id: z.string().optional() }).meta({ id: 'UpdateTableTagResponse' });
export type UpdateTableTagResponse = z.infer<typeof UpdateTableTagResponse>;

export const DeleteTableTagRequest = z.object({ ...RequestBase, tag: TagName }).meta({ id: 'DeleteTableTagRequest' });
export type DeleteTableTagRequest = z.infer<typeof DeleteTableTagRequest>;

export const DeleteTableTagResponse = z.object({ ...ResponseBase, transaction_id: z.string().optional() }).meta({ id: 'DeleteTableTagResponse' });
export type DeleteTableTagResponse = z.infer<typeof DeleteTableTagResponse>;
