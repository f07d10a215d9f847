import { describe, expect, it } from 'vitest';
import { buildEntry, memoryPolicy } from '../../core/entry';
import type { Store, VectorRecord } from '../../store/db';
import { FeedReader, trimFeed } from '../../store/vectorFeed';
import {
  changeId,
  clearVectorRecords,
  dropVectors,
  FEED_PAGE,
  logChanges,
  storeVectors,
  takeChangeNumbers,
  textHash,
  writeVectorRecords,
  type ToEmbed,
} from '../../store/vectors';
import { episode } from '../support/memories';
import { useTestEnv } from '../support/env';
import { failOnce } from '../support/faults';

/**
 * The vector feed against the real store: every process's reader applies every write and
 * erasure of every other, whatever order concurrent writers land in. A writer that is slow,
 * that overlaps another, that crashes after taking its numbers or after logging them: no
 * record is skipped, and a reader that stops waiting for a number fences it first, so no
 * record can land at it after. The writers are driven step by step (numbers, log, records:
 * the steps storeVectors and dropVectors take in that order) to force each interleaving.
 */

const env = useTestEnv();

const SPACE = { model: 'test-model', dimensions: 8 };
/** Long enough that no test that does not wait for it meets it. */
const NEVER = 10 * 60_000;
/** What a test that waits for the fence waits for. */
const FENCE_MS = 200;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

