import { lastWriteDay, oldestWriteDay, type Entry, type PendingWork } from '../core/entry';
import type { Located, NightRun, NightStore } from '../core/nightly/phases';
import { awaitsCounting } from '../core/nightly/plans';
import { removeSummary, summariesDerivedFrom } from './forget';
import { dayOf } from '../core/salience';
import type { ReclaimEntry } from '../core/nightly/reclaim';
import { countArrived, countWrittenOn, setHotCount, setHotWrittenFrom, tierCounts } from './agents';
import { countChanges } from './census';
import { allWithin } from '../core/allWithin';
import { CALL_FAN_OUT, inBatches, type QueryLogRecord, type Store } from './db';
import { entriesWithTerm, writeDayKey } from './entries';
import { countEvents } from './ledger';
import {
  dropLiveKeys,
  dropQueries,
  evictEntry,
  expireEntry,
  refreshHotEntries,
  rehydrateEntry,
  retireSummary,
  spillEntries,
  supersedeEntry,
  writeSummary,
} from './nightly';
import { summaryId } from '../core/ids';
import { evictedFactsOf, storedEntries, tierCollection, TIERS } from './tiers';
import { previousRunAsOf } from './runs';
import { adjustDocumentFrequencies, documentFrequencies, termKey } from './terms';
import { erasedAmong, erasuresUnderWay } from './erasure';
import { findByIds } from './byIds';

/**
 * The night counts the terms of entries it read awaiting their count. An erasure may land in
 * between, and it withdraws only what was counted when it read the entry: so once counted,
 * each entry is looked at again, and what was counted for one no longer standing is withdrawn
 * (docs/invariants.md, Erasure wins). Not standing: gone, changed (a summary an erasure
 * rewrote awaits its count again), or claimed by an erasure, whether under way (it may have
 * read the entry before it was counted, and delete it after this look) or ended (a replayed
 * copy it has yet to withdraw). Counts err low, never high.
 */
async function countEntryTerms(
  store: Store,
  agentId: string,
  entries: readonly Pick<Entry, '_id' | 'terms'>[],
): Promise<void> {
  const ids = entries.map((e) => e._id);
  await adjustDocumentFrequencies(
    store,
    agentId,
    entries.map((e) => e.terms),
    1,
  );
  // Read after the count and before the entries: an erasure that read one before it was
  // counted and deletes it after it is read again is under way all that time.
  const [underWay, erased] = await Promise.all([
    erasuresUnderWay(store, agentId),
    erasedAmong(store, agentId, ids),
  ]);
  const claimed = (e: Pick<Entry, '_id' | 'derivedFrom'>) =>
    underWay.has('*') ||
    underWay.has(e._id) ||
    erased.has(e._id) ||
    (e.derivedFrom ?? []).some((source) => underWay.has(source));
  // Each entry as stored now, hot first (mid-move it may be in both), read by ids.
  const now = new Map<string, Entry>();
  for (const tier of TIERS) {
    const unseen = ids.filter((id) => !now.has(id));
    if (unseen.length === 0) break;
    const found = await findByIds(tierCollection(store, tier), unseen, {
      agentId: 1,
      terms: 1,
      pending: 1,
      derivedFrom: 1,
    });
    for (const [id, e] of found) if (e.agentId === agentId) now.set(id, e);
  }
  const standing = (e: Pick<Entry, '_id' | 'terms'>) => {
    const stored = now.get(e._id);
    return (
      stored !== undefined &&
      !stored.pending?.includes('terms') &&
      stored.terms.join(' ') === e.terms.join(' ') &&
      !claimed(stored)
    );
  };
  await adjustDocumentFrequencies(
    store,
    agentId,
    entries.filter((e) => !standing(e)).map((e) => e.terms),
    -1,
  );
}

const RECLAIM_FIELDS = {
  _id: 1,
  kind: 1,
  tokens: 1,
  writtenAt: 1,
  refreshedAt: 1,
  validity: 1,
  expiredAt: 1,
  isActive: 1,
  dormantAt: 1,
  subsumedBy: 1,
  pending: 1,
  lastWriteKey: 1,
};

