import { shredAgentContentKeys } from './contentKeys';
import { ERASED, inBatches, isErasure, type Store, type Tombstone } from './db';
import { listKeys, revokeKey } from './keys';
import { releaseAgentClaims } from './quotas';
import { TIERS, tierCollection } from './tiers';
import { beginErasure } from './erasure';
import { dropVectors } from './vectors';
import { findByIds } from './byIds';

/**
 * Erasing a whole agent (docs/erasure.md; docs/invariants.md, Erasure wins). Every id the
 * agent was given goes behind an erasure tombstone before anything of it is deleted, so a
 * concurrent move, summary or replayed write withdraws itself as it does for `forget`
 * (store/erasure.ts, withdrawErased). Each function is idempotent and keyed by the agent id:
 * a rerun finds nothing left to do and changes nothing.
 */

/** The ledger event of an agent's erasure: the one ledger record of the agent that stays. */
export const AGENT_ERASED = 'erase-agent';

/**
 * Give each of these ids of the agent a content-free erasure tombstone, in place of none or of
 * an eviction's (whose terms, atoms and keys derive from the content). Erasure tombstones stay
 * as they are. Point reads by `_id`, then one bulk write; returns how many were written.
 */
async function tombstoneIds(
  store: Store,
  agentId: string,
  ids: readonly string[],
  at: number,
): Promise<number> {
  const stones = await Promise.all(
    ids.map((_id) => store.tombstones.findOne({ _id, agentId }, { projection: { reason: 1 } })),
  );
  const due = ids.filter((_, i) => !stones[i] || !isErasure(stones[i]));
  if (due.length === 0) return 0;
  const replacement: Omit<Tombstone, '_id'> = {
    agentId,
    terms: [],
    termKeys: [],
    reason: ERASED,
    deletedAt: at,
  };
  await store.tombstones.bulkWrite(
    due.map((_id) => ({ replaceOne: { filter: { _id, agentId }, replacement, upsert: true } })),
    { ordered: false },
  );
  return due.length;
}

export interface MemoryErased {
  tombstoned: number;
  entriesRemoved: number;
  vectorsCleared: number;
}

/**
 * The agent's memory. Its content keys go first, so every copy of its content in Temporal's
 * histories is unreadable from then on whatever fails after (and again once its tiers are
 * swept). Then tombstones (every id of the
 * registry, which a replayed write would bring back; then every tombstone that is not an
 * erasure's), then its entries of both tiers, a page at a time until none is left (each page
 * tombstoned again first, for an entry the registry does not name), then every vector it
 * still has, through the one way vectors are cleared (store/vectors.ts), after the content as
 * everywhere. `onBatch` runs per page.
 */
export async function eraseAgentMemory(
  store: Store,
  agentId: string,
  opts: { at: number; batch: number; onBatch: () => void },
): Promise<MemoryErased> {
  const { at, batch, onBatch } = opts;
  // Under way until the agent's record goes (eraseAgentRecords): recalls look at their hits.
  await beginErasure(store, agentId, '*');
  const erased: MemoryErased = { tombstoned: 0, entriesRemoved: 0, vectorsCleared: 0 };
  await shredAgentContentKeys(store, agentId);
  for await (const page of inBatches(store.entryIds, { agentId }, batch, { _id: 1 })) {
    erased.tombstoned += await tombstoneIds(
      store,
      agentId,
      page.map((r) => r._id),
      at,
    );
    onBatch();
  }
  for await (const page of inBatches(store.tombstones, { agentId }, batch, { _id: 1, reason: 1 })) {
    const evicted = page.filter((stone) => !isErasure(stone)).map((stone) => stone._id);
    erased.tombstoned += await tombstoneIds(store, agentId, evicted, at);
    onBatch();
  }
  for (const tier of TIERS) {
    const collection = tierCollection(store, tier);
    for (;;) {
      const page = await collection
        .find({ agentId }, { projection: { _id: 1 } })
        .limit(batch)
        .toArray();
      if (page.length === 0) break;
      const ids = page.map((e) => e._id);
      erased.tombstoned += await tombstoneIds(store, agentId, ids, at);
      const res = await collection.bulkWrite(
        ids.map((_id) => ({ deleteOne: { filter: { _id, agentId } } })),
        { ordered: false },
      );
      erased.entriesRemoved += res.deletedCount;
      onBatch();
    }
  }
  // Again once the tiers are swept: a write resent meanwhile found no key and made one, and,
  // its entry not yet tombstoned, was answered existing and kept it; a resend from here on is
  // answered erased, and its persist deletes the key it made.
  await shredAgentContentKeys(store, agentId);
  for (;;) {
    const page = await store.vectors
      .find({ agentId, vector: { $exists: true } }, { projection: { _id: 1 } })
      .limit(batch)
      .toArray();
    if (page.length === 0) break;
    await dropVectors(
      store,
      agentId,
      page.map((r) => r._id),
      at,
    );
    erased.vectorsCleared += page.length;
    onBatch();
  }
  return erased;
}

