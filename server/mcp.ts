import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  type ToolAnnotations,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { agentIdSchema, writeEntrySchema, type WriteEntryInput } from '../core/entry';
import { InvalidInputError, MemgateError, NotFoundError } from '../core/errors';
import { publicError } from './errors';
import { assertInScope, type KeyScope } from '../core/keys';
import { eraseAgentInputSchema, forgetInputSchema, parseInput, restoreInputSchema } from '../core/messages';
import { writeLimitsOf } from '../core/policy';
import { recallRequestSchema } from '../core/recall';
import {
  admitSchema,
  advanceTurnSchema,
  pinRequestSchema,
  rehydrateSchema,
  segmentIdSchema,
  sessionIdSchema,
} from '../core/window';
import type { MemgateClient } from '../client/client';
import type { WindowClient } from '../client/window';
import { API_VERSION } from './http';
import { openWindowBodySchema } from './schemas';

/**
 * The MCP server: memgate's operations as tools for an agent, over the same clients the HTTP
 * API answers from. Every call first checks the caller's key scope against the agent (or the
 * window session) it names, so an out-of-scope call reads and changes nothing. Results are
 * JSON; a MemgateError comes back as a tool error naming its type (RehydrationBlocked: the
 * reasons and the pins in the way), which the agent can read and act on.
 */
export interface McpDeps {
  memgate: MemgateClient;
  windows: WindowClient;
  /**
   * The scope of the key the call is made with, asked once per tool call: over HTTP the key
   * of the request, over stdio the configured key (so a revoked key stops working at once).
   */
  scope(): Promise<KeyScope>;
  /**
   * Told of every failure that is not a MemgateError (the caller sees only `Internal`), and of
   * one whose text the answer holds back, with the id the answer gives for it.
   */
  onServerError?: (err: unknown, errorId?: string) => void;
}

export const MCP_SERVER_NAME = 'memgate';

const sessionInput = z.strictObject({ sessionId: sessionIdSchema.describe('the window session id') });

/** A result as JSON text, and as structured content for clients that read it. */
function ok(value: unknown): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(value, null, 2) }],
    structuredContent: value as Record<string, unknown>,
  };
}

/** A MemgateError as a tool error: `Type: message`, then its details as JSON. */
export function toolError(
  err: unknown,
  onServerError?: (err: unknown, errorId?: string) => void,
): CallToolResult {
  if (!(err instanceof MemgateError)) {
    onServerError?.(err);
    const error = { type: 'Internal', message: 'internal error: the server failed to answer this call' };
    return { isError: true, content: [{ type: 'text', text: `${error.type}: ${error.message}` }] };
  }
  const { errorId, ...error } = publicError(err);
  if (errorId) onServerError?.(err, errorId);
  const details = Object.keys(error.details).length ? `\n${JSON.stringify(error.details, null, 2)}` : '';
  return {
    isError: true,
    content: [{ type: 'text', text: `${error.type}: ${error.message}${details}` }],
    structuredContent: { error },
  };
}

