import { z } from 'zod';
import { caseInsensitiveEnum, PageLimit, PageToken, Properties, QueryLimit, RequestBase, ResponseBase } from './common.js';

export const CreateNamespaceMode = caseInsensitiveEnum(['Create', 'ExistOk', 'Overwrite'], 'Behaviour when the namespace exists.');

export const CreateNamespaceRequest = z
  .object({ ...RequestBase, mode: CreateNamespaceMode.optional(), properties: Properties.optional() })
  .meta({ id: 'CreateNamespaceRequest' });
export type CreateNamespaceRequest = z.infer<typeof CreateNamespaceRequest>;

export const CreateNamespaceResponse = z
  .object({ ...ResponseBase, transaction_id: z.string().optional(), properties: Properties.nullable() })
  .meta({ id: 'CreateNamespaceResponse' });
export type CreateNamespaceResponse = z.infer<typeof CreateNamespaceResponse>;

export const ListNamespacesQuery = z.object({
  page_token: z.string().optional(),
  limit: QueryLimit.optional(),
});

export const ListNamespacesRequest = z
  .object({ ...RequestBase, page_token: PageToken.optional(), limit: PageLimit.optional() })
  .meta({ id: 'ListNamespacesRequest' });

export const ListNamespacesResponse = z
  .object({ ...ResponseBase, namespaces: z.array(z.string()), page_token: PageToken.optional() })
  .meta({ id: 'ListNamespacesResponse' });
export type ListNamespacesResponse = z.infer<typeof ListNamespacesResponse>;

export const DescribeNamespaceRequest = z.object({ ...RequestBase }).meta({ id: 'DescribeNamespaceRequest' });

export const DescribeNamespaceResponse = z.object({ ...ResponseBase, properties: Properties.nullable() }).meta({ id: 'DescribeNamespaceResponse' });
export type DescribeNamespaceResponse = z.infer<typeof DescribeNamespaceResponse>;

export const NamespaceExistsRequest = z.object({ ...RequestBase }).meta({ id: 'NamespaceExistsRequest' });

export const DropNamespaceMode = caseInsensitiveEnum(['Fail', 'Skip'], 'Behaviour when the namespace does not exist.');
export const DropNamespaceBehavior = caseInsensitiveEnum(['Restrict', 'Cascade'], 'Restrict fails on a non-empty namespace; Cascade drops everything in it.');

export const DropNamespaceRequest = z
  .object({ ...RequestBase, mode: DropNamespaceMode.optional(), behavior: DropNamespaceBehavior.optional() })
  .meta({ id: 'DropNamespaceRequest' });
export type DropNamespaceRequest = z.infer<typeof DropNamespaceRequest>;

export const DropNamespaceResponse = z
  .object({ ...ResponseBase, properties: Properties.nullable().optional(), transaction_id: z.array(z.string()).optional() })
  .meta({ id: 'DropNamespaceResponse' });
export type DropNamespaceResponse = z.infer<typeof DropNamespaceResponse>;
