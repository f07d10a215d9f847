import type { Command } from 'commander';
import { stackDown, stackStatus, stackUp } from '../../stack/stack';
import { superviseLocalStack } from '../../stack/watchdog';
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
    .command('watch')
    .description(
      "supervise the local stack's FerretDB: restart it when it stops answering (`stack up` starts this in the background)",
    )
    .action(async () => {
      const stop = new AbortController();
      for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => stop.abort());
      await superviseLocalStack(config(), stop.signal);
    });
  stack
    .command('status')
    .description('which servers answer, and whether recall is hybrid or lexical only (and why)')
    .action(async () => {
      printJson(await stackStatus(config()));
    });
}
