import type { WriteStatus } from '../core/messages';
import { MongoBulkWriteError, type Collection } from 'mongodb';
import { lastWriteDay, type Entry, type Provenance, type Tier } from '../core/entry';
import { entryId } from '../core/ids';
import {
  candidateTerms,
  inDefaultRecall,
  MAX_TERM_ROUNDS,
  POSTINGS_BUDGET,
  type Candidate,
} from '../core/recall';
import { dayOf } from '../core/salience';
import { allWithin } from '../core/allWithin';
import { CALL_FAN_OUT, insertIgnoringExisting, type QueryLogRecord, type Store } from './db';
import { erasedAmong, erasureMark, quietBetween, withdrawErased, type ErasureMark } from './erasure';
import { documentFrequencies, termKey } from './terms';
import { findByIds } from './byIds';

/** The id a written entry derives: by its idempotency key, else by its content and time. */
export function writtenEntryId(
  agentId: string,
  e: { idempotencyKey?: string | undefined; text: string; source: Provenance; writtenAt: number },
): string {
  return entryId(
    agentId,
    e.idempotencyKey
      ? { idempotencyKey: e.idempotencyKey }
      : { text: e.text, source: e.source, writtenAt: e.writtenAt },
  );
}

export function termKeys(agentId: string, terms: readonly string[]): string[] {
  return terms.map((t) => termKey(agentId, t));
}

/** The keys of an entry whose `dormantAt` is (re)set: live again, and found by its dormant day. */
export function gateKeys(
  entry: Pick<Entry, 'agentId' | 'terms'>,
  dormantAt: number,
): Pick<Entry, 'liveKeys' | 'dormantKey'> {
  return {
    liveKeys: termKeys(entry.agentId, entry.terms),
    dormantKey: termKey(entry.agentId, String(dayOf(dormantAt))),
  };
}

/** The key of an entry's last write day, (re)set with `writtenAt` or `refreshedAt`. */
export function writeDayKey(entry: Pick<Entry, 'agentId' | 'writtenAt' | 'refreshedAt'>): {
  lastWriteKey: string;
} {
  return { lastWriteKey: termKey(entry.agentId, String(lastWriteDay(entry))) };
}

/**
 * The keys of the pages an entry is listed in (`pageKeys`): the first one and two characters of
 * its id, a digest's, so each page of a level holds about the same share of the agent.
 */
export function pageKeys(agentId: string, id: string): string[] {
  return [pageKey(agentId, id.slice(0, 1)), pageKey(agentId, id.slice(0, 2))];
}

export function pageKey(agentId: string, prefix: string): string {
  return `${agentId} ${prefix}`;
}

/** The stored form of an entry: with the lookup keys of its terms, its gate and its pages. */
export function indexedEntry(entry: Entry): Entry {
  return {
    ...entry,
    termKeys: termKeys(entry.agentId, entry.terms),
    ...gateKeys(entry, entry.dormantAt),
    ...writeDayKey(entry),
    pageKeys: pageKeys(entry.agentId, entry._id),
  };
}

/**
 * The stored form of an entry as the nights before `now` left it (benchmarks and tests load
 * stores so): its pending work done, counted, and out of default recall's postings once dormant.
 */
export function settledEntry(entry: Entry, now: number): Entry {
  const { pending: _pending, ...e } = indexedEntry(entry);
  if (e.dormantAt <= now) delete e.liveKeys;
  return e;
}

/** Which of `ids` a collection holds, read by their ids. */
async function presentIds<T extends { _id: string }>(
  collection: Collection<T>,
  ids: string[],
): Promise<string[]> {
  return [...(await findByIds(collection, ids, { _id: 1 })).keys()];
}

/**
 * Insert entries that exist in neither tier and were never deleted; the one way entries
 * enter the store, since it keeps the registry of every id ever stored. Replays and retries are
 * no-ops: they never pull a spilled entry back into hot, nor resurrect an evicted or erased one.
 */
