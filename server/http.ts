import cors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type onRequestAsyncHookHandler,
} from 'fastify';
import { CONFIG_SPECS } from '../core/config';
import { MAX_WRITE_BYTES } from '../core/entry';
import { CallerShare } from '../core/callerShare';
import { base64url, sha256 } from '../core/sha256';
import { RateLimitedError } from '../core/errors';
import { routeNotFound, toHttpError } from './errors';
import { OPENAPI_PATH, openApiDocument } from './openapi';
import { buildRoutes, namesAgentInQuery, parseRequest, type ServerDeps } from './routes';

export type { ServerDeps } from './routes';

export interface ServerOptions {
  /**
   * Authentication: runs for every operation, not for health, readiness or the document, once
   * the route is known and before the body is read, so a caller without a key costs no body
   * parsing. `request.routeOptions.config.operationId` names the operation; a thrown
   * MemgateError answers with its status.
   */
  authenticate?: onRequestAsyncHookHandler;
  /**
   * Told of every failure answered with a 5xx, with the id the answer gives for it when the
   * answer holds its text back (server/errors.ts, publicError).
   */
  onServerError?: (err: unknown, request: FastifyRequest, errorId?: string) => void;
  /** Serve over TLS with this certificate (chain) and key, PEM. */
  https?: { cert: Buffer; key: Buffer };
  /** Told of every answered request: its operation, status and time (the metrics record it). */
  onAnswered?: (answered: { operation: string; status: number; ms: number }) => void;
  /**
   * Origins whose pages may call the codec endpoint from a browser: Temporal UIs, which call
   * it directly (docs/erasure.md, Reading histories). Other origins get no CORS headers.
   */
  codecOrigins?: string[];
  /** Requests a minute per API key (per address without one), health and the document aside. */
  rateLimitPerMinute?: number;
  /**
   * Calls of one key (or address) answered at once, and how many more may wait for a place,
   * in order; past both, 429 RateLimited at once. A count per minute does not bound what a
   * caller costs, since one deep recall can cost a thousand cheap ones: this bounds its share
   * of the process at any moment. A call that waits costs nothing, where one refused at once
   * comes straight back: a caller flooding from many connections waits on them.
   */
  inFlightPerCaller?: { running: number; queued: number };
  /** How long a request may take to arrive before its connection is cut off with 408 (default: the setting's). */
  requestTimeoutMs?: number;
}

/** Callers remembered as authenticated (`callerHooks`), at most. */
const MAX_AUTHENTICATED_CALLERS = 10_000;

/** When a caller at its bound of calls in flight may try again. */
const IN_FLIGHT_RETRY_MS = 1_000;

/**
 * Whom a request counts against, known before it is authenticated, so that a caller past its
 * share is refused without a store read: the digest of the credential it presents (only its
 * holder can spend a key's share: another credential, even one naming the same key id, counts
 * apart and is then refused by authentication), or its address when it presents none. The
 * counts live in this process's memory.
 */
function caller(request: FastifyRequest): string {
  const presented = request.headers.authorization;
  return presented ? `credential:${base64url(sha256(presented)).slice(0, 22)}` : `ip:${request.ip}`;
}
declare module 'fastify' {
  interface FastifyContextConfig {
    /** The OpenAPI operationId of the route. */
    operationId?: string;
    /** The route answers only what the caller's key covers (server/routes.ts, Route). */
    filtersByKey?: boolean;
    /** The route names its agent in the query (server/routes.ts, namesAgentInQuery). */
    agentInQuery?: boolean;
  }
  interface FastifyInstance {
    /**
     * The `onRequest` hooks of a route a caller calls, in the order they run: its share of the
     * process (calls in flight, then requests a minute), then `authenticate`. A caller past its
     * share is refused before its key is looked up or its body read. Every such route (the
     * API's and `/mcp`) counts against the same share.
     */
    callerHooks(authenticate?: onRequestAsyncHookHandler): onRequestAsyncHookHandler[];
  }
}

/** The version of the API the document describes: its paths are under `/v1`. */
export const API_VERSION = '1.0.0';

/**
 * Bodies up to twice the largest write, so the client's own byte check (core/entry.ts) names
 * the entry that is too large; Fastify refuses anything larger with 413.
 */
const BODY_LIMIT = 2 * MAX_WRITE_BYTES;

