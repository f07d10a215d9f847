import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { VectorIndexes, type SemanticSearch } from '../../store/vectorIndexes';
import { VectorEngine } from '../../vectorEngine/engine';
import { dropVectors, encodeVector, FEED_PAGE, feedKey } from '../../store/vectors';
import { useTestEnv, type TestEnv } from '../support/env';
import { interleaveOnce } from '../support/faults';

/**
 * The per-agent nearest-neighbour indexes a recall process keeps, against the real store:
 * changes other processes append to the feed are searched on the next recall, and catching
 * up after a burst reads the burst once, not on every recall while it settles.
 */

const env = useTestEnv();

const MODEL = 'test-model';
/** As a process would fence: after a few store timeouts, longer than any test here waits. */
const FENCE_MS = 60_000;
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

/** Take `n` change numbers of the agent's feed, as a writer does first; returns the first. */
async function takeNumbers(agentId: string, n: number): Promise<number> {
  const feed = await env.store.vectorFeeds.findOneAndUpdate(
    { _id: agentId },
    { $inc: { seq: n } },
    { upsert: true, returnDocument: 'after' },
  );
  return feed!.seq - n + 1;
}

/** Land the records of vectors `from`…`from + n − 1` at the numbers from `first`. */
async function land(agentId: string, from: number, first: number, n: number): Promise<void> {
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

/** `n` vector records as another process appends them: numbers taken, then the records. */
async function append(agentId: string, from: number, n: number): Promise<void> {
  await land(agentId, from, await takeNumbers(agentId, n), n);
}

/**
 * Undoes a stand-in for `find`: the stand-in was set on the guarded collection's target, so
 * it is deleted there, and the collection's own `find`, guarded, answers again. (Assigning the
 * saved bound `find` back would leave a guarded call under the guard: every read admitted
 * twice, and units held by the inner call for good.)
 */
function restoreFind(vectors: TestEnv['store']['vectors']): void {
  delete (vectors as { find?: unknown }).find;
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
    restoreFind(vectors);
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
      restoreFind(vectors);
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
    const indexes = new VectorIndexes(env.store, {
      maxVectors: 1_000_000,
      loadWaitMs: 0,
      fenceDelayMs: FENCE_MS,
    });
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
    const indexes = new VectorIndexes(env.store, { maxVectors: 1_000_000, fenceDelayMs: FENCE_MS });
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

  it('reads no page of the feed after a load for the changes the load already read', async () => {
    const agentId = env.agent('loaded');
    await append(agentId, 0, 2_000);
    const indexes = new VectorIndexes(env.store, { maxVectors: 1_000_000, fenceDelayMs: FENCE_MS });
    // The load reads the 2,000 records; the catch-up that follows it has nothing left to read.
    const reads = await feedReads(async () => {
      const found = await indexes.nearest(agentId, MODEL, vector(1_234), 1);
      expect(found).toMatchObject({ available: true, neighbours: [{ id: `${agentId}-v1234` }] });
    });
    expect(reads).toBe(0);
  });
});

/** Polls `read` until it gives the same value for a second: the loads in flight have ended. */
async function settledValue(read: () => number): Promise<number> {
  let last = read();
  let since = Date.now();
  for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
    await new Promise((r) => setTimeout(r, 100));
    const now = read();
    if (now !== last) [last, since] = [now, Date.now()];
    else if (Date.now() - since >= 1_000) return now;
  }
  throw new Error(`still changing: ${last}`);
}

describe('the vector indexes of every process, under writers that overlap', () => {
  // What the catch-up before the feed reader lost for good: a record numbered more than 512
  // behind the counter when first read was taken to have landed (store/vectorFeed.ts).
  it('apply every record of a slow writer that another overtakes, whatever order they land in', async () => {
    const agentId = env.agent('overtaken');
    const indexes = new VectorIndexes(env.store, { maxVectors: 1_000_000, fenceDelayMs: FENCE_MS });
    await append(agentId, 0, 10);
    expect(nearestId(await indexes.nearest(agentId, MODEL, vector(3), 1))).toBe(`${agentId}-v3`);
    // A takes 300 numbers and stalls; B takes 600 after it and lands them all.
    const slow = await takeNumbers(agentId, 300);
    await append(agentId, 400, 600);
    expect(nearestId(await indexes.nearest(agentId, MODEL, vector(450), 1))).toBe(`${agentId}-v450`);
    // A lands 50, then the rest, each seen by a recall in between.
    await land(agentId, 10, slow, 50);
    expect(nearestId(await indexes.nearest(agentId, MODEL, vector(30), 1))).toBe(`${agentId}-v30`);
    await land(agentId, 60, slow + 50, 250);
    expect(nearestId(await indexes.nearest(agentId, MODEL, vector(300), 1))).toBe(`${agentId}-v300`);
    expect(indexes.size).toBe(910);
  });
});

