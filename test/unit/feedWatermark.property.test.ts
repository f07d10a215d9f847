import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FeedWatermark } from '../../core/feedWatermark';

/**
 * The bookkeeping of a reader of the vector feed (store/vectorFeed.ts), against a model of the
 * store: writers take numbers, log them, land their records (over lower numbers only) or are
 * fenced, in any interleaving, while the reader reads any of it in any order. `settled` never
 * passes a number that is neither fenced nor applied (the reader's index holds its entry at
 * that number or later), also for a reader started from where another one stood; and once
 * everything has landed and been read, `settled` is the counter and the index is the store.
 */

const ENTRIES = ['a', 'b', 'c', 'd'];

type Step =
  | { op: 'take'; entry: number }
  | { op: 'log' | 'land' | 'readChange' | 'fence'; pick: number }
  | { op: 'readRecord'; entry: number }
  | { op: 'observe' | 'restart' | 'tick' };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ op: fc.constant('take' as const), entry: fc.nat(ENTRIES.length - 1) }),
  fc.record({
    op: fc.constantFrom('log' as const, 'land' as const, 'readChange' as const, 'fence' as const),
    pick: fc.nat(),
  }),
  fc.record({ op: fc.constant('readRecord' as const), entry: fc.nat(ENTRIES.length - 1) }),
  fc.record({ op: fc.constantFrom('observe' as const, 'restart' as const, 'tick' as const) }),
);

type Status = 'taken' | 'logged' | 'fenced' | 'landed';

class World {
  readonly entryOf: string[] = [''];
  readonly status: Status[] = ['landed'];
  /** Entry → the number of its record's current state. */
  readonly records = new Map<string, number>();
  get counter(): number {
    return this.entryOf.length - 1;
  }
  take(entry: string): void {
    this.entryOf.push(entry);
    this.status.push('taken');
  }
  numbers(status: Status): number[] {
    return this.status.flatMap((s, seq) => (s === status && seq > 0 ? [seq] : []));
  }
  /** A writer that finds its number fenced takes another for the same entry. */
  fence(seq: number): void {
    this.status[seq] = 'fenced';
    this.take(this.entryOf[seq]!);
  }
  land(seq: number): void {
    const entry = this.entryOf[seq]!;
    this.status[seq] = 'landed';
    if ((this.records.get(entry) ?? 0) < seq) this.records.set(entry, seq);
  }
}

class Reader {
  /** Entry → the number of the state applied. */
  readonly index: Map<string, number>;
  constructor(
    readonly wm: FeedWatermark,
    loaded: Map<string, number>,
  ) {
    this.index = new Map(loaded);
  }
  recordSeen(entry: string, seq: number): void {
    if (this.wm.recordSeen(entry, seq)) this.index.set(entry, seq);
  }
}

/** Every number up to `settled` is fenced, or its entry is applied at it or later. */
function holds(world: World, reader: Reader): void {
  for (let seq = 1; seq <= reader.wm.settled; seq++) {
    if (world.status[seq] === 'fenced') continue;
    expect(
      reader.index.get(world.entryOf[seq]!) ?? 0,
      `number ${seq} passed unapplied`,
    ).toBeGreaterThanOrEqual(seq);
  }
  expect(reader.wm.settled).toBeLessThanOrEqual(reader.wm.counter);
}

const pickFrom = (xs: number[], pick: number) => (xs.length ? xs[pick % xs.length] : undefined);

