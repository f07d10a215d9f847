/**
 * Hybrid retrieval's fusion: a convex combination of a lexical and a semantic share, each in
 * [0, 1] before its weight (Bruch et al., 2023, "An Analysis of Fusion Functions for Hybrid
 * Retrieval"), then weighted by salience in core/recall.ts. It fuses scores, not ranks,
 * because recall multiplies relevance by salience: reciprocal-rank fusion gives the first
 * ranks nearly equal relevance (1/61, 1/62, …), and salience alone would then order them.
 *
 * Neither share is measured against the best of its own list, since the best of a list of
 * noise is still noise (docs/recall.md, Relevance):
 * - the lexical share is the part of the query's term weight a candidate matches (its BM25
 *   over the most a candidate holding every query term once scores), so a note that shares
 *   one incidental word of a six-word question gets a sixth, not the whole share;
 * - the semantic share is how far a similarity stands above the query's own background: its
 *   similarities to a sample of the agent's entries and to a fixed set of reference
 *   passages, nearly all unrelated to any one query.
 *   Measured in that background's spread, a similarity means the same whatever scale a model
 *   puts its cosines on (the default model crowds every pair into 0.7–0.9; others spread
 *   paraphrases over 0.4–0.7): the ranking is unchanged by any increasing affine map of the
 *   cosines, so no number here belongs to one model.
 */

/** How a hit was found: by its words, by its meaning, or by both. */
export type FoundBy = 'lexical' | 'semantic' | 'both';

/** The lexical share of a hybrid relevance; the semantic share is the rest. */
export const LEXICAL_WEIGHT = 0.5;

/**
 * Where a query's similarities to unrelated entries lie: their median, and their spread (the
 * median absolute deviation, scaled to a normal's standard deviation). Both are robust: the
 * few related entries a sample holds move neither.
 */
export interface Background {
  center: number;
  spread: number;
}

/**
 * Sampled similarities the background is read from, when the agent has that many vectors;
 * beside them, the query's similarities to REFERENCE_PASSAGES (core/referencePassages.ts),
 * so an agent of a few entries still has a background to be measured against.
 */
export const BACKGROUND_SAMPLE = 256;

/** MAD × this estimates a normal distribution's standard deviation. */
const MAD_TO_SD = 1.4826;

/**
 * Spreads above the background at which a similarity starts to count as found by meaning,
 * and at which it has the whole semantic share. Chosen on LongMemEval and the main
 * paraphrase set, checked on the held-out one and on compressed cosines (docs/recall.md).
 */
export const FOUND_AT_SPREADS = 1.5;
export const FULL_AT_SPREADS = 6;

