import {
  type Binary,
  MongoBulkWriteError,
  MongoClient,
  MongoError,
  MongoServerError,
  type Collection,
  type Db,
  type Document,
  type Filter,
  type OptionalUnlessRequiredId,
} from 'mongodb';
import type { CensusCounts } from '../core/census';
import type { Entry } from '../core/entry';
import type { PendingChange } from '../core/feedWatermark';
import type { Policy } from '../core/policy';
import type { RecallState } from '../core/recall';
import { InvalidConfigError, StackUnavailableError } from '../core/errors';
import { maskUri, maskUris } from '../core/uri';
import { createGuard, type StoreLimits } from './guard';

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

/** The reason on an erasure's tombstone (`memgate forget`); a summary removed with it says why after a colon. */
export const ERASED = 'erased';

const DERIVED_FROM_ERASED = `${ERASED}: derived from erased entry `;

/** The reason of a summary removed because a source it cannot be rebuilt without was erased. */
export function derivedFromErased(erasedId: string): string {
  return DERIVED_FROM_ERASED + erasedId;
}

/** The erased source a reason names, when it is `derivedFromErased`'s. */
export function erasedSourceOf(reason: string): string | undefined {
  return reason.startsWith(DERIVED_FROM_ERASED) ? reason.slice(DERIVED_FROM_ERASED.length) : undefined;
}

/** The tombstone of an erasure, or of a summary removed because one of its sources was erased. */
export function isErasure(stone: Pick<Tombstone, 'reason'>): boolean {
  return stone.reason === ERASED || stone.reason.startsWith(`${ERASED}:`);
}

/** What stands in for a deleted entry. Holds terms, never content (docs/invariants.md, Erasure wins). */
export interface Tombstone {
  _id: string;
  agentId: string;
  terms: string[];
  /** As on entries (`termKeys`): how deep recall finds the tombstones a query matches. */
  termKeys: string[];
  reason: string;
  deletedAt: number;
  /**
   * `erased`: the stand-in was itself removed by an erasure; it stands in for nothing now
   * (docs/invariants.md, Erasure wins).
   */
  /**
   * `retired`: the stand-in was retired because another of its sources was superseded; it
   * stays stored (deep recall finds it) and still holds this entry's facts, but no longer
   * speaks in default recall (docs/invariants.md, Current summaries).
   */
  standIn?: { summaryId: string; lossy: boolean; erased?: boolean; retired?: boolean };
  /**
   * An evicted fact's subject, attribute and time (keys, not content): a newer fact about
   * them later still retires the summary standing in for it.
   */
  subject?: string;
  attribute?: string;
  writtenAt?: number;
  /** The evicted fact's restore: a fact written before it does not supersede it. */
  restoredAt?: number;
  /** An evicted entry's fact atoms: what a lossless stand-in must hold (`memgate verify`). */
  atoms?: string[];
  runId?: string;
}

export interface QueryLogRecord {
  _id: string;
  agentId: string;
  query: string;
  terms: string[];
  at: number;
  /** `dayOf(at)`: the nightly refresh reads the days since the previous run by equality. */
  day: number;
  deep: boolean;
  k: number;
  hitIds: string[];
  /** The hits found by meaning (semantically, or both ways): the night refreshes them too. */
  meaningIds?: string[];
  missingIds?: string[];
}

/**
 * How many stored entries (either tier) of an agent hold a term: recall and clustering skip
 * a term too common to narrow the candidates, as search engines skip stop words, without
 * reading its postings. One document per agent and term, deleted when no entry holds the
 * term any more, so a term of an erased entry does not outlive it (docs/invariants.md, Erasure wins).
 */
export interface TermStat {
  _id: string;
  agentId: string;
  df: number;
}

/**
 * Every agent that ever wrote, with how many entries each tier holds: the nightly run fans
 * out over these records and decides whether reclaim has work without reading any entries.
 * A new entry counts from the night that counts its terms (the write path pays nothing for
 * it); moves and deletions count as they happen. A crash between a change and its count can
 * leave them off by that change, until reclaim, when it reads every hot entry, sets the hot
 * count again. `hot` is absent until the first night for an agent.
 */
