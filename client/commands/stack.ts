import type { Command } from 'commander';
import { stackDown, stackStatus, stackUp } from '../../stack/stack';
import { config, printJson } from './context';

export function registerStackCommands(program: Command): void {
  const stack = program
    .command('stack')
    .description('the local Temporal dev server, FerretDB and the PostgreSQL under it');
  stack
    .command('up')
    .description('obtain (once) and start the servers on 127.0.0.1; reuses running ones')
    .action(async () => {
      const up = await stackUp(config());
      printJson(up);
    });
  stack
    .command('down')
    .description('stop the servers this state directory started')
    .action(async () => {
      printJson({ stopped: await stackDown(config()) });
    });
  stack
    .command('status')
    .description('which servers answer')
    .action(async () => {
      printJson(await stackStatus(config()));
    });
}
