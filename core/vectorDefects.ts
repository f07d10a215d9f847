/**
 * What makes a stored or returned vector unusable for search: one that is not finite, zero
 * (no direction to compare), or of another length than the space it is searched in. Such a
 * vector is skipped and counted, never searched: one bad record must not fail an agent's
 * every recall.
 */
export type VectorDefect = 'not-finite' | 'zero' | 'wrong-dimensions';

export function vectorDefect(vector: ArrayLike<number>, dimensions: number): VectorDefect | undefined {
  if (vector.length !== dimensions) return 'wrong-dimensions';
  let norm = 0;
  for (let i = 0; i < vector.length; i++) {
    const x = vector[i]!;
    if (!Number.isFinite(x)) return 'not-finite';
    norm += x * x;
  }
  return norm > 0 ? undefined : 'zero';
}

/**
 * The embedding space a vector belongs to: the model and the number of dimensions it was
 * asked for. Two vectors compare only within one space; a change of either is a change of
 * space, which `memgate reembed` converts a store to.
 */
export interface EmbeddingSpace {
  model: string;
  dimensions: number;
}
