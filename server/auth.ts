import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { UnauthenticatedError } from '../core/errors';
import { assertInScope, type KeyScope } from '../core/keys';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller's key scope, once `requireKey` has checked it. */
    keyScope?: KeyScope;
  }
}

/** The key of `Authorization: Bearer <key>`, or Unauthenticated. */
export function bearerKey(header: string | undefined): string {
  const m = /^Bearer ([\x21-\x7e]{1,200})$/.exec(header ?? '');
  if (!m) throw new UnauthenticatedError('an API key is required: Authorization: Bearer <key>');
  return m[1]!;
}

/**
 * Every operation needs a live key, and the key must cover what the call names: the agent in
 * the path, or in the query of a route that takes one there (none: every agent, which needs
 * `*`), or the window session in the path.
 * Runs before the body is read and before the handler, so an out-of-scope call reads and
 * changes nothing.
 */
export function requireKey(authenticate: (key: string) => Promise<KeyScope>): onRequestAsyncHookHandler {
  return async (request: FastifyRequest) => {
    const scope = await authenticate(bearerKey(request.headers.authorization));
    request.keyScope = scope;
    const params = (request.params ?? {}) as Record<string, unknown>;
    const query = (request.query ?? {}) as Record<string, unknown>;
    const named = (v: unknown) => (typeof v === 'string' ? v : undefined);
    // The codec endpoint names no agent in its path: it judges each payload by the agent the
    // payload's write names (client/client.ts, codecPayloads).
    if (request.url.startsWith('/codec/')) return;
    // A listing that names no agent answers only what the key covers.
    if (request.routeOptions.config.filtersByKey) return;
    if (typeof params.sessionId === 'string') assertInScope(scope, params.sessionId, 'session');
    else
      assertInScope(
        scope,
        named(params.agentId) ??
          (request.routeOptions.config.agentInQuery ? named(query.agentId) : undefined),
      );
  };
}
