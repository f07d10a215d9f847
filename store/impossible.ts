import type { Filter } from 'mongodb';
import type { QueryLogRecord, Store, Tombstone } from './db';

/**
 * What became impossible, live: queries whose deep recall matched deleted evidence, read from
 * the query log and the tombstones (not from the deletion ledger), grouped by why the
 * evidence was deleted.
 */
export interface ImpossibleQuery {
  queryId: string;
  agentId: string;
  query: string;
  at: number;
  missing: { tombstoneId: string; deletedAt: number; standIn?: Tombstone['standIn'] }[];
}

export interface ImpossibleGroup {
  reason: string;
  /** Deleted entries of this reason that some query missed. */
  tombstones: number;
  queries: ImpossibleQuery[];
}

/** The reason reported when a matched tombstone is itself gone. */
export const UNKNOWN_REASON = 'unknown: tombstone no longer present';

/**
 * The newest queries one report lists. The query log keeps every deep recall for its
 * retention, and a report over every agent reads them all: read a batch at a time, only the
 * newest this many that missed evidence are held, and the older ones are counted.
 */
export const MAX_IMPOSSIBLE_QUERIES = 1_000;

/** What `memgate impossible` and `GET /v1/impossible` answer. */
export interface ImpossibleReport {
  agentId?: string;
  /** Distinct queries in the groups. */
  queries: number;
  /** Older queries that missed evidence too, past `MAX_IMPOSSIBLE_QUERIES`; left out when none. */
  omitted?: number;
  groups: ImpossibleGroup[];
}

export async function impossibleReport(
  store: Store,
  opts: { agentId?: string } = {},
): Promise<ImpossibleReport> {
  const { groups, omitted } = await impossibleQueries(store, opts);
  return {
    ...(opts.agentId ? { agentId: opts.agentId } : {}),
    queries: new Set(groups.flatMap((g) => g.queries.map((q) => q.queryId))).size,
    ...(omitted > 0 ? { omitted } : {}),
    groups,
  };
}

export async function impossibleQueries(
  store: Store,
  opts: { agentId?: string } = {},
): Promise<{ groups: ImpossibleGroup[]; omitted: number }> {
  const scope = opts.agentId ? { agentId: opts.agentId } : {};
  const newestFirst = (a: QueryLogRecord, b: QueryLogRecord) => b.at - a.at;
  let missed: QueryLogRecord[] = [];
  let omitted = 0;
  const keepNewest = () => {
    missed.sort(newestFirst);
    omitted += Math.max(0, missed.length - MAX_IMPOSSIBLE_QUERIES);
    missed = missed.slice(0, MAX_IMPOSSIBLE_QUERIES);
  };
  const logged = store.queries.find({ ...scope, deep: true } as Filter<QueryLogRecord>, {
    projection: { agentId: 1, query: 1, at: 1, missingIds: 1 },
  });
  for await (const q of logged) {
    if ((q.missingIds?.length ?? 0) === 0) continue;
    missed.push(q);
    if (missed.length >= 2 * MAX_IMPOSSIBLE_QUERIES) keepNewest();
  }
  keepNewest();
  const ids = [...new Set(missed.flatMap((q) => q.missingIds!))];
  const stones = ids.length ? await store.tombstones.find({ ...scope, _id: { $in: ids } }).toArray() : [];
  const byId = new Map(stones.map((t) => [t._id, t]));
  const groups = new Map<string, { tombstones: Set<string>; queries: ImpossibleQuery[] }>();
  for (const q of missed) {
    const perReason = new Map<string, ImpossibleQuery['missing']>();
    for (const id of q.missingIds!) {
      const t = byId.get(id);
      const reason = t?.reason ?? UNKNOWN_REASON;
      const entry: ImpossibleQuery['missing'][number] = { tombstoneId: id, deletedAt: t?.deletedAt ?? 0 };
      if (t?.standIn) entry.standIn = t.standIn;
      perReason.set(reason, [...(perReason.get(reason) ?? []), entry]);
    }
    for (const [reason, missing] of perReason) {
      const g = groups.get(reason) ?? { tombstones: new Set<string>(), queries: [] };
      for (const m of missing) g.tombstones.add(m.tombstoneId);
      g.queries.push({ queryId: q._id, agentId: q.agentId, query: q.query, at: q.at, missing });
      groups.set(reason, g);
    }
  }
  return {
    groups: [...groups.entries()]
      .map(([reason, g]) => ({ reason, tombstones: g.tombstones.size, queries: g.queries }))
      .sort((a, b) => b.queries.length - a.queries.length || a.reason.localeCompare(b.reason)),
    omitted,
  };
}