export interface RecordsErased {
  queriesRemoved: number;
  ledgerRemoved: number;
  termStatsRemoved: number;
  runsRemoved: number;
  keysRevoked: string[];
}

/**
 * What else names the agent: its query log, its ledger (but the records of its erasures),
 * its term statistics, its nightly runs' records, its record in the nightly fan-out, and the
 * keys whose pattern names it alone (a pattern with `*` covers other agents too, and stays).
 * The records of the feed of its vectors, its registry of ids and its tombstones stay: they
 * hold no content, and they are what keeps every process's vector index and every replayed
 * write from bringing anything back. With `erased` (the memory steps removed something), or
 * when this removes anything, a ledger record of the erasure is left at `at`.
 */
export async function eraseAgentRecords(
  store: Store,
  agentId: string,
  opts: { at: number; erased: boolean },
): Promise<RecordsErased> {
  // Written before the agent's record goes when there is anything to erase, so a retry after
  // a crash below (which then finds nothing to remove) still leaves it.
  const record = () =>
    store.ledger.updateOne(
      { _id: `${AGENT_ERASED}:${agentId}:${opts.at}` },
      {
        $setOnInsert: {
          agentId,
          at: opts.at,
          event: AGENT_ERASED,
          // Every entry of the agent: its tombstones name each one.
          entryId: '*',
          reason: 'the agent was erased',
        },
      },
      { upsert: true },
    );
  // The agent's record goes first, its erasure recorded before it: a night's run of the agent
  // recorded from then on finds one or the other and drops its record itself (store/runs.ts,
  // recordAgentRun), whichever attempt of this step it meets.
  if (opts.erased || (await store.agents.findOne({ _id: agentId }, { projection: { _id: 1 } })))
    await record();
  await store.agents.deleteOne({ _id: agentId });
  const [queries, ledger, termStats, runs] = await Promise.all([
    store.queries.deleteMany({ agentId }),
    store.ledger.deleteMany({ agentId, event: { $ne: AGENT_ERASED } }),
    store.termStats.deleteMany({ agentId }),
    store.runs.deleteMany({ kind: 'agent', agentId }),
  ]);
  const keysRevoked: string[] = [];
  for (const key of await listKeys(store)) {
    if (key.agents === agentId && (await revokeKey(store, key._id, opts.at))) keysRevoked.push(key._id);
  }
  const removed: RecordsErased = {
    queriesRemoved: queries.deletedCount,
    ledgerRemoved: ledger.deletedCount,
    termStatsRemoved: termStats.deletedCount,
    runsRemoved: runs.deletedCount,
    keysRevoked,
  };
  // No key's quota claim names the agent any more; each key gets its place back.
  const claims = await releaseAgentClaims(store, agentId);
  const counted =
    removed.queriesRemoved + removed.ledgerRemoved + removed.termStatsRemoved + removed.runsRemoved + claims;
  if (!opts.erased && (counted > 0 || keysRevoked.length > 0)) await record();
  return removed;
}

/**
 * Whether the agent is being erased whole, or was and has not written since (its record gone,
 * its erasure in the ledger).
 */
export async function erasedWhole(store: Store, agentId: string): Promise<boolean> {
  const record = await store.agents.findOne({ _id: agentId }, { projection: { erasing: 1 } });
  if (record) return record.erasing?.includes('*') ?? false;
  return (
    (await store.ledger.findOne(
      { agentId, entryId: '*', event: AGENT_ERASED },
      { projection: { _id: 1 } },
    )) !== null
  );
}

/** Which of these agent ids joined the nightly fan-out (read by their ids). */
export async function registeredAmong(store: Store, agentIds: readonly string[]): Promise<Set<string>> {
  return new Set((await findByIds(store.agents, agentIds, { _id: 1 })).keys());
}