function median(sorted: readonly number[]): number {
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The background of a sample of similarities; undefined for an empty sample. */
export function backgroundOf(similarities: readonly number[]): Background | undefined {
  const finite = similarities.filter(Number.isFinite);
  if (finite.length === 0) return undefined;
  const sorted = [...finite].sort((a, b) => a - b);
  const center = median(sorted);
  const deviations = sorted.map((s) => Math.abs(s - center)).sort((a, b) => a - b);
  // Positive, so a sample of identical similarities measures nothing rather than divides by 0.
  const spread = Math.max(MAD_TO_SD * median(deviations), Number.EPSILON);
  return { center, spread };
}

/** A similarity in spreads above the background. */
export function standing(similarity: number, background: Background): number {
  return (similarity - background.center) / background.spread;
}

/** Whether a similarity stands far enough above the background to count as found by meaning. */
export function foundByMeaning(similarity: number, background: Background): boolean {
  return standing(similarity, background) >= FOUND_AT_SPREADS;
}

/** The semantic share of a relevance: 0 at FOUND_AT_SPREADS, the whole share from FULL_AT_SPREADS. */
export function semanticShare(similarity: number, background: Background): number {
  const z = standing(similarity, background);
  const t = (z - FOUND_AT_SPREADS) / (FULL_AT_SPREADS - FOUND_AT_SPREADS);
  return (1 - LEXICAL_WEIGHT) * Math.min(1, Math.max(0, t));
}

/** The lexical share of a relevance: the part of `ceiling` (core/recall.ts, bm25Ceiling) a score reaches. */
export function lexicalShare(score: number, ceiling: number): number {
  return ceiling > 0 ? LEXICAL_WEIGHT * Math.min(1, score / ceiling) : 0;
}

export interface LexicalScores {
  scores: readonly { id: string; score: number }[];
  /** What a candidate holding every query term once scores: the top of the lexical share. */
  ceiling: number;
}

export interface SemanticScores {
  /** Cosine similarities of the query's vector and the entries'. */
  similarities: readonly { id: string; similarity: number }[];
  background: Background;
}

export interface Fused {
  id: string;
  /** In [0, 1]: the lexical share plus the semantic share. */
  relevance: number;
  foundBy: FoundBy;
}

/**
 * Fuse the lexical scores and the semantic similarities of one query. A neighbour that does
 * not stand out of the background is not found by meaning, so it is dropped here. Ties keep
 * the lexical order, then the semantic one, so the result is deterministic.
 */
export function fuseScores(lexical: LexicalScores, semantic?: SemanticScores): Fused[] {
  const byId = new Map<string, { relevance: number; lexical: boolean; semantic: boolean; order: number }>();
  const add = (id: string, share: number, which: 'lexical' | 'semantic') => {
    const seen = byId.get(id) ?? { relevance: 0, lexical: false, semantic: false, order: byId.size };
    seen.relevance += share;
    seen[which] = true;
    byId.set(id, seen);
  };
  for (const l of lexical.scores) add(l.id, lexicalShare(l.score, lexical.ceiling), 'lexical');
  for (const s of semantic?.similarities ?? []) {
    if (foundByMeaning(s.similarity, semantic!.background))
      add(s.id, semanticShare(s.similarity, semantic!.background), 'semantic');
  }
  return [...byId]
    .sort(([, a], [, b]) => b.relevance - a.relevance || a.order - b.order)
    .map(([id, s]) => ({
      id,
      relevance: s.relevance,
      foundBy: s.lexical && s.semantic ? 'both' : s.lexical ? 'lexical' : 'semantic',
    }));
}

/**
 * The nearest neighbour found by meaning, if any: of those that stand out of the background,
 * the most similar (the first of equals). It keeps a place in the top k (`placeNearest`).
 */
export function nearestFoundByMeaning(semantic: SemanticScores): string | undefined {
  let nearest: { id: string; similarity: number } | undefined;
  for (const s of semantic.similarities) {
    if (foundByMeaning(s.similarity, semantic.background) && (!nearest || s.similarity > nearest.similarity))
      nearest = s;
  }
  return nearest?.id;
}

/**
 * A ranking (best first) in which the nearest neighbour found by meaning holds one of the
 * first k places: when it ranks below them, it moves up to the k-th, and the rest keep their
 * order (docs/recall.md, Relevance). Shares cannot promise this: a query's
 * words can give many notes more lexical share than a paraphrase's meaning earns, and a
 * semantic share large enough to pass all of them would give the top of a list of noise as
 * much. One place, never the first (k = 1 leaves the fusion alone), since the nearest is
 * sometimes only the top of that noise. Its score is below the k-1 before it, so the order
 * by score holds.
 */
export function placeNearest<T extends { id: string }>(
  ranked: readonly T[],
  k: number,
  nearest: string | undefined,
): T[] {
  const at = nearest === undefined ? -1 : ranked.findIndex((r) => r.id === nearest);
  if (k < 2 || at < k) return [...ranked];
  return [...ranked.slice(0, k - 1), ranked[at]!, ...ranked.slice(k - 1, at), ...ranked.slice(at + 1)];
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