export interface AgentRecord {
  _id: string;
  firstWriteAt: number;
  hot?: number;
  cold?: number;
  /**
   * A day on or after which every counted hot entry was last written (`lastWriteKey`), so that
   * reclaim reads hot from there on: set by the reclaim that first read every hot entry and
   * keyed it, raised by each reclaim to the first day that held one, lowered as new entries
   * count (the write path pays nothing for it).
   */
  hotWrittenFrom?: number;
  /**
   * An activity that deletes or moves entries (a phase of a night, a step of forget) was
   * retried: an attempt before it may have stopped between a change and its count, so the
   * next reclaim reads every hot entry, which sets the count again.
   */
  hotCountInDoubt?: true;
  /**
   * How many times `hot` changed or was put in doubt: a reclaim that read every hot entry sets
   * the count only if none landed while it read (store/agents.ts, setHotCount).
   */
  hotChanges?: number;
  /** Its entries by tier and state, and its tombstones by kind (store/census.ts). */
  census?: CensusCounts;
  /** The ids whose erasure has begun and not ended (`*`: the whole agent's); store/erasure.ts. */
  erasing?: string[];
  /** Erasures ended, ever: with `erasing`, what a recall reads around its log record. */
  erasures?: number;
}

/**
 * Every entry id ever stored, kept after the entry leaves (an id is a hash, never content):
 * a write whose id is new here cannot be a replay of a spilled or deleted entry.
 */
export interface EntryIdRecord {
  _id: string;
  /** Whose id it is: `memgate verify` accounts for every id an agent was ever given. */
  agentId: string;
}

/** An API key: its id, the digest of its secret, and the agents it may act for (core/keys.ts). */
export interface ApiKeyRecord {
  _id: string;
  hash: string;
  agents: string;
  createdAt: number;
  revokedAt?: number;
}

/** The one stored policy (store/policy.ts), with how many times it was applied. */
export interface PolicyRecord extends Policy {
  _id: 'policy';
  version: number;
  appliedAt: number;
}

/**
 * An entry's vector under one model (store/vectors.ts). Kept apart from the entry so recall's
 * lexical reads and the nightly phases never carry it; removed content leaves the record
 * behind without its vector (a change others must see), like the registry of ids.
 */
export interface VectorRecord {
  _id: string;
  agentId: string;
  model: string;
  /**
   * The dimensions the model was asked for (core/vectorDefects.ts, EmbeddingSpace). Absent on
   * records written before it was kept: their vector's own length stands for it.
   */
  dimensions?: number;
  /** Float32, little-endian, unit length; absent once the entry's content is gone. */
  vector?: Binary;
  /** Digest of the text embedded: a vector whose entry's text changed since is stale. */
  textHash?: string;
  /**
   * What default recall filters on, of the entry as it was last seen (core/recall.ts,
   * RecallState): the search applies the filter with it. Absent on records written before it
   * was kept: those neighbours are read and judged from their entry.
   */
  recall?: RecallState;
  /** The agent's change number of this record's last change (store/vectors.ts, the feed). */
  seq: number;
  /** `<agentId> <page of seq>`: the changes since a number, read by equality. */
  feedKey: string;
  at: number;
}

/** An agent's last vector change number: what a process holding its index has not seen yet. */
export interface VectorFeed {
  _id: string;
  seq: number;
  /**
   * Where a reader that starts can begin (store/vectorFeed.ts): every change number up to this
   * is resolved but the `unresolved` ones. Only ever raised, by readers.
   */
  resolvedThrough?: number;
  /** The changes up to `resolvedThrough` logged whose record was not yet seen at them. */
  unresolved?: PendingChange[];
  /**
   * Every change number up to this was resolved, and its logged change (not a fence) deleted
   * by the night (store/vectorFeed.ts, trimFeed). Only ever raised.
   */
  trimmedThrough?: number;
}

/**
 * One change number of an agent's vectors, logged before its record is written
 * (store/vectors.ts, the feed). Its `_id` is unique per number, so a number is claimed once:
 * by its writer, or by a reader that fenced it because its writer had not logged it in time.
 */
