import { describe, expect, it } from 'vitest';
import { ConflictError, InvalidInputError, NotFoundError } from '../../core/errors';
import {
  admit,
  advanceTurn,
  cheapestDisplacement,
  openWindow,
  pin,
  rehydrate,
  unpin,
  viewWindow,
  RehydrationBlocked,
  type Segment,
  type Transition,
  type WindowState,
} from '../../core/window';
import {
  CONSTRAINT,
  JSON_DUMP,
  playSteps,
  RATE_LIMITS,
  SEED_REHYDRATION,
  SEED_SETTINGS,
  SEED_STEPS,
  SUMMARY,
  TOOL_LOOP,
} from '../support/windowSeed';
import { thrownBy } from '../support/thrown';

/** A window driven by the pure transitions, for readable tests. */
class Window {
  constructor(public state: WindowState) {}
  static open(settings = { capacity: 1000, decay: 0.85, rehydrationThreshold: 0.6, margin: 0.1 }) {
    return new Window(openWindow(settings));
  }
  private run<R>(op: (s: WindowState, input: unknown) => Transition<R>, input: unknown): R {
    const next = op(this.state, input);
    this.state = next.state;
    return next.result;
  }
  admit = (input: unknown) => this.run(admit, input);
  rehydrate = (input: unknown) => this.run(rehydrate, input);
  pin = (input: unknown) => this.run(pin, input);
  unpin = (input: unknown) => this.run(unpin, input);
  turn = (input: unknown = {}) => this.run(advanceTurn, input);
  ids = () => this.state.segments.map((s) => s.id);
}

async function seedWindow(pinGuard: boolean): Promise<Window> {
  const w = new Window(openWindow({ ...SEED_SETTINGS, pinGuard }));
  await playSteps(SEED_STEPS, { turn: () => w.state.turn, advanceTurn: w.turn, admit: w.admit });
  return w;
}

const refusalOf = (fn: () => unknown) => thrownBy(fn, RehydrationBlocked);

describe('the seed case', () => {
  it('turn 12: the pinned JSON dump forces out the rate-limits table, and the record says so', async () => {
    const w = await seedWindow(true);
    const turn12 = w.state.evictions.filter((e) => e.turn === 12);
    expect(turn12).toEqual([
      expect.objectContaining({
        segmentId: RATE_LIMITS,
        tokens: 2_400,
        displacedBy: JSON_DUMP,
        displacerPinned: true,
        displacerPins: [{ kind: 'toolLoop', loopId: TOOL_LOOP }],
      }),
    ]);
    const dump = w.state.segments.find((s) => s.id === JSON_DUMP)!;
    expect(dump.displaced).toEqual([RATE_LIMITS]);
    expect(dump.salience).toBe(0.88);
  });

  it('turn 19: rehydrating the table is refused; the constraint and the summary stay', async () => {
    const w = await seedWindow(true);
    expect(w.state.turn).toBe(19);
    const before = structuredClone(w.state);
    const blocked = refusalOf(() => w.rehydrate(SEED_REHYDRATION));
    expect(blocked.type).toBe('RehydrationBlocked');
    expect(blocked.reasons).toEqual(['evictedByLivePin', 'wouldDisplacePinned']);
    expect(blocked.incoming).toEqual({
      id: RATE_LIMITS,
      tokens: 2_400,
      salience: 0.72,
      label: 'table of API rate limits',
    });
    expect(blocked.wouldDisplace.map((s) => [s.id, s.pinned])).toEqual([[CONSTRAINT, true]]);
    expect(blocked.pins).toEqual([
      { segmentId: JSON_DUMP, pin: { kind: 'toolLoop', loopId: TOOL_LOOP } },
      { segmentId: CONSTRAINT, pin: { kind: 'explicit' } },
    ]);
    expect(w.state).toEqual(before);
    expect(w.ids()).toContain(CONSTRAINT);
    expect(w.ids()).toContain(SUMMARY);
    expect(w.state.segments.find((s) => s.id === SUMMARY)!.tokens).toBe(300);
  });

  it('with the guard off, the same sequence evicts the constraint', async () => {
    const w = await seedWindow(false);
    const result = w.rehydrate(SEED_REHYDRATION);
    expect(result.mode).toBe('swap');
    expect(result.segment.displaced).toEqual([CONSTRAINT]);
    expect(w.ids()).not.toContain(CONSTRAINT);
    expect(w.state.evictions.at(-1)).toMatchObject({
      segmentId: CONSTRAINT,
      turn: 19,
      displacedBy: RATE_LIMITS,
      displacerPinned: false,
    });
  });
});