export async function insertNewEntries(store: Store, entries: Entry[]): Promise<Map<string, WriteStatus>> {
  const status = new Map<string, WriteStatus>();
  if (entries.length === 0) return status;
  const owner = new Map(entries.map((e) => [e._id, e.agentId]));
  const ids = [...owner.keys()];
  // Only an id stored before can be in cold or behind a tombstone: one batch insert into the
  // registry of ids tells them apart, and only those cost two point reads.
  const seen = [
    ...(await insertIgnoringExisting(
      store.entryIds,
      ids.map((_id) => ({ _id, agentId: owner.get(_id)! })),
    )),
  ];
  const [inCold, tombstoned] = await Promise.all([
    presentIds(store.cold, seen),
    presentIds(store.tombstones, seen),
  ]);
  for (const id of inCold) status.set(id, 'existing');
  for (const id of tombstoned) status.set(id, 'deleted');
  const unique = new Map<string, Entry>();
  for (const e of entries) if (!status.has(e._id) && !unique.has(e._id)) unique.set(e._id, indexedEntry(e));
  for (const id of unique.keys()) status.set(id, 'created');
  const fresh = [...unique.values()];
  if (fresh.length === 0) return status;
  try {
    await store.hot.insertMany(fresh, { ordered: false });
  } catch (err) {
    if (!(err instanceof MongoBulkWriteError)) throw err;
    const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
    for (const we of errors) {
      if (we.code !== 11000) throw err;
      status.set(fresh[we.index]!._id, 'existing');
    }
  }
  await settleReplays(
    store,
    fresh.filter((e) => seen.includes(e._id) && status.get(e._id) === 'created'),
    status,
  );
  return status;
}

/**
 * A replay passed the guard above and found hot free of its id, but the entry may have moved
 * or gone in between. An erasure wins (see withdrawErased); after an eviction or a move to
 * cold, the replay's own copy leaves hot. Only its own: the delete matches the version it
 * inserted, never a rehydration's newer copy.
 */
async function settleReplays(
  store: Store,
  replays: Entry[],
  status: Map<string, WriteStatus>,
): Promise<void> {
  for (const e of replays) {
    const own = { _id: e._id, agentId: e.agentId, version: e.version };
    if ((await withdrawErased(store, e.agentId, [e._id])).size > 0) {
      status.set(e._id, 'deleted');
    } else if (
      await store.tombstones.findOne({ _id: e._id, agentId: e.agentId }, { projection: { _id: 1 } })
    ) {
      await store.hot.deleteOne(own);
      status.set(e._id, 'deleted');
    } else if (await store.cold.findOne({ _id: e._id, agentId: e.agentId }, { projection: { _id: 1 } })) {
      await store.hot.deleteOne(own);
      status.set(e._id, 'existing');
    }
  }
}

export interface CandidateFilter {
  agentId: string;
  terms: string[];
  now: number;
  deep: boolean;
}

/**
 * Entries of a tier holding `term`, at most `limit`: one equality on the agent's term key
 * (`liveKeys`: only among hot entries the last night found above the gate).
 * (With `{agentId, terms}` instead, a planner may serve the agent's key and filter its whole
 * store.) The agent is checked again in code, as for point reads (docs/invariants.md, Agent-scoped).
 */
export async function entriesWithTerm(
  collection: Collection<Entry>,
  agentId: string,
  term: string,
  limit: number,
  key: 'termKeys' | 'liveKeys' = 'termKeys',
): Promise<Entry[]> {
  const found = await collection
    .find({ [key]: termKey(agentId, term) })
    .limit(limit)
    .toArray();
  return found.filter((e) => e.agentId === agentId);
}

/**
 * Recall's candidates: the postings of the query terms `candidateTerms` picks (rarest
 * first, within the budget), each read by equality, merged here, and passed through the
 * tier filter of core/recall.ts. Default recall reads hot and keeps what `inDefaultRecall`
 * keeps; deep recall reads both tiers and keeps everything.
 */
