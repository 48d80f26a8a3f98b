import { z } from 'zod';
import type { RouteSpec } from './route.js';

// The OpenAPI 3.1 document the service serves at /openapi.json, generated from the same route
// declarations and zod schemas that validate requests. Schemas with a registered id become
// components; query parameters are inlined.

type JsonSchema = Record<string, unknown>;

const ERROR_STATUSES = ['400', '401', '403', '404', '406', '409', '413', '429', '500', '503'];

function stripMeta(schema: JsonSchema): JsonSchema {
  const { $schema: _s, $id: _i, id: _id, ...rest } = schema;
  return rest;
}

function schemaFor(schema: z.ZodType): JsonSchema {
  const id = z.globalRegistry.get(schema)?.id;
  if (id) return { $ref: `#/components/schemas/${id}` };
  return stripMeta(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any', reused: 'inline' }) as JsonSchema);
}

function queryParameters(query: z.ZodType | undefined): JsonSchema[] {
  if (!(query instanceof z.ZodObject)) return [];
  return Object.entries(query.shape as Record<string, z.ZodType>).map(([name, field]) => ({
    name,
    in: 'query',
    required: false,
    schema: schemaFor(field instanceof z.ZodOptional ? (field.unwrap() as z.ZodType) : field),
  }));
}

function pathParameters(path: string): JsonSchema[] {
  const names = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] ?? '');
  return names.map((name) => ({
    name,
    in: 'path',
    required: true,
    description: name === 'id' ? 'Object id: its parts joined by the delimiter; the delimiter alone is the root namespace.' : undefined,
    schema: { type: 'string' },
  }));
}

export function buildOpenApi(routes: readonly RouteSpec[], info: { title: string; version: string }): JsonSchema {
  const components = z.toJSONSchema(z.globalRegistry, {
    io: 'input',
    unrepresentable: 'any',
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<string, JsonSchema> };
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    route.paths.forEach((path, index) => {
      const item = paths[path] ?? {};
      paths[path] = item;
      for (const method of route.methods) {
        // Every spec endpoint takes `delimiter` (the batch routes and ListAllTables name no id in
        // their path, but the spec and its generated clients still send it); health checks do not.
        const hasDelimiter = path.startsWith('/v1/');
        const parameters = [
          ...pathParameters(path),
          ...(hasDelimiter
            ? [{ name: 'delimiter', in: 'query', required: false, description: 'Delimiter of id parts; default "$".', schema: { type: 'string' } }]
            : []),
          ...queryParameters(route.query),
        ];
        const errorResponse = { description: 'Error', content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } } } };
        const responses: Record<string, unknown> =
          route.response === 'unsupported' ? { '406': { ...errorResponse, description: 'Not supported by this service (code 0); the message says why' } } : {};
        const success: JsonSchema =
          route.response === 'empty' || route.response === 'unsupported'
            ? { description: 'Success, no content' }
            : route.response === 'arrow-file'
              ? { description: 'Arrow IPC file', content: { 'application/vnd.apache.arrow.file': { schema: { type: 'string', format: 'binary' } } } }
              : { description: 'Success', content: { 'application/json': { schema: schemaFor(route.response) } } };
        const requestBody =
          method === 'GET'
            ? undefined
            : route.arrowBody
              ? { required: false, content: { 'application/vnd.apache.arrow.stream': { schema: { type: 'string', format: 'binary' } } } }
              : route.body
                ? { required: false, content: { 'application/json': { schema: schemaFor(route.body) } } }
                : undefined;
        item[method.toLowerCase()] = {
          operationId: index === 0 ? route.operationId + (method === 'GET' && route.methods.length > 1 ? 'Get' : '') : `${route.operationId}Alias${index}`,
          summary: route.summary,
          tags: [route.tag],
          ...(index > 0 ? { deprecated: true, description: `Alias of ${route.paths[0]} kept for older clients.` } : {}),
          // An open route (health) answers without credentials whatever is configured (authentication.ts).
          ...(route.open ? { security: [] } : {}),
          parameters,
          ...(requestBody ? { requestBody } : {}),
          responses:
            route.response === 'unsupported'
              ? responses
              : { [String(route.successStatus ?? 200)]: success, ...Object.fromEntries(ERROR_STATUSES.map((s) => [s, errorResponse])) },
        };
      }
    });
  }
  return {
    openapi: '3.1.0',
    info: { ...info, description: 'Lance Namespace REST service over Lance tables stored on a local disk or in an S3 bucket.' },
    servers: [{ url: '/' }],
    // The spec's schemes; which of them a deployment accepts is its configuration (docs/security.md, Authentication).
    security: [{ OAuth2: [] }, { BearerAuth: [] }, { ApiKeyAuth: [] }],
    paths,
    components: {
      // By name: the registry lists schemas in the order their modules were first imported, which an import reorder would change.
      schemas: Object.fromEntries(
        Object.entries(components.schemas)
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
          .map(([k, v]) => [k, stripMeta(v)]),
      ),
      securitySchemes: {
        OAuth2: { type: 'oauth2', flows: { clientCredentials: { tokenUrl: '/oauth/token', scopes: {} } } },
        BearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
        ApiKeyAuth: { type: 'apiKey', in: 'header', name: 'x-api-key' },
      },
    },
  };
}
