import { z } from 'zod';
import { STATUS_BY_TYPE, type HttpErrorType } from './errors';
import type { Route } from './routes';
import { errorSchema } from './schemas';

/** Where the server serves its OpenAPI document. */
export const OPENAPI_PATH = '/openapi.json';

type JsonSchema = Record<string, unknown>;

/**
 * A zod schema as JSON Schema 2020-12 (OpenAPI 3.1's dialect): `input` for what a request
 * may leave out (fields with defaults are optional), `output` for what a response holds.
 */
export function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
  }) as JsonSchema;
  return rest;
}

function parameters(schema: z.ZodType | undefined, where: 'path' | 'query'): unknown[] {
  if (!schema) return [];
  const s = jsonSchema(schema, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
  return Object.entries(s.properties ?? {}).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || (s.required ?? []).includes(name),
    schema: property,
  }));
}

const ERROR_REF = { $ref: '#/components/schemas/Error' };

/** The documented failures of a route, one response per status, naming the types behind it. */
function errorResponses(types: readonly HttpErrorType[]): Record<string, unknown> {
  const byStatus = new Map<number, HttpErrorType[]>();
  for (const type of [...types, 'Internal' as const]) {
    const status = STATUS_BY_TYPE[type];
    byStatus.set(status, [...(byStatus.get(status) ?? []), type]);
  }
  return Object.fromEntries(
    [...byStatus].map(([status, named]) => [
      String(status),
      {
        description: named.join(' or '),
        content: { 'application/json': { schema: ERROR_REF } },
      },
    ]),
  );
}

/** The security scheme of every operation but health, readiness and the document. */
const API_KEY = 'apiKey';

function operation(r: Route, keys: boolean): Record<string, unknown> {
  const secured = keys && !r.open;
  const op: Record<string, unknown> = {
    operationId: r.operationId,
    summary: r.summary,
    tags: [r.tag],
    ...(secured && { security: [{ [API_KEY]: [] }] }),
  };
  const params = [...parameters(r.params, 'path'), ...parameters(r.query, 'query')];
  if (params.length) op.parameters = params;
  if (r.body) {
    op.requestBody = {
      required: !r.bodyOptional,
      content: { 'application/json': { schema: jsonSchema(r.body, 'input') } },
    };
  }
  op.responses = {
    [String(r.status ?? 200)]: {
      description: 'success',
      content: { [r.produces ?? 'application/json']: { schema: jsonSchema(r.response, 'output') } },
    },
    // A missing, unknown or expired key is 401; one that does not cover what the call names,
    // 403; a key over its share of the server, 429.
    ...errorResponses(secured ? [...r.errors, 'Unauthenticated', 'Forbidden', 'RateLimited'] : r.errors),
  };
  return op;
}

/**
 * The OpenAPI 3.1 document of these routes, every schema generated from the routes' zod
 * schemas. With `keys`, every operation but the open ones requires an API key (a bearer
 * token) and documents the 401 and 403 it answers without one that covers the call.
 */
export function openApiDocument(
  routes: readonly Route[],
  version: string,
  options: { keys?: boolean } = {},
): Record<string, unknown> {
  const keys = options.keys ?? false;
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    paths[r.path] = { ...paths[r.path], [r.method.toLowerCase()]: operation(r, keys) };
  }
  paths[OPENAPI_PATH] = {
    get: {
      operationId: 'openapi',
      summary: 'This document',
      tags: ['service'],
      responses: {
        200: { description: 'the OpenAPI 3.1 document', content: { 'application/json': { schema: {} } } },
      },
    },
  };
  return {
    openapi: '3.1.0',
    info: {
      title: 'memgate',
      version,
      description:
        'A memory service for long-horizon LLM agents. Every error is `{ "error": { "type", "message", "details" } }`; the status follows the MemgateError `type`.',
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    tags: [
      { name: 'memory', description: "an agent's memories" },
      { name: 'windows', description: 'context windows of agent sessions' },
      { name: 'store', description: 'what the store can prove' },
      { name: 'service', description: 'health, readiness and this document' },
    ],
    paths,
    components: {
      schemas: { Error: jsonSchema(errorSchema, 'output') },
      ...(keys && {
        securitySchemes: {
          [API_KEY]: {
            type: 'http',
            scheme: 'bearer',
            description:
              'An API key (`memgate keys create <pattern>`), scoped to the agent ids its pattern covers',
          },
        },
      }),
    },
  };
}
