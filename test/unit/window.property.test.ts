import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConflictError, InvalidInputError, NotFoundError } from '../../core/errors';
import {
  admit,
  advanceTurn,
  isPinned,
  lastEviction,
  openWindow,
  pin,
  rehydrate,
  unpin,
  usedTokens,
  validateAdmit,
  validateAdvanceTurn,
  validatePin,
  validateRehydrate,
  validateUnpin,
  RehydrationBlocked,
  type EntryResult,
  type Transition,
  type WindowState,
} from '../../core/window';

const ids = fc.integer({ min: 0, max: 11 }).map((i) => `s${i}`);
const loops = fc.constantFrom('L0', 'L1');
/** Mostly valid values, and now and then a bad one. */
const salience = fc.oneof(
  { weight: 19, arbitrary: fc.double({ min: 0, max: 1, noNaN: true }) },
  { weight: 1, arbitrary: fc.constantFrom(-0.1, 1.5, Number.NaN) },
);
const tokens = fc.oneof(
  { weight: 19, arbitrary: fc.integer({ min: 1, max: 700 }) },
  { weight: 1, arbitrary: fc.constantFrom(-3, 0, 2.5, 5000) },
);
const pinArb = fc.oneof(
  fc.constant({ kind: 'explicit' as const }),
  loops.map((loopId) => ({ kind: 'toolLoop' as const, loopId })),
  fc.integer({ min: 0, max: 12 }).map((expiresAtTurn) => ({ kind: 'untilTurn' as const, expiresAtTurn })),
);

type Op =
  | { op: 'admit'; input: unknown }
  | { op: 'rehydrate'; input: unknown }
  | { op: 'pin'; input: unknown }
  | { op: 'unpin'; input: unknown }
  | { op: 'turn'; input: unknown }
  /** Rehydrate one of the segments evicted so far (which one is known only when it runs). */
  | { op: 'rehydrateEvicted'; input: { pick: number; salience: number } };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .record({
        segmentId: ids,
        tokens,
        salience,
        pin: fc.oneof({ weight: 7, arbitrary: fc.constant(undefined) }, { weight: 3, arbitrary: pinArb }),
      })
      .map(({ pin, ...rest }) => ({ op: 'admit' as const, input: pin ? { ...rest, pin } : rest })),
  },
  {
    weight: 4,
    arbitrary: fc
      .record({ segmentId: ids, salience, tokens: fc.option(tokens, { nil: undefined }) })
      .map(({ tokens, ...rest }) => ({
        op: 'rehydrate' as const,
        input: tokens === undefined ? rest : { ...rest, tokens },
      })),
  },
  {
    weight: 3,
    arbitrary: fc
      .record({ pick: fc.nat(), salience: fc.double({ min: 0.3, max: 1, noNaN: true }) })
      .map((input) => ({ op: 'rehydrateEvicted' as const, input })),
  },
  {
    weight: 2,
    arbitrary: fc.record({ segmentId: ids, pin: pinArb }).map((input) => ({ op: 'pin' as const, input })),
  },
  {
    weight: 2,
    arbitrary: fc
      .oneof(
        ids.map((segmentId) => ({ segmentId })),
        loops.map((loopId) => ({ loopId })),
      )
      .map((input) => ({ op: 'unpin' as const, input })),
  },
  {
    weight: 3,
    arbitrary: fc
      .option(fc.dictionary(ids, salience, { maxKeys: 2 }), { nil: undefined, freq: 3 })
      .map((scores) => ({ op: 'turn' as const, input: scores ? { scores } : {} })),
  },
);

const settingsArb = fc.record({
  capacity: fc.integer({ min: 700, max: 3000 }),
  decay: fc.double({ min: 0.5, max: 1, noNaN: true }),
  rehydrationThreshold: fc.double({ min: 0, max: 0.9, noNaN: true }),
  margin: fc.double({ min: 0, max: 0.4, noNaN: true }),
});

const OPS = {
  admit: [admit, validateAdmit],
  rehydrate: [rehydrate, validateRehydrate],
  pin: [pin, validatePin],
  unpin: [unpin, validateUnpin],
  turn: [advanceTurn, validateAdvanceTurn],
} as const satisfies Record<
  Exclude<Op['op'], 'rehydrateEvicted'>,
  readonly [(s: WindowState, i: unknown) => Transition<unknown>, (s: WindowState, i: unknown) => unknown]
>;

const BAD_INPUT = [InvalidInputError, NotFoundError, ConflictError];

type ResolvedOp = Exclude<Op, { op: 'rehydrateEvicted' }>;

function resolve(state: WindowState, generated: Op): ResolvedOp {
  if (generated.op !== 'rehydrateEvicted') return generated;
  const resident = new Set(state.segments.map((s) => s.id));
  const evicted = [...new Set(state.evictions.map((e) => e.segmentId))].filter((id) => !resident.has(id));
  const segmentId = evicted[generated.input.pick % Math.max(1, evicted.length)] ?? 's0';
  return { op: 'rehydrate', input: { segmentId, salience: generated.input.salience } };
}

/**
 * Applies one operation and checks every part of the window invariant against the state
 * before it (docs/invariants.md, Pins and capacity hold).
 */
