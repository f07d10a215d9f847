import { claimPatch, restoreSupersessionPatch } from '../core/nightly/clusters';
import type { Entry } from '../core/entry';
import { shredContentKey } from './contentKeys';
import { derivedFromErased, ERASED, type Store } from './db';
import { termKeys } from './entries';
import { adjustDocumentFrequencies } from './terms';
import { dropVectors } from './vectors';
import { annotate } from './annotate';
import { countTombstones } from './census';
import { beginErasure, deleteEntry, endErasure } from './erasure';
import { findById, locateEntry, TIERS, tierCollection } from './tiers';
import { releaseSources } from './nightly';

/**
 * Erasure (docs/invariants.md, Erasure wins): an entry's content leaves hot, cold, the
 * query log and every summary derived from it; what stays behind is a tombstone with no
 * content. Each step is idempotent and keyed by the entry id, so the erasure workflow can
 * rerun any of them.
 */

/** The content-free tombstone and the ledger record; false when there is nothing to erase. */
export async function tombstoneErasure(
  store: Store,
  agentId: string,
  id: string,
  at: number,
): Promise<boolean> {
  // First of all, and whether or not the entry is stored yet: every copy of its content in a
  // Temporal history becomes unreadable (docs/invariants.md, Erased from Temporal history).
  await shredContentKey(store, agentId, id);
  const entry = await locateEntry(store, agentId, id);
  const stone = await findById(store.tombstones, agentId, id);
  if (!entry && !stone) return false;
  if (stone?.reason !== ERASED) {
    // Replaces an eviction tombstone too: its terms are derived from the content.
    await store.tombstones.replaceOne(
      { _id: id, agentId },
      { agentId, terms: [], termKeys: [], reason: ERASED, deletedAt: at },
      { upsert: true },
    );
    await countTombstones(store, agentId, [{ from: stone?.reason, to: ERASED }]);
  }
  // Again once the tombstone stands: a write resent after the first delete found no key and
  // made one, and, its entry still stored, was answered existing and kept it. From here on a
  // resend is answered erased, and its persist deletes the key it made.
  await shredContentKey(store, agentId, id);
  await store.ledger.replaceOne(
    { _id: `erase:${id}`, agentId },
    { agentId, at, event: 'erase', entryId: id, reason: 'forget' },
    { upsert: true },
  );
  return true;
}

/** Summaries (in either tier) built from the entry. */
export async function summariesDerivedFrom(store: Store, agentId: string, id: string): Promise<Entry[]> {
  const found = new Map<string, Entry>();
  for (const tier of TIERS) {
    for (const s of await tierCollection(store, tier).find({ agentId, derivedFrom: id }).toArray()) {
      if (!found.has(s._id)) found.set(s._id, s);
    }
  }
  return [...found.values()];
}

/**
 * Rewrite a summary in place (every tier holding it) from the sources that remain. The
 * rewrite keeps every source's link truthful at every crash point, and its steps are
 * idempotent: the lossless links are withdrawn first, then the text is replaced, then each
 * link says whether the new text keeps its source's facts, and only then, when `final`, does
 * the erased id leave `derivedFrom`. Until that last step the erasure finds the summary again,
 * so a retried rewrite (whose model may write other text) redoes every step against its own
 * text, and a rewrite that is not final (the one without a model) is done again by the next.
 * The old text's counted terms are withdrawn before it goes, and the new text awaits its count.
 */
export async function replaceSummaryContent(
  store: Store,
  agentId: string,
  summary: Pick<
    Entry,
    | '_id'
    | 'text'
    | 'tokens'
    | 'terms'
    | 'termCounts'
    | 'atoms'
    | 'derivedFrom'
    | 'lossy_summary'
    | 'lossyReasons'
  >,
  lossless: ReadonlyMap<string, boolean>,
  erasedId: string,
  at: number,
  { final }: { final: boolean },
): Promise<void> {
  const { _id } = summary;
  await store.ledger.replaceOne(
    { _id: `erase:${erasedId}:resummarise:${_id}`, agentId },
    { agentId, at, event: 'resummarise', entryId: _id, reason: `source ${erasedId} erased` },
    { upsert: true },
  );
  const stillBuiltFromErased = (e: Pick<Entry, 'derivedFrom'>) => e.derivedFrom?.includes(erasedId) ?? false;
  const current = (await locateEntry(store, agentId, _id))?.entry;
  // Once the erased id has left `derivedFrom`, the rewrite is complete.
  if (!current || !stillBuiltFromErased(current)) return;
  for (const sourceId of lossless.keys()) {
    await annotate(store, agentId, sourceId, (e) => claimPatch(e, _id, false, { link: false }));
  }
  const content: Partial<Entry> = {
    text: summary.text,
    tokens: summary.tokens,
    terms: summary.terms,
    termKeys: termKeys(agentId, summary.terms),
    liveKeys: termKeys(agentId, summary.terms),
    atoms: summary.atoms,
    lossy_summary: summary.lossy_summary,
  };
  if (summary.lossyReasons !== undefined) content.lossyReasons = summary.lossyReasons;
  if (summary.termCounts !== undefined) content.termCounts = summary.termCounts;
  // Withdrawn before the text goes: a crash in between leaves a count too low, never a term
  // of the erased entry (docs/invariants.md, Erasure wins).
  if (!current.pending?.includes('terms')) {
    await adjustDocumentFrequencies(store, agentId, [current.terms], -1);
  }
  await annotate(store, agentId, _id, (e) =>
    stillBuiltFromErased(e)
      ? {
          // The new text awaits its count and its own vector.
          set: {
            ...content,
            pending: [...new Set([...(e.pending ?? []), 'terms' as const, 'embed' as const])],
          },
          // Recall scores by the counts beside the terms: none kept rather than the old text's.
          unset: [
            ...(summary.lossyReasons === undefined ? ['lossyReasons' as const] : []),
            ...(summary.termCounts === undefined ? ['termCounts' as const] : []),
          ],
        }
      : undefined,
  );
  // The old vector holds the erased entry's meaning; it goes after the text it was made from.
  await dropVectors(store, agentId, [_id], at);
  for (const [sourceId, ok] of lossless) {
    await annotate(store, agentId, sourceId, (e) => claimPatch(e, _id, ok, { link: false }));
  }
  if (!final) return;
  await annotate(store, agentId, _id, (e) =>
    stillBuiltFromErased(e) ? { set: { derivedFrom: summary.derivedFrom }, unset: [] } : undefined,
  );
}

