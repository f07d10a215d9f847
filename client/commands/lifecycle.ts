import type { Command } from 'commander';
import { InvalidInputError } from '../../core/errors';
import { LifecycleClient } from '../lifecycle';
import { NightlySchedule } from '../schedule';
import { config, printJson, withClient } from './context';

function isoTime(flag: string) {
  return (value: string): number => {
    const t = Date.parse(value);
    if (Number.isNaN(t))
      throw new InvalidInputError(`${flag} must be an ISO date-time, e.g. 2025-06-01T03:00:00Z`);
    return t;
  };
}

export function registerLifecycleCommands(program: Command): void {
  program
    .command('consolidate')
    .description(
      "run one agent's nightly consolidation now (expire, refresh, supersede, consolidate, reclaim)",
    )
    .requiredOption('-a, --agent <agentId>', 'agent id')
    .option('--as-of <iso>', 'decide as of this instant (default: now)', isoTime('--as-of'))
    .action(async (o) => {
      const asOf: number = o.asOf ?? Date.now();
      printJson(
        await withClient((c) =>
          new LifecycleClient(c.temporal, config()).consolidate({ agentId: o.agent, asOf }),
        ),
      );
    });

  program
    .command('restore')
    .description(
      'reverse the supersession of an entry (or, with --fresh-until, renew an expired volatile fact)',
    )
    .argument('<entryId>', 'entry id')
    .requiredOption('-a, --agent <agentId>', 'agent id')
    .option('--fresh-until <iso>', 'new end of the freshness window', isoTime('--fresh-until'))
    .action(async (entryId: string, o) => {
      printJson(
        await withClient((c) =>
          new LifecycleClient(c.temporal, config()).restore({
            agentId: o.agent,
            entryId,
            ...(o.freshUntil !== undefined && { freshUntil: o.freshUntil }),
          }),
        ),
      );
    });

  program
    .command('forget')
    .description(
      'erase an entry from hot, cold, the query log and every summary derived from it; leaves a content-free tombstone',
    )
    .argument('<entryId>', 'entry id')
    .requiredOption('-a, --agent <agentId>', 'agent id')
    .action(async (entryId: string, o) => {
      printJson(
        await withClient((c) =>
          new LifecycleClient(c.temporal, config()).forget({ agentId: o.agent, entryId }),
        ),
      );
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
