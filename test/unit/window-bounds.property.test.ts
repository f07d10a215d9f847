import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemgateError } from '../../core/errors';
import {
  admit,
  advanceTurn,
  lastEviction,
  openWindow,
  pin,
  rehydrate,
  unpin,
  RehydrationBlocked,
  type EntryResult,
  type EvictionRecord,
  type Pin,
  type Transition,
  type WindowSettingsInput,
  type WindowState,
} from '../../core/window';

/**
 * The window keeps only the eviction records that can still decide something (retainEvictions).
 * Each session here runs twice in lockstep: bounded, and a reference that sees every record
 * ever made, as the window did before the bound. They must decide alike, except for a segment
 * whose record the bounded window shed: that one is treated exactly as a segment it never
 * held, and no pin could ever have kept it out.
 */

const OPS = { admit, rehydrate, pin, unpin, turn: advanceTurn } satisfies Record<
  string,
  (s: WindowState, input: unknown) => Transition<unknown>
>;
type OpName = keyof typeof OPS;

/** A resolved operation and the segments it names. */
interface Step {
  op: OpName;
  input: unknown;
  names: string[];
}

/** A resident segment by position, or an id that may be resident, evicted, shed or unknown. */
type Target = { id: string } | { pick: number };
/** Pins are generated relative to the turn, so they stay live however long the session runs. */
type PinSpec = 'explicit' | 'L0' | 'L1' | number;

type Generated =
  | { op: 'admit'; id: string | 'fresh'; tokens: number; salience: number; pin?: PinSpec }
  | { op: 'rehydrate'; id: string; salience: number; tokens?: number }
  /** Rehydrate a segment the reference holds a record of (so now and then one the bounded window shed). */
  | { op: 'rehydrateEvicted'; pick: number; salience: number }
  | { op: 'pin'; target: Target; pin: PinSpec }
  | { op: 'unpin'; target: Target | { loopId: string } }
  | { op: 'turn'; scores: Record<string, number> };

const ids = fc.integer({ min: 0, max: 29 }).map((i) => `s${i}`);
const salience = fc.double({ min: 0, max: 1, noNaN: true });
const tokens = fc.integer({ min: 1, max: 700 });
const pinSpec: fc.Arbitrary<PinSpec> = fc.oneof(
  fc.constantFrom<PinSpec>('explicit', 'L0', 'L1'),
  fc.integer({ min: 1, max: 4 }),
);
const target: fc.Arbitrary<Target> = fc.oneof(
  ids.map((id) => ({ id })),
  fc.nat().map((pick) => ({ pick })),
);

const opArb: fc.Arbitrary<Generated> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record(
      {
        op: fc.constant('admit' as const),
        id: fc.oneof(ids, fc.constant('fresh' as const)),
        tokens,
        salience,
        pin: fc.oneof({ weight: 7, arbitrary: fc.constant(undefined) }, { weight: 3, arbitrary: pinSpec }),
      },
      { requiredKeys: ['op', 'id', 'tokens', 'salience'] },
    ),
  },
  {
    weight: 2,
    arbitrary: fc.record(
      { op: fc.constant('rehydrate' as const), id: ids, salience, tokens },
      { requiredKeys: ['op', 'id', 'salience'] },
    ),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('rehydrateEvicted' as const),
      pick: fc.nat(),
      salience: fc.double({ min: 0.3, max: 1, noNaN: true }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('pin' as const), target, pin: pinSpec }) },
  {
    // Frequent, and mostly of resident segments, so pins do not pile up over a long session.
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('unpin' as const),
      target: fc.oneof(
        target,
        fc.nat().map((pick) => ({ pick })),
        fc.constantFrom('L0', 'L1').map((loopId) => ({ loopId })),
      ),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('turn' as const),
      scores: fc.dictionary(ids, salience, { maxKeys: 2 }),
    }),
  },
);

/** For long sessions: half the operations bring in new content, as an agent's turns do. */
const longSessionOpArb: fc.Arbitrary<Generated> = fc.oneof(
  opArb,
  fc.record({ op: fc.constant('admit' as const), id: fc.constant('fresh' as const), tokens, salience }),
);

const settingsArb = fc.record({
  capacity: fc.integer({ min: 700, max: 3000 }),
  decay: fc.double({ min: 0.5, max: 1, noNaN: true }),
  rehydrationThreshold: fc.double({ min: 0, max: 0.9, noNaN: true }),
  margin: fc.double({ min: 0, max: 0.4, noNaN: true }),
  retainedEvictions: fc.integer({ min: 0, max: 6 }),
});

function toPin(spec: PinSpec, turn: number): Pin {
  if (spec === 'explicit') return { kind: 'explicit' };
  if (typeof spec === 'number') return { kind: 'untilTurn', expiresAtTurn: turn + spec };
  return { kind: 'toolLoop', loopId: spec };
}