describe('decideRehydration', () => {
  /** 1000 tokens: a(0.2, 300) b(0.5, 300) c pinned (0.3, 300), 100 free. */
  function full(): Window {
    const w = Window.open();
    w.admit({ segmentId: 'a', tokens: 300, salience: 0.2 });
    w.admit({ segmentId: 'b', tokens: 300, salience: 0.5 });
    w.admit({ segmentId: 'c', tokens: 300, salience: 0.3, pin: { kind: 'explicit' } });
    return w;
  }
  /** Evicts `gone` (300 tokens) by admitting a 400-token segment, then frees 400 tokens by ending its loop. */
  function withEvicted(displacerPin?: { kind: 'toolLoop'; loopId: string }) {
    const w = Window.open();
    w.admit({ segmentId: 'gone', tokens: 300, salience: 0.1 });
    w.admit({ segmentId: 'keep', tokens: 300, salience: 0.9 });
    w.admit({ segmentId: 'big', tokens: 500, salience: 0.9, ...(displacerPin && { pin: displacerPin }) });
    expect(w.state.evictions.map((e) => e.segmentId)).toEqual(['gone']);
    return w;
  }

  it('a segment never admitted comes in on score when there is slack', () => {
    const w = Window.open();
    expect(w.rehydrate({ segmentId: 'fresh', tokens: 100, salience: 0.7 }).mode).toBe('neverAdmitted');
  });

  it('never displaces anything for a fresh score alone at capacity', () => {
    const w = full();
    const blocked = refusalOf(() => w.rehydrate({ segmentId: 'fresh', tokens: 400, salience: 1 }));
    expect(blocked.reasons).toEqual(['neverAdmittedAtCapacity']);
    expect(w.ids()).toEqual(['a', 'b', 'c']);
  });

  it('admits an evicted segment into slack, and refuses one below the threshold even then', () => {
    const w = withEvicted();
    w.admit({ segmentId: 'x', tokens: 1, salience: 1 });
    w.state = { ...w.state, segments: w.state.segments.filter((s) => s.id !== 'big') };
    expect(refusalOf(() => w.rehydrate({ segmentId: 'gone', salience: 0.59 })).reasons).toEqual([
      'belowThreshold',
    ]);
    expect(w.rehydrate({ segmentId: 'gone', salience: 0.6 }).mode).toBe('slack');
  });

  it('swaps out the cheapest unpinned set only when the margin is met', () => {
    const w = full();
    w.state = {
      ...w.state,
      evictions: [
        {
          segmentId: 'back',
          tokens: 350,
          salience: 0.1,
          turn: 0,
          displacedBy: 'a',
          displacerPinned: false,
          displacerPins: [],
        },
      ],
    };
    // needs 250 tokens: `a` (0.2) is the cheapest; 0.29 does not beat it by 0.1.
    const margin = refusalOf(() => w.rehydrate({ segmentId: 'back', salience: 0.29 }));
    expect(margin.reasons).toEqual(['belowThreshold', 'marginNotMet']);
    expect(margin.wouldDisplace.map((s) => s.id)).toEqual(['a']);
    const swap = w.rehydrate({ segmentId: 'back', salience: 0.61 });
    expect(swap).toMatchObject({ mode: 'swap', segment: { displaced: ['a'] } });
    expect(w.ids()).toEqual(['b', 'c', 'back']);
  });

  it('refuses when only a pinned segment clears the margin', () => {
    const w = full();
    w.state = {
      ...w.state,
      turn: 1,
      evictions: [
        {
          segmentId: 'back',
          tokens: 350,
          salience: 0.1,
          turn: 0,
          displacedBy: 'a',
          displacerPinned: false,
          displacerPins: [],
        },
      ],
      segments: w.state.segments.map((s) => (s.pins.length ? s : { ...s, salience: 0.6 })),
    };
    // a and b are 0.6, c pinned 0.3: with 0.65 only c is beaten by the margin.
    const blocked = refusalOf(() => w.rehydrate({ segmentId: 'back', salience: 0.65 }));
    expect(blocked.reasons).toEqual(['wouldDisplacePinned']);
    expect(blocked.wouldDisplace).toEqual([{ id: 'c', tokens: 300, salience: 0.3, pinned: true }]);
    expect(blocked.pins).toEqual([{ segmentId: 'c', pin: { kind: 'explicit' } }]);
  });

  it('keeps a segment out while the pin of the displacer that forced it out holds', () => {
    const w = withEvicted({ kind: 'toolLoop', loopId: 'L' });
    // Room for it, whatever its score: still refused while the loop runs.
    w.state = { ...w.state, segments: w.state.segments.filter((s) => s.id !== 'keep') };
    const blocked = refusalOf(() => w.rehydrate({ segmentId: 'gone', salience: 1 }));
    expect(blocked.reasons).toEqual(['evictedByLivePin']);
    expect(blocked.pins).toEqual([{ segmentId: 'big', pin: { kind: 'toolLoop', loopId: 'L' } }]);
    // Another pin on the displacer is not the pin that forced the eviction.
    w.pin({ segmentId: 'big', pin: { kind: 'explicit' } });
    w.unpin({ loopId: 'L' });
    expect(w.rehydrate({ segmentId: 'gone', salience: 1 }).mode).toBe('slack');
  });

  it('a displacer that left the window and came back does not keep its old victim out', () => {
    const w = withEvicted({ kind: 'toolLoop', loopId: 'L' });
    w.unpin({ loopId: 'L' });
    // The same pin set again while `big` stayed: that is the pin that forced `gone` out.
    w.pin({ segmentId: 'big', pin: { kind: 'toolLoop', loopId: 'L' } });
    expect(refusalOf(() => w.rehydrate({ segmentId: 'gone', salience: 1 })).reasons).toContain(
      'evictedByLivePin',
    );
    w.unpin({ loopId: 'L' });
    w.turn({ scores: { big: 0.05 } });
    expect(w.admit({ segmentId: 'x', tokens: 500, salience: 0.5 }).evicted.map((e) => e.segmentId)).toEqual([
      'big',
    ]);
    expect(w.rehydrate({ segmentId: 'big', salience: 1 }).segment.displaced).toEqual(['x']);
    w.pin({ segmentId: 'big', pin: { kind: 'toolLoop', loopId: 'L' } });
    // `big` left unpinned and holds a new pin: nothing that forced `gone` out still holds.
    expect(w.rehydrate({ segmentId: 'gone', salience: 1 })).toMatchObject({ mode: 'swap' });
  });

  it('an unpinned displacer does not keep its victim out', () => {
    const w = withEvicted();
    w.state = { ...w.state, segments: w.state.segments.filter((s) => s.id !== 'keep') };
    expect(w.rehydrate({ segmentId: 'gone', salience: 0.7 }).mode).toBe('slack');
  });
});

