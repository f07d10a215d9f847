import { z } from 'zod';
import { encodedBytes, wellFormedString, zodIssues } from '../entry';
import { InvalidInputError } from '../errors';

/**
 * A token-budgeted context window (docs/windows.md, Context windows). Plain JSON data, so a workflow
 * can hold it, return it from a Query and carry it across continue-as-new.
 */

/**
 * Why a segment must stay. A segment is pinned while it holds any pin; an explicit pin lasts
 * until unpinned, a tool-loop pin until its loop ends, a turn pin until `expiresAtTurn`.
 */
export type Pin =
  { kind: 'explicit' } | { kind: 'toolLoop'; loopId: string } | { kind: 'untilTurn'; expiresAtTurn: number };

export interface Segment {
  id: string;
  tokens: number;
  /** Current salience: set on admission or by a turn's score, decayed once per turn otherwise. */
  salience: number;
  label?: string;
  pins: Pin[];
  admittedAtTurn: number;
  via: 'admit' | 'rehydrate';
  /** The displacer's side of every swap: the segments this one pushed out on entry. */
  displaced: string[];
}

/** The evicted side of a swap. A segment that was never admitted has no record. */
export interface EvictionRecord {
  segmentId: string;
  tokens: number;
  /** Its salience when it was pushed out. */
  salience: number;
  label?: string;
  turn: number;
  displacedBy: string;
  displacerPinned: boolean;
  /** The displacer's pins at that moment; while one of them holds, the segment stays out. */
  displacerPins: Pin[];
}

export interface WindowSettings {
  capacity: number;
  /** Salience multiplier applied to every segment at each turn, in (0, 1]. */
  decay: number;
  /** A rehydration needs at least this salience. */
  rehydrationThreshold: number;
  /** At capacity, the incoming salience must exceed every displaced segment's by this much. */
  margin: number;
  /** Refuse rehydrations that would displace a pinned segment. Off only to show the failure it prevents. */
  pinGuard: boolean;
  /**
   * How many evicted segments the window remembers beyond those a live pin keeps out (see
   * retainEvictions). Lowered only by tests, to reach the bound in a few hundred operations.
   */
  retainedEvictions: number;
}

export interface WindowState {
  settings: WindowSettings;
  turn: number;
  /** Resident segments in admission order. */
  segments: Segment[];
  /** The eviction records that can still decide something, oldest first (see retainEvictions). */
  evictions: EvictionRecord[];
  /** Records no longer held; with `evictions.length`, every eviction over the session. */
  evictionsDropped: number;
}

export interface SegmentRef {
  id: string;
  tokens: number;
  salience: number;
  label?: string;
}

export interface PinRef {
  segmentId: string;
  pin: Pin;
}

export const segmentIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, 'an identifier of 1-128 of A-Z a-z 0-9 . _ : -');
export const sessionIdSchema = segmentIdSchema;
export const tokensSchema = z.number().int('must be a whole number of tokens').positive('must be positive');
export const salienceSchema = z.number().min(0, 'must be in [0, 1]').max(1, 'must be in [0, 1]');
const turnSchema = z.number().int().min(0);
const labelSchema = wellFormedString.trim().min(1).max(200);

export const pinSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('explicit') }),
  z.strictObject({ kind: z.literal('toolLoop'), loopId: segmentIdSchema }),
  z.strictObject({ kind: z.literal('untilTurn'), expiresAtTurn: turnSchema }),
]);

/**
 * A window's state travels whole through every continue-as-new, under Temporal's 2 MB payload
 * limit, so it is bounded in every dimension, not by tokens alone
 * (docs/invariants.md, Window state is bounded):
 * - at most this many resident segments: at the bound an entry displaces, as at capacity;
 * - a capacity of at most this many tokens (the largest model windows of the day, with room);
 * - at most this many pins per segment, and at most 1,000 retained eviction records;
 * - a state past this many bytes refuses new entries and pins; one more update stays under
 *   2 MB (test/unit/window-limits.test.ts).
 */
export const MAX_WINDOW_SEGMENTS = 1_000;
export const MAX_WINDOW_CAPACITY = 2_000_000;
export const MAX_PINS_PER_SEGMENT = 3;
export const MAX_WINDOW_STATE_BYTES = 768 * 1024;

export const windowSettingsSchema = z.strictObject({
  capacity: tokensSchema.max(MAX_WINDOW_CAPACITY, `must be at most ${MAX_WINDOW_CAPACITY} tokens`),
  decay: z.number().gt(0, 'must be in (0, 1]').max(1, 'must be in (0, 1]'),
  rehydrationThreshold: salienceSchema,
  margin: salienceSchema,
  pinGuard: z.boolean().default(true),
  retainedEvictions: z.number().int().min(0).max(1_000).default(1_000),
});
export type WindowSettingsInput = z.input<typeof windowSettingsSchema>;

const segmentSchema = z.looseObject({
  id: segmentIdSchema,
  tokens: tokensSchema,
  salience: salienceSchema,
  label: z.string().optional(),
  pins: z.array(pinSchema).max(MAX_PINS_PER_SEGMENT),
  admittedAtTurn: turnSchema,
  via: z.enum(['admit', 'rehydrate']),
  displaced: z.array(segmentIdSchema),
});
const evictionRecordSchema = z.looseObject({
  segmentId: segmentIdSchema,
  tokens: tokensSchema,
  salience: salienceSchema,
  label: z.string().optional(),
  turn: turnSchema,
  displacedBy: segmentIdSchema,
  displacerPinned: z.boolean(),
  displacerPins: z.array(pinSchema),
});