describe('the vector indexes of a recall process, when a catch-up fails part-way', () => {
  /**
   * The engine refuses the `nth` request to apply changes from now on (a stand-in on the
   * process's engine, deleted once it fired: the engine's own method answers again).
   */
  function failApply(nth: number): void {
    const engine = VectorEngine.forProcess();
    const request = engine.request.bind(engine);
    let applies = 0;
    engine.request = ((req: Parameters<typeof request>[0]) => {
      if (req.op !== 'apply' || ++applies < nth) return request(req);
      delete (engine as { request?: unknown }).request;
      return Promise.reject(new Error('injected failure of an apply'));
    }) as typeof engine.request;
  }

  it('applies again every change of the catch-up whose later batch failed', async () => {
    const agentId = env.agent('apply-fails');
    const indexes = new VectorIndexes(env.store, { maxVectors: 1_000_000, fenceDelayMs: FENCE_MS });
    await append(agentId, 0, 10);
    expect(nearestId(await indexes.nearest(agentId, MODEL, vector(3), 1))).toBe(`${agentId}-v3`);
    // 300 more: the catch-up sends them 64 at a time, and the second batch fails.
    await append(agentId, 10, 300);
    failApply(2);
    await expect(indexes.nearest(agentId, MODEL, vector(300), 1)).rejects.toThrow(/injected failure/);
    expect(nearestId(await indexes.nearest(agentId, MODEL, vector(300), 1))).toBe(`${agentId}-v300`);
    expect(indexes.size).toBe(310);
  });
});

describe("a process's memory budget for vectors", () => {
  it('is one for every index set of the process: a second one makes room in the first', async () => {
    // A bound no other test of the file uses, so the budget is these two's alone.
    const limits = { maxVectors: 150, fenceDelayMs: FENCE_MS };
    const [x, y] = [env.agent('budget-x'), env.agent('budget-y')];
    await append(x, 0, 100);
    await append(y, 100, 100);
    const client = new VectorIndexes(env.store, limits);
    const worker = new VectorIndexes(env.store, limits);
    expect(nearestId(await client.nearest(x, MODEL, vector(5), 1))).toBe(`${x}-v5`);
    expect(nearestId(await worker.nearest(y, MODEL, vector(105), 1))).toBe(`${y}-v105`);
    expect(client.size + worker.size).toBeLessThanOrEqual(limits.maxVectors);
  });

  it('counts a load once as it completes: two indexes that fit together are both kept', async () => {
    const limits = { maxVectors: 160, fenceDelayMs: FENCE_MS };
    const [x, y] = [env.agent('budget-fit-x'), env.agent('budget-fit-y')];
    await append(x, 3000, 100);
    await append(y, 3100, 40);
    const indexes = new VectorIndexes(env.store, limits);
    expect(nearestId(await indexes.nearest(x, MODEL, vector(3005), 1))).toBe(`${x}-v3005`);
    expect(nearestId(await indexes.nearest(y, MODEL, vector(3105), 1))).toBe(`${y}-v3105`);
    expect(indexes.size).toBe(140);
  });

  it('is kept by loads that end after no search waits for them any more', async () => {
    const limits = { maxVectors: 250, loadWaitMs: 0, fenceDelayMs: FENCE_MS };
    const agents = ['p', 'q', 'r'].map((n) => env.agent(`late-${n}`));
    for (const [i, a] of agents.entries()) await append(a, 1000 + 100 * i, 100);
    const indexes = new VectorIndexes(env.store, limits);
    for (const a of agents) {
      expect(await indexes.nearest(a, MODEL, vector(0), 1)).toMatchObject({ available: false });
    }
    expect(await settledValue(() => indexes.size)).toBeLessThanOrEqual(limits.maxVectors);
  });

  it('refuses an agent larger than the budget, and takes it once it has shrunk to fit', async () => {
    const limits = { maxVectors: 50, refusalRecheckMs: 0, fenceDelayMs: FENCE_MS };
    const agentId = env.agent('shrinking');
    await append(agentId, 2000, 80);
    const indexes = new VectorIndexes(env.store, limits);
    expect(await indexes.nearest(agentId, MODEL, vector(2001), 1)).toMatchObject({
      available: false,
      reason: expect.stringMatching(/80 vectors, more than this process may hold/),
    });
    await dropVectors(
      env.store,
      agentId,
      Array.from({ length: 40 }, (_, i) => `${agentId}-v${2040 + i}`),
      Date.now(),
    );
    expect(nearestId(await indexes.nearest(agentId, MODEL, vector(2001), 1))).toBe(`${agentId}-v2001`);
  });

  /**
   * The agent's `nth` read of its feed's counter from now on waits until `release`: a catch-up
   * that reads it then is still running when another agent's load makes room. `reached` once
   * that read waits.
   */
  function holdCounterRead(agentId: string, nth: number) {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let reach!: () => void;
    const reached = new Promise<void>((r) => (reach = r));
    let reads = 0;
    const undo = interleaveOnce(
      env.store,
      'vectorFeeds',
      'findOne',
      () => (reach(), released),
      ([filter]) => (filter as { _id?: unknown })._id === agentId && ++reads === nth,
    );
    return { reached, release, undo };
  }

  const droppedForRoom = {
    available: false,
    reason: expect.stringMatching(/index was dropped .* to make room for other agents/),
  };

  it("answers lexically, saying why, a recall whose agent's index is dropped for room while it catches up", async () => {
    const limits = { maxVectors: 5, fenceDelayMs: FENCE_MS };
    const [a, b] = [env.agent('dropped-a'), env.agent('dropped-b')];
    await append(a, 3000, 3);
    await append(b, 3100, 3);
    const indexes = new VectorIndexes(env.store, limits);
    expect(nearestId(await indexes.nearest(a, MODEL, vector(3000), 1))).toBe(`${a}-v3000`);
    // One more of A's: its next recall's catch-up applies it, once B's first recall has
    // loaded B, which drops A's index to make room.
    await append(a, 3003, 1);
    const held = holdCounterRead(a, 1);
    try {
      const first = indexes.nearest(a, MODEL, vector(3003), 1);
      await held.reached;
      expect(nearestId(await indexes.nearest(b, MODEL, vector(3100), 1))).toBe(`${b}-v3100`);
      held.release();
      expect(await first).toMatchObject(droppedForRoom);
    } finally {
      held.release();
      held.undo();
    }
    // The next recall loads it again.
    expect(nearestId(await indexes.nearest(a, MODEL, vector(3003), 1))).toBe(`${a}-v3003`);
    expect(indexes.size).toBeLessThanOrEqual(limits.maxVectors);
  });

  it("answers lexically, saying why, a recall whose agent's index is dropped for room before its load saved it", async () => {
    const persistDir = mkdtempSync(join(tmpdir(), 'vector-indexes-'));
    const limits = { maxVectors: 6, fenceDelayMs: FENCE_MS, persistDir, saveDelayMs: 3_600_000 };
    const [a, b] = [env.agent('unsaved-a'), env.agent('unsaved-b')];
    await append(a, 3200, 4);
    await append(b, 3300, 4);
    const indexes = new VectorIndexes(env.store, limits);
    // A's load reads the counter when it starts, then again in the catch-up it saves after:
    // that one waits until B's first recall has loaded B, which drops A's index for room
    // (whether B is kept then is the budget's to judge, not this test's).
    const held = holdCounterRead(a, 2);
    try {
      const first = indexes.nearest(a, MODEL, vector(3200), 1);
      await held.reached;
      await indexes.nearest(b, MODEL, vector(3300), 1);
      held.release();
      expect(await first).toMatchObject(droppedForRoom);
      expect(nearestId(await indexes.nearest(a, MODEL, vector(3201), 1))).toBe(`${a}-v3201`);
    } finally {
      held.release();
      held.undo();
      await indexes.close();
      rmSync(persistDir, { recursive: true, force: true });
    }
  });
});