describe('admission and turns', () => {
  it('evicts the lowest-salience unpinned segments first and never a pinned one', () => {
    const w = Window.open();
    w.admit({ segmentId: 'low-pinned', tokens: 400, salience: 0.01, pin: { kind: 'explicit' } });
    w.admit({ segmentId: 'mid', tokens: 300, salience: 0.4 });
    w.admit({ segmentId: 'low', tokens: 300, salience: 0.2 });
    const r = w.admit({ segmentId: 'new', tokens: 250, salience: 0.1 });
    expect(r.evicted.map((e) => e.segmentId)).toEqual(['low']);
    expect(w.ids()).toEqual(['low-pinned', 'mid', 'new']);
  });

  it('refuses an admission that only pinned segments could make room for', () => {
    const w = Window.open();
    w.admit({ segmentId: 'p', tokens: 800, salience: 0.1, pin: { kind: 'explicit' } });
    w.admit({ segmentId: 'u', tokens: 100, salience: 0.9 });
    const blocked = refusalOf(() => w.admit({ segmentId: 'n', tokens: 300, salience: 1 }));
    expect(blocked).toMatchObject({ operation: 'admit', reasons: ['noUnpinnedRoom'] });
    expect(blocked.wouldDisplace.map((s) => s.id)).toEqual(['p']);
    expect(w.ids()).toEqual(['p', 'u']);
  });

  it('decays unscored segments each turn and sets scored ones', () => {
    const w = Window.open();
    w.admit({ segmentId: 'a', tokens: 10, salience: 0.8 });
    w.admit({ segmentId: 'b', tokens: 10, salience: 0.8 });
    w.turn({ scores: { b: 0.5 } });
    w.turn();
    expect(w.state.segments.map((s) => s.salience)).toEqual([0.8 * 0.85 * 0.85, 0.5 * 0.85]);
  });

  it('turn pins lapse at their expiry turn; tool-loop pins end with the loop; explicit ones on unpin', () => {
    const w = Window.open();
    w.admit({ segmentId: 'a', tokens: 10, salience: 0.5, pin: { kind: 'untilTurn', expiresAtTurn: 2 } });
    w.admit({ segmentId: 'b', tokens: 10, salience: 0.5, pin: { kind: 'toolLoop', loopId: 'L' } });
    w.pin({ segmentId: 'b', pin: { kind: 'explicit' } });
    expect(w.turn().lapsed).toEqual([]);
    expect(w.turn().lapsed).toEqual([{ segmentId: 'a', pin: { kind: 'untilTurn', expiresAtTurn: 2 } }]);
    expect(w.unpin({ segmentId: 'b' }).released).toEqual([{ segmentId: 'b', pin: { kind: 'explicit' } }]);
    expect(() => w.unpin({ segmentId: 'b' })).toThrow(ConflictError);
    expect(w.unpin({ loopId: 'L' }).released).toEqual([
      { segmentId: 'b', pin: { kind: 'toolLoop', loopId: 'L' } },
    ]);
    expect(w.state.segments.every((s) => s.pins.length === 0)).toBe(true);
  });

  it('cheapestDisplacement keeps a low segment that turned out not to be needed', () => {
    const seg = (id: string, salience: number, tokens: number): Segment => ({
      id,
      tokens,
      salience,
      pins: [],
      admittedAtTurn: 0,
      via: 'admit',
      displaced: [],
    });
    const chosen = cheapestDisplacement([seg('a', 0.1, 50), seg('b', 0.2, 500), seg('c', 0.3, 10)], 100);
    expect(chosen?.map((s) => s.id)).toEqual(['b']);
    expect(cheapestDisplacement([seg('a', 0.1, 50)], 100)).toBeUndefined();
  });
});

