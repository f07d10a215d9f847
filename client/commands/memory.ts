import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { InvalidInputError } from '../../core/errors';
import { isoTime } from './nightly';
import { printJson, withClient } from './context';

function parseNumber(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n))
      throw new InvalidInputError(`${flag} must be a number`, []);
    return n;
  };
}

export function registerMemoryCommands(program: Command): void {
  program
    .command('write')
    .description('durably write one entry (or a JSON list of entries with --json)')
    .requiredOption('-a, --agent <agentId>', 'agent id')
    .argument('[text]', 'entry text')
    .option('--json <file>', 'a JSON file holding an array of entries ("-" for stdin)')
    .option('--kind <kind>', 'episode | fact | constraint')
    .option('--salience <s>', 'initial salience in (0, 1]', parseNumber('--salience'))
    .option('--key <idempotencyKey>', 'idempotency key')
    .option('--volatile', 'a volatile fact (a price, a quota)')
    .option('--fresh-until <iso>', 'end of the freshness window of a volatile fact')
    .option('--subject <subject>', 'subject of a fact (with --attribute)')
    .option('--attribute <attribute>', 'attribute of a fact (with --subject)')
    .action(async (text: string | undefined, o) => {
      let entries: unknown[];
      if (o.json) {
        const raw = readFileSync(o.json === '-' ? 0 : o.json, 'utf8');
        const parsed: unknown = JSON.parse(raw);
        if (!Array.isArray(parsed)) throw new InvalidInputError('--json must hold an array of entries', []);
        entries = parsed;
      } else {
        if (text === undefined) throw new InvalidInputError('give the entry text, or --json <file>', []);
        const freshUntil = o.freshUntil ? Date.parse(o.freshUntil) : undefined;
        if (freshUntil !== undefined && Number.isNaN(freshUntil)) {
          throw new InvalidInputError('--fresh-until must be an ISO date-time', []);
        }
        entries = [
          {
            text,
            ...(o.kind && { kind: o.kind }),
            ...(o.salience !== undefined && { salience: o.salience }),
            ...(o.key && { idempotencyKey: o.key }),
            ...(o.volatile && { volatile: true }),
            ...(freshUntil !== undefined && { freshUntil }),
            ...(o.subject && { subject: o.subject }),
            ...(o.attribute && { attribute: o.attribute }),
          },
        ];
      }
      printJson(await withClient((c) => c.write({ agentId: o.agent, entries: entries as never })));
    });

  program
    .command('recall')
    .description(
      'recall entries for a query (gated by default; --deep adds dormant, cold and deleted evidence)',
    )
    .requiredOption('-a, --agent <agentId>', 'agent id')
    .argument('<query>', 'query text')
    .option('-k, --k <k>', 'number of hits', parseNumber('--k'), 10)
    .option('--deep', 'deep recall')
    .action(async (query: string, o) => {
      printJson(
        await withClient((c) => c.recall({ agentId: o.agent, query, k: o.k, deep: Boolean(o.deep) })),
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
          c.restore({
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
      printJson(await withClient((c) => c.forget({ agentId: o.agent, entryId })));
    });
}
