import { Command } from 'commander';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { auditOptions } from '../../audit/command';
import { buildProgram, COMMAND_MODULES } from '../../cli/cli';
import { entriesFileOptions, recallOptions, restoreOptions, writeOptions } from '../../cli/commands/memory';
import { backfillOptions, consolidateOptions } from '../../cli/commands/nightly';
import {
  commaList,
  isoDateTime,
  jsonText,
  keyNumberPairs,
  numeric,
  parseOptions,
} from '../../cli/commands/options';
import { admitOptions, openOptions, turnOptions, unpinOptions } from '../../cli/commands/window';
import { InvalidInputError, type Issue } from '../../core/errors';
import { thrownBy } from '../support/thrown';

const refusal = (parse: () => unknown) => thrownBy(parse, InvalidInputError);

/**
 * How `memgate` reads its options and arguments: one zod schema per command, parsed by
 * parseOptions, which names each offending flag as the user typed it. No server is involved:
 * a bad value is refused before any command connects.
 */

/** The whole program, as `memgate --help` builds it. */
let program: Command;
beforeAll(async () => {
  program = await buildProgram();
});

/** The real command, as `memgate` builds it, for the flag spellings. */
function command(path: string): Command {
  return path.split(' ').reduce((parent, name) => parent.commands.find((c) => c.name() === name)!, program);
}

describe('the commands, loaded by module', () => {
  const names = (p: Command) => p.commands.map((c) => c.name()).sort();

  it('names each command under the module that registers it, and every command once', async () => {
    for (const m of COMMAND_MODULES) {
      const alone = new Command('memgate');
      (await m.load())(alone);
      expect(names(alone)).toEqual([...m.commands].sort());
    }
    expect(names(program)).toEqual(COMMAND_MODULES.flatMap((m) => m.commands).sort());
  });

  it("registers only the running command's module, and every module for anything else", async () => {
    expect(names(await buildProgram('recall'))).toEqual(['forget', 'recall', 'reembed', 'restore', 'write']);
    expect(names(await buildProgram('--help'))).toEqual(names(program));
    expect(names(await buildProgram('recal'))).toEqual(names(program));
  });
});

const paths = (issues: Issue[]) => issues.map((i) => i.path);

describe('the shared pieces', () => {
  it('reads an ISO date-time as epoch milliseconds, and refuses what is not one', () => {
    expect(isoDateTime.parse('2025-06-01T03:00:00Z')).toBe(Date.UTC(2025, 5, 1, 3));
    expect(isoDateTime.parse('2025-06-01T05:00:00+02:00')).toBe(Date.UTC(2025, 5, 1, 3));
    expect(isoDateTime.safeParse('yesterday').success).toBe(false);
    expect(isoDateTime.safeParse('').success).toBe(false);
  });

  it('takes a plain date as midnight UTC, and refuses what Date.parse reads that is not a whole ISO date(-time) with its zone', () => {
    expect(isoDateTime.parse('2025-06-01')).toBe(Date.UTC(2025, 5, 1));
    expect(isoDateTime.parse('2024-02-29T23:59:59.999Z')).toBe(Date.UTC(2024, 1, 29, 23, 59, 59, 999));
    expect(isoDateTime.parse('2025-06-01T03:00Z')).toBe(Date.UTC(2025, 5, 1, 3));
    for (const bad of [
      '7',
      '2025',
      '2025-06',
      '2025-6-1',
      'June 1, 2025',
      'Sun, 01 Jun 2025 03:00:00 GMT',
      // No zone: local time, which differs from one machine to the next.
      '2025-06-01T03:00:00',
      '2025-06-01 03:00:00Z',
      // Dates no calendar has, which Date.parse would roll into the next month.
      '2025-02-29',
      '2025-02-30T00:00:00Z',
      '2025-04-31',
      '2025-13-01',
      '2025-00-10',
      '2025-06-00',
      '2025-06-01T24:00:00Z',
      '2025-06-01T03:60:00Z',
      '2025-06-01T03:00:00+24:00',
      ' 2025-06-01T03:00:00Z',
    ]) {
      expect(isoDateTime.safeParse(bad).success, bad).toBe(false);
    }
  });

  it('gives back the instant any ISO date-time was written from', () => {
    fc.assert(
      fc.property(fc.date({ noInvalidDate: true }), (date) => {
        expect(isoDateTime.parse(date.toISOString())).toBe(date.getTime());
      }),
    );
  });

  it('reads finite numbers only', () => {
    expect(numeric.parse('0.8')).toBe(0.8);
    expect(numeric.parse('-3')).toBe(-3);
    for (const bad of ['abc', '', '  ', 'Infinity', 'NaN', '1x']) {
      expect(numeric.safeParse(bad).success).toBe(false);
    }
  });

  it('splits a comma list into trimmed, non-empty items', () => {
    expect(commaList.parse(' a, b,,c ')).toEqual(['a', 'b', 'c']);
    expect(commaList.safeParse(' , ').success).toBe(false);
  });

  it('gathers repeated key=number pairs into one record, a later value of a key winning', () => {
    const scores = keyNumberPairs('<segment>=<salience>');
    expect(scores.parse(['a=0.5', 'b=1', 'a=0.25'])).toEqual({ a: 0.25, b: 1 });
    for (const bad of [['a'], ['=0.5'], ['a='], ['a=high']]) {
      expect(scores.safeParse(bad).success).toBe(false);
    }
    // A key is data, never the record's prototype: the client's rule for keys judges it.
    expect(Object.keys(scores.parse(['__proto__=0.5']))).toEqual(['__proto__']);
  });

  it('parses JSON text, and refuses text that is not JSON', () => {
    expect(jsonText.parse('[{"text":"x"}]')).toEqual([{ text: 'x' }]);
    expect(jsonText.safeParse('[{"text":').success).toBe(false);
  });
});