function step(
  state: WindowState,
  { op, input }: ResolvedOp,
  everAdmitted: Set<string>,
  seen: Map<string, number>,
): WindowState {
  const count = (what: string) => seen.set(what, (seen.get(what) ?? 0) + 1);
  const [apply, validate] = OPS[op];
  const before = structuredClone(state);
  let validationError: unknown;
  try {
    validate(state, input);
  } catch (err) {
    validationError = err;
  }
  let next: Transition<unknown>;
  try {
    next = apply(state, input);
  } catch (err) {
    // Nothing changed, and the error is typed: bad input as the validator said, or a refusal.
    expect(state).toEqual(before);
    if (validationError) {
      expect(BAD_INPUT.some((c) => err instanceof c)).toBe(true);
      expect((err as Error).constructor).toBe((validationError as Error).constructor);
    } else {
      expect(err).toBeInstanceOf(RehydrationBlocked);
      const blocked = err as RehydrationBlocked;
      blocked.reasons.forEach(count);
      expect(['admit', 'rehydrate']).toContain(op);
      expect(blocked.reasons.length).toBeGreaterThan(0);
      const record = op === 'rehydrate' ? lastEviction(state, blocked.incoming.id) : undefined;
      // Only a displacer that has stayed in the window since can hold the pin that forced the
      // eviction: one that left and came back (its `displaced` list then names whom it pushed
      // out on the way back) took no pin along.
      const displacer =
        record &&
        state.segments.find((s) => s.id === record.displacedBy && s.displaced.includes(record.segmentId));
      if (record?.displacerPinned && displacer && isPinned(displacer)) {
        // evictedByLivePin whenever one of the displacing pins still holds
        const holds = displacer.pins.some((p) =>
          record.displacerPins.some((q) => JSON.stringify(p) === JSON.stringify(q)),
        );
        expect(blocked.reasons.includes('evictedByLivePin')).toBe(holds);
      }
    }
    return state;
  }
  expect(validationError).toBeUndefined();
  const after = next.state;
  expect(usedTokens(after)).toBeLessThanOrEqual(after.settings.capacity);
  // No pinned segment is ever displaced: whatever was pinned before is still resident.
  const residentAfter = new Set(after.segments.map((s) => s.id));
  for (const s of state.segments.filter(isPinned)) expect(residentAfter.has(s.id)).toBe(true);
  // Only admit and rehydrate change who is resident.
  if (op !== 'admit' && op !== 'rehydrate') {
    expect(after.segments.map((s) => s.id)).toEqual(state.segments.map((s) => s.id));
    expect(after.evictions).toEqual(state.evictions);
    return after;
  }
  const result = next.result as EntryResult;
  count(`${op}:${result.mode}`);
  everAdmitted.add(result.segment.id);
  // Every swap is recorded on both sides; the new records are the latest held (the default
  // retention keeps them all here), and every record that goes is counted.
  const added = after.evictions.slice(after.evictions.length - result.evicted.length);
  expect(added).toEqual(result.evicted);
  expect(after.evictions.length + after.evictionsDropped).toBe(
    state.evictions.length + state.evictionsDropped + added.length,
  );
  expect(added.map((e) => e.segmentId)).toEqual(result.segment.displaced);
  for (const e of added) {
    expect(e).toMatchObject({
      turn: state.turn,
      displacedBy: result.segment.id,
      displacerPinned: result.segment.pins.length > 0,
    });
    expect(residentAfter.has(e.segmentId)).toBe(false);
    expect(everAdmitted.has(e.segmentId)).toBe(true);
  }
  if (op === 'rehydrate') {
    const { settings } = state;
    expect(result.segment.salience).toBeGreaterThanOrEqual(settings.rehydrationThreshold);
    if (result.mode === 'swap') {
      for (const e of added) {
        expect(result.segment.salience - e.salience).toBeGreaterThanOrEqual(settings.margin - 1e-9);
      }
    } else {
      expect(added).toEqual([]);
    }
  }
  return after;
}

describe('context window properties (fast-check)', () => {
  it('never over capacity, never displaces a pinned segment, refuses only with RehydrationBlocked, records both sides', () => {
    const seen = new Map<string, number>();
    fc.assert(
      fc.property(
        settingsArb,
        fc.array(opArb, { minLength: 20, maxLength: 80, size: 'max' }),
        (settings, ops) => {
          let state = openWindow(settings);
          const everAdmitted = new Set<string>();
          for (const op of ops) state = step(state, resolve(state, op), everAdmitted, seen);
        },
      ),
      { numRuns: 400 },
    );
    // The sequences reach every outcome, so the checks above are not vacuous.
    for (const outcome of [
      'admit:slack',
      'admit:evict',
      'rehydrate:slack',
      'rehydrate:neverAdmitted',
      'rehydrate:swap',
      'belowThreshold',
      'evictedByLivePin',
      'neverAdmittedAtCapacity',
      'wouldDisplacePinned',
      'marginNotMet',
      'noUnpinnedRoom',
    ]) {
      expect(seen.get(outcome) ?? 0, outcome).toBeGreaterThan(0);
    }
  });

  it('the same check catches a displaced pin when the guard is off', () => {
    const run = fc.check(
      fc.property(
        settingsArb,
        fc.array(opArb, { minLength: 20, maxLength: 80, size: 'max' }),
        (settings, ops) => {
          let state = openWindow({ ...settings, pinGuard: false });
          for (const generated of ops) {
            const { op, input } = resolve(state, generated);
            const pinned = state.segments.filter(isPinned).map((s) => s.id);
            try {
              state = OPS[op][0](state, input).state;
            } catch {
              continue;
            }
            const resident = new Set(state.segments.map((s) => s.id));
            if (pinned.some((id) => !resident.has(id))) return false;
          }
          return true;
        },
      ),
      { numRuns: 400 },
    );
    expect(run.failed).toBe(true);
  });
});