/**
 * The nightly phases' view of one agent in MongoDB (core/nightly/phases.ts). Reads are equality on
 * indexed fields (`pending`, `terms`, `subject`, `day`, the ledger's run and event) or point
 * reads by `_id`; the one read of a whole tier is reclaim's, only when the maintained hot
 * count is over the high watermark and hot's oldest write days do not hold what must leave.
 */
export function mongoNight(store: Store, run: NightRun, batch: number): NightStore {
  const { agentId } = run;

  async function* pending(work: PendingWork): AsyncGenerator<Located[]> {
    const seen = new Set<string>();
    for (const tier of TIERS) {
      for await (const page of inBatches(tierCollection(store, tier), { agentId, pending: work }, batch)) {
        const fresh = page.filter((entry) => !seen.has(entry._id));
        for (const entry of fresh) seen.add(entry._id);
        if (fresh.length) yield fresh.map((entry) => ({ entry, tier }));
      }
    }
  }

  /** Settled one by one at the version read, so a change since then keeps its work. */
  async function settle(ids: readonly string[], work: PendingWork): Promise<void> {
    for (let i = 0; i < ids.length; i += batch) {
      const slice = ids.slice(i, i + batch);
      for (const tier of TIERS) {
        await tierCollection(store, tier).bulkWrite(
          slice.map((_id) => ({
            updateOne: {
              filter: { _id, agentId, pending: work },
              update: { $pull: { pending: work }, $inc: { version: 1 } },
            },
          })),
          { ordered: false },
        );
      }
    }
  }

  /**
   * `lastWriteKey` on those of the entries that lack it, guarded by the write times the key
   * derives from, not the version: a key changes no decision.
   */
  async function keyWriteDays(entries: readonly ReclaimEntry[]): Promise<boolean> {
    const unkeyed = entries.filter((e) => e.lastWriteKey === undefined);
    if (unkeyed.length === 0) return true;
    const res = await store.hot.bulkWrite(
      unkeyed.map((e) => ({
        updateOne: {
          filter: {
            _id: e._id,
            agentId,
            writtenAt: e.writtenAt,
            refreshedAt: e.refreshedAt ?? { $exists: false },
          },
          update: { $set: writeDayKey({ ...e, agentId }) },
        },
      })),
      { ordered: false },
    );
    return res.matchedCount === unkeyed.length;
  }

  return {
    pending,
    // A few terms' reads at once (CALL_FAN_OUT), yielded in the terms' order.
    async *withTerms(tier, terms, limit) {
      const collection = tierCollection(store, tier);
      for (let i = 0; i < terms.length; i += CALL_FAN_OUT) {
        yield* await allWithin(terms.slice(i, i + CALL_FAN_OUT), CALL_FAN_OUT, (term) =>
          entriesWithTerm(collection, agentId, term, limit),
        );
      }
    },
    // A few dormant days' reads at once (CALL_FAN_OUT), each by its indexed `dormantKey`.
    async *dormantBetween(from, to) {
      const days: number[] = [];
      for (let day = dayOf(from); day <= dayOf(to); day++) days.push(day);
      for (let i = 0; i < days.length; i += CALL_FAN_OUT) {
        yield* await allWithin(days.slice(i, i + CALL_FAN_OUT), CALL_FAN_OUT, async (day) =>
          (await store.hot.find({ dormantKey: termKey(agentId, String(day)) }).toArray()).filter(
            (e) => e.agentId === agentId && e.dormantAt >= from && e.dormantAt <= to,
          ),
        );
      }
    },
    async factsAbout(subject) {
      const found = new Map<string, Located>();
      for (const tier of TIERS) {
        for (const entry of await tierCollection(store, tier).find({ agentId, subject }).toArray()) {
          if (!found.has(entry._id)) found.set(entry._id, { entry, tier });
        }
      }
      return [...found.values()];
    },
    async evictedFactsAbout(subject) {
      return evictedFactsOf(await store.tombstones.find({ agentId, subject }).toArray());
    },
    documentFrequencies: (terms) => documentFrequencies(store, agentId, terms),
    async countTerms(found) {
      const entries = found.map((f) => f.entry);
      // Settled before counted: a crash in between leaves a count too low, never one of
      // an entry that is gone (docs/invariants.md, Erasure wins).
      await settle(
        entries.map((e) => e._id),
        'terms',
      );
      // Each entry read again after its count: one erased meanwhile has its count withdrawn.
      await countEntryTerms(store, agentId, entries);
      const arrived = found.filter((f) => f.tier === 'hot' && awaitsCounting(f.entry)).map((f) => f.entry);
      await countArrived(store, agentId, arrived.length);
      // One stored by a worker of a version before write days gets its day as it counts.
      await keyWriteDays(arrived);
      if (arrived.length > 0) await countWrittenOn(store, agentId, oldestWriteDay(arrived));
      await countChanges(
        store,
        agentId,
        found.map(({ entry, tier }) => ({
          before: { entry, tier },
          after: { entry: { ...entry, pending: entry.pending?.filter((w) => w !== 'terms') }, tier },
        })),
      );
    },
    settle,
    async queriesSince(since) {
      const inRange = (at: number) => at <= run.asOf && (since === undefined || at > since);
      const projection = { terms: 1, at: 1, hitIds: 1, meaningIds: 1 };
      const logged: QueryLogRecord[] = [];
      if (since === undefined)
        logged.push(...(await store.queries.find({ agentId }, { projection }).toArray()));
      else {
        for (let day = dayOf(since); day <= dayOf(run.asOf); day++) {
          logged.push(...(await store.queries.find({ agentId, day }, { projection }).toArray()));
        }
      }
      return logged
        .filter((q) => inRange(q.at))
        .map((q) => ({ terms: q.terms, hitIds: q.hitIds, meaningIds: q.meaningIds ?? [] }));
    },
    previousRunAsOf: () => previousRunAsOf(store, run.asOf, { kind: 'agent', agentId }),
    tierCounts: () => tierCounts(store, agentId),
    async *hotStorage() {
      yield* inBatches<ReclaimEntry>(store.hot as never, { agentId }, batch, RECLAIM_FIELDS);
    },
    async hotWrittenOn(day) {
      const written = await store.hot
        .find(
          { lastWriteKey: termKey(agentId, String(day)) },
          { projection: { ...RECLAIM_FIELDS, agentId: 1 } },
        )
        .toArray();
      return written.filter((e) => e.agentId === agentId && lastWriteDay(e) === day);
    },
    setHotCount: (hot, changesSeen) => setHotCount(store, agentId, hot, changesSeen),
    keyWriteDays,
    setHotWrittenFrom: (day, was) => setHotWrittenFrom(store, agentId, day, was),
    stored: (ids) => storedEntries(store, agentId, ids),
    async copies(ids) {
      const byTier = await Promise.all(TIERS.map((tier) => findByIds(tierCollection(store, tier), ids)));
      return ids.flatMap((id) =>
        TIERS.flatMap((tier, t): Located[] => {
          const entry = byTier[t]!.get(id);
          return entry?.agentId === agentId ? [{ entry, tier }] : [];
        }),
      );
    },
    summaryId: (sourceIds) => summaryId(agentId, sourceIds),
    async summariesOfRun() {
      const records = await store.ledger
        .find({ agentId, runId: run.runId, event: 'summarise' }, { projection: { entryId: 1 } })
        .toArray();
      const { present } = await storedEntries(
        store,
        agentId,
        records.map((r) => r.entryId),
      );
      return present;
    },
    expire: ({ entry }) => expireEntry(store, run, entry),
    async refresh(steps) {
      await refreshHotEntries(
        store,
        run,
        steps.filter((s) => s.tier === 'hot'),
      );
      for (const step of steps.filter((s) => s.tier === 'cold')) await rehydrateEntry(store, run, step);
    },
    dropLiveKeys: (entries) => dropLiveKeys(store, run, entries),
    dropQueries: (before) => dropQueries(store, run, before),
    summariesOf: (sourceId) => summariesDerivedFrom(store, agentId, sourceId),
    async writeSummary(summary: Entry, sources) {
      const { erasedSource } = await writeSummary(store, run, summary, sources);
      if (erasedSource !== undefined)
        await removeSummary(store, agentId, summary._id, erasedSource, run.asOf);
    },
    supersede: (step) => supersedeEntry(store, run, step.olderId, step.newerId),
    retireSummary: (summary, cause) => retireSummary(store, run, summary, cause),
    spill: async (spills) => {
      await spillEntries(store, run, spills);
    },
    evict: (entry, step) => evictEntry(store, run, entry, step),
    counted: (event) => countEvents(store, run, event),
  };
}
