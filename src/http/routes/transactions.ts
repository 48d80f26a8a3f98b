import { AlterTransactionRequest, DescribeTransactionRequest, TransactionResponse } from '../../model/transactions.js';
import type { TransactionService } from '../../service/transactions/transaction-service.js';
import { defineRoute, type RouteGroup, routeGroup } from '../route.js';

// The path id is the transaction's (a service transaction id, or a Lance-form table id plus uuid
// or version); the body `id`, when a client sends one, names the table, so it is not compared
// with the path; the body `branch` (not in the spec), the line of history of a Lance commit.
export function transactionRoutes(transactions: TransactionService): RouteGroup {
  return routeGroup('/v1', [
    defineRoute({
      operationId: 'DescribeTransaction',
      summary: 'Describe a transaction: status and properties',
      tag: 'Transaction',
      paths: ['/transaction/{id}/describe'],
      methods: ['POST'],
      body: DescribeTransactionRequest,
      bodyIdIsPathId: false,
      response: TransactionResponse,
      handler: ({ ctx, id, body }) => transactions.describe(ctx, id, body.id, body.branch),
    }),
    defineRoute({
      operationId: 'AlterTransaction',
      summary: 'Set the status or properties of a transaction: all actions or none',
      tag: 'Transaction',
      paths: ['/transaction/{id}/alter'],
      methods: ['POST'],
      body: AlterTransactionRequest,
      bodyIdIsPathId: false,
      response: TransactionResponse,
      mutation: true,
      handler: ({ ctx, id, body }) => transactions.alter(ctx, id, body.id, body.actions, body.branch),
    }),
  ]);
}
