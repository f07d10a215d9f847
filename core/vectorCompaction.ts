/**
 * When a nearest-neighbour index is built afresh from the store. Each removal leaves a scrub
 * in the index's graph (vectorEngine/thread.ts, Erasure) that keeps the edges of the vector
 * it replaced, so searches lose their way as scrubs accumulate. In bench/vector-removals.ts
 * (docs/recall.md, The engine in memgate) default recall's recall@10 was 0.93 against 0.94 for an index
 * built afresh from the vectors left with a tenth removed, 0.86 against 0.92 with a quarter,
 * and 0.10 against 0.91 with nine tenths; deep recall, which asks for as many more neighbours
 * as there are scrubs, searched 10 to 30 times as long. It is a property of the graph, not of
 * a machine or a model: the share is what counts.
 */

/** Rebuilt once scrubs are more than this share of the vectors held. */
export const COMPACT_SCRUB_SHARE = 0.1;
/**
 * Not before there are this many: a graph this small is searched almost whole (usearch's
 * search expansion is 64), and a rebuild per few removals would read the agent's vectors often.
 */
export const COMPACT_MIN_SCRUBS = 64;

export function compactionDue(index: { scrubs: number; size: number }): boolean {
  return index.scrubs >= COMPACT_MIN_SCRUBS && index.scrubs > COMPACT_SCRUB_SHARE * index.size;
}
