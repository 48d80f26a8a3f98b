import { z } from 'zod';
import { caseInsensitiveEnum, RequestBase, ResponseBase } from './common.js';

// Beyond the spec: its DescribeTransactionRequest and AlterTransactionRequest carry no `branch`, and a
// Lance commit's id (`<table id>$<version>`) names a version of main; with `branch`, of that branch.
const TransactionBranch = z.string().nullable().optional().meta({
  description:
    'Not in the spec: the line of history of a Lance commit named `<table id>$<version or uuid>`. Absent, null, "" or "main" is main; a branch that does not exist is a 404 code 22.',
});

export const TransactionStatusInput = caseInsensitiveEnum(['Queued', 'Running', 'Succeeded', 'Failed', 'Canceled'], 'Transaction status.');

// The spec leaves every field of an action optional. One without the field it acts on (a status
// to set, a key, a value) changes nothing and checks nothing, as in Lance's reference server.
const ACTS_ON = 'When absent (or null), the action changes nothing.';

export const AlterTransactionAction = z
  .object({
    setStatusAction: z.object({ status: TransactionStatusInput.nullable().optional().meta({ description: ACTS_ON }) }).optional(),
    setPropertyAction: z
      .object({
        key: z.string().min(1).nullable().optional().meta({ description: ACTS_ON }),
        value: z.string().nullable().optional().meta({ description: ACTS_ON }),
        mode: caseInsensitiveEnum(['Overwrite', 'Fail', 'Skip'], 'When the key exists: Overwrite (default), Fail the whole alter, or Skip.').optional(),
      })
      .optional(),
    unsetPropertyAction: z
      .object({
        key: z.string().min(1).nullable().optional().meta({ description: ACTS_ON }),
        mode: caseInsensitiveEnum(['Skip', 'Fail'], 'When the key is missing: Skip (default) or Fail the whole alter.').optional(),
      })
      .optional(),
  })
  .refine((a) => [a.setStatusAction, a.setPropertyAction, a.unsetPropertyAction].filter((x) => x !== undefined).length === 1, {
    message: 'each action must set exactly one of setStatusAction, setPropertyAction, unsetPropertyAction',
  })
  .meta({ id: 'AlterTransactionAction' });
export type AlterTransactionAction = z.infer<typeof AlterTransactionAction>;

export const AlterTransactionRequest = z
  .object({ ...RequestBase, branch: TransactionBranch, actions: z.array(AlterTransactionAction).min(1) })
  .meta({ id: 'AlterTransactionRequest' });

export const DescribeTransactionRequest = z.object({ ...RequestBase, branch: TransactionBranch }).meta({ id: 'DescribeTransactionRequest' });

export const TransactionResponse = z
  .object({ ...ResponseBase, status: z.string(), properties: z.record(z.string(), z.string()) })
  .meta({ id: 'TransactionResponse', description: 'Status (Queued, Running, Succeeded, Failed, Canceled) and properties of a transaction.' });
