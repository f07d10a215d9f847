import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VectorIndexes, type SemanticSearch } from '../../store/vectorIndexes';
import { encodeVector, FEED_PAGE, feedKey } from '../../store/vectors';
import { startTestEnv, type TestEnv } from '../support/env';

/**
 * The per-agent nearest-neighbour indexes a recall process keeps, against the real store:
 * changes other processes append to the feed are searched on the next recall, and catching
 * up after a burst reads the burst once, not on every recall while it settles.
 */

let env: TestEnv;
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(async () => {
  await env?.close();
});

const MODEL = 'test-model';
const DIMENSIONS = 64;

/**
 * The `i`th of a fixed set of random unit vectors (a seeded generator): in 64 dimensions two
 * of them have a cosine of about ±0.13, so each is its own unmistakable nearest neighbour.
 */
function vector(i: number): Float32Array {
  let state = (i + 1) * 2654435761;
  const next = () => {
    state = (Math.imul(state ^ (state >>> 15), 2246822507) + 0x6d2b79f5) >>> 0;
    return state / 2 ** 32 - 0.5;
  };
  const v = Float32Array.from({ length: DIMENSIONS }, next);
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

/** `n` vector records as another process appends them: numbers taken, then the records. */
async function append(agentId: string, from: number, n: number): Promise<void> {
  const feed = await env.store.vectorFeeds.findOneAndUpdate(
    { _id: agentId },
    { $inc: { seq: n } },
    { upsert: true, returnDocument: 'after' },
  );
  const first = feed!.seq - n + 1;
  await env.store.vectors.insertMany(
    Array.from({ length: n }, (_, i) => ({
      _id: `${agentId}-v${from + i}`,
      agentId,
      model: MODEL,
      vector: encodeVector(vector(from + i)),
      textHash: '',
      seq: first + i,
      feedKey: feedKey(agentId, first + i),
      at: Date.now(),
    })),
  );
}

/** Counts the store's reads of feed pages (equality on `feedKey`) while `fn` runs. */
async function feedReads(fn: () => Promise<unknown>): Promise<number> {
  const vectors = env.store.vectors;
  const find = vectors.find.bind(vectors);
  let reads = 0;
  vectors.find = ((filter: Record<string, unknown>, ...rest: unknown[]) => {
    if (filter && 'feedKey' in filter) reads++;
    return (find as (...a: unknown[]) => unknown)(filter, ...rest);
  }) as typeof vectors.find;
  try {
    await fn();
  } finally {
    vectors.find = find;
  }
  return reads;
}

/**
 * Holds the store's reads of feed pages until `release`: a catch-up that starts meanwhile
 * cannot read what was appended, whatever the machine's speed.
 */
function holdFeedReads(): { release: () => void } {
  const vectors = env.store.vectors;
  const find = vectors.find.bind(vectors);
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  vectors.find = ((filter: Record<string, unknown>, ...rest: unknown[]) => {
    const cursor = (find as (...a: unknown[]) => { toArray(): Promise<unknown[]> })(filter, ...rest);
    if (!filter || !('feedKey' in filter)) return cursor;
    return { toArray: async () => (await released, cursor.toArray()) };
  }) as typeof vectors.find;
  return {
    release: () => {
      vectors.find = find;
      release();
    },
  };
}

/** Calls `search` until `done` holds of its answer, for at most a minute. */
async function until(search: () => Promise<SemanticSearch>, done: (s: SemanticSearch) => boolean) {
  for (const deadline = Date.now() + 60_000; ;) {
    const found = await search();
    if (done(found)) return found;
    if (Date.now() > deadline) throw new Error(`still ${JSON.stringify(found)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const nearestId = (s: SemanticSearch) => (s.available ? s.neighbours[0]?.id : undefined);

describe('the vector indexes of a recall process', () => {
  it('with no time to wait: says a loading index is loading, then answers from the index as it stands while a catch-up goes on, and says so', async () => {
    const agentId = env.agent('impatient');
    const indexes = new VectorIndexes(env.store, { maxVectors: 1_000_000, loadWaitMs: 0 });
    await append(agentId, 0, 100);
    const first = await indexes.nearest(agentId, MODEL, vector(3), 1);
    expect(first).toMatchObject({ available: false, reason: expect.stringMatching(/index is loading/) });
    await until(
      () => indexes.nearest(agentId, MODEL, vector(3), 1),
      (s) => nearestId(s) === `${agentId}-v3`,
    );

    const held = holdFeedReads();
    let stale: SemanticSearch;
    try {
      await append(agentId, 100, 100);
      stale = await indexes.nearest(agentId, MODEL, vector(150), 1);
    } finally {
      held.release();
    }
    expect(stale).toMatchObject({ available: true, catchingUp: true });
    expect(nearestId(stale)).not.toBe(`${agentId}-v150`);
    // The catch-up went on without a search waiting for it: a later search finds the vector.
    await until(
      () => indexes.nearest(agentId, MODEL, vector(150), 1),
      (s) => nearestId(s) === `${agentId}-v150`,
    );
  });

  it('searches what other processes append, and reads a burst once, not on each recall while it settles', async () => {
    const agentId = env.agent('feed');
    const indexes = new VectorIndexes(env.store, { maxVectors: 1_000_000 });
    await append(agentId, 0, 500);
    const first = await indexes.nearest(agentId, MODEL, vector(3), 1);
    expect(first).toMatchObject({ available: true, neighbours: [{ id: `${agentId}-v3` }] });

    // A burst of 4,000 appended by another process: the next recall reads it and finds it.
    await append(agentId, 500, 4_000);
    const burst = 4_000 / FEED_PAGE;
    const caughtUp = await feedReads(async () => {
      const found = await indexes.nearest(agentId, MODEL, vector(4_321), 1);
      expect(found).toMatchObject({ available: true, neighbours: [{ id: `${agentId}-v4321` }] });
    });
    expect(caughtUp).toBeGreaterThanOrEqual(burst);
    // Within the settling time, a recall reads again only the numbers that may still be in
    // flight (two pages' worth), not the whole burst.
    const again = await feedReads(() => indexes.nearest(agentId, MODEL, vector(7), 1));
    expect(again).toBeLessThanOrEqual(3);
    expect(indexes.size).toBe(4_500);
  });
});
