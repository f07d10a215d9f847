import type { Command } from 'commander';
import { impossibleQueries } from '../../store/impossible';
import { printJson, withClient } from './context';

export function registerImpossibleCommands(program: Command): void {
  program
    .command('impossible')
    .description('queries whose deep recall matched deleted evidence, grouped by deletion reason')
    .option('-a, --agent <agentId>', 'only this agent')
    .action(async (o: { agent?: string }) => {
      const groups = await withClient((c) => impossibleQueries(c.store, o.agent ? { agentId: o.agent } : {}));
      printJson({
        ...(o.agent ? { agentId: o.agent } : {}),
        queries: new Set(groups.flatMap((g) => g.queries.map((q) => q.queryId))).size,
        groups,
      });
    });
}