describe('parseOptions', () => {
  it('names the flag and the command in the error', () => {
    const err = refusal(() =>
      parseOptions(consolidateOptions, { agent: 'a1', asOf: 'yesterday' }, command('consolidate')),
    );
    expect(paths(err.issues)).toEqual(['--as-of']);
    expect(err.message).toMatch(
      /^invalid arguments to memgate consolidate: --as-of: must be an ISO date-time/,
    );
  });

  it('names a positional argument as <name>, and a subcommand by its full path', () => {
    const err = refusal(() => parseOptions(writeOptions, { agent: 'a1' }, command('write')));
    expect(paths(err.issues)).toEqual(['<text>']);
    const pin = refusal(() =>
      parseOptions(
        admitOptions,
        { session: 's', segment: 'x', tokens: '10', salience: '0.5', pin: 'forever' },
        command('window admit'),
      ),
    );
    expect(paths(pin.issues)).toEqual(['--pin']);
    expect(pin.message).toContain('invalid arguments to memgate window admit: --pin:');
  });

  it('refuses through the program itself, before connecting to anything', async () => {
    const run = async (...args: string[]) =>
      (await buildProgram(args[0])).parseAsync(['node', 'memgate', ...args]);
    await expect(run('consolidate', '--agent', 'a1', '--as-of', 'yesterday')).rejects.toThrow(
      /--as-of: must be an ISO date-time/,
    );
    await expect(run('recall', '--agent', 'a1', '-k', 'many', 'rate limit')).rejects.toThrow(
      /--k: must be a number/,
    );
    await expect(run('window', 'turn', 's', '--score', 'a=0.5', 'b')).rejects.toThrow(
      /--score: must be <segment>=<salience>, not "b"/,
    );
    await expect(run('audit', '--budgets', '8000,lots')).rejects.toThrow(
      /--budgets: whole numbers of tokens/,
    );
  });
});