export interface VectorChange {
  /** `<agentId> <seq>`. */
  _id: string;
  agentId: string;
  seq: number;
  /** The entry whose record the change writes; absent on a fence. */
  entryId?: string;
  /** `<agentId> <page of seq>`, as on records: a page of the log is read by equality. */
  feedKey: string;
  /** Claimed by a reader: no record is ever written at this number. */
  fenced?: true;
}

export interface Collections {
  hot: Collection<Entry>;
  cold: Collection<Entry>;
  ledger: Collection<LedgerRecord>;
  tombstones: Collection<Tombstone>;
  queries: Collection<QueryLogRecord>;
  termStats: Collection<TermStat>;
  agents: Collection<AgentRecord>;
  entryIds: Collection<EntryIdRecord>;
  runs: Collection<{ _id: string } & Record<string, unknown>>;
  auditRecords: Collection<{ _id: string } & Record<string, unknown>>;
  policy: Collection<PolicyRecord>;
  apiKeys: Collection<ApiKeyRecord>;
  vectors: Collection<VectorRecord>;
  vectorFeeds: Collection<VectorFeed>;
  vectorChanges: Collection<VectorChange>;
  contentKeys: Collection<ContentKeyRecord>;
  payloadKeys: Collection<PayloadKeyRecord>;
  keyClaims: Collection<KeyClaimRecord>;
  keyQuotas: Collection<KeyQuotaRecord>;
}

/** What an API key holds toward its quota (store/quotas.ts): an agent it wrote for, a window it opened. */
export type QuotaKind = 'agent' | 'window';

/** `_id`: `<keyId> <kind> <id>`; `agentId` for an agent's, so erasing the agent removes it. */
export interface KeyClaimRecord {
  _id: string;
  keyId: string;
  kind: QuotaKind;
  /** What the claim holds, by kind: whoever ends it (an erasure, a close by any key) releases it. */
  agentId?: string;
  sessionId?: string;
  at: number;
  /** Set once the key's counter took it: until then a concurrent call for the id waits. */
  counted: boolean;
}

/** `_id`: `<keyId> <kind>`; how many claims of the kind the key holds. */
export interface KeyQuotaRecord {
  _id: string;
  n: number;
}

/**
 * The key one entry's content is sealed with wherever it travels through Temporal
 * (codec/sealedEntry.ts): deleting it makes every copy unreadable (docs/invariants.md,
 * Erased from Temporal history). `_id` is the entry's id.
 */
export interface ContentKeyRecord {
  _id: string;
  agentId: string;
  key: Binary;
  createdAt: number;
}

/** A key the payload codec encrypts whole payloads with (codec/payloadCodec.ts); the newest encodes. */
export interface PayloadKeyRecord {
  _id: string;
  key: Binary;
  createdAt: number;
}

export interface Store extends Collections {
  db: Db;
  /**
   * Resolves when the store answers a command that needs its storage, within the store
   * timeout; else StackUnavailable (health checks, the local stack's watchdog).
   */
  answers(): Promise<void>;
  close(): Promise<void>;
}

/** The store refused a second document of one `_id` (or of one value of another unique index). */
export function isDuplicateKey(err: unknown): boolean {
  return err instanceof MongoServerError && err.code === 11000;
}

/**
 * Insert each document whose `_id` is not there yet, in one round trip (a batch insert costs
 * a fraction of as many upserts); returns the ids that were already there.
 */
export async function insertIgnoringExisting<T extends Document & { _id: string }>(
  collection: Collection<T>,
  docs: readonly T[],
): Promise<Set<string>> {
  const existing = new Set<string>();
  if (docs.length === 0) return existing;
  try {
    await collection.insertMany(docs as OptionalUnlessRequiredId<T>[], { ordered: false });
  } catch (err) {
    if (!(err instanceof MongoBulkWriteError)) throw err;
    const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
    for (const e of errors) {
      if (e.code !== 11000) throw err;
      existing.add(docs[e.index]!._id);
    }
  }
  return existing;
}

