import type { Collection, Filter } from 'mongodb';
import type { Entry, Tier } from '../core/entry';
import { NOT_IN_HIT_VIEW, type HitView } from '../core/recall';
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

/** A hit's view of an entry (core/recall.ts, HitView) in `tier`: a point read without the derived arrays. */
export async function findHitView(
  store: Store,
  tier: Tier,
  agentId: string,
  id: string,
): Promise<HitView | undefined> {
  const doc = await tierCollection(store, tier).findOne({ _id: id }, { projection: HIT_VIEW_PROJECTION });
  return doc?.agentId === agentId ? doc : undefined;
}

const HIT_VIEW_PROJECTION = Object.fromEntries(NOT_IN_HIT_VIEW.map((field) => [field, 0]));

/**
 * A hit's view of an entry in either tier, `first` read first: the tier the state beside its
 * vector named. An entry that moved since is found in the other. Mid-move it is in both, and
 * a search that saw it cold may return the cold copy of an entry being rehydrated: as it stood
 * when the search began.
 */
export async function locateHitView(
  store: Store,
  agentId: string,
  id: string,
  first: Tier = 'hot',
): Promise<{ entry: HitView; tier: Tier } | undefined> {
  for (const tier of first === 'hot' ? TIERS : [...TIERS].reverse()) {
    const entry = await findHitView(store, tier, agentId, id);
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
