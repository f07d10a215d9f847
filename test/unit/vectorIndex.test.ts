import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../core/errors';
import {
  ID_OVERHEAD_BYTES,
  seededRandom,
  VISIT_BUDGET,
  VectorIndex,
  type Neighbour,
} from '../../core/vectorIndex';

function gaussian(random: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
}

function unit(vector: Float32Array): Float32Array {
  const norm = Math.hypot(...vector);
  return vector.map((x) => x / norm);
}

function randomVector(random: () => number, dimensions: number): Float32Array {
  return unit(Float32Array.from({ length: dimensions }, () => gaussian(random)));
}

/** Points around `centres` random unit centres: centre plus gaussian noise of norm about `noise`. */
function clustered(seed: number, dimensions: number, centres: number, noise: number) {
  const random = seededRandom(seed);
  const middles = Array.from({ length: centres }, () => randomVector(random, dimensions));
  const sigma = noise / Math.sqrt(dimensions);
  return () => {
    const middle = middles[Math.floor(random() * centres)]!;
    return unit(middle.map((x) => x + sigma * gaussian(random)));
  };
}

function cosine(a: Float32Array, b: Float32Array): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i]! * b[i]!;
  return sum / Math.sqrt(a.reduce((s, x) => s + x * x, 0) * b.reduce((s, x) => s + x * x, 0));
}

/** The exact top k by true cosine, ties by id. */
function bruteForce(vectors: Map<string, Float32Array>, query: Float32Array, k: number): Neighbour[] {
  return [...vectors]
    .map(([id, v]) => ({ id, similarity: cosine(query, v) }))
    .sort((a, b) => b.similarity - a.similarity || (a.id < b.id ? -1 : 1))
    .slice(0, k);
}

/** Quantisation moves a similarity by about 0.001 at these sizes; 0.02 is the contract. */
const TOLERANCE = 0.02;

/**
 * The result is a correct top k up to quantisation: as long as the truth, sorted, each
 * similarity near the true cosine, and nothing left out that beats an included id by
 * more than the tolerance.
 */
function expectNearExact(
  result: Neighbour[],
  vectors: Map<string, Float32Array>,
  query: Float32Array,
  k: number,
) {
  const truth = bruteForce(vectors, query, k);
  expect(result).toHaveLength(truth.length);
  expect(new Set(result.map((r) => r.id)).size).toBe(result.length);
  result.forEach((r, i) => {
    expect(vectors.has(r.id)).toBe(true);
    expect(Math.abs(r.similarity - cosine(query, vectors.get(r.id)!))).toBeLessThan(TOLERANCE);
    expect(Math.abs(r.similarity - truth[i]!.similarity)).toBeLessThan(TOLERANCE);
    if (i > 0) expect(r.similarity).toBeLessThanOrEqual(result[i - 1]!.similarity);
  });
}

describe('VectorIndex input', () => {
  const index = new VectorIndex(4);
  it.each([
    ['too few entries', new Float32Array(3).fill(1)],
    ['too many entries', new Float32Array(5).fill(1)],
    ['a NaN entry', Float32Array.of(1, Number.NaN, 0, 0)],
    ['an infinite entry', Float32Array.of(1, Number.POSITIVE_INFINITY, 0, 0)],
    ['no direction', new Float32Array(4)],
  ])('refuses a vector with %s, as insert and as query, changing nothing', (_, vector) => {
    expect(() => index.upsert('a', vector)).toThrow(InvalidInputError);
    expect(() => index.search(vector, 3)).toThrow(InvalidInputError);
    expect(index.size).toBe(0);
    expect(index.has('a')).toBe(false);
  });

  it('refuses a dimension count that is not a positive integer, and a k that is not an integer', () => {
    for (const dimensions of [0, -1, 2.5, Number.NaN]) {
      expect(() => new VectorIndex(dimensions)).toThrow(InvalidInputError);
    }
    expect(() => index.search(Float32Array.of(1, 0, 0, 0), 1.5)).toThrow(InvalidInputError);
  });

  it('answers k < 1 and an empty index with nothing, and normalises what it is given', () => {
    const small = new VectorIndex(4);
    expect(small.search(Float32Array.of(1, 0, 0, 0), 5)).toEqual([]);
    small.upsert('big', Float32Array.of(1e30, 1e30, 0, 0));
    small.upsert('tiny', Float32Array.of(-1e-30, 0, 0, 0));
    expect(small.search(Float32Array.of(3, 3, 0, 0), 0)).toEqual([]);
    expect(small.search(Float32Array.of(3, 3, 0, 0), -2)).toEqual([]);
    const [big, tiny] = small.search(Float32Array.of(3, 3, 0, 0), 5);
    expect(big!.id).toBe('big');
    expect(big!.similarity).toBeCloseTo(1, 2);
    expect(tiny!.similarity).toBeCloseTo(-Math.SQRT1_2, 2);
  });
});