export async function findCandidates(store: Store, f: CandidateFilter): Promise<Candidate[]> {
  const budget = f.deep ? POSTINGS_BUDGET.deep : POSTINGS_BUDGET.default;
  const df = await documentFrequencies(store, f.agentId, f.terms);
  const tiers: Tier[] = f.deep ? ['hot', 'cold'] : ['hot'];
  const postings: { tier: Tier; term: string; entries: Entry[] }[] = [];
  const read = new Set<string>();
  const empty = new Set<string>();
  // Round after round while reads find terms empty: their places go to the next terms.
  for (let round = 0; round < MAX_TERM_ROUNDS; round++) {
    const next = candidateTerms(f.terms, df, budget, empty).filter((p) => !read.has(p.term));
    if (next.length === 0) break;
    const found = await allWithin(
      tiers.flatMap((tier) => next.map((p) => ({ tier, ...p }))),
      CALL_FAN_OUT,
      async ({ tier, term, limit }) => ({
        tier,
        term,
        entries: await entriesWithTerm(
          tier === 'hot' ? store.hot : store.cold,
          f.agentId,
          term,
          limit,
          f.deep ? 'termKeys' : 'liveKeys',
        ),
      }),
    );
    for (const p of next) read.add(p.term);
    for (const p of next)
      if (!found.some((r) => r.term === p.term && r.entries.length > 0)) empty.add(p.term);
    postings.push(...found);
    if (!next.some((p) => empty.has(p.term))) break;
  }
  // Mid-move an entry can sit in both tiers (docs/invariants.md, Moves lose nothing); hot
  // comes first and is the one reported (a stable sort: each tier's in the order read).
  postings.sort((a, b) => tiers.indexOf(a.tier) - tiers.indexOf(b.tier));
  const seen = new Set<string>();
  const candidates: Candidate[] = [];
  for (const { tier, entries } of postings) {
    for (const entry of entries) {
      if (seen.has(entry._id)) continue;
      seen.add(entry._id);
      if (f.deep || inDefaultRecall(entry, f.now)) candidates.push({ entry, tier });
    }
  }
  return candidates;
}

/**
 * A recall's record. The recall may have read an entry that `forget` erased since: the record
 * goes in first and looks for erasure tombstones after, while `forget` writes its tombstone
 * before it cleans the query log, so in any interleaving one of the two removes it
 * (docs/invariants.md, Erasure wins). With `before`, the agent's erasure mark read before the
 * recall read any entry, the look is skipped when the mark says no erasure could have raced it.
 */
export async function logQuery(
  store: Store,
  record: Omit<QueryLogRecord, 'day'>,
  before?: ErasureMark,
): Promise<void> {
  await store.queries.insertOne({ ...record, day: dayOf(record.at) });
  // One read instead of a read per hit, when no erasure can have raced the recall.
  if (quietBetween(before, await erasureMark(store, record.agentId))) return;
  if ((await erasedAmong(store, record.agentId, record.hitIds)).size > 0) {
    await store.queries.deleteOne({ _id: record._id, agentId: record.agentId });
  }
}

/**
 * A logged recall's hits set again (hybrid recall logs the hits it expects while it reads
 * them, and sets the ones it found when they differ). The ids new to the record are looked
 * for among erasures after it is set, as `logQuery` looks for all of them: an erasure that
 * cleaned the log before the record held its id left the record to this look.
 */
export async function relogHits(
  store: Store,
  record: Pick<QueryLogRecord, '_id' | 'agentId'>,
  hits: Pick<QueryLogRecord, 'hitIds' | 'meaningIds'>,
  newIds: readonly string[],
): Promise<void> {
  await store.queries.updateOne(
    { _id: record._id, agentId: record.agentId },
    { $set: { hitIds: hits.hitIds, meaningIds: hits.meaningIds ?? [] } },
  );
  if ((await erasedAmong(store, record.agentId, newIds)).size > 0) {
    await store.queries.deleteOne({ _id: record._id, agentId: record.agentId });
  }
}
