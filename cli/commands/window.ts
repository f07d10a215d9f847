import type { Command } from 'commander';
import { z } from 'zod';
import { describePin, type Pin, type WindowView } from '../../core/window';
import { WindowClient } from '../../client/window';
import { config, printJson, withClient } from './context';
import { keyNumberPairs, numeric, parseOptions, switchFlag } from './options';

/** `explicit`, `loop:<loopId>` or `until:<turn>` as the pin it names; the client judges ids and turns. */
export const pinSpec = z.string().transform((spec, ctx): Pin => {
  if (spec === 'explicit') return { kind: 'explicit' };
  const loop = /^loop:(.+)$/.exec(spec);
  if (loop) return { kind: 'toolLoop', loopId: loop[1]! };
  const until = /^until:(\d+)$/.exec(spec);
  if (until) return { kind: 'untilTurn', expiresAtTurn: Number(until[1]) };
  ctx.addIssue({ code: 'custom', message: 'must be explicit, loop:<loopId> or until:<turn>' });
  return z.NEVER;
});

export const openOptions = z
  .object({
    session: z.string(),
    tokens: numeric.optional(),
    decay: numeric.optional(),
    threshold: numeric.optional(),
    margin: numeric.optional(),
  })
  .transform((o) => ({
    session: o.session,
    // Only the settings given: the rest come from the configuration.
    overrides: {
      ...(o.tokens !== undefined && { capacity: o.tokens }),
      ...(o.decay !== undefined && { decay: o.decay }),
      ...(o.threshold !== undefined && { rehydrationThreshold: o.threshold }),
      ...(o.margin !== undefined && { margin: o.margin }),
    },
  }));

export const showOptions = z.object({ session: z.string(), json: switchFlag });

export const admitOptions = z
  .object({
    session: z.string(),
    segment: z.string(),
    tokens: numeric,
    salience: numeric,
    label: z.string().optional(),
    pin: pinSpec.optional(),
  })
  .transform(({ session, segment, ...o }) => ({
    session,
    input: {
      segmentId: segment,
      tokens: o.tokens,
      salience: o.salience,
      ...(o.label !== undefined && { label: o.label }),
      ...(o.pin && { pin: o.pin }),
    },
  }));

export const rehydrateOptions = z
  .object({
    session: z.string(),
    segment: z.string(),
    salience: numeric,
    tokens: numeric.optional(),
    label: z.string().optional(),
  })
  .transform(({ session, segment, ...o }) => ({
    session,
    input: {
      segmentId: segment,
      salience: o.salience,
      ...(o.tokens !== undefined && { tokens: o.tokens }),
      ...(o.label !== undefined && { label: o.label }),
    },
  }));

export const pinOptions = z
  .object({ session: z.string(), segment: z.string(), pin: pinSpec })
  .transform((o) => ({ session: o.session, input: { segmentId: o.segment, pin: o.pin } }));

export const unpinOptions = z
  .object({ session: z.string(), segment: z.string().optional(), loop: z.string().optional() })
  .refine((o) => (o.segment === undefined) !== (o.loop === undefined), {
    path: ['loop'],
    error: 'give either a segment id or --loop <loopId>',
  })
  .transform((o) => ({
    session: o.session,
    input: o.segment !== undefined ? { segmentId: o.segment } : { loopId: o.loop! },
  }));

export const turnOptions = z
  .object({ session: z.string(), score: keyNumberPairs('<segment>=<salience>').default({}) })
  .transform((o) => ({ session: o.session, input: { scores: o.score } }));

export const closeOptions = z.object({ session: z.string() });

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows]
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** The window and its eviction records, as `memgate window show` prints them. */
export function renderWindow(sessionId: string, view: WindowView): string {
  const { settings } = view;
  const head =
    `session ${sessionId}  turn ${view.turn}  ${view.used}/${settings.capacity} tokens ` +
    `(${(view.occupancy * 100).toFixed(1)}%)  decay ${settings.decay}  ` +
    `threshold ${settings.rehydrationThreshold}  margin ${settings.margin}` +
    (settings.pinGuard ? '' : '  PIN GUARD OFF');
  const segments = [...view.segments].sort((a, b) => b.salience - a.salience);
  const resident = table(
    ['SEGMENT', 'TOKENS', 'SALIENCE', 'PINS', 'SINCE', 'VIA', 'LABEL'],
    segments.map((s) => [
      s.id,
      String(s.tokens),
      s.salience.toFixed(3),
      s.pins.map(describePin).join(',') || '-',
      String(s.admittedAtTurn),
      s.via,
      s.label ?? '',
    ]),
  );
  const evictions = view.evictions.length
    ? table(
        ['EVICTED', 'TOKENS', 'SALIENCE', 'TURN', 'DISPLACED BY', 'DISPLACER PINNED', 'LABEL'],
        view.evictions.map((e) => [
          e.segmentId,
          String(e.tokens),
          e.salience.toFixed(3),
          String(e.turn),
          e.displacedBy,
          e.displacerPinned ? `yes (${e.displacerPins.map(describePin).join(',')})` : 'no',
          e.label ?? '',
        ]),
      )
    : 'no eviction records';
  // Records that can no longer decide anything are not kept; say how many, never hide them.
  const dropped = view.evictionsDropped
    ? `\n${view.evictionsDropped} earlier eviction records not kept (segment back in the window, ` +
      `evicted again, or beyond the ${settings.retainedEvictions} most recent)`
    : '';
  return `${head}\n\n${resident}\n\n${evictions}${dropped}`;
}