describe('the vector indexes of a recall process, when its engine thread stops', () => {
  /** Stops the process's engine thread as a crash in it would (its 'exit' event). */
  async function stopEngineThread(): Promise<void> {
    await (VectorEngine.forProcess() as unknown as { thread: Worker }).thread.terminate();
  }

  it('loads each index it held anew into the next engine, instead of searching one that is gone', async () => {
    const agentId = env.agent('engine-stops');
    const indexes = new VectorIndexes(env.store, { maxVectors: 1_000_000, fenceDelayMs: FENCE_MS });
    await append(agentId, 5000, 100);
    expect(nearestId(await indexes.nearest(agentId, MODEL, vector(5003), 1))).toBe(`${agentId}-v5003`);
    await stopEngineThread();
    expect(nearestId(await indexes.nearest(agentId, MODEL, vector(5007), 1))).toBe(`${agentId}-v5007`);
    // Counted once, in the engine that holds it now.
    expect(indexes.size).toBe(100);
  });
});

describe('a closed set of vector indexes', () => {
  it('keeps nothing a load in flight at its close reads after it: the engine drops it, and it counts for no one', async () => {
    const agentId = env.agent('closed-while-loading');
    await append(agentId, 6000, 2_000);
    const indexes = new VectorIndexes(env.store, {
      maxVectors: 1_000_000,
      loadWaitMs: 0,
      fenceDelayMs: FENCE_MS,
    });
    const engine = VectorEngine.forProcess();
    const request = engine.request.bind(engine);
    const dropped: string[] = [];
    engine.request = ((req: Parameters<typeof request>[0]) => {
      if (req.op === 'drop') dropped.push(req.key);
      return request(req);
    }) as typeof engine.request;
    try {
      expect(await indexes.nearest(agentId, MODEL, vector(6003), 1)).toMatchObject({ available: false });
      await indexes.close();
      for (const deadline = Date.now() + 60_000; !dropped.some((k) => k.includes(agentId));) {
        if (Date.now() > deadline) throw new Error(`no drop of the load's index; held ${indexes.size}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(indexes.size).toBe(0);
    } finally {
      delete (engine as { request?: unknown }).request;
    }
  });
});
