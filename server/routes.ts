import { z } from 'zod';
import { zodIssues } from '../core/entry';
import { EXPORT_MEDIA_TYPE } from '../core/exportFormat';
import { InvalidInputError, StackUnavailableError, type Issue } from '../core/errors';
import type { KeyScope } from '../core/keys';
import { writeLimitsOf } from '../core/policy';
import type { MemgateClient } from '../client/client';
import type { WindowClient } from '../client/window';
import type { HttpErrorType } from './errors';
import {
  admitSchema,
  advanceTurnSchema,
  agentListSchema,
  agentParams,
  agentQuery,
  agentsQuery,
  agentViewSchema,
  auditRunSchema,
  entriesQuery,
  entryListSchema,
  entryViewSchema,
  nightListSchema,
  nightsQuery,
  codecPayloadsSchema,
  entryParams,
  entryResultSchema,
  eraseAgentResultSchema,
  exportLineSchema,
  forgetResultSchema,
  healthSchema,
  impossibleReportSchema,
  openWindowBodySchema,
  pinRequestSchema,
  readySchema,
  recallBodySchema,
  recallResultSchema,
  rehydrateSchema,
  restoreBodySchema,
  restoreResultSchema,
  segmentSchema,
  sessionParams,
  turnResultSchema,
  unpinResultSchema,
  unpinSchema,
  verifyReportSchema,
  windowSummarySchema,
  windowViewSchema,
  writeBodySchema,
  writeResultSchema,
  type ImpossibleReport,
} from './schemas';

/** What the server answers from. It reaches the store and Temporal only through these. */
export interface ServerDeps {
  memgate: MemgateClient;
  windows: WindowClient;
  /** `memgate impossible`: one agent's, or every agent's. */
  impossible(request: { agentId?: string }): Promise<ImpossibleReport>;
  /** Readiness: each resolves when the server it names answers, and rejects otherwise. */
  probes: Record<string, () => Promise<unknown>>;
  /**
   * How long a streamed answer waits for its connection to take the last chunk: half the
   * store's timeout (MEMGATE_STORE_TIMEOUT_MS). The store cursor the chunks come from is held
   * meanwhile, a unit of the few every tenant's exports, index loads and nights share, and a
   * call waiting for that unit gives up after the store's timeout: a reader that stalled lets
   * it go well before then, even one that took its last chunk after the call began to wait.
   */
  streamStallMs: number;
}

export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

/**
 * One operation of the API: its method and path (OpenAPI's `{param}` form), the zod schemas
 * of what it takes and answers, the MemgateError types it documents, and its handler. The
 * server registers these and the OpenAPI document is generated from the same list.
 */
export interface Route<
  P extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
  R extends z.ZodType = z.ZodType,
> {
  method: Method;
  path: string;
  operationId: string;
  summary: string;
  tag: 'memory' | 'windows' | 'store' | 'service';
  /** Health, readiness and the document itself: no per-request hook (authentication) runs. */
  open?: boolean;
  /**
   * Names no agent, and answers only what the caller's key covers: any live key may call it
   * (server/auth.ts), and the handler filters by `keyScope`.
   */
  filtersByKey?: boolean;
  params?: P;
  query?: Q;
  body?: B;
  /** Whether a request may leave the body out (it then reads as `{}`). */
  bodyOptional?: boolean;
  response: R;
  /**
   * A streamed answer of this media type, each line one value of `response`: the handler
   * resolves to a web Response, which the server sends as the connection takes it.
   */
  produces?: typeof EXPORT_MEDIA_TYPE;
  status?: number;
  errors: HttpErrorType[];
  handle(input: {
    params: z.output<P>;
    query: z.output<Q>;
    body: z.output<B>;
    raw: unknown;
    /** The caller's key scope, when the server checks keys. */
    keyScope?: KeyScope;
    /** Ends the connection at once: a streamed answer breaks off from a reader that stalled. */
    breakOff: () => void;
  }): Promise<z.output<R>>;
}

/**
 * Whether the route names its agent in the query (`?agentId=`): only then does the key's
 * scope judge the query's agent (server/auth.ts), since a route that takes none ignores it.
 */
export function namesAgentInQuery(r: Route): boolean {
  return r.query instanceof z.ZodObject && 'agentId' in r.query.shape;
}

/** Infers a route's types from its schemas, and forgets them for the list. */
function route<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType, R extends z.ZodType>(
  r: Route<P, Q, B, R>,
): Route {
  return r as unknown as Route;
}

const PROBE_TIMEOUT_MS = 3_000;