/**
 * A window's state as a run carries it to the next (continue-as-new), checked as any other
 * workflow input is: the workflow takes its input from whoever starts it. Loose, so that a
 * field added to the state later is carried, not dropped, by a run that has this schema.
 */
export const windowStateSchema = z.looseObject({
  settings: windowSettingsSchema,
  turn: turnSchema,
  segments: z.array(segmentSchema).max(MAX_WINDOW_SEGMENTS),
  evictions: z.array(evictionRecordSchema),
  evictionsDropped: z.number().int().min(0),
}) satisfies z.ZodType<WindowState, unknown>;

export const admitSchema = z.strictObject({
  segmentId: segmentIdSchema,
  tokens: tokensSchema,
  salience: salienceSchema,
  label: labelSchema.optional(),
  pin: pinSchema.optional(),
});
export type AdmitInput = z.input<typeof admitSchema>;

export const rehydrateSchema = z.strictObject({
  segmentId: segmentIdSchema,
  /** Its salience now, for the turn that asks for it. */
  salience: salienceSchema,
  /** Required only for a segment this window never held. */
  tokens: tokensSchema.optional(),
  label: labelSchema.optional(),
});
export type RehydrateInput = z.input<typeof rehydrateSchema>;

export const pinRequestSchema = z.strictObject({ segmentId: segmentIdSchema, pin: pinSchema });
export type PinInput = z.input<typeof pinRequestSchema>;

/** Release a segment's explicit and turn pins, or end a tool loop and release all of its pins. */
export const unpinSchema = z.union([
  z.strictObject({ segmentId: segmentIdSchema }),
  z.strictObject({ loopId: segmentIdSchema }),
]);
export type UnpinInput = z.input<typeof unpinSchema>;

export const advanceTurnSchema = z.strictObject({
  /** This turn's salience for some resident segments; the rest decay. */
  scores: z.record(segmentIdSchema, salienceSchema).default({}),
});
export type AdvanceTurnInput = z.input<typeof advanceTurnSchema>;

export function parseWith<S extends z.ZodType>(schema: S, input: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) throw new InvalidInputError(`invalid ${what}`, zodIssues(parsed.error));
  return parsed.data;
}

export function isPinned(segment: Segment): boolean {
  return segment.pins.length > 0;
}

export function samePin(a: Pin, b: Pin): boolean {
  switch (a.kind) {
    case 'explicit':
      return b.kind === 'explicit';
    case 'toolLoop':
      return b.kind === 'toolLoop' && b.loopId === a.loopId;
    case 'untilTurn':
      return b.kind === 'untilTurn' && b.expiresAtTurn === a.expiresAtTurn;
  }
}

export function describePin(pin: Pin): string {
  switch (pin.kind) {
    case 'explicit':
      return 'explicit';
    case 'toolLoop':
      return `toolLoop:${pin.loopId}`;
    case 'untilTurn':
      return `untilTurn:${pin.expiresAtTurn}`;
  }
}

export function usedTokens(state: WindowState): number {
  return state.segments.reduce((sum, s) => sum + s.tokens, 0);
}

export function segmentRef(s: SegmentRef): SegmentRef {
  return {
    id: s.id,
    tokens: s.tokens,
    salience: s.salience,
    ...(s.label !== undefined && { label: s.label }),
  };
}

/**
 * Whether `segment` is the displacer of `record` and has stayed in the window since it pushed
 * that segment out (its `displaced` list is rewritten on every entry): only then can its pins
 * be the ones that forced the eviction, since a segment that leaves the window takes no pin along.
 */
export function isStandingDisplacer(segment: Segment, record: EvictionRecord): boolean {
  return segment.id === record.displacedBy && segment.displaced.includes(record.segmentId);
}

/** The latest eviction of a segment that is not resident now, if it was ever evicted. */
export function lastEviction(state: WindowState, segmentId: string): EvictionRecord | undefined {
  for (let i = state.evictions.length - 1; i >= 0; i--) {
    if (state.evictions[i]!.segmentId === segmentId) return state.evictions[i];
  }
  return undefined;
}

/** The state's JSON beside its segments and records: keys, settings, turn and counts. */
const STATE_OVERHEAD = 1_024;

/**
 * Encoded bytes of a segment or record, each measured once: they are never changed in place
 * (a transition makes new ones), so a window measures only what an update added.
 */
const measured = new WeakMap<object, number>();
function bytesOf(item: object): number {
  let bytes = measured.get(item);
  if (bytes === undefined) {
    bytes = encodedBytes(item);
    measured.set(item, bytes);
  }
  return bytes;
}

/**
 * An upper bound on the encoded bytes of a window's state, without encoding it whole: a
 * window checks it on every entry and pin, and encoding a state near the bound takes
 * milliseconds. Each segment and record counts as it encodes, plus its comma.
 */
export function stateBytesBound(state: WindowState): number {
  let bytes = STATE_OVERHEAD;
  for (const s of state.segments) bytes += bytesOf(s) + 1;
  for (const e of state.evictions) bytes += bytesOf(e) + 1;
  return bytes;
}