function vector(i: number): Float32Array {
  const v = Float32Array.from({ length: SPACE.dimensions }, (_, d) => Math.sin(i * 7.1 + d * 1.3) + 1.5);
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

type Item = ToEmbed & { vector: Float32Array };

function items(agentId: string, from: number, n: number): Item[] {
  return Array.from({ length: n }, (_, k) => {
    const i = from + k;
    const text = `memory ${i}`;
    const recall = {
      tier: 'hot' as const,
      isActive: true,
      dormantAt: Number.MAX_SAFE_INTEGER,
      salience: { base: 1, at: 0 },
    };
    return { id: `${agentId}-e${i}`, tier: 'hot', text, textHash: textHash(text), recall, vector: vector(i) };
  });
}

const ids = (xs: readonly Item[]) => xs.map((x) => x.id);

/** A writer's first two steps: numbers, then the log. */
async function numbered(agentId: string, xs: readonly Item[]): Promise<number[]> {
  return logChanges(env.store, agentId, ids(xs), await takeChangeNumbers(env.store, agentId, xs.length));
}

/** What a process's index holds: each entry's state as the reader handed it over, checked never to go back. */
class Applied {
  readonly states = new Map<string, VectorRecord>();
  /** One call of the reader, applied here: how many records it handed over. */
  async read(reader: FeedReader): Promise<number> {
    let n = 0;
    await reader.next(async (records) => {
      for (const r of records) {
        expect(r.seq).toBeGreaterThanOrEqual(this.states.get(r._id)?.seq ?? 0);
        this.states.set(r._id, r);
      }
      n = records.length;
    });
    return n;
  }
}

const state = (r: VectorRecord) => ({
  seq: r.seq,
  textHash: r.textHash,
  vector: r.vector?.toString('base64'),
});

/** The applied states are exactly the store's records of the agent. */
async function expectCurrent(applied: Applied, agentId: string, count: number): Promise<void> {
  const stored = await env.store.vectors.find({ agentId }).toArray();
  expect(stored).toHaveLength(count);
  expect(applied.states.size).toBe(count);
  for (const r of stored) expect(state(applied.states.get(r._id)!), r._id).toEqual(state(r));
}

/**
 * A reader, then writer A taking 300 numbers and stalling, then B taking 600 after it and
 * landing them all, read once: the start of every slow-writer case.
 */
async function overtaken(name: string, fenceDelayMs: number) {
  const agentId = env.agent(name);
  const reader = await FeedReader.start(env.store, agentId, { fenceDelayMs });
  const applied = new Applied();
  const a = items(agentId, 0, 300);
  const b = items(agentId, 300, 600);
  const aFirst = await takeChangeNumbers(env.store, agentId, a.length);
  await writeVectorRecords(env.store, agentId, SPACE, b, await numbered(agentId, b), Date.now());
  expect(await applied.read(reader)).toBe(600);
  expect(reader).toMatchObject({ counter: 900, settled: 0, unresolved: 300 });
  return { agentId, reader, applied, a, aFirst };
}

describe('a reader of the vector feed', () => {
  it('applies every record of a slow writer that overlaps another, as each lands', async () => {
    const { agentId, reader, applied, a, aFirst } = await overtaken('overlap', NEVER);

    // A logs its 300 and lands 50 of them.
    const aSeqs = await logChanges(env.store, agentId, ids(a), aFirst);
    expect(aSeqs).toEqual(a.map((_, i) => aFirst + i));
    await writeVectorRecords(env.store, agentId, SPACE, a.slice(0, 50), aSeqs.slice(0, 50), Date.now());
    expect(await applied.read(reader)).toBe(50);
    expect(reader).toMatchObject({ settled: 50, unresolved: 250 });

    // Then the rest.
    await writeVectorRecords(env.store, agentId, SPACE, a.slice(50), aSeqs.slice(50), Date.now());
    expect(await applied.read(reader)).toBe(250);
    expect(reader).toMatchObject({ settled: 900, unresolved: 0 });
    await expectCurrent(applied, agentId, 900);

    // A reader that starts now begins where this one stood, and has nothing to read.
    const later = await FeedReader.start(env.store, agentId, { fenceDelayMs: NEVER });
    expect(later).toMatchObject({ settled: 900, counter: 900, unresolved: 0 });
    expect(await new Applied().read(later)).toBe(0);
  });

  it('fences the numbers of a writer that stalls before logging them; the writer, late, takes others and lands', async () => {
    const { agentId, reader, applied, a, aFirst } = await overtaken('fenced', FENCE_MS);

    // Past the fence delay, the reader claims A's numbers: nothing can land at them now.
    await pause(FENCE_MS + 50);
    expect(await applied.read(reader)).toBe(0);
    expect(reader).toMatchObject({ settled: 900, unresolved: 0 });
    expect(await env.store.vectorChanges.findOne({ _id: changeId(agentId, aFirst) })).toMatchObject({
      fenced: true,
    });

    // A comes back: every number it took is taken in the log, so it logs at fresh ones.
    const aSeqs = await logChanges(env.store, agentId, ids(a), aFirst);
    expect(Math.min(...aSeqs)).toBeGreaterThan(900);
    await writeVectorRecords(env.store, agentId, SPACE, a, aSeqs, Date.now());
    expect(await applied.read(reader)).toBe(300);
    expect(reader).toMatchObject({ settled: 1_200, unresolved: 0 });
    await expectCurrent(applied, agentId, 900);
  });

  it('holds the changes of a writer that crashed after logging them, and applies the later changes of their entries', async () => {
    const agentId = env.agent('crashed');
    const counted = countingPointReads();
    const reader = await FeedReader.start(counted.store, agentId, { fenceDelayMs: FENCE_MS });
    const applied = new Applied();
    const a = items(agentId, 0, 300);
    const b = items(agentId, 300, 600);

    // A logs its changes and crashes before its records.
    const aSeqs = await numbered(agentId, a);
    await writeVectorRecords(env.store, agentId, SPACE, b, await numbered(agentId, b), Date.now());
    expect(await applied.read(reader)).toBe(600);
    expect(reader).toMatchObject({ settled: 0, unresolved: 300 });

    // Past the fence delay nothing is fenced (A's changes are logged) nor skipped: each is
    // pending, and costs a point read of its record per call.
    await pause(FENCE_MS + 50);
    const before = counted.count();
    expect(await applied.read(reader)).toBe(0);
    expect(counted.count() - before).toBe(300);
    expect(reader).toMatchObject({ settled: 0, unresolved: 300 });

    // A's entries are embedded again (its activity retried): those later changes resolve A's.
    const retried = a.map((item, i) => ({ ...item, vector: vector(10_000 + i) }));
    await writeVectorRecords(
      env.store,
      agentId,
      SPACE,
      retried,
      await numbered(agentId, retried),
      Date.now(),
    );
    expect(await applied.read(reader)).toBe(300);
    expect(reader).toMatchObject({ settled: 1_200, unresolved: 0 });
    await expectCurrent(applied, agentId, 900);

    // Had A only been slow, its records now land at numbers lower than the retry's: they
    // change nothing.
    await writeVectorRecords(env.store, agentId, SPACE, a, aSeqs, Date.now());
    expect(await applied.read(reader)).toBe(0);
    await expectCurrent(applied, agentId, 900);
  });

  it('applies erasures the same way: a slow eraser overlapped by others, and the production path', async () => {
    const agentId = env.agent('erasures');
    const all = items(agentId, 0, 40);
    // The entries, as far as storeVectors reads them (their text, to check the vector's).
    await env.store.hot.insertMany(
      all.map((x) => buildEntry(x.id, agentId, episode(x.text, Date.now()), memoryPolicy(env.config))),
    );
    const reader = await FeedReader.start(env.store, agentId, { fenceDelayMs: NEVER });
    const applied = new Applied();
    const kept = await storeVectors(env.store, agentId, SPACE, all, Date.now());
    expect(kept).toHaveLength(40);
    expect(await applied.read(reader)).toBe(40);

    // A slow eraser takes and logs numbers for the first ten; the next ten are erased by
    // dropVectors meanwhile, and land before it.
    const slow = ids(all.slice(0, 10));
    const slowSeqs = await logChanges(
      env.store,
      agentId,
      slow,
      await takeChangeNumbers(env.store, agentId, slow.length),
    );
    const quick = ids(all.slice(10, 20));
    await env.store.hot.deleteMany({ agentId, _id: { $in: [...slow, ...quick] } });
    await dropVectors(env.store, agentId, quick, Date.now());
    expect(await applied.read(reader)).toBe(10);
    expect(reader.unresolved).toBe(10);
    await clearVectorRecords(env.store, agentId, slow, slowSeqs, Date.now());
    expect(await applied.read(reader)).toBe(10);
    expect(reader.unresolved).toBe(0);

    for (const id of [...slow, ...quick]) expect(applied.states.get(id)?.vector).toBeUndefined();
    for (const x of all.slice(20)) expect(applied.states.get(x.id)?.vector).toBeDefined();
    await expectCurrent(applied, agentId, 40);
  });
});

describe('a reader of the vector feed, when a store call fails part-way', () => {
  it('hands over again every change of a call whose later page read failed', async () => {
    const agentId = env.agent('page-fails');
    const reader = await FeedReader.start(env.store, agentId, { fenceDelayMs: NEVER });
    const applied = new Applied();
    const xs = items(agentId, 0, 300);
    await writeVectorRecords(env.store, agentId, SPACE, xs, await numbered(agentId, xs), Date.now());
    // Numbers 1-300 are two pages: the second's read of records fails, after the first's.
    let reads = 0;
    const undo = failOnce(env.store, 'vectors', 'find', undefined, () => ++reads === 2);
    try {
      await expect(applied.read(reader)).rejects.toThrow(/injected failure/);
    } finally {
      undo();
    }
    expect(await applied.read(reader)).toBe(300);
    await expectCurrent(applied, agentId, 300);
  });

  it('keeps the erasures of a call that failed where it keeps its place', async () => {
    const agentId = env.agent('keep-fails');
    const all = items(agentId, 0, 300);
    const reader = await FeedReader.start(env.store, agentId, { fenceDelayMs: NEVER });
    const applied = new Applied();
    await writeVectorRecords(env.store, agentId, SPACE, all, await numbered(agentId, all), Date.now());
    expect(await applied.read(reader)).toBe(300);
    // A page of erasures (numbers 301-556), read; the write of where a reader may start fails.
    const erased = ids(all.slice(0, FEED_PAGE));
    await dropVectors(env.store, agentId, erased, Date.now());
    const undo = failOnce(env.store, 'vectorFeeds', 'updateOne');
    try {
      await expect(applied.read(reader)).rejects.toThrow(/injected failure/);
    } finally {
      undo();
    }
    // They were applied before the write failed; the next call writes it.
    for (const id of erased) expect(applied.states.get(id)?.vector, id).toBeUndefined();
    expect(await applied.read(reader)).toBe(0);
    expect(await env.store.vectorFeeds.findOne({ _id: agentId })).toMatchObject({ resolvedThrough: 556 });
    await expectCurrent(applied, agentId, 300);
  });
});

describe('the night trims the feed', () => {
  /** Plain numbers: a failed match on the reader itself would print its store. */
  const progress = (r: FeedReader) => ({ settled: r.settled, unresolved: r.unresolved });

  /** The agent's logged changes: fences apart from the rest. */
  async function logged(agentId: string): Promise<{ changes: number; fences: number }> {
    const all = await env.store.vectorChanges.find({ agentId }).toArray();
    const fences = all.filter((c) => c.fenced).length;
    return { changes: all.length - fences, fences };
  }

  it('deletes the changes of wholly resolved pages, keeps the fences, and a reader far behind still applies every record', async () => {
    const { agentId, reader, applied, a } = await overtaken('trim-fences', FENCE_MS);
    await pause(FENCE_MS + 50);
    expect(await applied.read(reader)).toBe(0);
    // A lands at fresh numbers (901-1,200) after its first 300 were fenced.
    await writeVectorRecords(env.store, agentId, SPACE, a, await numbered(agentId, a), Date.now());
    expect(await applied.read(reader)).toBe(300);
    expect(await logged(agentId)).toEqual({ changes: 900, fences: 300 });

    // Resolved through 1,200: pages 0-3 (numbers up to 1,023) are whole.
    expect(await trimFeed(env.store, agentId, { fenceDelayMs: NEVER })).toBe(723);
    expect(await logged(agentId)).toEqual({ changes: 177, fences: 300 });
    expect(await env.store.vectorFeeds.findOne({ _id: agentId })).toMatchObject({ trimmedThrough: 1_023 });
    // Nothing more is whole until more lands.
    expect(await trimFeed(env.store, agentId, { fenceDelayMs: NEVER })).toBe(0);

    // A process whose persisted index stood before every change reads them all, fencing none.
    const behind = (await FeedReader.resume(
      env.store,
      agentId,
      { fenceDelayMs: NEVER },
      { through: 0, pending: [] },
    ))!;
    const caughtUp = new Applied();
    expect(await caughtUp.read(behind)).toBe(900);
    expect(progress(behind)).toEqual({ settled: 1_200, unresolved: 0 });
    await expectCurrent(caughtUp, agentId, 900);
    expect(await logged(agentId)).toEqual({ changes: 177, fences: 300 });
  });

  it('stops below a change still in flight, and a reader resolves trimmed numbers whose records moved on', async () => {
    const agentId = env.agent('trim-in-flight');
    const behind = await FeedReader.start(env.store, agentId, { fenceDelayMs: NEVER });
    const first = items(agentId, 0, 600);
    await writeVectorRecords(env.store, agentId, SPACE, first, await numbered(agentId, first), Date.now());
    // The first 100 embedded again: their records move to 601-700, and 1-100 hold none.
    const again = first.slice(0, 100).map((x, i) => ({ ...x, vector: vector(5_000 + i) }));
    await writeVectorRecords(env.store, agentId, SPACE, again, await numbered(agentId, again), Date.now());
    // A writer takes 701-1,000 and stalls; another lands 1,001-1,300.
    const stalled = items(agentId, 600, 300);
    const stalledFirst = await takeChangeNumbers(env.store, agentId, stalled.length);
    const late = items(agentId, 900, 300);
    await writeVectorRecords(env.store, agentId, SPACE, late, await numbered(agentId, late), Date.now());

    // Settled through 700: pages 0 and 1 (up to 511) go, none past the stalled writer's.
    expect(await trimFeed(env.store, agentId, { fenceDelayMs: NEVER })).toBe(511);
    expect(await logged(agentId)).toEqual({ changes: 489, fences: 0 });

    // The reader that started before it all: 1-100 have neither change nor record now, and
    // are resolved at once, not left as holes to fence; only the stalled writer's are holes.
    const applied = new Applied();
    expect(await applied.read(behind)).toBe(900);
    expect(progress(behind)).toEqual({ settled: 700, unresolved: 300 });
    await expectCurrent(applied, agentId, 900);

    const seqs = await logChanges(env.store, agentId, ids(stalled), stalledFirst);
    await writeVectorRecords(env.store, agentId, SPACE, stalled, seqs, Date.now());
    expect(await applied.read(behind)).toBe(300);
    expect(progress(behind)).toEqual({ settled: 1_300, unresolved: 0 });
    await expectCurrent(applied, agentId, 1_200);
  });
});

/** The test's store, counting its point reads of records (by `_id`). */
function countingPointReads(): { store: Store; count: () => number } {
  let reads = 0;
  const vectors = new Proxy(env.store.vectors, {
    get: (target, prop, receiver) => {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop !== 'findOne' || typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        reads++;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: { ...env.store, vectors }, count: () => reads };
}