async function probe(
  check: () => Promise<unknown>,
): Promise<{ ok: boolean; error?: string; cause?: string }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ProbeTimeout()), PROBE_TIMEOUT_MS);
  });
  try {
    await Promise.race([check(), timeout]);
    return { ok: true };
  } catch (err) {
    if (err instanceof ProbeTimeout) return { ok: false, error: err.message };
    return { ok: false, error: 'failed', cause: err instanceof Error ? err.message : String(err) };
  } finally {
    clearTimeout(timer);
  }
}

class ProbeTimeout extends Error {
  constructor() {
    super(`no answer within ${PROBE_TIMEOUT_MS} ms`);
  }
}

/** A body that names the agent must name the one the path does. */
function sameAgent(path: string, body: { agentId?: string | undefined }): string {
  if (body.agentId !== undefined && body.agentId !== path) {
    throw new InvalidInputError('invalid request', [
      { path: 'agentId', message: `must be the agent of the path (${path}) or left out` },
    ]);
  }
  return path;
}

/** The body as the caller sent it, for the client to validate as its own input. */
function rawObject(raw: unknown): Record<string, unknown> {
  return raw as Record<string, unknown>;
}

/**
 * Chunks as a streamed answer. The first is read before the answer starts, so a failure to
 * begin (an unknown agent, an unreachable store) answers with its typed error; each next one
 * only when the connection has taken the last (its backpressure reaches the store's cursor),
 * and a connection that goes away ends the chunks. One that takes nothing for `stallMs` ends
 * them too, and the answer breaks off, its connection with it: the chunks' cursor is not held
 * for a reader that stopped (docs/invariants.md, No store wedge), nor its socket, which the
 * server would otherwise keep, waiting for the reader to drain it.
 */
async function streamed(
  chunks: AsyncGenerator<string, void>,
  type: string,
  stall: { ms: number; breakOff: () => void },
): Promise<Response> {
  let next: IteratorResult<string, void> | undefined = await chunks.next();
  const encoder = new TextEncoder();
  let stalled: NodeJS.Timeout | undefined;
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        clearTimeout(stalled);
        const { done, value } = next ?? (await chunks.next());
        next = undefined;
        if (done) return controller.close();
        controller.enqueue(encoder.encode(value));
        stalled = setTimeout(() => {
          void chunks.return();
          controller.error(
            new StackUnavailableError(`the connection took nothing for ${stall.ms} ms: the answer is ended`),
          );
          stall.breakOff();
        }, stall.ms);
      },
      async cancel() {
        clearTimeout(stalled);
        await chunks.return();
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(body, { headers: { 'content-type': type } });
}

const WRITE_ERRORS: HttpErrorType[] = ['InvalidInput', 'QuotaExceeded', 'StackUnavailable'];
const WINDOW_ERRORS: HttpErrorType[] = ['InvalidInput', 'NotFound', 'Conflict', 'StackUnavailable'];

