import { seededRandom } from '../core/seededRandom';

/**
 * Synthetic vectors shaped like text embeddings rather than uniform noise (on which every
 * index looks worse than it is and quantisation better): 2,000 topic centroids that share a
 * common direction (cosine ≈ 0.5 between centroids, as text embeddings are anisotropic),
 * topics drawn with a skew (a few popular ones, a long tail), each vector its centroid plus
 * Gaussian noise to a cosine of about 0.8 with it, normalised. Queries are perturbed data
 * vectors (cosine ≈ 0.85 with the one they come from), not data vectors themselves. From a
 * seeded generator: every run measures the same data. Embedding as many texts would take this
 * kind of machine hours.
 */
const CENTROIDS = 2000;
export const SYNTHETIC_DATA = `synthetic: ${CENTROIDS} skewed topic centroids (cosine ≈ 0.5 apart), vectors at cosine ≈ 0.8 to theirs, queries at ≈ 0.85 to a data vector`;

/** Weight of the direction all centroids share: cosine ≈ w²/(1 + w²) between two of them. */
const COMMON_WEIGHT = 1;

export interface TextLikeVectors {
  vectors: Float32Array;
  queries: Float32Array;
  /** The generator, as it stands after the data: further draws continue the same sequence. */
  random: () => number;
}

export function textLikeVectors(opts: {
  n: number;
  queries: number;
  dimensions: number;
  seed: number;
}): TextLikeVectors {
  const { n, dimensions } = opts;
  /** Per-dimension noise for a cosine c with the vector perturbed: √((1/c² − 1)/d). */
  const spread = (cosine: number) => Math.sqrt((1 / cosine ** 2 - 1) / dimensions);
  const row = (m: Float32Array, i: number) => m.subarray(i * dimensions, (i + 1) * dimensions);
  const random = seededRandom(opts.seed);
  const gaussian = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  /** Into `out` at `at`: `base` (or nothing) plus Gaussian noise of `sigma` per dimension, normalised. */
  const perturbed = (out: Float32Array, at: number, base: Float32Array | null, sigma: number) => {
    let norm = 0;
    for (let j = 0; j < dimensions; j++) {
      const x = (base?.[j] ?? 0) + sigma * gaussian();
      out[at + j] = x;
      norm += x * x;
    }
    for (let j = 0; j < dimensions; j++) out[at + j]! /= Math.sqrt(norm);
  };
  const common = new Float32Array(dimensions);
  perturbed(common, 0, null, 1);
  const shared = common.map((x) => COMMON_WEIGHT * x);
  const centroids = new Float32Array(CENTROIDS * dimensions);
  for (let c = 0; c < CENTROIDS; c++) perturbed(centroids, c * dimensions, shared, 1 / Math.sqrt(dimensions));
  const vectors = new Float32Array(n * dimensions);
  for (let i = 0; i < n; i++) {
    // Squaring skews the draw toward the first centroids: popular topics and a long tail.
    const c = Math.floor(CENTROIDS * random() ** 2);
    perturbed(vectors, i * dimensions, row(centroids, c), spread(0.8));
  }
  const queries = new Float32Array(opts.queries * dimensions);
  for (let q = 0; q < opts.queries; q++) {
    perturbed(queries, q * dimensions, row(vectors, Math.floor(random() * n)), spread(0.85));
  }
  return { vectors, queries, random };
}
