import type { Collection, Filter } from 'mongodb';
import type { Entry, Tier } from '../core/entry';
import { supersededWhileEvicted, type EvictedFact } from '../core/nightly/plans';
import { NOT_IN_HIT_VIEW, type HitView } from '../core/recall';
import { findByIds, idLoader } from './byIds';
import type { Store, Tombstone } from './db';

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

const HIT_VIEW_PROJECTION = Object.fromEntries(NOT_IN_HIT_VIEW.map((field) => [field, 0]));

/**
 * One call's reads of hits' views (core/recall.ts, HitView: an entry without its derived
 * arrays) by id: the reads it makes side by side go as one read per tier (store/byIds.ts).
 */
export interface HitViewReader {
  /** The entry's view in `tier`, if it is there and the agent's. */
  find(tier: Tier, id: string): Promise<HitView | undefined>;
  /**
   * Its view in either tier, `first` read first: the tier the state beside its vector named.
   * An entry that moved since is found in the other. Mid-move it is in both, and a search
   * that saw it cold may return the cold copy of an entry being rehydrated: as it stood when
   * the search began.
   */
  locate(id: string, first?: Tier): Promise<{ entry: HitView; tier: Tier } | undefined>;
}

export function hitViewReader(store: Store, agentId: string): HitViewReader {
  const loaders = {
    hot: idLoader(store.hot, HIT_VIEW_PROJECTION),
    cold: idLoader(store.cold, HIT_VIEW_PROJECTION),
  };
  const find = async (tier: Tier, id: string): Promise<HitView | undefined> => {
    const doc: HitView | undefined = await loaders[tier].load(id);
    return doc?.agentId === agentId ? doc : undefined;
  };
  return {
    find,
    async locate(id, first = 'hot') {
      for (const tier of first === 'hot' ? TIERS : [...TIERS].reverse()) {
        const entry = await find(tier, id);
        if (entry) return { entry, tier };
      }
      return undefined;
    },
  };
}

export function tierCollection(store: Store, tier: Tier): Collection<Entry> {
  return tier === 'hot' ? store.hot : store.cold;
}

/**
 * The agent's entries of these ids, each in the tier it is found in, hot first (mid-move an
 * entry is in both, and hot is the live copy): one read of hot, then one of cold for the rest.
 */
export async function locateEntries(
  store: Store,
  agentId: string,
  ids: readonly string[],
): Promise<Map<string, { entry: Entry; tier: Tier }>> {
  const located = new Map<string, { entry: Entry; tier: Tier }>();
  let rest = [...new Set(ids)];
  for (const tier of TIERS) {
    if (rest.length === 0) break;
    for (const entry of (await findByIds(tierCollection(store, tier), rest)).values()) {
      if (entry.agentId === agentId) located.set(entry._id, { entry, tier });
    }
    rest = rest.filter((id) => !located.has(id));
  }
  return located;
}

/** The entries of these ids still stored (either tier), oldest first, and the ids no longer stored. */
export async function storedEntries(
  store: Store,
  agentId: string,
  ids: readonly string[],
): Promise<{ present: Entry[]; gone: string[] }> {
  const present: Entry[] = [];
  const gone: string[] = [];
  const found = await locateEntries(store, agentId, ids);
  for (const id of new Set(ids)) {
    const located = found.get(id);
    if (located) present.push(located.entry);
    else gone.push(id);
  }
  present.sort((a, b) => a.writtenAt - b.writtenAt || (a._id < b._id ? -1 : 1));
  return { present, gone };
}

/**
 * The facts these tombstones keep (an evicted fact's attribute, time and restore), as
 * supersession reads them (core/nightly/plans.ts, supersededWhileEvicted).
 */
export function evictedFactsOf(stones: readonly Tombstone[]): EvictedFact[] {
  return stones.flatMap((t) =>
    t.attribute !== undefined && t.writtenAt !== undefined
      ? [
          {
            id: t._id,
            attribute: t.attribute,
            writtenAt: t.writtenAt,
            ...(t.restoredAt !== undefined && { restoredAt: t.restoredAt }),
          },
        ]
      : [],
  );
}

/**
 * The first of these deleted sources that a newer fact supersedes: its tombstone keeps its
 * subject, attribute and time, as the night's supersede phase reads them
 * (core/nightly/plans.ts, supersededWhileEvicted).
 */
export async function supersededSinceDeleted(
  store: Store,
  agentId: string,
  ids: readonly string[],
): Promise<string | undefined> {
  const stones = [...(await findByIds(store.tombstones, ids)).values()].filter((t) => t.agentId === agentId);
  for (const subject of new Set(stones.flatMap((t) => (t.subject === undefined ? [] : [t.subject])))) {
    const evicted = evictedFactsOf(stones.filter((t) => t.subject === subject));
    const facts = (
      await Promise.all(TIERS.map((tier) => tierCollection(store, tier).find({ agentId, subject }).toArray()))
    ).flat();
    const superseded = supersededWhileEvicted(evicted, facts)[0];
    if (superseded) return superseded.sourceId;
  }
  return undefined;
}
