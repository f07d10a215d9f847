import type { Collection } from 'mongodb';
import type { AuditRecord } from '../audit/records';
import type { Entry } from '../core/entry';
import type { Store } from './db';

/**
 * Store access of the audit: its per-question agents and `audit_records`. Its memgate arm
 * moves entries with the nightly reclaim's own moves (store/nightly.ts).
 */

export async function agentEntries(store: Store, agentId: string, tier: 'hot' | 'cold'): Promise<Entry[]> {
  return store[tier].find({ agentId }).toArray();
}

/** Removes everything the audit wrote for these agents (its records stay). */
export async function dropAgents(store: Store, agentIds: string[]): Promise<void> {
  const filter = { agentId: { $in: agentIds } };
  await Promise.all([
    store.hot.deleteMany(filter),
    store.cold.deleteMany(filter),
    store.tombstones.deleteMany(filter),
    store.ledger.deleteMany(filter),
  ]);
}

export async function saveAuditRecords(store: Store, records: AuditRecord[]): Promise<void> {
  if (records.length === 0) return;
  await auditCollection(store).bulkWrite(
    records.map((r) => ({ replaceOne: { filter: { _id: r._id }, replacement: r, upsert: true } })),
    { ordered: true },
  );
}

/** Which of these record ids are stored; one `_id` lookup each, the access FerretDB pushes down. */
export async function storedAuditRecordIds(store: Store, ids: string[]): Promise<Set<string>> {
  const found = await Promise.all(
    ids.map((_id) => auditCollection(store).findOne({ _id }, { projection: { _id: 1 } })),
  );
  return new Set(found.flatMap((d) => (d ? [d._id] : [])));
}

export async function auditRecordsOfRun(store: Store, runId: string): Promise<AuditRecord[]> {
  const records = await auditCollection(store).find({ runId }).toArray();
  return records.sort((a, b) => (a._id < b._id ? -1 : a._id > b._id ? 1 : 0));
}

function auditCollection(store: Store): Collection<AuditRecord> {
  return store.auditRecords as unknown as Collection<AuditRecord>;
}
