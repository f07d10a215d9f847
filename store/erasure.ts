import type { Entry, Tier } from '../core/entry';
import { countDeleted } from './agents';
import { countChanges } from './census';
import { isErasure, type Store } from './db';
import { adjustDocumentFrequencies } from './terms';
import { locateEntry, tierCollection, TIERS } from './tiers';
import { dropVectors } from './vectors';
import { findByIds } from './byIds';

/** Entries leaving the store: an erasure's claim on ids, and a delete from both tiers. */

/**
 * An agent's erasures as one read sees them: how many are under way, and how many have ended.
 * A recall reads it before it reads any entry and again once its query log record is in: when
 * no erasure was under way at either read and none ended between them, no entry it read was
 * erased before its record could be found by the erasure's clean-up of the query log, and the
 * record needs no look at its hits' tombstones (store/entries.ts, logQuery). Absent for an
 * agent with no record (never written, or erased whole): the hits are looked at.
 */
export interface ErasureMark {
  erasing: number;
  erasures: number;
}

export async function erasureMark(store: Store, agentId: string): Promise<ErasureMark | undefined> {
  const record = await store.agents.findOne({ _id: agentId }, { projection: { erasing: 1, erasures: 1 } });
  return record ? { erasing: record.erasing?.length ?? 0, erasures: record.erasures ?? 0 } : undefined;
}

/** Whether no erasure was under way at either mark, and none ended between them. */
export function quietBetween(before: ErasureMark | undefined, after: ErasureMark | undefined): boolean {
  return (
    before !== undefined &&
    after !== undefined &&
    before.erasing === 0 &&
    after.erasing === 0 &&
    before.erasures === after.erasures
  );
}

/**
 * An erasure of `id` (`*`: the whole agent) is under way from before its first write until
 * `endErasure`: recalls meanwhile look at their hits' tombstones (ErasureMark). Idempotent.
 */
export async function beginErasure(store: Store, agentId: string, id: string): Promise<void> {
  await store.agents.updateOne({ _id: agentId }, { $addToSet: { erasing: id } });
}

/** The ids (`*`: the whole agent) whose erasure is under way. */
export async function erasuresUnderWay(store: Store, agentId: string): Promise<Set<string>> {
  const record = await store.agents.findOne({ _id: agentId }, { projection: { erasing: 1 } });
  return new Set(record?.erasing ?? []);
}

/** The erasure of `id` is over: every copy it removes is gone, the query log cleaned. */
export async function endErasure(store: Store, agentId: string, id: string): Promise<void> {
  await store.agents.updateOne(
    { _id: agentId, erasing: id },
    { $pull: { erasing: id }, $inc: { erasures: 1 } },
  );
}

/** Which of `ids` an erasure has claimed (its tombstone, or that of a summary removed with it), read by their ids. */
export async function erasedAmong(
  store: Store,
  agentId: string,
  ids: readonly string[],
): Promise<Set<string>> {
  const stones = await findByIds(store.tombstones, ids, { reason: 1, agentId: 1 });
  return new Set(
    [...stones.values()].flatMap((stone) =>
      stone.agentId === agentId && isErasure(stone) ? [stone._id] : [],
    ),
  );
}

/**
 * Erasure wins (docs/invariants.md, Erasure wins). `forget` writes its tombstone before it
 * deletes; every writer of a copy (a move to the other tier, a summary, a replayed write)
 * writes first and looks for an erasure tombstone after, so in any interleaving one of the
 * two removes the copy. Returns the ids withdrawn. `deleteEntry` may then count a copy that
 * was never counted: counts err low, never high.
 */
export async function withdrawErased(
  store: Store,
  agentId: string,
  ids: readonly string[],
): Promise<Set<string>> {
  const withdrawn = await erasedAmong(store, agentId, ids);
  for (const id of withdrawn) await deleteEntry(store, agentId, id);
  return withdrawn;
}

/**
 * An entry leaves both tiers (it may be in both after an interrupted move), and the tier
 * counts and document frequencies follow; with `version`, only copies at that version, and
 * with them an older copy in the other tier. Its terms are withdrawn before the delete, so a
 * crash in between leaves a count too low, never a term of a deleted entry
 * (docs/invariants.md, Erasure wins).
 */
export async function deleteEntry(
  store: Store,
  agentId: string,
  id: string,
  version?: number,
): Promise<Tier[]> {
  const copy = (await locateEntry(store, agentId, id))?.entry;
  if (copy && (version === undefined || copy.version === version) && !copy.pending?.includes('terms')) {
    await adjustDocumentFrequencies(store, agentId, [copy.terms], -1);
  }
  // Each copy is counted out as it was deleted, not as read above: a change landing in between
  // (a restore, a refresh) counted itself, and counting the read would undo it
  // (docs/invariants.md, Census kept).
  const removed: { entry: Entry; tier: Tier }[] = [];
  for (const tier of TIERS) {
    const gone = await tierCollection(store, tier).findOneAndDelete({
      _id: id,
      agentId,
      ...(version !== undefined && { version }),
    });
    if (gone) removed.push({ entry: gone, tier });
  }
  if (version !== undefined && removed.length > 0) {
    // A rehydration writes its hot copy a version up before it deletes the cold one: cut off in
    // between, it left that older copy, which goes with the one deleted here (an eviction
    // decides on the hot copy), or it would stand behind the tombstone.
    for (const tier of TIERS) {
      if (removed.some((r) => r.tier === tier)) continue;
      const stale = await tierCollection(store, tier).findOneAndDelete({
        _id: id,
        agentId,
        version: { $lt: version },
      });
      if (stale) removed.push({ entry: stale, tier });
    }
  }
  const from = removed.map((r) => r.tier);
  await countDeleted(store, agentId, from);
  await countChanges(
    store,
    agentId,
    removed.map((before) => ({ before })),
  );
  // After the content, never before (store/vectors.ts): a vector stored meanwhile finds its
  // entry gone and leaves by itself.
  if (!(await locateEntry(store, agentId, id))) await dropVectors(store, agentId, [id], Date.now());
  return from;
}