/**
 * What a connection may hold of the server. A parameter longer than any id memgate takes
 * still reaches its route, whose schema refuses it (Fastify's own limit, 100, is below the 128
 * an agent id may have); one past 1024 is refused by the router, 414 (`frameworkErrors`). A request
 * still arriving after `requestTimeout` (headers and body trickled in a byte at a time) is
 * cut off, as is a connection idle for `keepAliveTimeout` between requests.
 */
function serverLimits(requestTimeoutMs: number) {
  return {
    bodyLimit: BODY_LIMIT,
    // What the router refuses before any route runs (a path whose escapes are not UTF-8, a
    // parameter past `maxParamLength`) is answered in memgate's error format, as the rest.
    frameworkErrors: (err: FastifyError, _request: FastifyRequest, reply: FastifyReply) => {
      const { status, body } = toHttpError(err);
      return reply.code(status).send(body);
    },
    routerOptions: { maxParamLength: 1024 },
    requestTimeout: requestTimeoutMs,
    keepAliveTimeout: 10_000,
  } as const;
}

/**
 * Node checks for requests past their timeout every `connectionsCheckingInterval` (30 s by
 * default, whatever the timeout): a quarter of the timeout keeps the cut-off near it.
 */
function connectionChecks(requestTimeoutMs: number) {
  return { connectionsCheckingInterval: Math.ceil(requestTimeoutMs / 4) };
}

/**
 * The HTTP API as a Fastify app, over a connected MemgateClient and WindowClient. Not yet
 * listening: the caller may register more (another mount such as `/mcp`) before `listen`.
 */
