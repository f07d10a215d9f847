/**
 * The retrieval benchmark's pure parts: memgate's lexical ranking of a set of documents,
 * the rank metrics, and a paired bootstrap of the difference between two arms.
 */
import { InvalidInputError } from '../core/errors';
import { bm25, termCounts } from '../core/bm25';
import { seededRandom } from '../core/seededRandom';
import { terms } from '../core/text';

export interface Doc {
  id: string;
  text: string;
}

/**
 * The documents sharing a term with the query with their BM25 score (core/bm25.ts), best
 * first, the statistics over that candidate set as recall takes them, without the salience
 * weight, which a benchmark of stored turns has no use for; ties go to the later document,
 * as recall's go to the newer write. With the ceiling the fusion measures a score against,
 * as `scoreLexical` gives it.
 */
export function bm25Ranking(
  query: string,
  docs: readonly Doc[],
): { id: string; score: number }[] & { ceiling: number } {
  const queryTerms = terms(query);
  const candidates = docs
    .map((d, order) => ({ id: d.id, order, ...termCounts(d.text) }))
    .filter((d) => queryTerms.some((t) => d.tf.has(t)));
  const { scores, ceiling } = bm25(queryTerms, candidates);
  const ranked = candidates
    .map((d, i) => ({ id: d.id, order: d.order, score: scores[i]! }))
    .filter((d) => d.score > 0)
    .sort((a, b) => b.score - a.score || b.order - a.order)
    .map((d) => ({ id: d.id, score: d.score }));
  return Object.assign(ranked, { ceiling });
}

/** The documents with their cosine similarity to the query (all vectors unit length), best first. */
export function cosineRanking(
  query: Float32Array,
  docs: readonly { id: string; vector: Float32Array }[],
): { id: string; similarity: number }[] {
  return docs
    .map((d, order) => {
      let dot = 0;
      for (let i = 0; i < query.length; i++) dot += query[i]! * d.vector[i]!;
      return { id: d.id, order, dot };
    })
    .sort((a, b) => b.dot - a.dot || a.order - b.order)
    .map((d) => ({ id: d.id, similarity: d.dot }));
}

function requireRelevant(relevant: ReadonlySet<string>): void {
  // Every metric here divides by the relevant set (or its ideal ranking): empty has no score.
  if (relevant.size === 0) throw new InvalidInputError('a rank metric needs at least one relevant id');
}

function hitsInTop(ranking: readonly string[], relevant: ReadonlySet<string>, k: number): number {
  return ranking.slice(0, k).filter((id) => relevant.has(id)).length;
}

/** The fraction of the relevant ids in the top k. */
export function recallAt(ranking: readonly string[], relevant: ReadonlySet<string>, k: number): number {
  requireRelevant(relevant);
  return hitsInTop(ranking, relevant, k) / relevant.size;
}

/** 1 when every relevant id is in the top k, else 0 (LongMemEval's `recall_all`). */
export function recallAllAt(ranking: readonly string[], relevant: ReadonlySet<string>, k: number): number {
  requireRelevant(relevant);
  return hitsInTop(ranking, relevant, k) === relevant.size ? 1 : 0;
}

/** 1 when some relevant id is in the top k, else 0 (LongMemEval's `recall_any`). */
export function recallAnyAt(ranking: readonly string[], relevant: ReadonlySet<string>, k: number): number {
  requireRelevant(relevant);
  return hitsInTop(ranking, relevant, k) > 0 ? 1 : 0;
}

/** NDCG at k with binary relevance: DCG of the top k over that of the ideal ranking. */
export function ndcgAt(ranking: readonly string[], relevant: ReadonlySet<string>, k: number): number {
  requireRelevant(relevant);
  const gain = (rank: number) => 1 / Math.log2(rank + 2);
  let dcg = 0;
  ranking.slice(0, k).forEach((id, rank) => {
    if (relevant.has(id)) dcg += gain(rank);
  });
  let ideal = 0;
  for (let rank = 0; rank < Math.min(k, relevant.size); rank++) ideal += gain(rank);
  return dcg / ideal;
}

export function mean(xs: readonly number[]): number {
  return xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : NaN;
}

/**
 * The percentile interval of mean(b − a) under resampling the paired items with
 * replacement: the items (questions) are the unit of variation, and pairing removes what
 * the two arms share (a hard question is hard for both).
 */
export function pairedBootstrapCI(
  a: readonly number[],
  b: readonly number[],
  opts: { resamples: number; seed: number; level?: number },
): [number, number] {
  if (a.length !== b.length || a.length === 0) {
    throw new InvalidInputError(
      `paired bootstrap needs two equal, non-empty arms (got ${a.length} and ${b.length})`,
    );
  }
  const diffs = a.map((x, i) => b[i]! - x);
  const random = seededRandom(opts.seed);
  const means: number[] = [];
  for (let r = 0; r < opts.resamples; r++) {
    let sum = 0;
    for (let i = 0; i < diffs.length; i++) sum += diffs[Math.floor(random() * diffs.length)]!;
    means.push(sum / diffs.length);
  }
  means.sort((x, y) => x - y);
  const tail = (1 - (opts.level ?? 0.95)) / 2;
  const at = (q: number) => means[Math.min(means.length - 1, Math.max(0, Math.floor(q * means.length)))]!;
  return [at(tail), at(1 - tail)];
}
