import type { Command } from 'commander';
import { stackDown, stackStatus, stackUp } from '../../stack/stack';
import { config, printJson } from './context';

export function registerStackCommands(program: Command): void {
  const stack = program
    .command('stack')
    .description(
      'the local Temporal dev server, FerretDB and the PostgreSQL under it, and the embeddings server',
    );
  stack
    .command('up')
    .description(
      'obtain (once) and start the servers on 127.0.0.1; reuses running ones. An embeddings server that cannot start leaves recall lexical only (`stack status` says why)',
    )
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
    .description('which servers answer, and whether recall is hybrid or lexical only (and why)')
    .action(async () => {
      printJson(await stackStatus(config()));
    });
}
