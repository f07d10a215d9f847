import type { UpdateFilter } from 'mongodb';
import type { Entry, Tier } from '../core/entry';
import { ConflictError } from '../core/errors';
import { recallStateOf, sameRecallState, widerRecallState, type RecallState } from '../core/recall';
import { applyPatch, type EntryPatch } from '../core/nightly/plans';
import { countChanges } from './census';
import type { Store } from './db';
import { gateKeys, writeDayKey } from './entries';
import { findById, tierCollection, TIERS } from './tiers';
import { restateForRecall } from './vectors';

/** An entry's version-guarded changes in place, shared by the night, `forget` and `restore`. */

/**
 * Apply a patch to every copy of an entry (mid-move it is in both tiers), each copy guarded
 * by its version. `decide` sees the current copy and returns undefined when the change is
 * already there, which is what makes a rerun a no-op. Returns the copies it found.
 */
export async function annotate(
  store: Store,
  agentId: string,
  id: string,
  decide: (entry: Entry) => EntryPatch | undefined,
): Promise<{ tier: Tier; entry: Entry }[]> {
  const found: { tier: Tier; entry: Entry }[] = [];
  let restate = false;
  for (const tier of TIERS) {
    const collection = tierCollection(store, tier);
    for (let round = 0; ; round++) {
      const entry = await findById(collection, agentId, id);
      if (!entry) break;
      const patch = decide(entry);
      if (!patch) {
        found.push({ tier, entry });
        break;
      }
      const update: UpdateFilter<Entry> = { $inc: { version: 1 } };
      // A new `dormantAt` makes the entry live again for default recall's postings; a refresh
      // is a write, found by its day.
      const set = {
        ...patch.set,
        ...(patch.set.dormantAt !== undefined && gateKeys(entry, patch.set.dormantAt)),
        ...(patch.set.refreshedAt !== undefined &&
          writeDayKey({ ...entry, refreshedAt: patch.set.refreshedAt })),
      };
      if (Object.keys(set).length) update.$set = set;
      if (patch.unset.length) update.$unset = Object.fromEntries(patch.unset.map((k) => [k, '']));
      const patched = applyPatch(entry, { set, unset: patch.unset });
      const [before, after] = [recallStateOf(entry, tier), recallStateOf(patched, tier)];
      await widenForRecall(store, agentId, new Map([[id, after]]), new Map([[id, before]]));
      const res = await collection.updateOne({ _id: id, agentId, version: entry.version }, update);
      if (res.modifiedCount === 1) {
        await countChanges(store, agentId, [{ before: { entry, tier }, after: { entry: patched, tier } }]);
        found.push({ tier, entry: { ...patched, version: entry.version + 1 } });
        restate ||= !sameRecallState(before, after);
        break;
      }
      if (round >= 4)
        throw new ConflictError(`entry ${id} kept changing while it was annotated`, { id, tier });
    }
  }
  if (restate) await restateForRecall(store, agentId, [id], Date.now());
  return found;
}

/**
 * Before a change that lets default recall take more of these entries (`after`, of each
 * entry now `before`), the states kept beside their vectors are widened to admit it
 * (core/recall.ts, RecallState), so that a crash between the change and its restating costs
 * reads, not hits. `before` is what the caller just read, so the entries are not read again
 * to see which records need widening.
 */
export async function widenForRecall(
  store: Store,
  agentId: string,
  after: ReadonlyMap<string, RecallState>,
  before?: ReadonlyMap<string, RecallState>,
): Promise<void> {
  const widens = [...after].filter(([id, state]) => {
    const was = before?.get(id);
    return was === undefined || !sameRecallState(widerRecallState(was, state), was);
  });
  if (widens.length)
    await restateForRecall(
      store,
      agentId,
      widens.map(([id]) => id),
      Date.now(),
      { widen: new Map(widens), ...(before && { known: before }) },
    );
}
