import { z } from 'zod';
import { caseInsensitiveEnum, RequestBase } from './common.js';

export const TransactionStatusInput = caseInsensitiveEnum(['Queued', 'Running', 'Succeeded', 'Failed', 'Canceled'], 'Transaction status.');

export const AlterTransactionAction = z
  .object({
    setStatusAction: z.object({ status: TransactionStatusInput }).optional(),
    setPropertyAction: z
      .object({
        key: z.string().min(1),
        value: z.string(),
        mode: caseInsensitiveEnum(['Overwrite', 'Fail', 'Skip'], 'When the key exists: Overwrite (default), Fail the whole alter, or Skip.').optional(),
      })
      .optional(),
    unsetPropertyAction: z
      .object({
        key: z.string().min(1),
        mode: caseInsensitiveEnum(['Skip', 'Fail'], 'When the key is missing: Skip (default) or Fail the whole alter.').optional(),
      })
      .optional(),
  })
  .refine((a) => [a.setStatusAction, a.setPropertyAction, a.unsetPropertyAction].filter((x) => x !== undefined).length === 1, {
    message: 'each action must set exactly one of setStatusAction, setPropertyAction, unsetPropertyAction',
  })
  .meta({ id: 'AlterTransactionAction' });
export type AlterTransactionAction = z.infer<typeof AlterTransactionAction>;

export const AlterTransactionRequest = z.object({ ...RequestBase, actions: z.array(AlterTransactionAction).min(1) }).meta({ id: 'AlterTransactionRequest' });

export const DescribeTransactionRequest = z.object({ ...RequestBase }).meta({ id: 'DescribeTransactionRequest' });

export const TransactionResponse = z
  .object({ status: z.string(), properties: z.record(z.string(), z.string()) })
  .meta({ id: 'TransactionResponse', description: 'Status (Queued, Running, Succeeded, Failed, Canceled) and properties of a transaction.' });