export function buildRoutes(deps: ServerDeps): Route[] {
  const { memgate, windows } = deps;
  // Anyone may ask /readyz, and each ask costs each server a call: those asked while a round of
  // probes is out share it, so a flood costs the store one command at a time, not one each.
  let round: ReturnType<typeof probeAll> | undefined;
  const probeAll = () => Promise.all(Object.values(deps.probes).map((check) => probe(check)));
  const probing = () => (round ??= probeAll().finally(() => (round = undefined)));
  const writeBody = writeBodySchema(writeLimitsOf(memgate.policy));
  return [
    route({
      method: 'GET',
      path: '/healthz',
      operationId: 'health',
      summary: 'The process is up (it does not ask Temporal or the store)',
      tag: 'service',
      open: true,
      response: healthSchema,
      errors: [],
      handle: async () => ({ status: 'ok' as const }),
    }),
    route({
      method: 'GET',
      path: '/readyz',
      operationId: 'ready',
      summary: 'Temporal and the store answer; 503 StackUnavailable naming the one that does not',
      tag: 'service',
      open: true,
      response: readySchema,
      errors: ['StackUnavailable'],
      handle: async () => {
        const names = Object.keys(deps.probes);
        const results = await probing();
        // Anyone may ask: the answer names the server and whether it failed or kept silent,
        // never its error's text (addresses, users, versions), which goes to the log.
        const checks = Object.fromEntries(
          names.map((n, i) => [
            n,
            { ok: results[i]!.ok, ...(results[i]!.error && { error: results[i]!.error }) },
          ]),
        );
        const failed = names.filter((n) => !checks[n]!.ok);
        if (failed.length) {
          const err = new StackUnavailableError(
            `not ready: ${failed.map((n) => `${n}: ${checks[n]!.error}`).join('; ')}`,
            { checks },
          );
          const causes = names.flatMap((n, i) => (results[i]!.cause ? [`${n}: ${results[i]!.cause}`] : []));
          if (causes.length) err.cause = new Error(causes.join('; '));
          throw err;
        }
        return { status: 'ready' as const, checks };
      },
    }),
    route({
      method: 'POST',
      path: '/v1/agents/{agentId}/memories',
      operationId: 'write',
      summary:
        "Durably write entries through the agent's workflow; answers once they are stored. A repeated idempotencyKey reports `existing`.",
      tag: 'memory',
      params: agentParams,
      body: writeBody,
      response: writeResultSchema,
      errors: WRITE_ERRORS,
      handle: async ({ params, body, raw, keyScope }) => {
        const agentId = sameAgent(params.agentId, body);
        return memgate.write(
          { ...rawObject(raw), agentId } as Parameters<MemgateClient['write']>[0],
          keyScope,
        );
      },
    }),
    route({
      method: 'POST',
      path: '/v1/agents/{agentId}/recall',
      operationId: 'recall',
      summary:
        'Recall entries for a query: gated by default; `deep` adds dormant and cold entries, and `missing` (deleted evidence)',
      tag: 'memory',
      params: agentParams,
      body: recallBodySchema,
      response: recallResultSchema,
      errors: ['InvalidInput', 'StackUnavailable'],
      handle: ({ params, body, raw }) =>
        memgate.recall({ ...rawObject(raw), agentId: sameAgent(params.agentId, body) } as Parameters<
          MemgateClient['recall']
        >[0]),
    }),
    route({
      method: 'DELETE',
      path: '/v1/agents/{agentId}/memories/{entryId}',
      operationId: 'forget',
      summary:
        'Erase an entry from both tiers, the query log and every summary derived from it, leaving a content-free tombstone; erasing it again answers with no tiers',
      tag: 'memory',
      params: entryParams,
      response: forgetResultSchema,
      errors: ['InvalidInput', 'NotFound', 'StackUnavailable'],
      handle: ({ params }) => memgate.forget(params),
    }),
    route({
      method: 'DELETE',
      path: '/v1/agents/{agentId}',
      operationId: 'eraseAgent',
      summary:
        'Erase the whole agent (docs/erasure.md): every entry and summary, vector, query-log, ledger and run record, term statistic, workflow and context window, and the keys naming it alone; each of its ids stays behind a content-free tombstone. Erasing it again, or an agent never written, answers with nothing removed',
      tag: 'memory',
      params: agentParams,
      response: eraseAgentResultSchema,
      errors: ['InvalidInput', 'StackUnavailable'],
      handle: ({ params }) => memgate.eraseAgent(params),
    }),
    route({
      method: 'POST',
      path: '/v1/agents/{agentId}/memories/{entryId}/restore',
      operationId: 'restore',
      summary:
        'Reverse the supersession of an entry, or with `freshUntil` renew an expired volatile fact; 409 Conflict when there is nothing to restore',
      tag: 'memory',
      params: entryParams,
      body: restoreBodySchema,
      bodyOptional: true,
      response: restoreResultSchema,
      errors: ['InvalidInput', 'NotFound', 'Conflict', 'StackUnavailable'],
      handle: ({ params, body }) => memgate.restore({ ...params, ...body }),
    }),
    route({
      method: 'GET',
      path: '/v1/agents/{agentId}/export',
      operationId: 'exportAgent',
      summary:
        "Stream the agent's memory as JSON Lines (docs/export.md): a header, its tombstones, its hot and cold entries as stored, and an end line counting them; `memgate import` reads it",
      tag: 'memory',
      params: agentParams,
      produces: EXPORT_MEDIA_TYPE,
      response: exportLineSchema,
      errors: ['InvalidInput', 'NotFound', 'StackUnavailable'],
      // The server sends the Response as it is (`produces`).
      handle: async ({ params, breakOff }) =>
        (await streamed(memgate.exportAgent(params), EXPORT_MEDIA_TYPE, {
          ms: deps.streamStallMs,
          breakOff,
        })) as never,
    }),
    route({
      method: 'GET',
      path: '/v1/agents',
      operationId: 'listAgents',
      summary:
        'A page of the registered agents the key covers, in id order (the memory browser, docs/browser.md)',
      tag: 'memory',
      filtersByKey: true,
      query: agentsQuery,
      response: agentListSchema,
      errors: ['InvalidInput', 'StackUnavailable'],
      handle: ({ query, keyScope }) => memgate.agents(query, keyScope),
    }),
    route({
      method: 'GET',
      path: '/v1/agents/{agentId}',
      operationId: 'showAgent',
      summary:
        "The agent's entries by tier and state and its tombstones by reason, as the store counts them now, from the agent's record alone",
      tag: 'memory',
      params: agentParams,
      response: agentViewSchema,
      errors: ['InvalidInput', 'NotFound', 'StackUnavailable'],
      handle: ({ params }) => memgate.agent(params),
    }),
    route({
      method: 'GET',
      path: '/v1/agents/{agentId}/nights',
      operationId: 'listNights',
      summary:
        "The agent's nightly runs, newest first: each one's counts and time per phase, its census, and its workflow",
      tag: 'memory',
      params: agentParams,
      query: nightsQuery,
      response: nightListSchema,
      errors: ['InvalidInput', 'StackUnavailable'],
      handle: ({ params, query }) => memgate.nights({ ...query, ...params }),
    }),
    route({
      method: 'GET',
      path: '/v1/agents/{agentId}/memories',
      operationId: 'listMemories',
      summary:
        "A page of the agent's entries, both tiers, in id order, each with its state and salience now; pass `next` back as `cursor` for the following page",
      tag: 'memory',
      params: agentParams,
      query: entriesQuery,
      response: entryListSchema,
      errors: ['InvalidInput', 'StackUnavailable'],
      handle: ({ params, query }) => memgate.entries({ ...query, ...params }),
    }),
    route({
      method: 'GET',
      path: '/v1/agents/{agentId}/memories/{entryId}',
      operationId: 'showMemory',
      summary:
        'An entry (or the tombstone it left) with its lifecycle from the ledger and the summaries that stand in for it, with the atoms each keeps or lacks',
      tag: 'memory',
      params: entryParams,
      response: entryViewSchema,
      errors: ['InvalidInput', 'NotFound', 'StackUnavailable'],
      handle: ({ params }) => memgate.entry(params),
    }),
    route({
      method: 'GET',
      path: '/v1/audit',
      operationId: 'lastAudit',
      summary:
        'The summary of the last `memgate audit` run: errors per arm and budget, irreversible, recoverable and residual (needs a key for every agent)',
      tag: 'store',
      response: auditRunSchema,
      errors: ['NotFound', 'StackUnavailable'],
      handle: () => memgate.lastAudit(),
    }),
    route({
      method: 'GET',
      path: '/v1/impossible',
      operationId: 'impossible',
      summary: 'Queries whose deep recall matched deleted evidence, grouped by why it was deleted',
      tag: 'store',
      query: agentQuery,
      response: impossibleReportSchema,
      errors: ['InvalidInput', 'StackUnavailable'],
      handle: ({ query }) => deps.impossible(query),
    }),
    ...(['encode', 'decode'] as const).map((direction) =>
      route({
        method: 'POST',
        path: `/codec/${direction}`,
        operationId: `codec${direction === 'encode' ? 'Encode' : 'Decode'}`,
        summary:
          direction === 'encode'
            ? "Temporal's codec-server protocol: encrypt payloads as memgate's clients and workers do, each write in clear sealed first (its agent within the key's scope): for an agent written with another language's Temporal SDK"
            : "Temporal's codec-server protocol: decrypt payloads for the Temporal UI or CLI or another SDK; with a key for every agent, each write's entries are opened too where their key is held (an erased one reads `erased: true`)",
        tag: 'service',
        body: codecPayloadsSchema,
        response: codecPayloadsSchema,
        errors: ['InvalidInput', 'StackUnavailable'],
        handle: async ({ body, keyScope }) => ({
          payloads: await memgate.codecPayloads(direction, body.payloads, keyScope),
        }),
      }),
    ),
    route({
      method: 'GET',
      path: '/v1/verify',
      operationId: 'verify',
      summary:
        'Check the store: every id accounted for, one copy per entry, no erased content, every stand-in standing (`ok: false` names the findings)',
      tag: 'store',
      query: agentQuery,
      response: verifyReportSchema,
      errors: ['InvalidInput', 'StackUnavailable'],
      handle: ({ query }) => memgate.verify(query),
    }),
    route({
      method: 'PUT',
      path: '/v1/windows/{sessionId}',
      operationId: 'openWindow',
      summary:
        "Open the session's context window with the configured settings and these overrides, or answer the open one (409 Conflict if its settings differ)",
      tag: 'windows',
      params: sessionParams,
      body: openWindowBodySchema,
      bodyOptional: true,
      response: windowViewSchema,
      errors: ['InvalidInput', 'Conflict', 'QuotaExceeded', 'StackUnavailable'],
      handle: async ({ params, body, keyScope }) => {
        if (keyScope) await memgate.claimForKey(keyScope, 'window', params.sessionId);
        return windows.open(params.sessionId, body);
      },
    }),
    route({
      method: 'GET',
      path: '/v1/windows/{sessionId}',
      operationId: 'showWindow',
      summary: 'The window as it is, or as it was left at its close',
      tag: 'windows',
      params: sessionParams,
      response: windowViewSchema,
      errors: ['InvalidInput', 'NotFound', 'StackUnavailable'],
      handle: ({ params }) => windows.show(params.sessionId),
    }),
    route({
      method: 'POST',
      path: '/v1/windows/{sessionId}/admit',
      operationId: 'admit',
      summary:
        'Admit a segment, displacing the lowest-salience unpinned ones if the window is full; 409 RehydrationBlocked if only pinned ones could make room',
      tag: 'windows',
      params: sessionParams,
      body: admitSchema,
      response: entryResultSchema,
      errors: [...WINDOW_ERRORS, 'RehydrationBlocked'],
      handle: ({ params, raw }) => windows.admit(params.sessionId, rawObject(raw) as never),
    }),
    route({
      method: 'POST',
      path: '/v1/windows/{sessionId}/rehydrate',
      operationId: 'rehydrate',
      summary:
        'Bring an evicted segment back, or 409 RehydrationBlocked with the reasons, what it would displace and the pins in the way',
      tag: 'windows',
      params: sessionParams,
      body: rehydrateSchema,
      response: entryResultSchema,
      errors: [...WINDOW_ERRORS, 'RehydrationBlocked'],
      handle: ({ params, raw }) => windows.rehydrate(params.sessionId, rawObject(raw) as never),
    }),
    route({
      method: 'POST',
      path: '/v1/windows/{sessionId}/pin',
      operationId: 'pin',
      summary: 'Pin a resident segment (explicit, for a tool loop, or until a turn)',
      tag: 'windows',
      params: sessionParams,
      body: pinRequestSchema,
      response: segmentSchema,
      errors: WINDOW_ERRORS,
      handle: ({ params, raw }) => windows.pin(params.sessionId, rawObject(raw) as never),
    }),
    route({
      method: 'POST',
      path: '/v1/windows/{sessionId}/unpin',
      operationId: 'unpin',
      summary: "Release a segment's explicit and turn pins, or end a tool loop and release all of its pins",
      tag: 'windows',
      params: sessionParams,
      body: unpinSchema,
      response: unpinResultSchema,
      errors: WINDOW_ERRORS,
      handle: ({ params, raw }) => windows.unpin(params.sessionId, rawObject(raw) as never),
    }),
    route({
      method: 'POST',
      path: '/v1/windows/{sessionId}/turn',
      operationId: 'advanceTurn',
      summary: "Advance the turn: the given segments take this turn's salience, the rest decay",
      tag: 'windows',
      params: sessionParams,
      body: advanceTurnSchema,
      bodyOptional: true,
      response: turnResultSchema,
      errors: WINDOW_ERRORS,
      handle: ({ params, raw }) => windows.advanceTurn(params.sessionId, (raw ?? {}) as never),
    }),
    route({
      method: 'POST',
      path: '/v1/windows/{sessionId}/close',
      operationId: 'closeWindow',
      summary: 'End the session and answer its summary; later calls but GET are 409 Conflict',
      tag: 'windows',
      params: sessionParams,
      response: windowSummarySchema,
      errors: WINDOW_ERRORS,
      handle: async ({ params, keyScope }) => {
        const summary = await windows.close(params.sessionId);
        await memgate.releaseWindow(params.sessionId, keyScope);
        return summary;
      },
    }),
  ];
}

/**
 * A request's path parameters, query and body, each through its route's zod schema; every
 * offending field of the three in one InvalidInputError, named by its dotted path.
 */
export function parseRequest(
  r: Route,
  request: { params: unknown; query: unknown; body: unknown },
): { params: unknown; query: unknown; body: unknown; raw: unknown } {
  const issues: Issue[] = [];
  const part = (schema: z.ZodType | undefined, value: unknown): unknown => {
    if (!schema) return undefined;
    const parsed = schema.safeParse(value);
    if (parsed.success) return parsed.data;
    issues.push(...zodIssues(parsed.error));
    return undefined;
  };
  const raw = request.body === undefined && r.bodyOptional ? {} : request.body;
  const params = part(r.params, request.params ?? {});
  const query = part(r.query, request.query ?? {});
  const body = part(r.body, raw);
  if (issues.length) throw new InvalidInputError(`invalid ${r.operationId} request`, issues);
  return { params, query, body, raw };
}
