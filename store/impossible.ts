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

export async function impossibleQueries(
  store: Store,
  opts: { agentId?: string } = {},
): Promise<ImpossibleGroup[]> {
  const scope = opts.agentId ? { agentId: opts.agentId } : {};
  const logged = await store.queries.find({ ...scope, deep: true } as Filter<QueryLogRecord>).toArray();
  const missed = logged.filter((q) => (q.missingIds?.length ?? 0) > 0);
  const ids = [...new Set(missed.flatMap((q) => q.missingIds!))];
  const stones = ids.length ? await store.tombstones.find({ ...scope, _id: { $in: ids } }).toArray() : [];
  const byId = new Map(stones.map((t) => [t._id, t]));
  const groups = new Map<string, { tombstones: Set<string>; queries: ImpossibleQuery[] }>();
  for (const q of missed.sort((a, b) => b.at - a.at)) {
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
  return [...groups.entries()]
    .map(([reason, g]) => ({ reason, tombstones: g.tombstones.size, queries: g.queries }))
    .sort((a, b) => b.queries.length - a.queries.length || a.reason.localeCompare(b.reason));
}
