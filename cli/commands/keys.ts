import type { Command } from 'commander';
import { z } from 'zod';
import { NotFoundError } from '../../core/errors';
import { agentPatternSchema } from '../../core/keys';
import { createKey, listKeys, revokeKey } from '../../store/keys';
import { printJson, withClient } from './context';
import { parseOptions } from './options';

export const createKeyOptions = z.object({ agents: agentPatternSchema });
export const revokeKeyOptions = z.object({
  keyId: z.string().regex(/^[a-z0-9]{12}$/, 'a key id: 12 of a-z 0-9'),
});

export function registerKeyCommands(program: Command): void {
  const keys = program
    .command('keys')
    .description('API keys for the HTTP and MCP servers, each scoped to the agents a pattern covers');
  keys
    .command('create')
    .description('create a key; it is printed once, on the last line, and stored only as a digest')
    .requiredOption('--agents <pattern>', 'agent ids the key may act for; * stands for any run of characters')
    .action(async (raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(createKeyOptions, raw, command);
      const created = await withClient((c) => createKey(c.store, o.agents, Date.now()));
      console.log(`key ${created.keyId} for agents matching ${created.agents}; shown only now:`);
      console.log(created.key);
    });
  keys
    .command('revoke')
    .description('revoke a key: every call with it is refused from now on')
    .argument('<keyId>', 'the key id (the part after mg_)')
    .action(async (keyId: string, raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(revokeKeyOptions, { ...raw, keyId }, command);
      const revoked = await withClient((c) => revokeKey(c.store, o.keyId, Date.now()));
      if (!revoked) throw new NotFoundError(`no live key ${o.keyId}`, { keyId: o.keyId });
      printJson({ revoked: o.keyId });
    });
  keys
    .command('list')
    .description('every key: id, agents, when created and revoked (never the key itself)')
    .action(() => withClient(async (c) => printJson(await listKeys(c.store))));
}
