import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Command } from 'commander';
import { InvalidConfigError } from '../../core/errors';
import { buildMcpServer } from '../../server/mcp';
import { MemgateClient } from '../../client/client';
import { WindowClient } from '../../client/window';
import { config, resolveEndpoints } from './context';

/**
 * `memgate mcp`: the MCP server over stdio, for an MCP client that starts it as a local
 * process. Stdout carries the protocol alone, so everything else goes to stderr. It acts with
 * the key in MEMGATE_API_KEY, checked at start and again on every tool call, so a revoked key
 * stops working without a restart. Ends when the client closes stdin, or on SIGINT/SIGTERM.
 */
export function registerMcpCommands(program: Command): void {
  program
    .command('mcp')
    .description(
      'serve the MCP tools over stdio (for an MCP client to start), acting with the API key in MEMGATE_API_KEY; writes need a worker',
    )
    .action(async () => {
      const c = config();
      const key = c.apiKey;
      if (!key) {
        throw new InvalidConfigError('MEMGATE_API_KEY', 'an API key from `memgate keys create`', undefined);
      }
      const client = await MemgateClient.connect(c, await resolveEndpoints());
      try {
        await client.authenticate(key);
        const server = buildMcpServer({
          memgate: client,
          windows: new WindowClient(client.temporal, c),
          scope: () => client.authenticate(key),
          onServerError: (err, errorId) =>
            console.error(`memgate mcp: a tool call failed${errorId ? ` (error ${errorId})` : ''}:`, err),
        });
        const transport = new StdioServerTransport();
        const closed = new Promise<void>((resolve) => {
          transport.onclose = resolve;
          process.stdin.once('end', resolve);
          process.once('SIGINT', resolve);
          process.once('SIGTERM', resolve);
        });
        await server.connect(transport);
        console.error('memgate MCP server on stdio');
        await closed;
        await server.close();
      } finally {
        await client.close();
      }
    });
}