describe('VectorIndex ties', () => {
  it('breaks them by id, including where k cuts', () => {
    const index = new VectorIndex(3);
    for (const id of ['e', 'c', 'a', 'd', 'b']) index.upsert(id, Float32Array.of(1, 2, 3));
    index.upsert('z', Float32Array.of(3, 2, 1));
    expect(index.search(Float32Array.of(1, 2, 3), 3).map((r) => r.id)).toEqual(['a', 'b', 'c']);
    expect(index.search(Float32Array.of(1, 2, 3), 6).map((r) => r.id)).toEqual([
      'a',
      'b',
      'c',
      'd',
      'e',
      'z',
    ]);
  });
});

describe('VectorIndex below the flat threshold (fast-check)', () => {
  const dimensions = 24;
  const cases = fc.record({
    seed: fc.integer(),
    n: fc.integer({ min: 0, max: 300 }),
    k: fc.integer({ min: 1, max: 40 }),
  });

  it('is the brute-force top k by true cosine, up to quantisation', () => {
    fc.assert(
      fc.property(cases, ({ seed, n, k }) => {
        const random = seededRandom(seed);
        const index = new VectorIndex(dimensions);
        const vectors = new Map<string, Float32Array>();
        for (let i = 0; i < n; i++) {
          // Not unit length: the index normalises.
          const v = randomVector(random, dimensions).map((x) => x * (0.1 + 5 * random()));
          vectors.set(`v${i}`, v);
          index.upsert(`v${i}`, v);
        }
        for (let q = 0; q < 3; q++) {
          const query = randomVector(random, dimensions);
          expectNearExact(index.search(query, k), vectors, query, k);
        }
      }),
      { numRuns: 60 },
    );
  });

  it('returns exactly the brute-force ids on well-separated data', () => {
    fc.assert(
      fc.property(cases, ({ seed, n, k }) => {
        // Each vector its own axis plus a shared one; the query weighs the axes by a shuffled
        // 1, 2, …, so neighbouring ranks differ by far more than quantisation moves them.
        const random = seededRandom(seed);
        const count = Math.min(n, 60);
        const index = new VectorIndex(count + 1);
        const vectors = new Map<string, Float32Array>();
        for (let i = 0; i < count; i++) {
          const v = new Float32Array(count + 1);
          v[i] = 1;
          v[count] = 0.3;
          vectors.set(`v${i}`, v);
          index.upsert(`v${i}`, v);
        }
        const weights = Array.from({ length: count }, (_, i) => i + 1);
        for (let i = count - 1; i > 0; i--) {
          const j = Math.floor(random() * (i + 1));
          [weights[i], weights[j]] = [weights[j]!, weights[i]!];
        }
        const query = Float32Array.from([...weights, 1]);
        const truth = bruteForce(vectors, query, k);
        expect(index.search(query, k).map((r) => r.id)).toEqual(truth.map((t) => t.id));
      }),
      { numRuns: 60 },
    );
  });

  it('never lets a rejected id through, and still returns min(k, accepted) of the best accepted', () => {
    fc.assert(
      fc.property(cases, fc.integer({ min: 0, max: 4 }), ({ seed, n, k }, modulus) => {
        const random = seededRandom(seed);
        const index = new VectorIndex(dimensions);
        const vectors = new Map<string, Float32Array>();
        for (let i = 0; i < n; i++) {
          const v = randomVector(random, dimensions);
          index.upsert(`v${i}`, v);
          if (modulus === 0 || i % (modulus + 1) === 0) vectors.set(`v${i}`, v);
        }
        const asked = new Set<string>();
        const query = randomVector(random, dimensions);
        const result = index.search(query, k, (id) => {
          expect(asked.has(id)).toBe(false);
          asked.add(id);
          return vectors.has(id);
        });
        for (const r of result) expect(vectors.has(r.id)).toBe(true);
        expectNearExact(result, vectors, query, k);
      }),
      { numRuns: 60 },
    );
  });
});

type Op = { op: 'upsert'; id: string; seed: number } | { op: 'remove'; id: string };

const ops: fc.Arbitrary<Op[]> = fc.array(
  fc.oneof(
    {
      weight: 3,
      arbitrary: fc.record({
        op: fc.constant('upsert' as const),
        id: fc.integer({ min: 0, max: 15 }).map((i) => `m${i}`),
        seed: fc.integer(),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        op: fc.constant('remove' as const),
        id: fc.integer({ min: 0, max: 15 }).map((i) => `m${i}`),
      }),
    },
  ),
  { maxLength: 80 },
);

describe('VectorIndex against a Map model (fast-check)', () => {
  it('agrees on size, has and what a search can return, over any sequence of upserts and removes', () => {
    const dimensions = 8;
    fc.assert(
      fc.property(ops, fc.integer(), (sequence, querySeed) => {
        const index = new VectorIndex(dimensions);
        const model = new Map<string, Float32Array>();
        for (const step of sequence) {
          if (step.op === 'upsert') {
            const v = randomVector(seededRandom(step.seed), dimensions);
            index.upsert(step.id, v);
            model.set(step.id, v);
          } else {
            expect(index.remove(step.id)).toBe(model.delete(step.id));
          }
          expect(index.size).toBe(model.size);
          for (let i = 0; i <= 15; i++) expect(index.has(`m${i}`)).toBe(model.has(`m${i}`));
        }
        // The current vector of every id is what the index holds: each finds itself.
        for (const [id, v] of model) {
          const own = index.search(v, model.size).find((r) => r.id === id);
          expect(own?.similarity).toBeGreaterThan(0.99);
        }
        const query = randomVector(seededRandom(querySeed), dimensions);
        expectNearExact(index.search(query, 16), model, query, 16);
      }),
      { numRuns: 150 },
    );
  });
});

