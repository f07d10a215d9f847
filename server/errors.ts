import { InvalidConfigError, MemgateError, type MemgateErrorType } from '../core/errors';

/**
 * How an error leaves the HTTP API: `{ "error": { "type", "message", "details" } }`, with the
 * status its `type` decides. A MemgateError keeps its type; a request Fastify itself refused
 * (a body that is not JSON, too large, of another media type) is `InvalidInput`; a route that
 * does not exist is `NotFound`; anything else is `Internal`, a 500 that says nothing more.
 */

export type HttpErrorType = MemgateErrorType | 'Internal';

/** The one table from a MemgateError `type` to an HTTP status. */
export const STATUS_BY_TYPE: Readonly<Record<HttpErrorType, number>> = {
  InvalidInput: 400,
  InvalidConfig: 400,
  Unauthenticated: 401,
  Forbidden: 403,
  NotFound: 404,
  Conflict: 409,
  RehydrationBlocked: 409,
  /** Well-formed, but the eviction policy refuses it (it could not tell dormant from dead). */
  EvictionBoundaryError: 422,
  ModelError: 502,
  StackUnavailable: 503,
  RateLimited: 429,
  Internal: 500,
};

export interface ErrorBody {
  error: { type: HttpErrorType; message: string; details: Record<string, unknown> };
}

export interface HttpError {
  status: number;
  body: ErrorBody;
}

const INTERNAL_MESSAGE = 'internal error: the server failed to answer this request';

/** Credentials in a URI (`scheme://user:password@host`) never reach a response. */
function redact(message: string): string {
  return message.replace(/\/\/[^\s/@]+@/g, '//***@');
}

function body(type: HttpErrorType, message: string, details: Record<string, unknown> = {}): ErrorBody {
  return { error: { type, message: redact(message), details } };
}

/** What Fastify sets on the errors it raises itself (its codes start with `FST_`). */
interface FrameworkError {
  statusCode?: unknown;
  code?: unknown;
  message?: unknown;
}

/**
 * A request Fastify refused before any route ran (a body that is not JSON, too large, of a
 * media type no parser takes): a 4xx it chose. Any other error is not the caller's to read.
 */
function frameworkClientError(err: unknown): { status: number; code: string; message: string } | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { statusCode, code, message } = err as FrameworkError;
  if (typeof statusCode !== 'number' || statusCode < 400 || statusCode >= 500) return undefined;
  if (typeof code !== 'string' || !code.startsWith('FST_')) return undefined;
  return { status: statusCode, code, message: typeof message === 'string' ? message : code };
}

/** The status and JSON body for any error a handler threw or Fastify raised. */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof MemgateError) {
    if (err instanceof InvalidConfigError) {
      // The value a variable held could be a secret; the variable and the rule are enough.
      const { variable, allowed } = err;
      return {
        status: STATUS_BY_TYPE[err.type],
        body: body(err.type, `${variable} is invalid: ${allowed}`, { variable, allowed }),
      };
    }
    return { status: STATUS_BY_TYPE[err.type], body: body(err.type, err.message, err.details) };
  }
  const framework = frameworkClientError(err);
  if (framework) {
    return {
      status: framework.status,
      body: body('InvalidInput', framework.message, { code: framework.code, issues: [] }),
    };
  }
  return { status: 500, body: body('Internal', INTERNAL_MESSAGE) };
}

/** The answer to a method and path no route serves. */
export function routeNotFound(method: string, url: string): HttpError {
  const path = url.split('?')[0] ?? url;
  return {
    status: 404,
    body: body('NotFound', `no route ${method} ${path}`, { method, path }),
  };
}