export function buildHttpServer(deps: ServerDeps, options: ServerOptions = {}): FastifyInstance {
  const requestTimeoutMs = options.requestTimeoutMs ?? Number(CONFIG_SPECS.httpRequestTimeoutMs.default);
  const limits = serverLimits(requestTimeoutMs);
  const checks = connectionChecks(requestTimeoutMs);
  // Over TLS the server is an https.Server; the routes and hooks are the same either way.
  const app = (
    options.https
      ? Fastify({ logger: false, ...limits, https: { ...options.https, ...checks } })
      : Fastify({ logger: false, ...limits, http: checks })
  ) as FastifyInstance;

  // No browser reads an answer as another type than it says (an error echoes the path it
  // was asked for): the UI's pages say so too (server/ui.ts), and so does every API answer.
  app.addHook('onSend', async (_request, reply) => {
    void reply.header('x-content-type-options', 'nosniff');
  });

  // An empty JSON body reads as no body, so a route whose body is optional takes it.
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body.toString();
    if (text === '') return done(null, undefined);
    void json(request, text, done);
  });

  if (options.codecOrigins?.length) {
    const origins = new Set(options.codecOrigins);
    void app.register(cors, {
      // Only the codec routes answer another origin: the UI sends the key it was given.
      delegator: (request, done) =>
        done(null, {
          origin: request.url.startsWith('/codec/') && origins.has(request.headers.origin ?? ''),
          methods: ['POST'],
          allowedHeaders: ['authorization', 'content-type', 'x-namespace'],
        }),
    });
  }

  if (options.onAnswered) {
    const onAnswered = options.onAnswered;
    app.addHook('onResponse', async (request, reply) => {
      onAnswered({
        operation: request.routeOptions.config.operationId ?? 'unrouted',
        status: reply.statusCode,
        ms: reply.elapsedTime,
      });
    });
  }

  // Not global: its hook runs where callerHooks puts it, before authentication.
  void app.register(rateLimit, { global: false });
  app.setErrorHandler((err, request, reply) => {
    const { status, body, errorId } = toHttpError(err);
    // Busy, not broken: a client that honours Retry-After comes back when it may be served.
    if (status === 503 || (status === 429 && !reply.hasHeader('retry-after'))) {
      void reply.header('retry-after', '1');
    }
    if (status >= 500 || errorId) options.onServerError?.(err, request, errorId);
    return reply.code(status).send(body);
  });
  app.setNotFoundHandler((request, reply) => {
    const { status, body } = routeNotFound(request.method, request.url);
    return reply.code(status).send(body);
  });

  /** Each caller's calls being answered, and those waiting for a place (core/callerShare.ts). */
  const shares = new Map<string, CallerShare>();
  /** A place among the caller's calls in flight until its answer is done; a wait for one; or RateLimited. */
  const holdInFlight =
    (limit: { running: number; queued: number }): onRequestAsyncHookHandler =>
    async (request, reply) => {
      const who = caller(request);
      const share = shares.get(who) ?? new CallerShare(limit.running, limit.queued);
      shares.set(who, share);
      const place = share.take();
      if (place === 'refused') {
        throw new RateLimitedError(
          `${limit.running} calls of this key are being answered and ${limit.queued} wait, the most one key may have: try again once one is`,
          { inFlightLimit: limit.running, queuedLimit: limit.queued, retryAfterMs: IN_FLIGHT_RETRY_MS },
        );
      }
      // Once the answer is written or the connection gone, however the route answered (/mcp's
      // transport writes its answer itself), the place goes to the next in line.
      const done = new Promise<void>((resolve) => reply.raw.once('close', resolve));
      void done.then(() => {
        share.leave(place);
        if (share.idle) shares.delete(who);
      });
      await Promise.race([place.granted, done]);
      // Gone while it waited: there is no one to answer.
      if (!place.isGranted) {
        reply.hijack();
        return reply;
      }
    };
  let perMinute: onRequestAsyncHookHandler | undefined;
  let perAddress: onRequestAsyncHookHandler | undefined;
  /** Callers (`caller`) this process has seen authenticated; a bound on memory, not a cache policy. */
  const authenticated = new Set<string>();
  app.decorate('callerHooks', function (this: FastifyInstance, authenticate?: onRequestAsyncHookHandler) {
    const max = options.rateLimitPerMinute;
    if (max !== undefined && perAddress === undefined) {
      // A credential not yet seen authenticated counts against its address as well: a share
      // per credential alone gives a fresh one to each made-up key, and each costs a lookup.
      const limit = this.createRateLimit({ max, timeWindow: 60_000, keyGenerator: (r) => `ip:${r.ip}` });
      perAddress = async (request, reply) => {
        if (authenticated.has(caller(request))) return;
        const counted = await limit(request);
        if (counted.isAllowed || !counted.isExceeded) return;
        void reply.header('retry-after', String(counted.ttlInSeconds));
        throw new RateLimitedError(
          `over ${max} requests a minute from this address with keys not yet authenticated: try again in ${counted.ttlInSeconds} s`,
          { limit: max, retryAfterMs: counted.ttl },
        );
      };
    }
    const authenticating: onRequestAsyncHookHandler | undefined =
      authenticate &&
      async function (this: FastifyInstance, request, reply) {
        await authenticate.call(this, request, reply);
        if (authenticated.size >= MAX_AUTHENTICATED_CALLERS) authenticated.clear();
        authenticated.add(caller(request));
      };
    // One limiter, so the API and /mcp count against one share per caller.
    if (max !== undefined) {
      perMinute ??= this.rateLimit({
        max,
        timeWindow: 60_000,
        keyGenerator: caller,
        // Thrown, so the error handler answers it in memgate's format; the plugin has set Retry-After.
        errorResponseBuilder: (_, context) =>
          new RateLimitedError(
            `over ${context.max} requests a minute for this key: try again in ${context.after}`,
            {
              limit: context.max,
              retryAfterMs: context.ttl,
            },
          ),
      });
    }
    return [
      ...(options.inFlightPerCaller === undefined ? [] : [holdInFlight(options.inFlightPerCaller)]),
      ...(perMinute ? [perMinute] : []),
      ...(perAddress ? [perAddress] : []),
      ...(authenticating ? [authenticating] : []),
    ];
  });

  const routes = buildRoutes(deps);
  // In a plugin of their own, so that they are added once the rate limit has loaded.
  void app.register(async (api) => {
    for (const r of routes) {
      api.route({
        method: r.method,
        url: r.path.replace(/\{(\w+)\}/g, ':$1'),
        config: {
          operationId: r.operationId,
          ...(r.filtersByKey && { filtersByKey: true }),
          ...(namesAgentInQuery(r) && { agentInQuery: true }),
        },
        // A streamed answer has no length to give a HEAD request before it is read.
        ...(r.produces && { exposeHeadRoute: false }),
        ...(!r.open && { onRequest: api.callerHooks(options.authenticate) }),
        handler: async (request, reply) => {
          const input = {
            ...parseRequest(r, request),
            ...(request.keyScope && { keyScope: request.keyScope }),
            breakOff: () => reply.raw.destroy(),
          };
          const result = await r.handle(input as Parameters<typeof r.handle>[0]);
          return reply.code(r.status ?? 200).send(result);
        },
      });
    }
  });

  const document = openApiDocument(routes, API_VERSION, { keys: options.authenticate !== undefined });
  app.get(OPENAPI_PATH, { config: { operationId: 'openapi' } }, async () => document);
  return app;
}
