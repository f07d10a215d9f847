import { ConflictError } from '../core/errors';
import type { Entry } from '../core/entry';
import type { RestoreResult } from '../core/messages';
import { applyPatch, awaitPatch, combinePatches, renewPatch, type EntryPatch } from '../core/nightly/plans';
import { restoreSupersessionPatch, retirePatch } from '../core/nightly/clusters';
import type { Store } from './db';
import { annotate } from './annotate';
import { findById, locateEntry, storedEntries, supersededSinceDeleted } from './tiers';

/**
 * Reverse a supersession (and, given a new `freshUntil`, an expiry). The ledger record is
 * keyed by the restore's time and written first, so a retried restore finishes the same
 * change instead of reporting a conflict. A retired summary comes back only while every
 * source it holds is current (docs/invariants.md, Current summaries); else ConflictError.
 * Undefined when there is no such entry, or it was deleted before it could be restored.
 */
export async function restoreEntry(
  store: Store,
  agentId: string,
  id: string,
  opts: { at: number; freshUntil?: number },
): Promise<RestoreResult | undefined> {
  const before = (await locateEntry(store, agentId, id))?.entry;
  if (!before) return undefined;
  const ledgerId = `restore:${id}:${opts.at}`;
  const earlier = await findById(store.ledger, agentId, ledgerId);
  let restored = earlier?.inputs?.restored as RestoreResult['restored'] | undefined;
  if (!restored) {
    restored = [];
    if (before.supersededBy !== undefined || !before.isActive) restored.push('supersession');
    if (opts.freshUntil !== undefined && before.validity.volatile) restored.push('expiry');
    if (restored.length === 0) {
      throw new ConflictError(
        opts.freshUntil === undefined
          ? `entry ${id} is not superseded (to renew a volatile fact, give a new freshUntil)`
          : `entry ${id} is neither superseded nor volatile`,
        { id },
      );
    }
    if (restored.includes('supersession') && before.kind === 'summary') {
      const stale = await supersededSource(store, agentId, before);
      if (stale) throw stale;
    }
    await store.ledger.replaceOne(
      { _id: ledgerId, agentId },
      {
        agentId,
        at: opts.at,
        event: 'restore',
        entryId: id,
        reason: 'operator restore',
        inputs: { restored, supersededBy: before.supersededBy, freshUntil: opts.freshUntil },
      },
      { upsert: true },
    );
  }
  const newer = (earlier?.inputs?.supersededBy as string | undefined) ?? before.supersededBy;
  const { freshUntil } = opts;
  const copies = await annotate(store, agentId, id, (e) => {
    const patches: EntryPatch[] = [];
    if (restored.includes('expiry') && freshUntil !== undefined && e.validity.freshUntil !== freshUntil)
      patches.push(renewPatch(freshUntil), awaitPatch(e, 'expire'));
    // Seen with the renewal applied, so both kinds of work stay pending.
    if (restored.includes('supersession') && (e.supersededBy !== undefined || !e.isActive))
      patches.push(restoreSupersessionPatch(applyPatch(e, combinePatches(...patches)), opts.at));
    return patches.length ? combinePatches(...patches) : undefined;
  });
  if (copies.length === 0) {
    // Deleted since it was found (a forget, an eviction): nothing was restored, so no record says it was.
    if (!earlier) await store.ledger.deleteOne({ _id: ledgerId, agentId });
    return undefined;
  }
  if (restored.includes('supersession') && before.kind === 'summary') {
    // A night may have superseded a source after the look above, and found the summary still
    // retired: it is retired again here, as that night would have retired it.
    const stale = await supersededSource(store, agentId, before);
    if (stale) {
      await annotate(store, agentId, id, retirePatch);
      // The record says what stands, on this attempt or a retry of it: a renewal, or nothing.
      const stands = restored.filter((r) => r !== 'supersession');
      if (stands.length === 0) {
        await store.ledger.deleteOne({ _id: ledgerId, agentId });
        throw stale;
      }
      await store.ledger.updateOne({ _id: ledgerId, agentId }, { $set: { 'inputs.restored': stands } });
      return { id, tier: copies[0]!.tier, restored: stands };
    }
  }
  if (newer !== undefined) {
    await annotate(store, agentId, newer, (e) =>
      e.supersedes === id ? { set: {}, unset: ['supersedes'] } : undefined,
    );
  }
  return { id, tier: copies[0]!.tier, restored };
}

/** Why a retired summary cannot be current again: a source of it is superseded (docs/invariants.md, Current summaries). */
async function supersededSource(
  store: Store,
  agentId: string,
  summary: Pick<Entry, '_id' | 'derivedFrom'>,
): Promise<ConflictError | undefined> {
  const id = summary._id;
  const { present, gone } = await storedEntries(store, agentId, summary.derivedFrom ?? []);
  const superseded = present.find((source) => !source.isActive);
  if (superseded) {
    return new ConflictError(
      `summary ${id} holds ${superseded._id}, which is superseded; restore that entry instead (a night then clusters it again)`,
      { id, source: superseded._id },
    );
  }
  const deleted = await supersededSinceDeleted(store, agentId, gone);
  if (deleted) {
    return new ConflictError(
      `summary ${id} holds ${deleted}, which reclaim deleted and a newer fact has superseded since; it cannot be current again`,
      { id, source: deleted },
    );
  }
  return undefined;
}
