import type { Collection, Filter } from 'mongodb';
import type { Entry, Tier } from '../core/entry';
import type { Store } from './db';

/**
 * An entry's two tiers, and where in them an entry is. Mid-move an entry is in both, and hot
 * is the live copy (docs/invariants.md, Moves lose nothing).
 */

export const TIERS: readonly Tier[] = ['hot', 'cold'];

/**
 * A point read by `_id` alone — the one filter FerretDB serves from its index (anything
 * more scans) — and then the agent check (docs/invariants.md, Agent-scoped): another
 * agent's document is not found.
 */
export async function findById<T extends { _id: string; agentId: string }>(
  collection: Collection<T>,
  agentId: string,
  id: string,
): Promise<T | undefined> {
  const doc = (await collection.findOne({ _id: id } as Filter<T>)) as T | null;
  return doc?.agentId === agentId ? doc : undefined;
}

/** An entry in either tier, hot first (mid-move it is in both, and hot is the live copy). */
export async function locateEntry(
  store: Store,
  agentId: string,
  id: string,
): Promise<{ entry: Entry; tier: Tier } | undefined> {
  for (const tier of TIERS) {
    const entry = await findById(tierCollection(store, tier), agentId, id);
    if (entry) return { entry, tier };
  }
  return undefined;
}

export function tierCollection(store: Store, tier: Tier): Collection<Entry> {
  return tier === 'hot' ? store.hot : store.cold;
}

/** The entries of these ids still stored (either tier), oldest first, and the ids no longer stored. */
export async function storedEntries(
  store: Store,
  agentId: string,
  ids: readonly string[],
): Promise<{ present: Entry[]; gone: string[] }> {
  const present: Entry[] = [];
  const gone: string[] = [];
  // Point reads by _id, side by side (the driver's pool bounds how many are in flight).
  const found = await Promise.all(ids.map((id) => locateEntry(store, agentId, id)));
  found.forEach((f, i) => {
    if (f) present.push(f.entry);
    else gone.push(ids[i]!);
  });
  present.sort((a, b) => a.writtenAt - b.writtenAt || (a._id < b._id ? -1 : 1));
  return { present, gone };
}