/**
 * The store commands one call has in flight at once: a call that reads many terms (a long
 * query's postings and tombstones) issues them a few at a time, so they take
 * turns at this process's admission with other callers' commands instead of filling its queue
 * ahead of them (docs/serving.md, Tenant against tenant, measured).
 */
export const CALL_FAN_OUT = 8;

/** Everything a filter selects, a batch at a time over one cursor, in the server's order. */
export async function* inBatches<T extends Document>(
  collection: Collection<T>,
  filter: Filter<T>,
  size: number,
  projection?: Document,
): AsyncGenerator<T[]> {
  const cursor = collection.find(filter, projection ? { projection } : {});
  cursor.batchSize(size);
  let batch: T[] = [];
  try {
    for await (const doc of cursor) {
      batch.push(doc as T);
      if (batch.length >= size) {
        yield batch;
        batch = [];
      }
    }
    if (batch.length) yield batch;
  } finally {
    await cursor.close();
  }
}

/**
 * A failure of the store's server or of the connection to it, as the typed error the rest of
 * memgate speaks: no driver error leaves the store layer's callers' boundary (client/client.ts).
 */
export function storeFailure(err: unknown): StackUnavailableError | undefined {
  if (!(err instanceof MongoError)) return undefined;
  return new StackUnavailableError(`the MongoDB-protocol server failed: ${maskUris(err.message)}`, {
    driverError: err.name,
  });
}

/**
 * The store, every collection of it guarded (store/guard.ts): admitted against this process's
 * share of the server's connections and bounded by the store timeout.
 */
export async function openStore(uri: string, database: string, limits: StoreLimits): Promise<Store> {
  let client: MongoClient;
  try {
    client = new MongoClient(uri, {
      serverSelectionTimeoutMS: Math.min(5_000, limits.timeoutMs),
      // The guard admits no more than this at once; the driver's own queue never holds a call.
      maxPoolSize: limits.budget.perProcess,
      waitQueueTimeoutMS: limits.timeoutMs,
      ignoreUndefined: true,
    });
  } catch (err) {
    // The driver's message may quote the URI, password and all.
    const why = maskUris((err as Error).message.split(uri).join(maskUri(uri)));
    throw new InvalidConfigError('MONGODB_URI', `a URI the MongoDB driver accepts (${why})`, maskUri(uri));
  }
  try {
    await client.connect();
  } catch (err) {
    throw new StackUnavailableError(
      `cannot reach the MongoDB-protocol server at ${maskUri(uri)}: ${(err as Error).name}`,
    );
  }
  const db = client.db(database);
  const guard = createGuard(uri, limits);
  const store: Store = {
    db,
    hot: guard.collection(db.collection<Entry>('entries_hot')),
    cold: guard.collection(db.collection<Entry>('entries_cold')),
    ledger: guard.collection(db.collection<LedgerRecord>('ledger')),
    tombstones: guard.collection(db.collection<Tombstone>('tombstones')),
    queries: guard.collection(db.collection<QueryLogRecord>('queries')),
    termStats: guard.collection(db.collection<TermStat>('term_stats')),
    agents: guard.collection(db.collection<AgentRecord>('agents')),
    entryIds: guard.collection(db.collection<EntryIdRecord>('entry_ids')),
    runs: guard.collection(db.collection('runs')),
    auditRecords: guard.collection(db.collection('audit_records')),
    policy: guard.collection(db.collection<PolicyRecord>('policy')),
    apiKeys: guard.collection(db.collection<ApiKeyRecord>('api_keys')),
    vectors: guard.collection(db.collection<VectorRecord>('vectors')),
    vectorFeeds: guard.collection(db.collection<VectorFeed>('vector_feeds')),
    vectorChanges: guard.collection(db.collection<VectorChange>('vector_changes')),
    contentKeys: guard.collection(db.collection<ContentKeyRecord>('content_keys')),
    payloadKeys: guard.collection(db.collection<PayloadKeyRecord>('payload_keys')),
    keyClaims: guard.collection(db.collection<KeyClaimRecord>('key_claims')),
    keyQuotas: guard.collection(db.collection<KeyQuotaRecord>('key_quotas')),
    // Sizes every database: under FerretDB that reads PostgreSQL, which a `ping` would not.
    answers: () =>
      guard
        .run('admin.listDatabases', 1, () => client.db('admin').admin().listDatabases(), { read: true })
        .then(() => undefined),
    close: () => client.close(),
  };
  return store;
}

