import type { Command } from 'commander';
import { InvalidInputError } from '../../core/errors';
import { NightlySchedule } from '../schedule';
import { config, printJson, withClient } from './context';

export function isoTime(flag: string) {
  return (value: string): number => {
    const t = Date.parse(value);
    if (Number.isNaN(t))
      throw new InvalidInputError(`${flag} must be an ISO date-time, e.g. 2025-06-01T03:00:00Z`);
    return t;
  };
}

export function registerNightlyCommands(program: Command): void {
  program
    .command('consolidate')
    .description(
      "run one agent's nightly consolidation now (expire, refresh, supersede, consolidate, reclaim)",
    )
    .requiredOption('-a, --agent <agentId>', 'agent id')
    .option('--as-of <iso>', 'decide as of this instant (default: now)', isoTime('--as-of'))
    .action(async (o) => {
      const asOf: number = o.asOf ?? Date.now();
      printJson(await withClient((c) => c.consolidate({ agentId: o.agent, asOf })));
    });

  const schedule = program
    .command('schedule')
    .description('the nightly consolidation Schedule (memgate-nightly)');
  const nightly = <T>(fn: (s: NightlySchedule) => Promise<T>) =>
    withClient(async (c) => printJson(await fn(new NightlySchedule(c.temporal, config()))));
  schedule
    .command('create')
    .description('create it from MEMGATE_NIGHTLY_AT / _TZ / _CATCHUP_HOURS, or update it to match them')
    .action(() => nightly((s) => s.ensure()));
  schedule
    .command('describe')
    .description('calendar, policies, state, next and recent runs')
    .action(() => nightly((s) => s.describe()));
  schedule
    .command('pause')
    .description('stop taking runs until unpaused')
    .option('--note <text>', 'why')
    .action((o) => nightly((s) => s.pause(o.note)));
  schedule
    .command('unpause')
    .description('take runs again')
    .option('--note <text>', 'why')
    .action((o) => nightly((s) => s.unpause(o.note)));
  schedule
    .command('trigger')
    .description('start a nightly run now (skipped if one is running)')
    .action(() => nightly(async (s) => ({ triggered: (await s.trigger(), s.scheduleId) })));
  schedule
    .command('backfill')
    .description('take the runs missed between two instants, each as of its own night')
    .requiredOption('--from <iso>', 'start', isoTime('--from'))
    .requiredOption('--to <iso>', 'end', isoTime('--to'))
    .action((o) =>
      nightly(async (s) => {
        await s.backfill(new Date(o.from), new Date(o.to));
        return {
          backfilled: s.scheduleId,
          from: new Date(o.from).toISOString(),
          to: new Date(o.to).toISOString(),
        };
      }),
    );
}