/** Segments out of the window that `state` holds a record of, oldest eviction first. */
function outOfWindow(state: WindowState): string[] {
  const resident = new Set(state.segments.map((s) => s.id));
  return [...new Set(state.evictions.map((e) => e.segmentId))].filter((id) => !resident.has(id));
}

/** Resolves a generated operation against the reference (it sees every record). */
function resolve(reference: WindowState, g: Generated, freshId: () => string): Step {
  const segmentOf = (t: Target): string =>
    'id' in t ? t.id : (reference.segments[t.pick % Math.max(1, reference.segments.length)]?.id ?? 's0');
  switch (g.op) {
    case 'admit': {
      const segmentId = g.id === 'fresh' ? freshId() : g.id;
      const input = { segmentId, tokens: g.tokens, salience: g.salience };
      return {
        op: 'admit',
        input: g.pin === undefined ? input : { ...input, pin: toPin(g.pin, reference.turn) },
        names: [segmentId],
      };
    }
    case 'rehydrate': {
      const input = { segmentId: g.id, salience: g.salience };
      return { op: 'rehydrate', input: g.tokens ? { ...input, tokens: g.tokens } : input, names: [g.id] };
    }
    case 'rehydrateEvicted': {
      const out = outOfWindow(reference);
      const segmentId = out[g.pick % Math.max(1, out.length)] ?? 's0';
      return { op: 'rehydrate', input: { segmentId, salience: g.salience }, names: [segmentId] };
    }
    case 'pin': {
      const segmentId = segmentOf(g.target);
      return {
        op: 'pin',
        input: { segmentId, pin: toPin(g.pin, reference.turn) },
        names: [segmentId],
      };
    }
    case 'unpin': {
      if ('loopId' in g.target) return { op: 'unpin', input: g.target, names: [] };
      const segmentId = segmentOf(g.target);
      return { op: 'unpin', input: { segmentId }, names: [segmentId] };
    }
    case 'turn':
      return { op: 'turn', input: { scores: g.scores }, names: Object.keys(g.scores) };
  }
}

type Outcome = { ok: unknown; next: WindowState } | { error: string; details: Record<string, unknown> };

function attempt(state: WindowState, step: Step): Outcome {
  try {
    const t = OPS[step.op](state, step.input);
    return { ok: t.result, next: t.state };
  } catch (err) {
    if (!(err instanceof MemgateError)) throw err;
    return { error: err.type, details: err.details };
  }
}

/** What a caller sees of an outcome. */
function decision(o: Outcome) {
  return 'ok' in o ? { ok: o.ok } : o;
}

function blockedByLivePin(o: Outcome): boolean {
  return (
    'error' in o &&
    o.error === 'RehydrationBlocked' &&
    (o.details.reasons as string[]).includes('evictedByLivePin')
  );
}

/** The bounded window's size limit: a record per resident segment's displaced entry, plus the retained. */
function recordBound(state: WindowState): number {
  return state.settings.retainedEvictions + state.segments.reduce((n, s) => n + s.displaced.length, 0);
}

interface Tally {
  compared: number;
  shedNamed: number;
  shedAdmitted: number;
  livePinRefusals: number;
  rehydrated: number;
  maxDropped: number;
  maxHeld: number;
}

function newTally(): Tally {
  return {
    compared: 0,
    shedNamed: 0,
    shedAdmitted: 0,
    livePinRefusals: 0,
    rehydrated: 0,
    maxDropped: 0,
    maxHeld: 0,
  };
}

/** Plays one session bounded and unbounded, checking every step; returns the reference's records. */
function playLockstep(settings: WindowSettingsInput, ops: Generated[], tally: Tally): EvictionRecord[] {
  let bounded = openWindow(settings);
  let reference = bounded;
  // Every record ever made, oldest first: the reference decides with all of them.
  let log: EvictionRecord[] = [];
  let fresh = 0;
  for (const generated of ops) {
    const full = { ...reference, evictions: log };
    const step = resolve(full, generated, () => `f${fresh++}`);
    const unboundedOutcome = attempt(full, step);
    const shed = step.names.filter(
      (id) => lastEviction(full, id) && !full.segments.some((s) => s.id === id) && !lastEviction(bounded, id),
    );
    const boundedOutcome = attempt(bounded, step);
    if (shed.length) {
      // Not a case the bound keeps: the segment is as if never held, and no pin needed its record.
      tally.shedNamed++;
      const forgotten = { ...full, evictions: log.filter((r) => !shed.includes(r.segmentId)) };
      expect(decision(boundedOutcome)).toEqual(decision(attempt(forgotten, step)));
      expect(blockedByLivePin(unboundedOutcome)).toBe(false);
      if (step.op === 'admit' && 'ok' in boundedOutcome) tally.shedAdmitted++;
      // Neither run takes it, so both go on from the same segments.
      continue;
    }
    tally.compared++;
    expect(decision(boundedOutcome)).toEqual(decision(unboundedOutcome));
    if (blockedByLivePin(boundedOutcome)) tally.livePinRefusals++;
    if ('next' in boundedOutcome && 'next' in unboundedOutcome) {
      if (step.op === 'rehydrate') tally.rehydrated++;
      bounded = boundedOutcome.next;
      reference = unboundedOutcome.next;
      log = [...log, ...((unboundedOutcome.ok as Partial<EntryResult>).evicted ?? [])];
    }
    expect(bounded.segments).toEqual(reference.segments);
    expect(bounded.turn).toBe(reference.turn);
    // What the bounded window holds is what the reference would read for that segment.
    for (const record of bounded.evictions) {
      expect(lastEviction({ ...reference, evictions: log }, record.segmentId)).toEqual(record);
    }
    expect(bounded.evictions.length).toBeLessThanOrEqual(recordBound(bounded));
    expect(bounded.evictions.length + bounded.evictionsDropped).toBe(log.length);
    tally.maxDropped = Math.max(tally.maxDropped, bounded.evictionsDropped);
    tally.maxHeld = Math.max(tally.maxHeld, bounded.evictions.length);
  }
  return log;
}

