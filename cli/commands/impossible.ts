import type { Command } from 'commander';
import { z } from 'zod';
import { agentIdSchema } from '../../core/entry';
import { impossibleReport } from '../../store/impossible';
import { printJson, withClient } from './context';
import { parseOptions } from './options';

/** The store reads the agent id as it is, so it is checked here, by the client's own rule. */
export const impossibleOptions = z.object({ agent: agentIdSchema.optional() });

export function registerImpossibleCommands(program: Command): void {
  program
    .command('impossible')
    .description('queries whose deep recall matched deleted evidence, grouped by deletion reason')
    .option('-a, --agent <agentId>', 'only this agent')
    .action(async (raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(impossibleOptions, raw, command);
      printJson(await withClient((c) => impossibleReport(c.store, o.agent ? { agentId: o.agent } : {})));
    });
}
