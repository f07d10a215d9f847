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
  QuotaExceeded: 403,
  Internal: 500,
};

export interface ErrorBody {
  error: { type: HttpErrorType; message: string; details: Record<string, unknown> };
}

export interface HttpError {
  status: number;
  body: ErrorBody;
  /** Set when the answer holds back the error's text: the log line carries it under this id. */
  errorId?: string;
}

/**
 * The types whose message carries another server's words (the store's driver, Temporal, an
 * embeddings or model endpoint): hosts, collection names, a server's own diagnosis. A caller
 * gets what it may do and an id to quote; the server's log has the text under that id.
 */
const OPAQUE: Partial<Record<MemgateErrorType, string>> = {
  StackUnavailable: 'a server memgate depends on did not answer in time; retrying is safe',
  ModelError: 'the model endpoint failed this call',
};

/** An error as a caller of the HTTP API or MCP sees it. */
export function publicError(err: MemgateError): {
  type: MemgateErrorType;
  message: string;
  details: Record<string, unknown>;
  errorId?: string;
} {
  if (err instanceof InvalidConfigError) {
    // The value a variable held could be a secret; the variable and the rule are enough.
    const { variable, allowed } = err;
    return { type: err.type, message: `${variable} is invalid: ${allowed}`, details: { variable, allowed } };
  }
  const opaque = OPAQUE[err.type];
  if (opaque) {
    const errorId = crypto.randomUUID().replaceAll('-', '').slice(0, 12);
    // Of the details, only the readiness checks, which name a server and no text of it.
    const checks = err.details.checks;
    return {
      type: err.type,
      message: `${opaque} (error ${errorId})`,
      details: { errorId, ...(checks !== undefined && { checks }) },
      errorId,
    };
  }
  return { type: err.type, message: redact(err.message), details: err.details };
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
    const { type, message, details, errorId } = publicError(err);
    return { status: STATUS_BY_TYPE[type], body: body(type, message, details), ...(errorId && { errorId }) };
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