/**
 * Remove a summary that cannot be rebuilt without the erased entry, leaving a flagged,
 * content-free tombstone for it, and unlink everything that leaned on it: sources are no
 * longer subsumed by it, and tombstones it stood in for are marked `erased`. The summary held
 * the erased content, so it is erased as an entry is (docs/invariants.md, Erasure wins): under
 * an erasure mark of its own, since a night removes it after its source's erasure has ended,
 * and out of the query log, where a recall may have logged it without its source. Returns how
 * many logged recalls left the log.
 */
export async function removeSummary(
  store: Store,
  agentId: string,
  summaryId: string,
  erasedId: string,
  at: number,
): Promise<number> {
  await beginErasure(store, agentId, summaryId);
  const reason = derivedFromErased(erasedId);
  const written = await store.tombstones.replaceOne(
    { _id: summaryId, agentId },
    { agentId, terms: [], termKeys: [], reason, deletedAt: at },
    { upsert: true },
  );
  if (written.upsertedCount === 1) await countTombstones(store, agentId, [{ to: reason }]);
  await store.ledger.replaceOne(
    { _id: `erase:${erasedId}:remove:${summaryId}`, agentId },
    { agentId, at, event: 'erase', entryId: summaryId, reason },
    { upsert: true },
  );
  await unlinkSummary(store, agentId, summaryId);
  await deleteEntry(store, agentId, summaryId);
  const queriesRemoved = await eraseFromQueryLog(store, agentId, summaryId);
  await endErasure(store, agentId, summaryId);
  return queriesRemoved;
}

/**
 * Entries subsumed by a summary that is going are released from it (`releasePatch`: the link
 * goes, and a current one awaits clustering again); tombstones it stood in for say so. Both
 * are found through the summary's own `derivedFrom` by point reads, so this runs before the
 * summary is deleted.
 */
export async function unlinkSummary(store: Store, agentId: string, summaryId: string): Promise<void> {
  const summary = (await locateEntry(store, agentId, summaryId))?.entry;
  if (!summary) return;
  await releaseSources(store, agentId, summary);
  for (const id of summary.derivedFrom ?? []) {
    const stone = await findById(store.tombstones, agentId, id);
    if (stone?.standIn?.summaryId === summaryId && !stone.standIn.erased) {
      await store.tombstones.updateOne(
        { _id: id, agentId },
        { $set: { 'standIn.erased': true, 'standIn.lossy': true } },
      );
    }
  }
}

/**
 * Supersession links through the erased entry: a fact it superseded is current again
 * (restored, with a ledger record), and a fact that superseded it no longer points to it.
 */
export async function unlinkSupersession(
  store: Store,
  agentId: string,
  id: string,
  at: number,
): Promise<string[]> {
  const restored: string[] = [];
  for (const tier of TIERS) {
    const collection = tierCollection(store, tier);
    for (const { _id } of await collection
      .find({ agentId, supersededBy: id }, { projection: { _id: 1 } })
      .toArray()) {
      await store.ledger.replaceOne(
        { _id: `erase:${id}:restore:${_id}`, agentId },
        {
          agentId,
          at,
          event: 'restore',
          entryId: _id,
          reason: `the fact that superseded it (${id}) was erased`,
        },
        { upsert: true },
      );
      await annotate(store, agentId, _id, (e) =>
        e.supersededBy === id ? restoreSupersessionPatch(e, at) : undefined,
      );
      restored.push(_id);
    }
    for (const { _id } of await collection
      .find({ agentId, supersedes: id }, { projection: { _id: 1 } })
      .toArray()) {
      await annotate(store, agentId, _id, (e) =>
        e.supersedes === id ? { set: {}, unset: ['supersedes'] } : undefined,
      );
    }
  }
  return [...new Set(restored)];
}

/**
 * Logged queries that returned the entry, and those a deep recall logged as missing it (its
 * eviction tombstone held terms of its text that the query matched), leave the query log with
 * it: either ties the query's words to the erased text.
 */
export async function eraseFromQueryLog(store: Store, agentId: string, id: string): Promise<number> {
  const hit = await store.queries.deleteMany({ agentId, hitIds: id });
  const missed = await store.queries.deleteMany({ agentId, missingIds: id });
  return hit.deletedCount + missed.deletedCount;
}
