import { MongoClient, type Collection, type Db } from 'mongodb';
import type { Entry } from '../core/entry';
import { StackUnavailableError } from '../core/errors';

/** One record per lifecycle event: spill, eviction, rehydration, supersession, restore, expiry, erasure. */
export interface LedgerRecord {
  _id: string;
  agentId: string;
  at: number;
  event: string;
  entryId: string;
  reason: string;
  inputs?: Record<string, unknown>;
  runId?: string;
}

/** What stands in for a deleted entry. Holds terms, never content (I10). */
export interface Tombstone {
  _id: string;
  agentId: string;
  terms: string[];
  reason: string;
  deletedAt: number;
  /** `erased`: the stand-in was itself removed by an erasure (I10); it stands in for nothing now. */
  standIn?: { summaryId: string; lossy: boolean; erased?: boolean };
  runId?: string;
}

export interface QueryLogRecord {
  _id: string;
  agentId: string;
  query: string;
  terms: string[];
  at: number;
  deep: boolean;
  k: number;
  hitIds: string[];
  missingIds?: string[];
}

export interface Collections {
  hot: Collection<Entry>;
  cold: Collection<Entry>;
  ledger: Collection<LedgerRecord>;
  tombstones: Collection<Tombstone>;
  queries: Collection<QueryLogRecord>;
  runs: Collection<{ _id: string } & Record<string, unknown>>;
  auditRecords: Collection<{ _id: string } & Record<string, unknown>>;
}

export interface Store extends Collections {
  db: Db;
  close(): Promise<void>;
}

export async function openStore(uri: string, database: string): Promise<Store> {
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 5_000, ignoreUndefined: true });
  try {
    await client.connect();
  } catch (err) {
    throw new StackUnavailableError(
      `cannot reach the MongoDB-protocol server at ${uri}: ${(err as Error).message}`,
    );
  }
  const db = client.db(database);
  const store: Store = {
    db,
    hot: db.collection<Entry>('entries_hot'),
    cold: db.collection<Entry>('entries_cold'),
    ledger: db.collection<LedgerRecord>('ledger'),
    tombstones: db.collection<Tombstone>('tombstones'),
    queries: db.collection<QueryLogRecord>('queries'),
    runs: db.collection('runs'),
    auditRecords: db.collection('audit_records'),
    close: () => client.close(),
  };
  return store;
}

/** The indexes of design section 3. Idempotent; FerretDB accepts them and scans anyway. */
export async function ensureIndexes(store: Store): Promise<void> {
  for (const tier of [store.hot, store.cold]) {
    // One index per command: FerretDB 1.24 drops the connection when a multi-index
    // createIndexes names indexes that already exist (every start after the first).
    for (const field of ['dormantAt', 'terms', 'writtenAt', 'supersededBy']) {
      await tier.createIndex({ agentId: 1, [field]: 1 });
    }
  }
  await store.tombstones.createIndex({ agentId: 1, terms: 1 });
  await store.ledger.createIndex({ agentId: 1, at: 1 });
  // A nightly phase counts its own run's records.
  await store.ledger.createIndex({ agentId: 1, runId: 1, event: 1 });
  await store.runs.createIndex({ agentId: 1, asOf: 1 });
  await store.queries.createIndex({ agentId: 1, at: 1 });
}