function run(steps: Step[]): void {
  const world = new World();
  let now = 0;
  let reader = new Reader(new FeedWatermark(0), new Map());
  for (const s of steps) {
    const { wm } = reader;
    switch (s.op) {
      case 'take':
        world.take(ENTRIES[s.entry]!);
        break;
      case 'log': {
        const seq = pickFrom(world.numbers('taken'), s.pick);
        if (seq !== undefined) world.status[seq] = 'logged';
        break;
      }
      case 'land': {
        const seq = pickFrom(world.numbers('logged'), s.pick);
        if (seq !== undefined) world.land(seq);
        break;
      }
      case 'observe':
        wm.observe(world.counter, now);
        break;
      case 'readChange': {
        const seq = pickFrom(wm.holeNumbers(), s.pick);
        if (seq === undefined) break;
        const status = world.status[seq];
        if (status === 'fenced') wm.changeSeen(seq, undefined);
        else if (status !== 'taken') wm.changeSeen(seq, world.entryOf[seq]);
        break;
      }
      case 'readRecord': {
        const entry = ENTRIES[s.entry]!;
        const seq = world.records.get(entry);
        if (seq !== undefined) reader.recordSeen(entry, seq);
        break;
      }
      case 'fence': {
        const seq = pickFrom(wm.holesOlderThan(now, 2), s.pick);
        if (seq === undefined) break;
        if (world.status[seq] === 'taken') {
          world.fence(seq);
          wm.changeSeen(seq, undefined);
        } else wm.changeSeen(seq, world.status[seq] === 'fenced' ? undefined : world.entryOf[seq]);
        break;
      }
      case 'restart': {
        // Another process starts from where this one stood, then loads every record.
        const horizon = wm.horizon;
        reader = new Reader(new FeedWatermark(horizon, wm.pendingThrough(horizon)), world.records);
        break;
      }
      case 'tick':
        now++;
        break;
    }
    holds(world, reader);
  }
  // Every writer still alive logs and lands; the reader reads until nothing is left.
  for (const seq of world.numbers('taken')) world.status[seq] = 'logged';
  for (const seq of world.numbers('logged')) world.land(seq);
  const { wm } = reader;
  wm.observe(world.counter, now);
  for (const seq of wm.holeNumbers())
    wm.changeSeen(seq, world.status[seq] === 'fenced' ? undefined : world.entryOf[seq]);
  for (const entry of wm.pendingEntries()) reader.recordSeen(entry, world.records.get(entry)!);
  holds(world, reader);
  expect(wm.settled).toBe(world.counter);
  expect(wm.unresolved).toBe(0);
  for (const [entry, seq] of world.records) expect(reader.index.get(entry)).toBe(seq);
}

describe('the watermark of a feed reader', () => {
  it('never passes an unresolved number, in any interleaving of writers landing and the reader reading', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 20, maxLength: 150, size: 'max' }), (steps) => run(steps)),
      { numRuns: 500 },
    );
  });

  it('holds a number whose record landed under a later change only until that change is seen', () => {
    const wm = new FeedWatermark(0);
    wm.observe(3, 0);
    wm.changeSeen(2, 'a');
    wm.changeSeen(3, 'a');
    // 1 is a hole; 2 and 3 are pending for `a`, whose record is at 3.
    expect(wm.recordSeen('a', 3)).toBe(true);
    expect(wm.settled).toBe(0);
    expect(wm.holesOlderThan(5, 5)).toEqual([1]);
    wm.changeSeen(1, undefined);
    expect(wm.settled).toBe(3);
  });

  it('resolves in a copy and leaves the original as it stood: a call that fails keeps no copy', () => {
    const wm = new FeedWatermark(0);
    wm.observe(3, 0);
    wm.changeSeen(2, 'a');
    const copy = wm.copy();
    copy.changeSeen(1, undefined);
    expect(copy.recordSeen('a', 2)).toBe(true);
    copy.changeSeen(3, undefined);
    expect(copy.settled).toBe(3);
    // The original still holds 1 and 3 as holes counted at 0, and 2 pending.
    expect(wm.settled).toBe(0);
    expect(wm.holesOlderThan(5, 5)).toEqual([1, 3]);
    expect(wm.pendingEntries()).toEqual(['a']);
    expect(wm.recordSeen('a', 2)).toBe(true);
  });
});
