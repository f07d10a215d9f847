import { expect } from 'vitest';
import { censusKeys, tombstoneKind, type CensusCounts } from '../../core/census';
import type { Store } from '../../store/db';
import { TIERS, tierCollection } from '../../store/tiers';

/** The counts held as a map of positive numbers: a key counted to 0 is no key. */
function positive(counts: Record<string, number> | undefined): Record<string, number> {
  return Object.fromEntries(Object.entries(counts ?? {}).filter(([, n]) => n !== 0));
}

/** The census counted from scratch: every copy of the agent's entries and every tombstone, read. */
export async function recountCensus(store: Store, agentId: string): Promise<Required<CensusCounts>> {
  const entries: Record<string, number> = {};
  for (const tier of TIERS) {
    for (const entry of await tierCollection(store, tier).find({ agentId }).toArray()) {
      for (const key of censusKeys(entry, tier)) entries[key] = (entries[key] ?? 0) + 1;
    }
  }
  const tombstones: Record<string, number> = {};
  for (const stone of await store.tombstones.find({ agentId }).toArray()) {
    const kind = tombstoneKind(stone.reason);
    tombstones[kind] = (tombstones[kind] ?? 0) + 1;
  }
  return { entries, tombstones };
}

/** The census the store kept as the agent changed is the one counted from scratch. */
export async function expectCensusKept(store: Store, agentId: string): Promise<void> {
  const kept = (await store.agents.findOne({ _id: agentId }))?.census;
  const truth = await recountCensus(store, agentId);
  expect({
    entries: positive(kept?.entries),
    tombstones: positive(kept?.tombstones),
  }).toEqual(truth);
}
