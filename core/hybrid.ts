/**
 * Hybrid retrieval's fusion: a convex combination of the lexical and the semantic score, each
 * normalised to [0, 1] first (Bruch et al., 2023, "An Analysis of Fusion Functions for Hybrid
 * Retrieval"). It fuses scores, not ranks, because recall multiplies relevance by salience:
 * reciprocal-rank fusion gives the first ranks nearly equal relevance (1/61, 1/62, …), and
 * salience alone would then order them, so a fresh note that shares one word with the query
 * would outrank the entry that answers it.
 */

/** How a hit was found: by its words, by its meaning, or by both. */
export type FoundBy = 'lexical' | 'semantic' | 'both';

/**
 * The lexical share of a hybrid relevance; the semantic share is the rest. Equal shares:
 * neither is fitted to one corpus (bench/retrieval measures the choice, it did not make it).
 */
export const LEXICAL_WEIGHT = 0.5;

export interface LexicalScore {
  id: string;
  /** BM25, above 0. */
  score: number;
}

export interface SemanticScore {
  id: string;
  /** Cosine similarity of the query's vector and the entry's. */
  similarity: number;
}

export interface Fused {
  id: string;
  /** In [0, 1]: LEXICAL_WEIGHT × lexical + (1 − LEXICAL_WEIGHT) × semantic, each normalised. */
  relevance: number;
  foundBy: FoundBy;
}

/**
 * The semantic share of a relevance: a similarity measured from the floor (`minSimilarity`)
 * to the best one, at most 1 − LEXICAL_WEIGHT. Every similarity at the floor (a span of 0)
 * is the best there is, and gets the whole share.
 */
export function semanticShare(similarity: number, minSimilarity: number, bestSimilarity: number): number {
  const span = bestSimilarity - minSimilarity;
  return (1 - LEXICAL_WEIGHT) * (span > 0 ? Math.min(1, (similarity - minSimilarity) / span) : 1);
}

/**
 * Fuse the lexical scores and the semantic similarities of one query. A lexical score is
 * divided by the best one (BM25's least is 0); a similarity is measured from the floor
 * (`minSimilarity`, below which nothing counts as found by meaning, so it is dropped here)
 * to `bestSimilarity`: by default the best in `semantic`; recall passes the best its search
 * found before its own filters, so a neighbour read later never rescales those read before.
 * Ties keep the lexical order, then the semantic one, so the result is deterministic.
 */
export function fuseScores(
  lexical: readonly LexicalScore[],
  semantic: readonly SemanticScore[],
  minSimilarity: number,
  bestSimilarity?: number,
): Fused[] {
  const bestScore = Math.max(0, ...lexical.map((l) => l.score));
  const similar = semantic.filter((s) => s.similarity >= minSimilarity);
  const best = bestSimilarity ?? Math.max(...similar.map((s) => s.similarity));
  const byId = new Map<string, { relevance: number; lexical: boolean; semantic: boolean; order: number }>();
  const add = (id: string, share: number, which: 'lexical' | 'semantic') => {
    const seen = byId.get(id) ?? { relevance: 0, lexical: false, semantic: false, order: byId.size };
    seen.relevance += share;
    seen[which] = true;
    byId.set(id, seen);
  };
  for (const l of lexical) add(l.id, bestScore > 0 ? (LEXICAL_WEIGHT * l.score) / bestScore : 0, 'lexical');
  for (const s of similar) add(s.id, semanticShare(s.similarity, minSimilarity, best), 'semantic');
  return [...byId]
    .sort(([, a], [, b]) => b.relevance - a.relevance || a.order - b.order)
    .map(([id, s]) => ({
      id,
      relevance: s.relevance,
      foundBy: s.lexical && s.semantic ? 'both' : s.lexical ? 'lexical' : 'semantic',
    }));
}

/**
 * The most nearest neighbours, after recall's own filters (the gate, expiry, tier), in the
 * semantic list: five times k, at least 50, so an entry the words rank well but the meaning
 * ranks just past the top still gets its semantic share. Recall reads a neighbour the
 * lexical candidates do not hold only while it could still enter the top k.
 */
export function semanticDepth(k: number): number {
  return Math.max(50, 5 * k);
}