describe('VectorIndex as an inverted file', () => {
  it('finds at least 90% of the true 10 nearest on clustered data of 50,000 vectors', () => {
    const dimensions = 48;
    const point = clustered(7, dimensions, 400, 0.8);
    const index = new VectorIndex(dimensions);
    const vectors = Array.from({ length: 50_000 }, point);
    vectors.forEach((v, i) => index.upsert(`v${i}`, v));
    let found = 0;
    const queries = 60;
    for (let q = 0; q < queries; q++) {
      const query = point();
      // Brute force by hand: sorting 50,000 neighbours per query would dominate the test.
      const truth: { id: string; similarity: number }[] = [];
      vectors.forEach((v, i) => {
        let similarity = 0; // both unit length: the cosine is the dot product
        for (let d = 0; d < dimensions; d++) similarity += query[d]! * v[d]!;
        if (truth.length === 10 && similarity <= truth[9]!.similarity) return;
        truth.splice(10 - 1, 1, { id: `v${i}`, similarity });
        truth.sort((a, b) => b.similarity - a.similarity);
      });
      const result = index.search(query, 10);
      expect(result).toHaveLength(10);
      found += result.filter((r) => truth.some((t) => t.id === r.id)).length;
    }
    expect(found / (10 * queries)).toBeGreaterThanOrEqual(0.9);
  });

  it('keeps every live id findable exactly once, and no removed one, through removals and replacements', () => {
    const dimensions = 16;
    const point = clustered(11, dimensions, 50, 0.8);
    const index = new VectorIndex(dimensions);
    const live = new Set<string>();
    const total = VISIT_BUDGET * 2 + 500;
    for (let i = 0; i < total; i++) {
      index.upsert(`v${i}`, point());
      live.add(`v${i}`);
    }
    const random = seededRandom(3);
    for (let i = 0; i < total; i++) {
      const id = `v${Math.floor(random() * total)}`;
      if (random() < 0.7) {
        expect(index.remove(id)).toBe(live.delete(id));
      } else {
        index.upsert(id, point());
        live.add(id);
      }
    }
    expect(index.size).toBe(live.size);
    // k = size makes the search probe every list, so it must list every member once.
    const everything = index.search(point(), index.size);
    expect(everything).toHaveLength(live.size);
    expect(new Set(everything.map((r) => r.id))).toEqual(live);
    // A filter that rejects nearly everything still yields k accepted ids.
    const wanted = [...live].slice(0, 5);
    const few = index.search(point(), 5, (id) => wanted.includes(id));
    expect(few.map((r) => r.id).sort()).toEqual([...wanted].sort());
  });

  it('builds the same index from the same operations', () => {
    const dimensions = 16;
    const build = () => {
      const point = clustered(5, dimensions, 30, 0.8);
      const index = new VectorIndex(dimensions);
      for (let i = 0; i < VISIT_BUDGET + 3000; i++) index.upsert(`v${i}`, point());
      for (let i = 0; i < 2000; i += 3) index.remove(`v${i}`);
      return index;
    };
    // The ids offered to `accept` come in the order the search visits them, list by list:
    // the same order means the same partition, not merely the same answer.
    const searched = (index: VectorIndex, query: Float32Array) => {
      const offered: string[] = [];
      const result = index.search(query, 50, (id) => offered.push(id) > 0);
      return { result, offered };
    };
    const [a, b] = [build(), build()];
    const random = seededRandom(9);
    for (let q = 0; q < 10; q++) {
      const query = randomVector(random, dimensions);
      expect(searched(a, query)).toEqual(searched(b, query));
    }
    expect(a.bytes).toBe(b.bytes);
  });

  it('holds about dimensions + 12 bytes a vector plus its id, and gives memory back', () => {
    const dimensions = 384;
    const point = clustered(13, dimensions, 20, 0.8);
    const index = new VectorIndex(dimensions);
    const n = VISIT_BUDGET + 1000;
    for (let i = 0; i < n; i++) index.upsert(`v${String(i).padStart(5, '0')}`, point());
    const idBytes = n * (ID_OVERHEAD_BYTES + 2 * 'v00000'.length);
    const perVector = (index.bytes - idBytes) / n;
    expect(perVector).toBeGreaterThanOrEqual(dimensions + 12);
    expect(perVector).toBeLessThanOrEqual(420);
    for (let i = 0; i < n - 100; i++) index.remove(`v${String(i).padStart(5, '0')}`);
    expect(index.size).toBe(100);
    // The last chunk halves once a quarter full: at most four times what 100 vectors need.
    expect(index.bytes).toBeLessThanOrEqual(4 * 100 * (dimensions + 12 + ID_OVERHEAD_BYTES + 12));
  });
});