describe('bad input gets a typed error and leaves the window unchanged', () => {
  const cases: [string, (w: Window) => unknown, new (...args: never[]) => Error][] = [
    ['negative tokens', (w) => w.admit({ segmentId: 'n', tokens: -5, salience: 0.5 }), InvalidInputError],
    ['non-integer tokens', (w) => w.admit({ segmentId: 'n', tokens: 1.5, salience: 0.5 }), InvalidInputError],
    ['salience above 1', (w) => w.admit({ segmentId: 'n', tokens: 5, salience: 1.2 }), InvalidInputError],
    ['salience below 0', (w) => w.rehydrate({ segmentId: 'gone', salience: -0.1 }), InvalidInputError],
    ['a score outside [0, 1]', (w) => w.turn({ scores: { a: 2 } }), InvalidInputError],
    [
      'larger than the window',
      (w) => w.admit({ segmentId: 'n', tokens: 1001, salience: 0.5 }),
      InvalidInputError,
    ],
    [
      'an unknown field',
      (w) => w.admit({ segmentId: 'n', tokens: 5, salience: 0.5, x: 1 }),
      InvalidInputError,
    ],
    [
      'a pin that already expired',
      (w) => w.pin({ segmentId: 'a', pin: { kind: 'untilTurn', expiresAtTurn: 1 } }),
      InvalidInputError,
    ],
    [
      'tokens that differ from the evicted segment',
      (w) => w.rehydrate({ segmentId: 'gone', salience: 0.9, tokens: 7 }),
      InvalidInputError,
    ],
    [
      'pinning an unknown segment',
      (w) => w.pin({ segmentId: 'nope', pin: { kind: 'explicit' } }),
      NotFoundError,
    ],
    ['scoring an unknown segment', (w) => w.turn({ scores: { nope: 0.5 } }), NotFoundError],
    [
      'rehydrating an unknown segment',
      (w) => w.rehydrate({ segmentId: 'nope', salience: 0.9 }),
      NotFoundError,
    ],
    ['unpinning a segment that is not pinned', (w) => w.unpin({ segmentId: 'a' }), ConflictError],
    ['ending a tool loop that pins nothing', (w) => w.unpin({ loopId: 'nope' }), ConflictError],
    [
      'pinning an evicted segment',
      (w) => w.pin({ segmentId: 'gone', pin: { kind: 'explicit' } }),
      ConflictError,
    ],
    [
      'admitting a resident segment',
      (w) => w.admit({ segmentId: 'a', tokens: 5, salience: 0.5 }),
      ConflictError,
    ],
    [
      'admitting an evicted segment',
      (w) => w.admit({ segmentId: 'gone', tokens: 5, salience: 0.5 }),
      ConflictError,
    ],
    ['rehydrating a resident segment', (w) => w.rehydrate({ segmentId: 'a', salience: 0.9 }), ConflictError],
    [
      'pinning twice with the same pin',
      (w) => w.pin({ segmentId: 'p', pin: { kind: 'explicit' } }),
      ConflictError,
    ],
  ];
  it.each(cases)('%s', (_name, op, errorClass) => {
    const w = Window.open();
    w.admit({ segmentId: 'gone', tokens: 600, salience: 0.1 });
    w.admit({ segmentId: 'a', tokens: 300, salience: 0.9 });
    w.admit({ segmentId: 'p', tokens: 100, salience: 0.9, pin: { kind: 'explicit' } });
    w.turn();
    w.admit({ segmentId: 'b', tokens: 500, salience: 0.9 });
    expect(w.state.evictions.map((e) => e.segmentId)).toEqual(['gone']);
    const before = structuredClone(w.state);
    expect(() => op(w)).toThrow(errorClass);
    expect(w.state).toEqual(before);
    expect(viewWindow(w.state)).toEqual(viewWindow(before));
  });
});
