import { findByIds } from './byIds';
import type { Store } from './db';

/**
 * An agent's key for a term, for its postings (`termKeys` of entries and tombstones) and its
 * document frequency: agent ids never hold a space (core/entry.ts), and terms never do.
 */
export function termKey(agentId: string, term: string): string {
  return `${agentId} ${term}`;
}

/** How many stored entries of the agent hold each term (0 for one never counted), read by their keys. */
export async function documentFrequencies(
  store: Store,
  agentId: string,
  terms: readonly string[],
): Promise<Map<string, number>> {
  const distinct = [...new Set(terms)];
  const found = await findByIds(
    store.termStats,
    distinct.map((t) => termKey(agentId, t)),
    { df: 1 },
  );
  return new Map(distinct.map((t) => [t, Math.max(0, found.get(termKey(agentId, t))?.df ?? 0)]));
}

/**
 * Add (`+1`) or withdraw (`-1`) the terms of entries from the document frequencies. A term no
 * entry holds any more leaves with its count (docs/invariants.md, Erasure wins): withdrawn
 * terms at zero are deleted.
 */
export async function adjustDocumentFrequencies(
  store: Store,
  agentId: string,
  termLists: readonly (readonly string[])[],
  sign: 1 | -1,
): Promise<void> {
  const counts = new Map<string, number>();
  for (const list of termLists) for (const t of new Set(list)) counts.set(t, (counts.get(t) ?? 0) + 1);
  if (counts.size === 0) return;
  const ids = [...counts].map(([t, n]) => ({ _id: termKey(agentId, t), n }));
  await store.termStats.bulkWrite(
    ids.map(({ _id, n }) => ({
      updateOne: {
        filter: { _id },
        update: { $inc: { df: sign * n }, $setOnInsert: { agentId } },
        upsert: sign > 0,
      },
    })),
    { ordered: false },
  );
  if (sign < 0) {
    await store.termStats.bulkWrite(
      ids.map(({ _id }) => ({ deleteOne: { filter: { _id, df: { $lte: 0 } } } })),
      { ordered: false },
    );
  }
}

/** Document frequencies as a nightly run leaves them, written at once (benchmarks load stores with it). */
export async function insertDocumentFrequencies(
  store: Store,
  agentId: string,
  df: ReadonlyMap<string, number>,
): Promise<void> {
  const docs = [...df]
    .filter(([, n]) => n > 0)
    .map(([t, n]) => ({ _id: termKey(agentId, t), agentId, df: n }));
  for (let i = 0; i < docs.length; i += 1000) await store.termStats.insertMany(docs.slice(i, i + 1000));
}
