/**
 * What removals do to an index's answers (vectorEngine/thread.ts, Erasure): usearch marks a
 * removed slot free, and the engine fills it at once with a scrub vector, so that no file it
 * saves holds a removed vector. Scrubs stay in the graph until a new vector takes their slot.
 * This measures, in one run on the same data, the engine's index after a growing share of
 * its vectors was removed (`scrubbed`) beside an index built afresh from the vectors left
 * (`rebuilt`, what store/vectorIndexes.ts swaps in once scrubs outnumber the vectors held).
 *
 * Per share: recall@10 against exact cosine search over the vectors left, for deep recall (no
 * filter) and default recall (the filter, which every vector here passes), the share of
 * searches that came back with fewer than k (`shortShare`) and empty (`emptyShare`), and the
 * search time at the median and p99, through the engine thread as a recall calls it.
 *
 * Env: BENCH_REMOVALS_N vectors (default 20000), BENCH_REMOVALS_QUERIES (default 200).
 * Prints {"n","dimensions","k","data","shares":[{"removedShare","scrubbed","rebuilt"}]}.
 */
import { VectorEngine } from '../vectorEngine/engine';
import type { RecallState } from '../core/recall';
import { seededRandom } from '../core/seededRandom';
import { emit, percentile, round } from './support';
import { SYNTHETIC_DATA, textLikeVectors } from './syntheticVectors';

const N = Number(process.env.BENCH_REMOVALS_N ?? 20_000);
const QUERIES = Number(process.env.BENCH_REMOVALS_QUERIES ?? 200);
const DIMENSIONS = 384;
const K = 10;
const SHARES = [0, 0.1, 0.25, 0.5, 0.75, 0.9];
const BATCH = 512;
/** Default recall's filter at this time: every vector's state passes it. */
const NOW = 1_000;
const STATE: RecallState = {
  tier: 'hot',
  isActive: true,
  dormantAt: 2 * NOW,
  salience: { base: 0.5, at: 0 },
};

const engine = VectorEngine.forProcess();
const { vectors, queries } = textLikeVectors({
  n: N,
  queries: QUERIES,
  dimensions: DIMENSIONS,
  seed: 0x72656d76,
});
const row = (m: Float32Array, i: number) => m.subarray(i * DIMENSIONS, (i + 1) * DIMENSIONS);
let keys = 0;

async function add(key: string, labels: number[]): Promise<void> {
  for (let at = 0; at < labels.length; at += BATCH) {
    const part = labels.slice(at, at + BATCH);
    const matrix = new Float32Array(part.length * DIMENSIONS);
    part.forEach((i, j) => matrix.set(row(vectors, i), j * DIMENSIONS));
    await engine.request({
      op: 'apply',
      key,
      upserts: part.map((i) => ({ id: String(i), state: STATE })),
      vectors: matrix,
      removals: [],
    });
  }
}

async function built(labels: number[]): Promise<string> {
  const key = `removals-${keys++}`;
  await engine.request({ op: 'create', key, dimensions: DIMENSIONS });
  await add(key, labels);
  return key;
}

/** Exact top k among `live` by cosine (unit vectors: dot product). */
function exact(live: number[]): Set<string>[] {
  return Array.from({ length: QUERIES }, (_, q) => {
    const query = row(queries, q);
    const scored = live.map((i) => {
      const v = row(vectors, i);
      let dot = 0;
      for (let j = 0; j < DIMENSIONS; j++) dot += query[j]! * v[j]!;
      return { i, dot };
    });
    scored.sort((a, b) => b.dot - a.dot);
    return new Set(scored.slice(0, K).map((s) => String(s.i)));
  });
}

async function measure(key: string, truth: Set<string>[]) {
  const arm = async (filtered: boolean) => {
    let hits = 0;
    let short = 0;
    let empty = 0;
    const ms: number[] = [];
    for (let q = 0; q < QUERIES; q++) {
      const start = performance.now();
      const found = await engine.request({
        op: 'search',
        key,
        query: row(queries, q).slice(),
        k: K,
        ...(filtered ? { defaultRecallAt: NOW } : {}),
        sample: 0,
      });
      ms.push(performance.now() - start);
      hits += found.neighbours.filter((n) => truth[q]!.has(n.id)).length;
      if (found.neighbours.length < K) short++;
      if (found.neighbours.length === 0) empty++;
    }
    ms.sort((a, b) => a - b);
    return {
      recallAt10: round(hits / (K * QUERIES), 4),
      shortShare: round(short / QUERIES, 4),
      emptyShare: round(empty / QUERIES, 4),
      searchMs: { p50: round(percentile(ms, 50)), p99: round(percentile(ms, 99)) },
    };
  };
  return { deep: await arm(false), default: await arm(true) };
}

async function main(): Promise<void> {
  const order = Array.from({ length: N }, (_, i) => i);
  const random = seededRandom(0x6f726472);
  for (let i = N - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const scrubbed = await built(order);
  const shares = [];
  let removed = 0;
  for (const share of SHARES) {
    const upTo = Math.round(share * N);
    for (; removed < upTo; removed += BATCH) {
      const part = order.slice(removed, Math.min(upTo, removed + BATCH));
      await engine.request({
        op: 'apply',
        key: scrubbed,
        upserts: [],
        vectors: new Float32Array(0),
        removals: part.map(String),
      });
    }
    removed = upTo;
    const live = order.slice(upTo);
    process.stderr.write(
      `[vector-removals] ${Math.round(share * 100)} % removed: ${live.length} vectors left\n`,
    );
    const truth = exact(live);
    const rebuilt = await built(live);
    shares.push({
      removedShare: share,
      scrubbed: await measure(scrubbed, truth),
      rebuilt: await measure(rebuilt, truth),
    });
    await engine.request({ op: 'drop', key: rebuilt });
  }
  emit({ bench: 'vector-removals', n: N, dimensions: DIMENSIONS, k: K, data: SYNTHETIC_DATA, shares });
}

void main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