function windows<T>(fn: (w: WindowClient) => Promise<T>): Promise<T> {
  return withClient((c) => fn(new WindowClient(c.temporal, config())));
}

export function registerWindowCommands(program: Command): void {
  const window = program
    .command('window')
    .description('context windows of agent sessions: admit, rehydrate, pin, turn, show, close');

  window
    .command('open')
    .description('open a session window (defaults from MEMGATE_WINDOW_* and MEMGATE_REHYDRATION_*)')
    .argument('<session>', 'session id')
    .option('--tokens <n>', 'token capacity')
    .option('--decay <x>', 'per-turn salience multiplier')
    .option('--threshold <x>', 'least salience to rehydrate')
    .option('--margin <x>', 'how much a rehydration must beat what it displaces')
    .action(async (session: string, raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(openOptions, { ...raw, session }, command);
      const view = await windows((w) => w.open(o.session, o.overrides));
      console.log(renderWindow(o.session, view));
    });

  window
    .command('show')
    .description('the segments in the window and the eviction records it keeps, as tables')
    .argument('<session>', 'session id')
    .option('--json', 'print the window as JSON')
    .action(async (session: string, raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(showOptions, { ...raw, session }, command);
      const view = await windows((w) => w.show(o.session));
      if (o.json) printJson(view);
      else console.log(renderWindow(o.session, view));
    });

  window
    .command('admit')
    .description('take a new segment in; the lowest-salience unpinned segments make room')
    .argument('<session>', 'session id')
    .argument('<segment>', 'segment id')
    .requiredOption('--tokens <n>', 'size in tokens')
    .requiredOption('--salience <s>', 'salience in [0, 1]')
    .option('--label <text>', 'what the segment holds')
    .option('--pin <spec>', 'explicit, loop:<loopId> or until:<turn>')
    .action(async (session: string, segment: string, raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(admitOptions, { ...raw, session, segment }, command);
      printJson(await windows((w) => w.admit(o.session, o.input)));
    });

  window
    .command('rehydrate')
    .description('bring an evicted segment back, or say why not (RehydrationBlocked)')
    .argument('<session>', 'session id')
    .argument('<segment>', 'segment id')
    .requiredOption('--salience <s>', 'its salience now, in [0, 1]')
    .option('--tokens <n>', 'size, for a segment this window never held')
    .option('--label <text>', 'what the segment holds')
    .action(async (session: string, segment: string, raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(rehydrateOptions, { ...raw, session, segment }, command);
      printJson(await windows((w) => w.rehydrate(o.session, o.input)));
    });

  window
    .command('pin')
    .description('pin a resident segment')
    .argument('<session>', 'session id')
    .argument('<segment>', 'segment id')
    .requiredOption('--pin <spec>', 'explicit, loop:<loopId> or until:<turn>')
    .action(async (session: string, segment: string, raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(pinOptions, { ...raw, session, segment }, command);
      printJson(await windows((w) => w.pin(o.session, o.input)));
    });

  window
    .command('unpin')
    .description("release a segment's explicit and turn pins, or end a tool loop (--loop)")
    .argument('<session>', 'session id')
    .argument('[segment]', 'segment id')
    .option('--loop <loopId>', 'the tool loop that ended')
    .action(
      async (
        session: string,
        segment: string | undefined,
        raw: Record<string, unknown>,
        command: Command,
      ) => {
        const o = parseOptions(unpinOptions, { ...raw, session, segment }, command);
        printJson(await windows((w) => w.unpin(o.session, o.input)));
      },
    );

  window
    .command('turn')
    .description('advance one turn: scored segments take their score, the rest decay')
    .argument('<session>', 'session id')
    .option('--score <segment=salience...>', "this turn's salience of a segment (repeatable)")
    .action(async (session: string, raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(turnOptions, { ...raw, session }, command);
      printJson(await windows((w) => w.advanceTurn(o.session, o.input)));
    });

  window
    .command('close')
    .description('end the session: prints its summary; later calls on it are refused (Conflict)')
    .argument('<session>', 'session id')
    .action(async (session: string, raw: Record<string, unknown>, command: Command) => {
      const o = parseOptions(closeOptions, { ...raw, session }, command);
      printJson(await windows((w) => w.close(o.session)));
    });
}
