import type { Command } from 'commander';
import { z } from 'zod';
import { InvalidInputError } from '../../core/errors';

/**
 * The one way a command reads its input. Commander only declares the flags and their help;
 * it hands over strings, `true` for a switch and arrays for a repeatable flag. Each command
 * parses them, with its positional arguments, through one zod schema beside it. Where the
 * client validates the same input (core/messages.ts, core/entry.ts, core/window), the
 * command's schema only turns strings into the shapes the client takes, so each rule stays
 * in one place.
 */

/**
 * Parse a command's raw input: commander's options merged with its positional arguments under
 * their declared names. Throws InvalidInputError whose issues name each offending flag as the
 * user typed it (`--as-of`, `<entryId>`), which `memgate` prints and exits 2 for.
 */
export function parseOptions<S extends z.ZodType>(
  schema: S,
  raw: Record<string, unknown>,
  command: Command,
): z.output<S> {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map(({ path: [head, ...rest], message }) => ({
    path: [...(head === undefined ? [] : [spelling(command, String(head))]), ...rest.map(String)].join('.'),
    message,
  }));
  throw new InvalidInputError(`invalid arguments to memgate ${commandPath(command)}`, issues);
}

/** How the user spells an input: its long flag, or `<name>` for a positional argument. */
function spelling(command: Command, key: string): string {
  const option = command.options.find((o) => o.attributeName() === key);
  if (option) return option.long ?? option.short ?? key;
  return command.registeredArguments.some((a) => a.name() === key) ? `<${key}>` : key;
}

/** `window admit` for that subcommand: the words the user typed after `memgate`. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** A file the user named that cannot be opened or read: InvalidInput naming its flag. */
export function unreadableFile(command: string, flag: string, path: string, err: unknown): InvalidInputError {
  return new InvalidInputError(`invalid arguments to memgate ${command}`, [
    { path: flag, message: `cannot open ${path} (${(err as NodeJS.ErrnoException).code ?? 'failed'})` },
  ]);
}

// Shared pieces for what arrives as a string.

/**
 * An ISO 8601 date-time with its zone (`Z` or `±HH:MM`; seconds and their fraction optional),
 * or a plain date, read as midnight UTC as ECMAScript reads one. Date.parse alone reads far
 * more: `7` as a date of 2001, a time without a zone in the machine's own, and 30 February
 * as 2 March. Years as `toISOString` writes them, six digits and a sign past 9999.
 */
const ISO_DATE_TIME =
  /^([+-]\d{6}|\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-](\d{2}):(\d{2})))?$/;

/** Epoch milliseconds of an ISO date(-time) as above, or undefined for anything else. */
export function isoInstant(s: string): number | undefined {
  const m = ISO_DATE_TIME.exec(s);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second, zoneHour, zoneMinute] = m
    .slice(1)
    .map((part) => (part === undefined ? 0 : Number(part)));
  const leap = year! % 4 === 0 && (year! % 100 !== 0 || year! % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month! - 1];
  if (days === undefined || day! < 1 || day! > days) return undefined;
  if (hour! > 23 || minute! > 59 || second! > 59 || zoneHour! > 23 || zoneMinute! > 59) return undefined;
  const ms = Date.parse(s);
  return Number.isNaN(ms) ? undefined : ms;
}

/** An ISO date-time (or a plain date) as epoch milliseconds; see isoInstant. */
export const isoDateTime = z.string().transform((s, ctx): number => {
  const ms = isoInstant(s);
  if (ms === undefined) {
    ctx.addIssue({
      code: 'custom',
      message: 'must be an ISO date-time with its zone, e.g. 2025-06-01T03:00:00Z, or a date (midnight UTC)',
    });
    return z.NEVER;
  }
  return ms;
});

/** A finite number; ranges are the client's to check. */
export const numeric = z
  .string()
  .refine((s) => s.trim() !== '' && Number.isFinite(Number(s)), 'must be a number')
  .transform(Number);

/** A comma-separated list of non-empty items. */
export const commaList = z
  .string()
  .transform((s) =>
    s
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
  )
  .pipe(z.array(z.string()).min(1, 'must list at least one item'));

/**
 * A repeatable `<key>=<number>` flag (declared variadic, so commander hands over every value)
 * as one record; a later value of a key wins. `form` is how the help spells a pair.
 */
export function keyNumberPairs(form: string) {
  return z.array(z.string()).transform((pairs, ctx) => {
    const values = new Map<string, number>();
    for (const pair of pairs) {
      const at = pair.lastIndexOf('=');
      const value = numeric.safeParse(pair.slice(at + 1));
      if (at <= 0 || !value.success) {
        ctx.addIssue({ code: 'custom', message: `must be ${form}, not ${JSON.stringify(pair)}` });
        return z.NEVER;
      }
      values.set(pair.slice(0, at), value.data);
    }
    // Own properties whatever the key, `__proto__` included: the client judges the keys.
    return Object.fromEntries(values);
  });
}

/** A flag without a value: commander gives `true` when it is there, nothing otherwise. */
export const switchFlag = z.boolean().default(false);

/** Text that must hold JSON, as the parsed value. */
export const jsonText = z.string().transform((text, ctx): unknown => {
  try {
    return JSON.parse(text);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `must hold JSON (${(err as Error).message})` });
    return z.NEVER;
  }
});