// Read by `_id` only.
type IndexedCollection = Exclude<
  keyof Collections,
  'runs' | 'auditRecords' | 'policy' | 'apiKeys' | 'vectorFeeds' | 'keyQuotas'
>;

/**
 * The one list of secondary indexes. Every query the store runs on a hot path is equality
 * on top-level fields that lead one of these (docs/invariants.md, Index-driven). MongoDB
 * serves them as declared; on the local stack FerretDB pushes such equality down to
 * PostgreSQL as `_jsonb->'field' @> value`, and the stack gives every declared field a GIN
 * index that serves it (stack/postgres.ts).
 */
const TIER_INDEXES: readonly Record<string, 1>[] = [
  { termKeys: 1 },
  { liveKeys: 1 },
  { dormantKey: 1 },
  { agentId: 1, pending: 1 },
  { agentId: 1, subject: 1 },
  { agentId: 1, derivedFrom: 1 },
  { agentId: 1, supersededBy: 1 },
  { agentId: 1, supersedes: 1 },
  // A page of the agent's entries (store/browse.ts).
  { pageKeys: 1 },
];

export const INDEXES: Readonly<Record<IndexedCollection, readonly Record<string, 1>[]>> = {
  // `lastWriteKey`: reclaim reads hot by write day, from the oldest on.
  hot: [...TIER_INDEXES, { lastWriteKey: 1 }],
  cold: TIER_INDEXES,
  tombstones: [{ termKeys: 1 }, { agentId: 1 }, { agentId: 1, subject: 1 }],
  // `at`: the nightly pruning deletes by age (store/retention.ts); `entryId`: an entry's
  // lifecycle (store/browse.ts).
  ledger: [{ agentId: 1, runId: 1, event: 1 }, { at: 1 }, { agentId: 1, entryId: 1 }],
  // `hitIds`, `missingIds`: an erasure deletes the records that name the erased entry.
  queries: [
    { agentId: 1, day: 1 },
    { agentId: 1, hitIds: 1 },
    { agentId: 1, missingIds: 1 },
  ],
  termStats: [{ agentId: 1 }],
  // Read whole by the nightly fan-out: one small document per agent.
  agents: [],
  // The write path reads it by `_id`; `memgate verify` lists an agent's ids.
  entryIds: [{ agentId: 1 }],
  // `feedKey`: a recall-serving process reads the changes since it last looked; `agentId`:
  // it loads an agent's vectors once, and `memgate reembed` pages through them.
  vectors: [{ feedKey: 1 }, { agentId: 1 }],
  // A reader of the feed reads the log a page at a time, by equality (store/vectorFeed.ts).
  vectorChanges: [{ feedKey: 1 }],
  // Read by `_id`; erasing a whole agent deletes its keys by `agentId`.
  contentKeys: [{ agentId: 1 }],
  // Read whole, once per process: a handful of keys.
  payloadKeys: [],
  // Read by `_id`; erasing a whole agent deletes its claims by `agentId`; a key at its quota
  // reads its own (store/quotas.ts, settledClaims).
  keyClaims: [{ agentId: 1 }, { sessionId: 1 }, { keyId: 1, kind: 1 }],
};

/** Idempotent. */
export async function ensureIndexes(store: Store): Promise<void> {
  for (const [name, indexes] of Object.entries(INDEXES) as [IndexedCollection, Record<string, 1>[]][]) {
    // One index per command: FerretDB 1.24 drops the connection when a multi-index
    // createIndexes names indexes that already exist (every start after the first).
    for (const keys of indexes) await store[name].createIndex(keys);
  }
  await store.runs.createIndex({ kind: 1, agentId: 1 });
  await store.runs.createIndex({ asOf: 1 });
  await store.auditRecords.createIndex({ at: 1 });
}
