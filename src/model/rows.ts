import { z } from 'zod';
import { BranchField, caseInsensitiveEnum, Properties, QueryBoolean, QueryLimit, RequestBase, ResponseBase } from './common.js';

// Row operations of the spec: update, delete, insert, merge-insert, count, restore. Insert and
// merge-insert carry an Arrow IPC stream as the body and their fields in the query string.

const Version = z.number().int().min(0);
/** A SQL predicate; empty or blank means none where the predicate is optional. */
const Predicate = z.string().meta({ description: 'SQL predicate over Lance field paths.' });

export const UpdateTableRequest = z
  .object({
    ...RequestBase,
    branch: BranchField,
    predicate: Predicate.nullable().optional(),
    updates: z
      .array(z.tuple([z.string().min(1), z.string()]).meta({ description: '[field_path, SQL expression]' }))
      .min(1)
      .meta({ description: 'Pairs of [field_path, SQL expression] evaluated against the current row.' }),
    properties: Properties.nullable().optional().meta({ description: 'Merged into the table properties.' }),
  })
  .meta({ id: 'UpdateTableRequest' });
export type UpdateTableRequest = z.infer<typeof UpdateTableRequest>;

export const UpdateTableResponse = z
  .object({
    ...ResponseBase,
    transaction_id: z.string().optional(),
    updated_rows: z.number().int().min(0),
    version: Version,
    properties: Properties.nullable().optional(),
  })
  .meta({ id: 'UpdateTableResponse' });
export type UpdateTableResponse = z.infer<typeof UpdateTableResponse>;

export const DeleteFromTableRequest = z.object({ ...RequestBase, branch: BranchField, predicate: Predicate }).meta({ id: 'DeleteFromTableRequest' });
export type DeleteFromTableRequest = z.infer<typeof DeleteFromTableRequest>;

export const DeleteFromTableResponse = z
  .object({ ...ResponseBase, transaction_id: z.string().optional(), version: Version })
  .meta({ id: 'DeleteFromTableResponse' });
export type DeleteFromTableResponse = z.infer<typeof DeleteFromTableResponse>;

export const InsertMode = caseInsensitiveEnum(['Append', 'Overwrite'], 'How the insert behaves (default Append).');

/** InsertIntoTable's fields travel in the query string; the body is an Arrow IPC stream. */
export const InsertIntoTableQuery = z.object({
  mode: InsertMode.optional(),
  branch: z.string().optional(),
});

export const InsertIntoTableResponse = z
  .object({ ...ResponseBase, transaction_id: z.string().optional(), num_inserted_rows: z.number().int().min(0), version: Version })
  .meta({ id: 'InsertIntoTableResponse' });
export type InsertIntoTableResponse = z.infer<typeof InsertIntoTableResponse>;

/** MergeInsertIntoTable's fields travel in the query string; the body is an Arrow IPC stream. */
export const MergeInsertIntoTableQuery = z.object({
  on: z.string().min(1).meta({ description: 'Lance field path of the column rows are matched on.' }),
  when_matched_update_all: QueryBoolean.optional(),
  when_matched_update_all_filt: z.string().optional(),
  when_not_matched_insert_all: QueryBoolean.optional(),
  when_not_matched_by_source_delete: QueryBoolean.optional(),
  when_not_matched_by_source_delete_filt: z.string().optional(),
  timeout: z.string().optional().meta({ description: 'e.g. "30s", "5m", "1m30s", "250ms"; a bare number is seconds.' }),
  use_index: QueryBoolean.optional(),
  branch: z.string().optional(),
});
export type MergeInsertIntoTableQuery = z.output<typeof MergeInsertIntoTableQuery>;

export const MergeInsertIntoTableResponse = z
  .object({
    ...ResponseBase,
    transaction_id: z.string().optional(),
    num_updated_rows: z.number().int().min(0),
    num_inserted_rows: z.number().int().min(0),
    num_deleted_rows: z.number().int().min(0),
    version: Version,
  })
  .meta({ id: 'MergeInsertIntoTableResponse' });
export type MergeInsertIntoTableResponse = z.infer<typeof MergeInsertIntoTableResponse>;

export const CountTableRowsRequest = z
  .object({ ...RequestBase, version: Version.nullable().optional(), branch: BranchField, predicate: Predicate.nullable().optional() })
  .meta({ id: 'CountTableRowsRequest' });

/** Older clients send CountTableRows as a GET with its fields in the query string. */
export const CountTableRowsQuery = z.object({
  version: QueryLimit.optional(),
  predicate: z.string().optional(),
  branch: z.string().optional(),
});

/** REST answers a bare JSON integer rather than {count}. */
export const CountTableRowsResponse = z.number().int().min(0).meta({ id: 'CountTableRowsResponse' });

export const RestoreTableRequest = z
  .object({ ...RequestBase, version: Version.meta({ description: 'Version to restore; its content becomes a new latest version.' }), branch: BranchField })
  .meta({ id: 'RestoreTableRequest' });
export type RestoreTableRequest = z.infer<typeof RestoreTableRequest>;

export const RestoreTableResponse = z.object({ ...ResponseBase, transaction_id: z.string().optional() }).meta({ id: 'RestoreTableResponse' });
export type RestoreTableResponse = z.infer<typeof RestoreTableResponse>;