describe('bounded eviction records (fast-check)', () => {
  it('decide as with every record kept; a shed segment is one never held, never one a pin keeps out', () => {
    const tally = newTally();
    fc.assert(
      fc.property(
        settingsArb,
        fc.array(opArb, { minLength: 40, maxLength: 200, size: 'max' }),
        (settings, ops) => {
          playLockstep(settings, ops, tally);
        },
      ),
      { numRuns: 200 },
    );
    // The sessions reach every case the claim is about.
    expect(tally.compared).toBeGreaterThan(1000);
    expect(tally.livePinRefusals).toBeGreaterThan(0);
    expect(tally.rehydrated).toBeGreaterThan(0);
    expect(tally.shedNamed).toBeGreaterThan(0);
    expect(tally.shedAdmitted).toBeGreaterThan(0);
    expect(tally.maxDropped).toBeGreaterThan(0);
  });

  it('holds at most retainedEvictions plus one record per displaced entry of a resident, however long the session', () => {
    const tally = newTally();
    let longest = 0;
    fc.assert(
      fc.property(
        settingsArb,
        fc.array(longSessionOpArb, { minLength: 1000, maxLength: 2000, size: 'max' }),
        (settings, ops) => {
          longest = Math.max(longest, playLockstep(settings, ops, tally).length);
        },
      ),
      { numRuns: 10 },
    );
    // Sessions long enough that every record ever made dwarfs what the window holds.
    expect(longest).toBeGreaterThan(10 * tally.maxHeld);
  });

  it('20,000 evictions at the default retention stay far below the 2 MB continue-as-new payload', () => {
    const label = 'x'.repeat(200);
    let state = openWindow({ capacity: 10_000, decay: 0.85, rehydrationThreshold: 0.6, margin: 0.1 });
    let unboundedBytes = 0;
    for (let i = 0; i < 20_000; i++) {
      const next = admit(state, { segmentId: `segment-${i}`, tokens: 1_000, salience: 0.5, label });
      unboundedBytes += next.result.evicted.reduce((n, e) => n + JSON.stringify(e).length, 0);
      state = next.state;
    }
    expect(state.evictions).toHaveLength(1_000);
    expect(state.evictionsDropped).toBe(20_000 - 10 - 1_000);
    expect(JSON.stringify(state).length).toBeLessThan(512 * 1024);
    // Every record kept, as before the bound, is past the payload limit.
    expect(unboundedBytes).toBeGreaterThan(2 * 1024 * 1024);
  });
});

describe('a shed segment, concretely', () => {
  it('can be admitted again and needs its tokens to rehydrate, while a pin-held record is kept past the bound', () => {
    let state = openWindow({
      capacity: 1000,
      decay: 0.85,
      rehydrationThreshold: 0.5,
      margin: 0.1,
      retainedEvictions: 1,
    });
    const run = (op: (s: WindowState, i: unknown) => Transition<unknown>, input: unknown) => {
      state = op(state, input).state;
    };
    run(admit, { segmentId: 'held', tokens: 500, salience: 0.1 });
    run(admit, { segmentId: 'tool', tokens: 600, salience: 0.9, pin: { kind: 'toolLoop', loopId: 'L' } });
    for (const id of ['a', 'b', 'c']) {
      run(admit, { segmentId: id, tokens: 400, salience: 0.2 });
    }
    // `held` (out by the pinned tool output) and the latest of a, b stay; the other one goes.
    expect(state.evictions.map((e) => e.segmentId)).toEqual(['held', 'b']);
    expect(state.evictionsDropped).toBe(1);
    expect(() => rehydrate(state, { segmentId: 'held', salience: 1 })).toThrow(RehydrationBlocked);
    expect(() => rehydrate(state, { segmentId: 'a', salience: 1 })).toThrow(/never in this window/);
    expect(admit(state, { segmentId: 'a', tokens: 400, salience: 0.3 }).result.segment.via).toBe('admit');
  });
});
