import { countTerms } from './text';

/**
 * BM25, written once: recall's lexical score (core/recall.ts), the audit's frozen ranker
 * (audit/arms.ts) and the retrieval benchmark (bench/retrievalMetrics.ts) all score by it.
 */

const K1 = 1.2;
const B = 0.75;

/** A document as BM25 reads it: how often it holds each term, and its length in terms. */
export interface TermCounts {
  tf: ReadonlyMap<string, number>;
  length: number;
}

/** The counts of a text's terms; of those in `only` alone when given (the others never score). */
export function termCounts(text: string, only?: ReadonlySet<string>): TermCounts {
  const { terms, termCounts: counts } = countTerms(text);
  return storedTermCounts(terms, counts, only);
}

/**
 * The same from terms and their counts as an entry stores them (core/entry.ts `termCounts`):
 * its length is every term's count, its frequencies those of `only`'s terms when given.
 */
export function storedTermCounts(
  terms: readonly string[],
  counts: readonly number[],
  only?: ReadonlySet<string>,
): TermCounts {
  const tf = new Map<string, number>();
  let length = 0;
  terms.forEach((t, i) => {
    length += counts[i]!;
    if (!only || only.has(t)) tf.set(t, counts[i]!);
  });
  return { tf, length };
}

/**
 * Each document's BM25 score against the query, in the documents' order (0 for one holding
 * no query term), with the idf and the average length taken over `docs`: the caller's choice
 * of documents is the collection the statistics describe. The ceiling is the sum of the
 * query terms' idf, what a document of average length holding every term once would score;
 * the hybrid fusion measures a score against it (core/hybrid.ts).
 */
export function bm25(
  queryTerms: readonly string[],
  docs: readonly TermCounts[],
): { scores: number[]; ceiling: number } {
  const n = docs.length;
  const avgLength = n ? docs.reduce((s, d) => s + d.length, 0) / n : 1;
  const idf = new Map<string, number>();
  for (const t of queryTerms) {
    const df = docs.filter((d) => d.tf.has(t)).length;
    idf.set(t, Math.log(1 + (n - df + 0.5) / (df + 0.5)));
  }
  const scores = docs.map(({ tf, length }) => {
    let score = 0;
    for (const t of queryTerms) {
      const f = tf.get(t) ?? 0;
      if (f)
        score += idf.get(t)! * ((f * (K1 + 1)) / (f + K1 * (1 - B + (B * length) / Math.max(avgLength, 1))));
    }
    return score;
  });
  let ceiling = 0;
  for (const t of new Set(queryTerms)) ceiling += idf.get(t)!;
  return { scores, ceiling };
}
