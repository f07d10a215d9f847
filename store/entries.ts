import { createHash } from 'node:crypto';
import { MongoBulkWriteError, type Collection, type Filter } from 'mongodb';
import type { Entry, Provenance } from '../core/entry';
import type { Candidate } from '../core/recall';
import type { QueryLogRecord, Store } from './db';

/** Deterministic `_id`: a retried write lands on the same document. */
export function entryId(
  agentId: string,
  key: { idempotencyKey: string } | { text: string; source: Provenance; writtenAt: number },
): string {
  const h = createHash('sha256').update(agentId).update('\0');
  if ('idempotencyKey' in key) h.update('key\0').update(key.idempotencyKey);
  else
    h.update('content\0')
      .update(key.text)
      .update('\0')
      .update(JSON.stringify(key.source))
      .update('\0')
      .update(String(key.writtenAt));
  return h.digest('base64url').slice(0, 32);
}

/**
 * `existing`: the id is already in hot or cold, left untouched. `deleted`: the id has a
 * tombstone (evicted, or erased by `forget`), so a replayed write does not bring it back.
 */
export type WriteStatus = 'created' | 'existing' | 'deleted';

/** Which of `ids` a collection holds, by `_id` point reads (the one filter FerretDB pushes down). */
async function presentIds<T extends { _id: string }>(
  collection: Collection<T>,
  ids: string[],
): Promise<string[]> {
  const found = await Promise.all(
    ids.map((_id) => collection.findOne({ _id } as Filter<T>, { projection: { _id: 1 } })),
  );
  return found.flatMap((d) => (d ? [String(d._id)] : []));
}

/**
 * Insert entries that exist in neither tier and were never deleted. Replays and retries are
 * no-ops: they never pull a spilled entry back into hot, nor resurrect an evicted or erased one.
 */
export async function insertNewEntries(store: Store, entries: Entry[]): Promise<Map<string, WriteStatus>> {
  const status = new Map<string, WriteStatus>();
  if (entries.length === 0) return status;
  const ids = [...new Set(entries.map((e) => e._id))];
  const [inCold, tombstoned] = await Promise.all([
    presentIds(store.cold, ids),
    presentIds(store.tombstones, ids),
  ]);
  for (const id of inCold) status.set(id, 'existing');
  for (const id of tombstoned) status.set(id, 'deleted');
  const unique = new Map<string, Entry>();
  for (const e of entries) if (!status.has(e._id) && !unique.has(e._id)) unique.set(e._id, e);
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
  return status;
}

export interface CandidateFilter {
  agentId: string;
  terms: string[];
  now: number;
  deep: boolean;
}

/** Default recall: hot, active, not expired, above the gate. Deep adds dormant hot and cold. */
export async function findCandidates(store: Store, f: CandidateFilter): Promise<Candidate[]> {
  const base: Filter<Entry> = { agentId: f.agentId, terms: { $in: f.terms } };
  if (!f.deep) {
    const hot = await store.hot
      .find({
        ...base,
        dormantAt: { $gt: f.now },
        isActive: true,
        $or: [{ 'validity.freshUntil': { $exists: false } }, { 'validity.freshUntil': { $gte: f.now } }],
      })
      .toArray();
    return hot.map((entry) => ({ entry, tier: 'hot' as const }));
  }
  const [hot, cold] = await Promise.all([store.hot.find(base).toArray(), store.cold.find(base).toArray()]);
  const seen = new Set(hot.map((e) => e._id));
  // Mid-move an entry can sit in both tiers (I8); report it once, as hot.
  return [
    ...hot.map((entry) => ({ entry, tier: 'hot' as const })),
    ...cold.filter((e) => !seen.has(e._id)).map((entry) => ({ entry, tier: 'cold' as const })),
  ];
}

export async function logQuery(store: Store, record: QueryLogRecord): Promise<void> {
  await store.queries.insertOne(record);
}

/**
 * How many documents the server examines for a default-recall candidate query, from the
 * server's own explain: MongoDB reports it; FerretDB reports whether the filter was pushed
 * down, and without pushdown it examines every document of the collection.
 */
export async function explainCandidateScan(
  store: Store,
  f: CandidateFilter,
): Promise<{ docsExamined: number; source: string }> {
  const plan = (await store.hot
    .find({ agentId: f.agentId, terms: { $in: f.terms }, dormantAt: { $gt: f.now }, isActive: true })
    .explain('executionStats')) as {
    executionStats?: { totalDocsExamined?: number };
    filterPushdown?: boolean;
  };
  if (typeof plan.executionStats?.totalDocsExamined === 'number') {
    return {
      docsExamined: plan.executionStats.totalDocsExamined,
      source: 'explain.executionStats.totalDocsExamined',
    };
  }
  return {
    docsExamined: await store.hot.estimatedDocumentCount(),
    source: `collection size (filterPushdown: ${plan.filterPushdown})`,
  };
}
