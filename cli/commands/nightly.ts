import type { Command } from 'commander';
import { z } from 'zod';
import { NIGHT_PHASES } from '../../core/nightly/registry';
import { NightlySchedule } from '../../client/schedule';
import { config, printJson, withClient } from './context';
import { isoDateTime, parseOptions } from './options';

export const consolidateOptions = z
  .object({ agent: z.string(), asOf: isoDateTime.optional() })
  .transform((o) => ({ agentId: o.agent, asOf: o.asOf ?? Date.now() }));

export const scheduleNoteOptions = z.object({ note: z.string().optional() });

export const backfillOptions = z
  .object({ from: isoDateTime, to: isoDateTime })
  .refine((o) => o.from < o.to, { path: ['from'], error: 'must be before --to' });

export function registerNightlyCommands(program: Command): void {
  program
    .command('consolidate')
    .description(`run one agent's nightly consolidation now (${NIGHT_PHASES.map((p) => p.name).join(', ')})`)
    .requiredOption('-a, --agent <agentId>', 'agent id')
    .option('--as-of <iso>', 'decide as of this instant (default: now)')
    .addHelpText(
      'after',
      `\nIts phases, in the order they run:\n${NIGHT_PHASES.map((p) => `  ${p.name.padEnd(12)}${p.does}`).join('\n')}`,
    )
    .action(async (raw: Record<string, unknown>, command: Command) => {
      const input = parseOptions(consolidateOptions, raw, command);
      printJson(await withClient((c) => c.consolidate(input)));
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
    .action((raw: Record<string, unknown>, command: Command) => {
      const { note } = parseOptions(scheduleNoteOptions, raw, command);
      return nightly((s) => s.pause(note));
    });
  schedule
    .command('unpause')
    .description('take runs again')
    .option('--note <text>', 'why')
    .action((raw: Record<string, unknown>, command: Command) => {
      const { note } = parseOptions(scheduleNoteOptions, raw, command);
      return nightly((s) => s.unpause(note));
    });
  schedule
    .command('trigger')
    .description('start a nightly run now (skipped if one is running)')
    .action(() => nightly(async (s) => ({ triggered: (await s.trigger(), s.scheduleId) })));
  schedule
    .command('backfill')
    .description('take the runs missed between two instants, each as of its own night')
    .requiredOption('--from <iso>', 'start')
    .requiredOption('--to <iso>', 'end')
    .action((raw: Record<string, unknown>, command: Command) => {
      const { from, to } = parseOptions(backfillOptions, raw, command);
      return nightly(async (s) => {
        await s.backfill(new Date(from), new Date(to));
        return {
          backfilled: s.scheduleId,
          from: new Date(from).toISOString(),
          to: new Date(to).toISOString(),
        };
      });
    });
}
