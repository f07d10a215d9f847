import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { z } from 'zod';
import type { WriteEntryInput } from '../../core/entry';
import { MAX_RECALL_INDEX_WAIT_MS } from '../../core/config';
import { printJson, withClient } from './context';
import { isoDateTime, jsonText, numeric, parseOptions, switchFlag, unreadableFile } from './options';

/** What describes the one entry of a write without --json. */
const ENTRY_INPUTS = [
  'text',
  'kind',
  'salience',
  'key',
  'volatile',
  'freshUntil',
  'subject',
  'attribute',
] as const;

export const writeOptions = z
  .object({
    agent: z.string(),
    text: z.string().optional(),
    json: z.string().optional(),
    kind: z.string().optional(),
    salience: numeric.optional(),
    key: z.string().optional(),
    volatile: switchFlag,
    freshUntil: isoDateTime.optional(),
    subject: z.string().optional(),
    attribute: z.string().optional(),
  })
  .superRefine((o, ctx) => {
    if (o.json === undefined) {
      if (o.text === undefined)
        ctx.addIssue({ code: 'custom', path: ['text'], message: 'give the entry text, or --json <file>' });
      return;
    }
    // The file holds every entry whole: an entry's text or flag beside it would be dropped.
    for (const key of ENTRY_INPUTS) {
      if (o[key] !== undefined && o[key] !== false)
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message: 'the --json file holds the entries: give this in them, not beside --json',
        });
    }
  });

/** A --json file's text ("-" for standard input), or InvalidInput naming the flag. */
function entriesFileText(path: string): string {
  try {
    return readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (err) {
    throw unreadableFile('write', '--json', path, err);
  }
}

/** What a `--json` file holds: the entries, which the client validates one by one. */
export const entriesFileOptions = z.object({
  json: jsonText.pipe(z.array(z.unknown(), 'must hold an array of entries')),
});

/** The one entry the flags describe; empty flags are left out, as if not given. */
function entryOf(o: z.output<typeof writeOptions>): unknown {
  return {
    text: o.text,
    ...(o.kind && { kind: o.kind }),
    ...(o.salience !== undefined && { salience: o.salience }),
    ...(o.key && { idempotencyKey: o.key }),
    ...(o.volatile && { volatile: true }),
    ...(o.freshUntil !== undefined && { freshUntil: o.freshUntil }),
    ...(o.subject && { subject: o.subject }),
    ...(o.attribute && { attribute: o.attribute }),
  };
}

export const recallOptions = z
  .object({ agent: z.string(), query: z.string(), k: numeric, deep: switchFlag })
  .transform((o) => ({ agentId: o.agent, query: o.query, k: o.k, deep: o.deep }));

export const restoreOptions = z
  .object({ agent: z.string(), entryId: z.string(), freshUntil: isoDateTime.optional() })
  .transform((o) => ({
    agentId: o.agent,
    entryId: o.entryId,
    ...(o.freshUntil !== undefined && { freshUntil: o.freshUntil }),
  }));

export const reembedOptions = z.object({ agent: z.string() }).transform((o) => ({ agentId: o.agent }));

/** One entry, or with `--all` the whole agent (docs/erasure.md): one of the two. */
export const forgetOptions = z
  .object({ agent: z.string(), entryId: z.string().optional(), all: switchFlag })
  .superRefine((o, ctx) => {
    if (o.all && o.entryId !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['all'],
        message: 'erases the whole agent: give no <entryId> with it',
      });
    if (!o.all && o.entryId === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['entryId'],
        message: 'give the entry to erase, or --all for the whole agent',
      });
  })
  .transform((o) => ({ agentId: o.agent, entryId: o.entryId }));

export function registerMemoryCommands(program: Command): void {
  program
    .command('write')
    .description('durably write one entry (or a JSON list of entries with --json)')
    .requiredOption('-a, --agent <agentId>', 'agent id')
    .argument('[text]', 'entry text')
    .option(
      '--json <file>',
      'a JSON file holding an array of entries ("-" for stdin), in place of the text and entry flags',
    )
    .option('--kind <kind>', 'episode | fact | constraint')
    .option('--salience <s>', 'initial salience in (0, 1]')
    .option('--key <idempotencyKey>', 'idempotency key')
    .option('--volatile', 'a volatile fact (a price, a quota)')
    .option('--fresh-until <iso>', 'end of the freshness window of a volatile fact')
    .option('--subject <subject>', 'subject of a fact (with --attribute)')
    .option('--attribute <attribute>', 'attribute of a fact (with --subject)')
    .action(async (text: string | undefined, raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(writeOptions, { ...raw, text }, command);
      const entries =
        o.json === undefined
          ? [entryOf(o)]
          : parseOptions(entriesFileOptions, { json: entriesFileText(o.json) }, command).json;
      // The client validates each entry and names the offending field.
      printJson(
        await withClient((c) => c.write({ agentId: o.agent, entries: entries as WriteEntryInput[] })),
      );
    });

  program
    .command('recall')
    .description(
      'recall entries for a query (gated by default; --deep adds dormant, cold and deleted evidence)',
    )
    .requiredOption('-a, --agent <agentId>', 'agent id')
    .argument('<query>', 'query text')
    .option('-k, --k <k>', 'number of hits', '10')
    .option('--deep', 'deep recall')
    .action(async (query: string, raw: Record<string, unknown>, command: Command) => {
      const request = parseOptions(recallOptions, { ...raw, query }, command);
      // One recall, then the process exits: no later recall would find the index loaded, so
      // this one waits for the load rather than answer lexically.
      printJson(await withClient((c) => c.recall(request), { recallIndexWaitMs: MAX_RECALL_INDEX_WAIT_MS }));
    });

  program
    .command('restore')
    .description(
      'reverse the supersession of an entry (or, with --fresh-until, renew an expired volatile fact)',
    )
    .argument('<entryId>', 'entry id')
    .requiredOption('-a, --agent <agentId>', 'agent id')
    .option('--fresh-until <iso>', 'new end of the freshness window')
    .action(async (entryId: string, raw: Record<string, unknown>, command: Command) => {
      const request = parseOptions(restoreOptions, { ...raw, entryId }, command);
      printJson(await withClient((c) => c.restore(request)));
    });

  program
    .command('reembed')
    .description(
      'give every entry of an agent a vector of the configured embedding model (after a change of model); resumable, and recall reports the entries still on another model until it has',
    )
    .requiredOption('-a, --agent <agentId>', 'agent id')
    .action(async (raw: Record<string, unknown>, command: Command) => {
      const request = parseOptions(reembedOptions, raw, command);
      printJson(await withClient((c) => c.reembed(request)));
    });

  program
    .command('forget')
    .description(
      'erase an entry from hot, cold, the query log and every summary derived from it (or with --all every record and workflow of the agent); leaves content-free tombstones',
    )
    .argument('[entryId]', 'entry id')
    .requiredOption('-a, --agent <agentId>', 'agent id')
    .option('--all', 'erase the whole agent instead of one entry (docs/erasure.md)')
    .action(async (entryId: string | undefined, raw: Record<string, unknown>, command: Command) => {
      const { agentId, entryId: id } = parseOptions(forgetOptions, { ...raw, entryId }, command);
      printJson(
        await withClient(async (c) =>
          id === undefined ? await c.eraseAgent({ agentId }) : await c.forget({ agentId, entryId: id }),
        ),
      );
    });
}
