import { spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyStore } from '../../store/verify';
import {
  VectorIndexes,
  type SavedMeta,
  type SemanticSearch,
  type VectorIndexLimits,
} from '../../store/vectorIndexes';
import { dropVectors, encodeVector, feedKey, takeChangeNumbers } from '../../store/vectors';
import { OWNER_FILE, persistedIndexes } from '../../vectorEngine/persisted';
import { startTestEnv, type TestEnv } from '../support/env';
import { failOnce } from '../support/faults';
import { anyFileHolds, markerVector } from '../support/vectorBytes';

/**
 * The vector indexes a process persists, against the real store: a process that starts opens
 * what it saved and reads only the changes since; an erasure leaves nothing of the vector on
 * disk, whether the process holding the index is running or was stopped; `memgate verify`
 * says when a persisted index still holds an erased vector.
 */

let env: TestEnv;
const dirs: string[] = [];
beforeAll(async () => {
  env = await startTestEnv();
});
afterAll(async () => {
  await env?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const MODEL = 'test-model';
const DIMENSIONS = 48;
const vector = (i: number) => markerVector(i + 1, DIMENSIONS);
const id = (agentId: string, i: number) => `${agentId}-v${i}`;

function limits(): VectorIndexLimits {
  const persistDir = mkdtempSync(join(tmpdir(), 'vector-indexes-'));
  dirs.push(persistDir);
  // No timed save or sweep: each test saves and sweeps when it means to.
  return {
    maxVectors: 1_000_000,
    fenceDelayMs: 60_000,
    persistDir,
    saveDelayMs: 3_600_000,
    erasureSweepMs: 3_600_000,
  };
}

/** `n` vector records from `from`, as a writer leaves them: numbers taken, then the records. */
async function append(agentId: string, from: number, n: number): Promise<void> {
  const first = await takeChangeNumbers(env.store, agentId, n);
  await env.store.vectors.insertMany(
    Array.from({ length: n }, (_, i) => ({
      _id: id(agentId, from + i),
      agentId,
      model: MODEL,
      dimensions: DIMENSIONS,
      vector: encodeVector(vector(from + i)),
      textHash: '',
      seq: first + i,
      feedKey: feedKey(agentId, first + i),
      at: Date.now(),
    })),
  );
}

/** Counts the store's reads of an agent's whole set of vectors (a load) while `fn` runs. */
async function fullLoads<T>(fn: () => Promise<T>): Promise<{ value: T; loads: number }> {
  const vectors = env.store.vectors;
  const find = vectors.find.bind(vectors);
  let loads = 0;
  vectors.find = ((filter: Record<string, unknown>, ...rest: unknown[]) => {
    if (filter && !('feedKey' in filter) && !('_id' in filter)) loads++;
    return (find as (...a: unknown[]) => unknown)(filter, ...rest);
  }) as typeof vectors.find;
  try {
    return { value: await fn(), loads };
  } finally {
    delete (vectors as { find?: unknown }).find;
  }
}

const nearest = (indexes: VectorIndexes, agentId: string, i: number) =>
  indexes.nearest(agentId, MODEL, vector(i), 1);
const nearestId = (s: SemanticSearch) => (s.available ? s.neighbours[0]?.id : undefined);

describe('a persisted vector index', () => {
  it('is opened by the next process, which reads only the changes made since', async () => {
    const agentId = env.agent('persisted');
    const l = limits();
    await append(agentId, 0, 300);
    const first = new VectorIndexes(env.store, l);
    expect(nearestId(await nearest(first, agentId, 5))).toBe(id(agentId, 5));
    await first.close();

    await append(agentId, 300, 20);
    const second = new VectorIndexes(env.store, l);
    const { value, loads } = await fullLoads(async () => [
      await nearest(second, agentId, 7),
      await nearest(second, agentId, 310),
    ]);
    expect(value.map(nearestId)).toEqual([id(agentId, 7), id(agentId, 310)]);
    // Opened from disk: the agent's vectors were not read again, only the feed since.
    expect(loads).toBe(0);
    await second.close();
  });

  it('leaves no erased vector on disk: deleted at once, and not in the next save', async () => {
    const agentId = env.agent('erased');
    const l = limits();
    await append(agentId, 0, 100);
    const indexes = new VectorIndexes(env.store, l);
    await nearest(indexes, agentId, 1);
    // Saved once loaded: the vector is in the files, where this test can find it.
    expect(anyFileHolds(l.persistDir!, vector(3))).toBe(true);

    await dropVectors(env.store, agentId, [id(agentId, 3)], Date.now());
    expect(nearestId(await nearest(indexes, agentId, 3))).not.toBe(id(agentId, 3));
    // Applying the erasure deleted what was persisted, before any new save.
    expect(readdirSync(l.persistDir!)).toEqual([OWNER_FILE]);

    await indexes.close();
    expect(readdirSync(l.persistDir!).length).toBeGreaterThan(0);
    expect(anyFileHolds(l.persistDir!, vector(3))).toBe(false);
    expect(anyFileHolds(l.persistDir!, vector(4))).toBe(true);
  });

  it('saved by a process that is stopped: verify names the erased vector it holds, and the next process’s sweep deletes it', async () => {
    const agentId = env.agent('stopped');
    const l = limits();
    await append(agentId, 0, 50);
    const stopped = new VectorIndexes(env.store, l);
    await nearest(stopped, agentId, 1);
    await stopped.close();
    await dropVectors(env.store, agentId, [id(agentId, 8)], Date.now());

    const report = await verifyStore(env.store, { agentId, batch: 100, vectorIndexDir: l.persistDir! });
    expect(report.ok).toBe(false);
    expect(report.findings.map((f) => [f.check, f.id])).toEqual([['erased-in-vector-index', id(agentId, 8)]]);

    const next = new VectorIndexes(env.store, l);
    await next.sweepErasures();
    expect(anyFileHolds(l.persistDir!, vector(8))).toBe(false);
    expect((await verifyStore(env.store, { agentId, batch: 100, vectorIndexDir: l.persistDir! })).ok).toBe(
      true,
    );
    // The agent's next recall loads from the store, without the erased vector.
    expect(nearestId(await nearest(next, agentId, 8))).not.toBe(id(agentId, 8));
    expect(nearestId(await nearest(next, agentId, 9))).toBe(id(agentId, 9));
    await next.close();
    expect(existsSync(l.persistDir!)).toBe(true);
  });

  it('whose opening a store error fails is still swept of an erased vector, and opens again at the next recall', async () => {
    const agentId = env.agent('open-failed');
    const l = limits();
    await append(agentId, 0, 50);
    const stopped = new VectorIndexes(env.store, l);
    await nearest(stopped, agentId, 1);
    await stopped.close();

    const next = new VectorIndexes(env.store, l);
    // The store fails the read of the agent's feed as the saved index is opened.
    const undo = failOnce(env.store, 'vectorFeeds', 'findOne');
    try {
      await expect(nearest(next, agentId, 1)).rejects.toThrow('injected failure');
    } finally {
      undo();
    }
    await dropVectors(env.store, agentId, [id(agentId, 8)], Date.now());
    await next.sweepErasures();
    expect(anyFileHolds(l.persistDir!, vector(8))).toBe(false);
    expect(nearestId(await nearest(next, agentId, 8))).not.toBe(id(agentId, 8));
    expect(nearestId(await nearest(next, agentId, 9))).toBe(id(agentId, 9));
    await next.close();
  });

  it('cut off (a machine lost before its save reached the disk) is loaded afresh, swept away, and named by verify', async () => {
    const [agentId, other] = [env.agent('cut-off'), env.agent('cut-off-other')];
    const l = limits();
    await append(agentId, 0, 30);
    await append(other, 100, 30);
    const stopped = new VectorIndexes(env.store, l);
    await nearest(stopped, agentId, 1);
    await nearest(stopped, other, 101);
    await stopped.close();
    // The agent's state file empty, as a save left it whose bytes never reached the disk.
    const [cut] = persistedIndexes(l.persistDir!).filter(
      (p) => (p.header?.meta as SavedMeta).agentId === agentId,
    );
    truncateSync(`${cut!.at.base}.state`, 0);
    await dropVectors(env.store, other, [id(other, 104)], Date.now());

    const report = await verifyStore(env.store, { batch: 100, vectorIndexDir: l.persistDir! });
    expect(report.findings.map((f) => f.check).sort()).toEqual([
      'erased-in-vector-index',
      'unreadable-vector-index',
    ]);

    const next = new VectorIndexes(env.store, l);
    // The other agent's erasure is swept all the same, and the unreadable file goes.
    await next.sweepErasures();
    expect(anyFileHolds(l.persistDir!, vector(104))).toBe(false);
    expect(existsSync(`${cut!.at.base}.state`)).toBe(false);
    expect((await verifyStore(env.store, { batch: 100, vectorIndexDir: l.persistDir! })).findings).toEqual(
      [],
    );
    expect(nearestId(await nearest(next, agentId, 7))).toBe(id(agentId, 7));
    await next.close();

    // Opened with its state cut off, it is loaded from the store instead.
    const again = persistedIndexes(l.persistDir!).find(
      (p) => (p.header?.meta as SavedMeta).agentId === agentId,
    );
    truncateSync(`${again!.at.base}.state`, 3);
    const third = new VectorIndexes(env.store, l);
    expect(nearestId(await nearest(third, agentId, 9))).toBe(id(agentId, 9));
    await third.close();
  });

  it('is kept by one process at a time: one that finds the directory held by another running process neither opens nor saves there', async () => {
    const agentId = env.agent('two-processes');
    const l = limits();
    await append(agentId, 0, 20);
    // Another process holds the directory (a `memgate serve` beside a `memgate worker`).
    const other = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      mkdirSync(l.persistDir!, { recursive: true });
      writeFileSync(join(l.persistDir!, OWNER_FILE), String(other.pid));
      const second = new VectorIndexes(env.store, l);
      expect(nearestId(await nearest(second, agentId, 3))).toBe(id(agentId, 3));
      await second.close();
      expect(readdirSync(l.persistDir!)).toEqual([OWNER_FILE]);
    } finally {
      other.kill('SIGKILL');
      await new Promise((done) => other.once('exit', done));
    }
    // Gone, it leaves the directory to the next process.
    const next = new VectorIndexes(env.store, l);
    expect(nearestId(await nearest(next, agentId, 4))).toBe(id(agentId, 4));
    await next.close();
    expect(readdirSync(l.persistDir!).length).toBeGreaterThan(1);
  });

  it('is built afresh from the store once removals leave scrubs past a share of it, and saved without them', async () => {
    const agentId = env.agent('compacted');
    const l = limits();
    await append(agentId, 0, 200);
    const indexes = new VectorIndexes(env.store, l);
    await nearest(indexes, agentId, 1);
    const removed = Array.from({ length: 100 }, (_, i) => id(agentId, i));
    await dropVectors(env.store, agentId, removed, Date.now());
    // The catch-up of this search applies the removals: 100 scrubs beside 100 vectors.
    await nearest(indexes, agentId, 150);

    const saved = () => persistedIndexes(l.persistDir!).map(({ header }) => header);
    for (const deadline = Date.now() + 60_000; ; await new Promise((r) => setTimeout(r, 100))) {
      const [header] = saved();
      if (header?.scrubs.length === 0 && header.labels === 100) break;
      if (Date.now() > deadline) throw new Error(`still saved as ${JSON.stringify(header ?? null)}`);
    }
    const answers = await Promise.all([100, 150, 199, 5, 50].map((i) => nearest(indexes, agentId, i)));
    expect(answers.map(nearestId).slice(0, 3)).toEqual([
      id(agentId, 100),
      id(agentId, 150),
      id(agentId, 199),
    ]);
    for (const gone of answers.slice(3)) expect(removed).not.toContain(nearestId(gone));
    expect(anyFileHolds(l.persistDir!, vector(5))).toBe(false);
    await indexes.close();
  });

  it('with no room in the budget to build it beside, lets the index go with its file, and loads it afresh', async () => {
    const [a, b] = [env.agent('compact-full-a'), env.agent('compact-full-b')];
    const l = { ...limits(), maxVectors: 250 };
    await append(a, 0, 150);
    await append(b, 1000, 100);
    const indexes = new VectorIndexes(env.store, l);
    await nearest(indexes, a, 1);
    await nearest(indexes, b, 1001);
    // 80 vectors and 70 scrubs: a build beside them would need 80 more, past the budget of
    // 250 beside b's 100.
    const { value, loads } = await fullLoads(async () => {
      await dropVectors(
        env.store,
        a,
        Array.from({ length: 70 }, (_, i) => id(a, i)),
        Date.now(),
      );
      return nearest(indexes, a, 100);
    });
    expect(nearestId(value)).toBe(id(a, 100));
    // One read of a's vectors, the load after the drop: no build beside it that could not be kept.
    expect(loads).toBe(1);
    expect(indexes.size).toBe(180);
    const [header] = persistedIndexes(l.persistDir!)
      .map((p) => p.header)
      .filter((h) => (h?.meta as { agentId?: string } | undefined)?.agentId === a);
    expect(header).toMatchObject({ scrubs: [], labels: 80 });
    await indexes.close();
  });
});