export function buildMcpServer(deps: McpDeps): McpServer {
  const { memgate, windows } = deps;
  const server = new McpServer({ name: MCP_SERVER_NAME, version: API_VERSION });

  /** Each tool's handler by name, which tools/call (below) answers with. */
  const calls = new Map<string, (input: unknown) => Promise<CallToolResult>>();
  /**
   * A tool whose call parses its arguments with the tool's schema, then runs once the key
   * covers what it names: the agent (`agentId`) or, for the window tools, the session
   * (`sessionId`). The call gets the scope it was checked against (the key's quotas count
   * against it). Any failure, a refused argument too, comes back as a typed tool error.
   */
  const tool = <S extends z.ZodObject>(
    name: string,
    config: { title: string; description: string; inputSchema: S; annotations?: ToolAnnotations },
    call: (args: z.output<S>, scope: KeyScope, input: Record<string, unknown>) => Promise<unknown>,
  ): void => {
    const what = 'sessionId' in config.inputSchema.shape ? 'session' : 'agent';
    const handler = async (input: unknown): Promise<CallToolResult> => {
      try {
        const args = parseInput(config.inputSchema, input, name);
        const named = args as { agentId?: string; sessionId?: string };
        const scope = await deps.scope();
        assertInScope(scope, what === 'session' ? named.sessionId : named.agentId, what);
        return ok(await call(args, scope, input as Record<string, unknown>));
      } catch (err) {
        return toolError(err, deps.onServerError);
      }
    };
    calls.set(name, handler);
    server.registerTool(name, config, handler as never);
  };

  // remember: one text with its options, or several entries.
  const entry = writeEntrySchema(writeLimitsOf(memgate.policy));
  const single = Object.fromEntries(
    Object.entries(entry.shape).map(([k, s]) => [k, (s as z.ZodType).optional()]),
  ) as { [K in keyof typeof entry.shape]: z.ZodOptional<(typeof entry.shape)[K]> };
  tool(
    'remember',
    {
      title: 'Remember',
      description:
        "Durably store memories for an agent. Give either `text` (one memory, with its optional kind, salience, source and so on) or `entries` (several, each with its own fields; none of them beside `entries`). Answers once they are stored, with each entry's id and status (`created`, or `existing` for a repeated idempotencyKey).",
      inputSchema: z.strictObject({
        agentId: agentIdSchema.describe('the agent whose memory this is'),
        ...single,
        entries: z.array(entry).optional().describe('several memories at once, instead of `text`'),
      }),
    },
    async (args, scope, input) => {
      const { agentId, entries, ...one } = args;
      // Parsed, the fields of one entry hold their defaults: what was given is in the input.
      const beside = entries === undefined ? [] : Object.keys(single).filter((k) => Object.hasOwn(input, k));
      if (beside.length > 0) {
        throw new InvalidInputError(
          'invalid remember',
          beside.map((path) => ({
            path,
            message: 'give either one entry (text and its fields) or entries, not both',
          })),
        );
      }
      if (entries === undefined && one.text === undefined) {
        throw new InvalidInputError('invalid remember', [
          { path: 'text', message: 'give text (one memory) or entries (several)' },
        ]);
      }
      const list = entries ?? [one as WriteEntryInput];
      return memgate.write({ agentId, entries: list }, scope);
    },
  );

  tool(
    'recall',
    {
      title: 'Recall',
      description:
        "Recall an agent's memories relevant to a query, best first. By default only memories above the salience gate; `deep: true` also returns dormant and cold ones, the successors of superseded facts, and `missing`: deleted memories whose terms match the query (the evidence is gone, so say so rather than guess).",
      inputSchema: recallRequestSchema,
    },
    (args) => memgate.recall(args),
  );

  tool(
    'forget',
    {
      title: 'Forget',
      description:
        'Erase one memory of an agent for good: from both tiers, the query log and every summary derived from it, leaving a content-free tombstone. Erasing it again answers with no tiers.',
      inputSchema: forgetInputSchema,
      annotations: { destructiveHint: true, idempotentHint: true },
    },
    (args) => memgate.forget(args),
  );

  tool(
    'forget_agent',
    {
      title: 'Forget an agent',
      description:
        'Erase everything of an agent for good: every memory and summary, its vectors, query log, ledger and statistics, its workflows and context windows, and the keys naming it alone, leaving a content-free tombstone for each memory so that a replayed write brings nothing back. Erasing it again answers with nothing removed.',
      inputSchema: eraseAgentInputSchema,
      annotations: { destructiveHint: true, idempotentHint: true },
    },
    (args) => memgate.eraseAgent(args),
  );

  tool(
    'restore',
    {
      title: 'Restore',
      description:
        'Reverse the supersession of a memory (bring back a fact a newer one replaced), or with `freshUntil` (epoch ms) renew an expired volatile fact. A Conflict error when there is nothing to restore.',
      inputSchema: restoreInputSchema,
    },
    (args) => memgate.restore(args),
  );

  tool(
    'window_open',
    {
      title: 'Open a context window',
      description:
        "Open a session's context window (a token budget of segments), with the configured settings and any of these overrides; answers the open window if it is already open (a Conflict error if its settings differ).",
      inputSchema: sessionInput.extend(openWindowBodySchema.shape),
    },
    async ({ sessionId, ...overrides }, scope) => {
      await memgate.claimForKey(scope, 'window', sessionId);
      return windows.open(sessionId, overrides);
    },
  );

  tool(
    'window_show',
    {
      title: 'Show a context window',
      description:
        'The context window as it is (or as it was left at its close): settings, used and free tokens, resident segments with their pins, and the evictions.',
      inputSchema: sessionInput,
      annotations: { readOnlyHint: true },
    },
    ({ sessionId }) => windows.show(sessionId),
  );

  tool(
    'window_admit',
    {
      title: 'Admit a segment',
      description:
        'Admit a segment into the window, displacing the lowest-salience unpinned segments if it is full. A RehydrationBlocked error, naming the pins in the way, if only pinned segments could make room.',
      inputSchema: admitSchema.extend(sessionInput.shape),
    },
    ({ sessionId, ...input }) => windows.admit(sessionId, input),
  );

  tool(
    'window_rehydrate',
    {
      title: 'Rehydrate a segment',
      description:
        'Bring an evicted segment back into the window at its salience now. When refused, a RehydrationBlocked error gives the reasons, what it would displace and the pins that block it: unpin them (or wait for them to lapse) and try again.',
      inputSchema: rehydrateSchema.extend(sessionInput.shape),
    },
    ({ sessionId, ...input }) => windows.rehydrate(sessionId, input),
  );

  tool(
    'window_pin',
    {
      title: 'Pin a segment',
      description:
        'Pin a resident segment so nothing displaces it: `explicit` until unpinned, `toolLoop` until its loop ends, or `untilTurn` until that turn.',
      inputSchema: pinRequestSchema.extend(sessionInput.shape),
    },
    ({ sessionId, ...input }) => windows.pin(sessionId, input),
  );

  tool(
    'window_unpin',
    {
      title: 'Unpin',
      description:
        "Give `segmentId` to release that segment's explicit and turn pins, or `loopId` to end a tool loop and release all of its pins (one of the two).",
      inputSchema: sessionInput.extend({
        segmentId: segmentIdSchema.optional().describe('release this segment’s explicit and turn pins'),
        loopId: segmentIdSchema.optional().describe('end this tool loop, releasing its pins'),
      }),
    },
    ({ sessionId, segmentId, loopId }) => {
      if ((segmentId === undefined) === (loopId === undefined)) {
        throw new InvalidInputError('invalid unpin', [
          { path: 'segmentId', message: 'give either segmentId or loopId' },
        ]);
      }
      return windows.unpin(sessionId, segmentId !== undefined ? { segmentId } : { loopId: loopId! });
    },
  );

  tool(
    'window_turn',
    {
      title: 'Advance the turn',
      description:
        "Advance the window's turn: the segments in `scores` take this turn's salience, the rest decay; pins that expire at this turn lapse.",
      inputSchema: advanceTurnSchema.extend(sessionInput.shape),
    },
    ({ sessionId, ...input }) => windows.advanceTurn(sessionId, input),
  );

  tool(
    'window_close',
    {
      title: 'Close a context window',
      description:
        'End the session and answer its summary; later calls but window_show are Conflict errors until it is opened again (empty).',
      inputSchema: sessionInput,
    },
    async ({ sessionId }, scope) => {
      const summary = await windows.close(sessionId);
      await memgate.releaseWindow(sessionId, scope);
      return summary;
    },
  );

  // The SDK's own tools/call checks the arguments against the tool's schema before its handler
  // and answers a refusal as untyped text; this one hands them to the handler, which parses
  // them into an InvalidInput like every other refusal. The SDK still lists the schemas.
  server.server.setRequestHandler(CallToolRequestSchema, ({ params }) => {
    const call = calls.get(params.name);
    if (call) return call(params.arguments ?? {});
    return toolError(new NotFoundError(`no tool ${params.name}: tools/list names them`));
  });

  return server;
}
