import type { Collection } from 'mongodb';
import type { AuditRecord } from '../core/audit';
import type { Entry } from '../core/entry';
import { insertIgnoringExisting, type LedgerRecord, type Store, type Tombstone } from './db';
import { termKeys } from './entries';

/**
 * Store access of the audit: its per-question agents, the batch moves its memgate arm makes,
 * and `audit_records`. Batches keep FerretDB, which pushes down only `_id` equality, to one
 * scan per step instead of one per entry.
 */

export async function agentEntries(store: Store, agentId: string, tier: 'hot' | 'cold'): Promise<Entry[]> {
  return store[tier].find({ agentId }).toArray();
}

export interface MoveDecision {
  entry: Entry;
  reason: string;
  inputs: Record<string, unknown>;
}

/**
 * Spill: copy to cold (salience and provenance intact), record it, then remove from hot. A
 * crash between the steps leaves the entry in both tiers, never in neither (I8).
 */
export async function spillBatch(store: Store, moves: MoveDecision[], at: number): Promise<void> {
  await insertIgnoringExisting(
    store.cold,
    moves.map((m) => ({ ...m.entry, spilledAt: at })),
  );
  await insertIgnoringExisting(
    store.ledger,
    moves.map((m) => ledgerRecord('spill', m, at)),
  );
  await deleteFromHot(store, moves);
}

/** Evict: tombstone (terms, never content) and ledger record first, then the removal (I3). */
export async function evictBatch(store: Store, moves: MoveDecision[], at: number): Promise<void> {
  await insertIgnoringExisting<Tombstone>(
    store.tombstones,
    moves.map((m) => ({
      _id: m.entry._id,
      agentId: m.entry.agentId,
      terms: m.entry.terms,
      termKeys: termKeys(m.entry.agentId, m.entry.terms),
      reason: m.reason,
      deletedAt: at,
    })),
  );
  await insertIgnoringExisting(
    store.ledger,
    moves.map((m) => ledgerRecord('evict', m, at)),
  );
  await deleteFromHot(store, moves);
}

function ledgerRecord(event: 'spill' | 'evict', m: MoveDecision, at: number): LedgerRecord {
  return {
    _id: `${event}:${m.entry._id}:${at}`,
    agentId: m.entry.agentId,
    at,
    event,
    entryId: m.entry._id,
    reason: m.reason,
    inputs: m.inputs,
  };
}

async function deleteFromHot(store: Store, moves: MoveDecision[]): Promise<void> {
  if (moves.length) await store.hot.deleteMany({ _id: { $in: moves.map((m) => m.entry._id) } });
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
