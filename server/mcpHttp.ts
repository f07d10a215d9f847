import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { KeyScope } from '../core/keys';
import type { MemgateClient } from '../client/client';
import type { WindowClient } from '../client/window';
import { bearerKey } from './auth';
import { buildMcpServer } from './mcp';

export const MCP_PATH = '/mcp';

/**
 * JSON-RPC messages one POST may carry. The server answers a batch's calls one after another
 * within one request, so a batch multiplies what one request may cost; MCP's own clients
 * send one message at a time (its 2025-06-18 revision drops batches), and room for an
 * `initialize` beside a few calls is enough for those that still batch.
 */
export const MAX_MCP_BATCH = 8;

export interface McpMountDeps {
  memgate: MemgateClient;
  windows: WindowClient;
  /** The scope of a live key, or Unauthenticated (MemgateClient.authenticate). */
  authenticate(key: string): Promise<KeyScope>;
  onServerError?: (err: unknown, errorId?: string) => void;
}

/** A JSON-RPC error with no request id, as the transport answers what it cannot take. */
function rpcError(reply: FastifyReply, status: number, message: string) {
  return reply.code(status).send({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });
}

/**
 * The MCP server over Streamable HTTP at `/mcp`, on an app that is not yet listening.
 * Stateless: each POST gets a server and transport of its own, so no session outlives its
 * request and any instance of the service can answer. Every request needs a live key
 * (`Authorization: Bearer <key>`, 401 Unauthenticated otherwise), and each tool call checks
 * what it names against that key's scope. With no sessions there is no stream to GET or
 * session to DELETE: both answer 405, which MCP clients read as "not offered".
 */
export function mountMcp(app: FastifyInstance, deps: McpMountDeps): void {
  // In a plugin, as the API's routes are, so that the server's limits have loaded: a caller
  // counts against one share on both (FastifyInstance.callerHooks).
  void app.register(async (mcp) => {
    const authenticated = async (request: FastifyRequest): Promise<KeyScope> =>
      deps.authenticate(bearerKey(request.headers.authorization));

    // Authenticated before the body is read: a caller without a key costs no parsing.
    const onRequest = async (request: FastifyRequest) => {
      request.keyScope = await authenticated(request);
    };
    mcp.post(
      MCP_PATH,
      { config: { operationId: 'mcp' }, onRequest: mcp.callerHooks(onRequest) },
      async (request, reply) => {
        const scope = request.keyScope!;
        if (request.body === undefined)
          return rpcError(reply, 400, 'Parse error: a JSON-RPC message is required');
        if (Array.isArray(request.body) && request.body.length > MAX_MCP_BATCH) {
          return rpcError(
            reply,
            400,
            `Invalid Request: a batch of ${request.body.length} messages; at most ${MAX_MCP_BATCH} per POST`,
          );
        }
        const server = buildMcpServer({
          memgate: deps.memgate,
          windows: deps.windows,
          scope: async () => scope,
          ...(deps.onServerError && { onServerError: deps.onServerError }),
        });
        const transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: undefined,
          enableJsonResponse: true,
        });
        reply.raw.on('close', () => {
          void transport.close();
          void server.close();
        });
        await server.connect(transport);
        // The transport writes the response itself.
        reply.hijack();
        await transport.handleRequest(request.raw, reply.raw, request.body);
      },
    );

    for (const method of ['GET', 'DELETE'] as const) {
      mcp.route({
        method,
        url: MCP_PATH,
        config: { operationId: 'mcp' },
        onRequest: mcp.callerHooks(),
        handler: async (request, reply) => {
          await authenticated(request);
          reply.header('allow', 'POST');
          return rpcError(reply, 405, 'Method not allowed: this server is stateless (POST only)');
        },
      });
    }
  });
}
