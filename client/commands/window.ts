import type { Command } from 'commander';
import { InvalidInputError } from '../../core/errors';
import { describePin, type Pin, type WindowView } from '../../core/window';
import { WindowClient } from '../window';
import { config, printJson, withClient } from './context';

function number(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidInputError(`${flag} must be a number`);
    return n;
  };
}

/** `explicit`, `loop:<loopId>` or `until:<turn>`. */
export function parsePin(spec: string): Pin {
  if (spec === 'explicit') return { kind: 'explicit' };
  const loop = /^loop:(.+)$/.exec(spec);
  if (loop) return { kind: 'toolLoop', loopId: loop[1]! };
  const until = /^until:(\d+)$/.exec(spec);
  if (until) return { kind: 'untilTurn', expiresAtTurn: Number(until[1]) };
  throw new InvalidInputError('--pin must be explicit, loop:<loopId> or until:<turn>');
}

function collectScore(value: string, scores: Record<string, number>): Record<string, number> {
  const at = value.lastIndexOf('=');
  const salience = Number(value.slice(at + 1));
  if (at <= 0 || value.slice(at + 1).trim() === '' || !Number.isFinite(salience)) {
    throw new InvalidInputError('--score must be <segment>=<salience>');
  }
  return { ...scores, [value.slice(0, at)]: salience };
}

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
    .option('--tokens <n>', 'token capacity', number('--tokens'))
    .option('--decay <x>', 'per-turn salience multiplier', number('--decay'))
    .option('--threshold <x>', 'least salience to rehydrate', number('--threshold'))
    .option('--margin <x>', 'how much a rehydration must beat what it displaces', number('--margin'))
    .action(async (session: string, o) => {
      const view = await windows((w) =>
        w.open(session, {
          ...(o.tokens !== undefined && { capacity: o.tokens }),
          ...(o.decay !== undefined && { decay: o.decay }),
          ...(o.threshold !== undefined && { rehydrationThreshold: o.threshold }),
          ...(o.margin !== undefined && { margin: o.margin }),
        }),
      );
      console.log(renderWindow(session, view));
    });

  window
    .command('show')
    .description('the segments in the window and the eviction records it keeps, as tables')
    .argument('<session>', 'session id')
    .option('--json', 'print the window as JSON')
    .action(async (session: string, o) => {
      const view = await windows((w) => w.show(session));
      if (o.json) printJson(view);
      else console.log(renderWindow(session, view));
    });

  window
    .command('admit')
    .description('take a new segment in; the lowest-salience unpinned segments make room')
    .argument('<session>', 'session id')
    .argument('<segment>', 'segment id')
    .requiredOption('--tokens <n>', 'size in tokens', number('--tokens'))
    .requiredOption('--salience <s>', 'salience in [0, 1]', number('--salience'))
    .option('--label <text>', 'what the segment holds')
    .option('--pin <spec>', 'explicit, loop:<loopId> or until:<turn>', parsePin)
    .action(async (session: string, segmentId: string, o) => {
      printJson(
        await windows((w) =>
          w.admit(session, {
            segmentId,
            tokens: o.tokens,
            salience: o.salience,
            ...(o.label !== undefined && { label: o.label }),
            ...(o.pin && { pin: o.pin }),
          }),
        ),
      );
    });

  window
    .command('rehydrate')
    .description('bring an evicted segment back, or say why not (RehydrationBlocked)')
    .argument('<session>', 'session id')
    .argument('<segment>', 'segment id')
    .requiredOption('--salience <s>', 'its salience now, in [0, 1]', number('--salience'))
    .option('--tokens <n>', 'size, for a segment this window never held', number('--tokens'))
    .option('--label <text>', 'what the segment holds')
    .action(async (session: string, segmentId: string, o) => {
      printJson(
        await windows((w) =>
          w.rehydrate(session, {
            segmentId,
            salience: o.salience,
            ...(o.tokens !== undefined && { tokens: o.tokens }),
            ...(o.label !== undefined && { label: o.label }),
          }),
        ),
      );
    });

  window
    .command('pin')
    .description('pin a resident segment')
    .argument('<session>', 'session id')
    .argument('<segment>', 'segment id')
    .requiredOption('--pin <spec>', 'explicit, loop:<loopId> or until:<turn>', parsePin)
    .action(async (session: string, segmentId: string, o) => {
      printJson(await windows((w) => w.pin(session, { segmentId, pin: o.pin })));
    });

  window
    .command('unpin')
    .description("release a segment's explicit and turn pins, or end a tool loop (--loop)")
    .argument('<session>', 'session id')
    .argument('[segment]', 'segment id')
    .option('--loop <loopId>', 'the tool loop that ended')
    .action(async (session: string, segmentId: string | undefined, o) => {
      if ((segmentId === undefined) === (o.loop === undefined)) {
        throw new InvalidInputError('give either a segment id or --loop <loopId>');
      }
      printJson(
        await windows((w) => w.unpin(session, segmentId !== undefined ? { segmentId } : { loopId: o.loop })),
      );
    });

  window
    .command('turn')
    .description('advance one turn: scored segments take their score, the rest decay')
    .argument('<session>', 'session id')
    .option('--score <segment=salience>', "this turn's salience of a segment (repeatable)", collectScore, {})
    .action(async (session: string, o) => {
      printJson(await windows((w) => w.advanceTurn(session, { scores: o.score })));
    });

  window
    .command('close')
    .description('end the session: prints its summary; later calls on it are refused (Conflict)')
    .argument('<session>', 'session id')
    .action(async (session: string) => {
      printJson(await windows((w) => w.close(session)));
    });
}