describe('the command schemas', () => {
  const parse = <S extends z.ZodType>(schema: S, path: string, raw: Record<string, unknown>) =>
    parseOptions(schema, raw, command(path));
  /** The flags a refused parse names. */
  const refusedFlags = (schema: z.ZodType, path: string, raw: Record<string, unknown>) =>
    paths(refusal(() => parse(schema, path, raw)).issues);

  it('schedule backfill: --from before --to, named by its flag', () => {
    expect(
      refusedFlags(backfillOptions, 'schedule backfill', { from: '2026-01-02', to: '2026-01-01' }),
    ).toEqual(['--from']);
    expect(
      refusedFlags(backfillOptions, 'schedule backfill', { from: '2026-01-01', to: '2026-01-01' }),
    ).toEqual(['--from']);
    expect(parse(backfillOptions, 'schedule backfill', { from: '2026-01-01', to: '2026-01-02' })).toEqual({
      from: Date.UTC(2026, 0, 1),
      to: Date.UTC(2026, 0, 2),
    });
  });

  it('write: the flags become one entry, left for the client to validate', () => {
    const o = parse(writeOptions, 'write', {
      agent: 'a1',
      text: 'The quota is 10 GB.',
      salience: '1.5',
      volatile: true,
      freshUntil: '2030-01-01T00:00:00Z',
    });
    // Out of range, yet the client, not the command, judges salience.
    expect(o).toMatchObject({ salience: 1.5, volatile: true, freshUntil: Date.UTC(2030, 0, 1) });
    const file = refusal(() => parse(entriesFileOptions, 'write', { json: '{"text":"x"}' }));
    expect(file.issues).toEqual([{ path: '--json', message: 'must hold an array of entries' }]);
  });

  it('write --json: the file holds every entry, so no text or entry flag goes beside it', () => {
    const json = { agent: 'a1', json: 'entries.json' };
    expect(parse(writeOptions, 'write', json)).toMatchObject(json);
    expect(
      refusedFlags(writeOptions, 'write', {
        ...json,
        text: 'The quota is 10 GB.',
        kind: 'fact',
        salience: '0.8',
        key: 'k1',
        volatile: true,
        freshUntil: '2030-01-01T00:00:00Z',
        subject: 'quota',
        attribute: 'size',
      }),
    ).toEqual([
      '<text>',
      '--kind',
      '--salience',
      '--key',
      '--volatile',
      '--fresh-until',
      '--subject',
      '--attribute',
    ]);
  });

  it('write --json: a file that cannot be read is refused naming the flag, before connecting to anything', async () => {
    const run = async (...args: string[]) =>
      (await buildProgram(args[0])).parseAsync(['node', 'memgate', ...args]);
    const err = await run('write', '-a', 'a1', '--json', 'no-such-entries.json').then(
      () => expect.unreachable('a missing file was read'),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).issues).toEqual([
      { path: '--json', message: 'cannot open no-such-entries.json (ENOENT)' },
    ]);
  });

  it('recall and restore: the shapes the client takes', () => {
    expect(parse(recallOptions, 'recall', { agent: 'a1', query: 'rate limit', k: '10' })).toEqual({
      agentId: 'a1',
      query: 'rate limit',
      k: 10,
      deep: false,
    });
    const restore = { agent: 'a1', entryId: 'e1', freshUntil: '2030-01-01T00:00:00Z' };
    expect(parse(restoreOptions, 'restore', restore)).toEqual({
      agentId: 'a1',
      entryId: 'e1',
      freshUntil: Date.UTC(2030, 0, 1),
    });
    expect(refusedFlags(restoreOptions, 'restore', { ...restore, freshUntil: 'soon' })).toEqual([
      '--fresh-until',
    ]);
  });

  it('consolidate: as of now unless --as-of says otherwise', () => {
    const before = Date.now();
    expect(parse(consolidateOptions, 'consolidate', { agent: 'a1' }).asOf).toBeGreaterThanOrEqual(before);
    expect(parse(consolidateOptions, 'consolidate', { agent: 'a1', asOf: '2025-06-01T03:00:00Z' })).toEqual({
      agentId: 'a1',
      asOf: Date.UTC(2025, 5, 1, 3),
    });
  });

  it('window: settings given, pins, scores, and a segment or a loop', () => {
    expect(parse(openOptions, 'window open', { session: 's', tokens: '500' })).toEqual({
      session: 's',
      overrides: { capacity: 500 },
    });
    const admit = { session: 's', segment: 'x', tokens: '10', salience: '0.5' };
    expect(parse(admitOptions, 'window admit', { ...admit, pin: 'until:7' })).toEqual({
      session: 's',
      input: { segmentId: 'x', tokens: 10, salience: 0.5, pin: { kind: 'untilTurn', expiresAtTurn: 7 } },
    });
    expect(refusedFlags(admitOptions, 'window admit', { ...admit, tokens: 'ten' })).toEqual(['--tokens']);
    expect(parse(turnOptions, 'window turn', { session: 's' })).toEqual({
      session: 's',
      input: { scores: {} },
    });
    expect(parse(unpinOptions, 'window unpin', { session: 's', loop: 'fetch' })).toEqual({
      session: 's',
      input: { loopId: 'fetch' },
    });
    for (const neitherOrBoth of [{}, { segment: 'x', loop: 'fetch' }]) {
      const err = refusal(() => parse(unpinOptions, 'window unpin', { session: 's', ...neitherOrBoth }));
      expect(err.issues).toEqual([
        { path: '--loop', message: 'give either a segment id or --loop <loopId>' },
      ]);
    }
  });

  it("audit: its defaults parse, and a value the workflow's input refuses names its flag", () => {
    const defaults = {
      data: 'data',
      out: 'out',
      budgets: '8000,80000,8000',
      reader: 'evidence',
      judge: 'match',
      restoreCap: '2000',
      ranker: 'bm25',
      concurrency: '2',
    };
    expect(parse(auditOptions, 'audit', defaults)).toMatchObject({
      budgets: [80000, 8000],
      restoreCap: 2000,
      ranker: 'bm25',
      concurrency: 2,
    });
    expect(refusedFlags(auditOptions, 'audit', { ...defaults, ranker: 'dense' })).toEqual(['--ranker']);
    expect(refusedFlags(auditOptions, 'audit', { ...defaults, concurrency: '9' })).toEqual(['--concurrency']);
    expect(refusedFlags(auditOptions, 'audit', { ...defaults, runId: 'a b' })).toEqual(['--run-id']);
    expect(refusedFlags(auditOptions, 'audit', { ...defaults, restoreCap: '0' })).toEqual(['--restore-cap']);
  });
});
