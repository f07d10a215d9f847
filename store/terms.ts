import type { Entry } from '../core/entry';
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

/**
 * The night counts the terms of entries it read awaiting their count. An erasure may land in
 * between, and it withdraws only what was counted when it looked: so once counted, each entry
 * is read again, and what was counted for one no longer stored with those terms and counted
 * (erased, or a summary an erasure rewrote, which awaits its count again) is withdrawn
 * (docs/invariants.md, Erasure wins). Counts err low, never high.
 */
export async function countEntryTerms(
  store: Store,
  agentId: string,
  entries: readonly Pick<Entry, '_id' | 'terms'>[],
): Promise<void> {
  await adjustDocumentFrequencies(
    store,
    agentId,
    entries.map((e) => e.terms),
    1,
  );
  const standing = await Promise.all(
    entries.map(async ({ _id, terms }) => {
      for (const tier of [store.hot, store.cold]) {
        const now = await tier.findOne({ _id, agentId }, { projection: { terms: 1, pending: 1 } });
        if (now) return !now.pending?.includes('terms') && now.terms.join(' ') === terms.join(' ');
      }
      return false;
    }),
  );
  await adjustDocumentFrequencies(
    store,
    agentId,
    entries.filter((_, i) => !standing[i]).map((e) => e.terms),
    -1,
  );
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
