import { countedCopies, type CensusCounts } from '../core/census';
import type { Tier } from '../core/entry';
import { findByIds } from './byIds';
import type { Store } from './db';

/** A page of the agents the nightly run fans out to, in id order, after `after`. */
export async function registeredAgents(
  store: Store,
  page: { after?: string; limit: number },
): Promise<string[]> {
  const agents = await store.agents
    .find(page.after === undefined ? {} : { _id: { $gt: page.after } }, { projection: { _id: 1 } })
    .sort({ _id: 1 })
    .limit(page.limit)
    .toArray();
  return agents.map((a) => a._id);
}

/** Which of these agents are registered: each has written, through its memory workflow. */
export async function agentsRegistered(store: Store, agentIds: readonly string[]): Promise<Set<string>> {
  return new Set((await findByIds(store.agents, agentIds, { _id: 1 })).keys());
}

/** Counted with every change to `hot`, and every doubt of it (AgentRecord, `hotChanges`). */
const HOT_CHANGED = { hotChanges: 1 };

/** How many entries each tier of the agent holds; `hot` undefined when never counted. */
export async function tierCounts(
  store: Store,
  agentId: string,
): Promise<{
  hot: number | undefined;
  cold: number;
  hotChanges?: number;
  hotWrittenFrom?: number;
  hotCountInDoubt?: true;
}> {
  const record = await store.agents.findOne({ _id: agentId });
  return {
    hot: record?.hot,
    cold: Math.max(0, record?.cold ?? 0),
    ...(record?.hotChanges !== undefined && { hotChanges: record.hotChanges }),
    ...(record?.hotWrittenFrom !== undefined && { hotWrittenFrom: record.hotWrittenFrom }),
    ...(record?.hotCountInDoubt && { hotCountInDoubt: true as const }),
  };
}

/** An activity that deletes or moves the agent's entries is retried: the next reclaim counts hot again (AgentRecord). */
export async function doubtHotCount(store: Store, agentId: string): Promise<void> {
  await store.agents.updateOne({ _id: agentId }, { $set: { hotCountInDoubt: true }, $inc: HOT_CHANGED });
}

/** The agent's census counts (store/census.ts); undefined for an agent never written. */
export async function agentCensus(store: Store, agentId: string): Promise<CensusCounts | undefined> {
  const record = await store.agents.findOne({ _id: agentId }, { projection: { census: 1 } });
  return record ? (record.census ?? {}) : undefined;
}

/** How many entry copies the agent's census counts, both tiers (0 for an agent not yet counted). */
export async function countedEntries(store: Store, agentId: string): Promise<number> {
  return countedCopies(await agentCensus(store, agentId));
}

/** The agent joins the nightly fan-out (its memory workflow does this once per run). */
export async function registerAgent(store: Store, agentId: string, at: number): Promise<void> {
  await store.agents.updateOne({ _id: agentId }, { $setOnInsert: { firstWriteAt: at } }, { upsert: true });
}

/** `n` new hot entries were counted by the nightly run (their `terms` work settled). */
export async function countArrived(store: Store, agentId: string, n: number): Promise<void> {
  if (n > 0) await store.agents.updateOne({ _id: agentId }, { $inc: { hot: n, ...HOT_CHANGED } });
}

/** `n` entries left `from` for the other tier. */
export async function countMoved(store: Store, agentId: string, from: Tier, n: number): Promise<void> {
  if (n === 0) return;
  const to: Tier = from === 'hot' ? 'cold' : 'hot';
  await store.agents.updateOne({ _id: agentId }, { $inc: { [from]: -n, [to]: n, ...HOT_CHANGED } });
}

/** Entries of an export were imported into these tiers, counted as the night would count them. */
export async function countImported(
  store: Store,
  agentId: string,
  counts: Partial<Record<Tier, number>>,
): Promise<void> {
  const inc = Object.fromEntries(Object.entries(counts).filter(([, n]) => n > 0));
  if (Object.keys(inc).length === 0) return;
  await store.agents.updateOne({ _id: agentId }, { $inc: { ...inc, ...(inc.hot && HOT_CHANGED) } });
}

/** Entries were deleted from these tiers (eviction, erasure). */
export async function countDeleted(store: Store, agentId: string, tiers: readonly Tier[]): Promise<void> {
  if (tiers.length === 0) return;
  const inc: Partial<Record<Tier, number>> = {};
  for (const t of tiers) inc[t] = (inc[t] ?? 0) - 1;
  await store.agents.updateOne({ _id: agentId }, { $inc: { ...inc, ...(inc.hot && HOT_CHANGED) } });
}

/** Hot entries last written on `day` were counted: `hotWrittenFrom`, once kept, goes no later. */
export async function countWrittenOn(store: Store, agentId: string, day: number): Promise<void> {
  await store.agents.updateOne(
    { _id: agentId, hotWrittenFrom: { $gt: day } },
    { $set: { hotWrittenFrom: day } },
  );
}

/** `hotWrittenFrom` becomes `day` only if it is still `was` (absent when undefined): a count may have lowered it meanwhile. */
export async function setHotWrittenFrom(
  store: Store,
  agentId: string,
  day: number,
  was: number | undefined,
): Promise<void> {
  await store.agents.updateOne(
    { _id: agentId, hotWrittenFrom: was ?? { $exists: false } },
    { $set: { hotWrittenFrom: day } },
  );
}

/**
 * Reclaim read every hot entry: the exact count replaces the maintained one, unless a change
 * was counted since `changesSeen` (read before the read of hot began). The read's total may
 * then hold an entry deleted behind it, or lack one counted ahead of it, so the count stays
 * in doubt for the next reclaim instead.
 */
export async function setHotCount(
  store: Store,
  agentId: string,
  hot: number,
  changesSeen: number | undefined,
): Promise<void> {
  const set = await store.agents.updateOne(
    { _id: agentId, hotChanges: changesSeen ?? { $exists: false } },
    { $set: { hot }, $unset: { hotCountInDoubt: '' } },
  );
  if (set.matchedCount === 0) await doubtHotCount(store, agentId);
}

/** How many tombstones the agent has (a read of its tombstones, which are few). */
export async function tombstoneCount(store: Store, agentId: string): Promise<number> {
  return store.tombstones.countDocuments({ agentId });
}
