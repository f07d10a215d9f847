import {
  assessSummary,
  claimPatch,
  reinstatePatch,
  releasePatch,
  retirePatch,
} from '../core/nightly/clusters';
import { allWithin } from '../core/allWithin';
import type { Copy } from '../core/census';
import type { Entry } from '../core/entry';
import { recallStateOf, type RecallState } from '../core/recall';
import {
  applyPatch,
  combinePatches,
  dueForExpiry,
  expirePatch,
  refreshPatch,
  settlePatch,
  supersedePatch,
  supersedesPatch,
  type RefreshStep,
} from '../core/nightly/plans';
import type { ReclaimStep } from '../core/nightly/reclaim';
import type { SupersededSource } from '../core/nightly/phases';
import { moveBetweenTiers, moveManyBetweenTiers, type BatchTierOps, type MoveOutcome } from '../core/tiers';
import { annotate, widenForRecall } from './annotate';
import { countArrived, countMoved } from './agents';
import { countChanges, countTombstones } from './census';
import {
  CALL_FAN_OUT,
  inBatches,
  insertIgnoringExisting,
  isDuplicateKey,
  isErasure,
  type Store,
  type Tombstone,
} from './db';
import { gateKeys, insertNewEntries, termKeys, writeDayKey } from './entries';
import { IDS_PER_READ } from './byIds';
import { deleteEntry, withdrawErased } from './erasure';
import { ledgerId, recordEvent, recordEvents, type RunContext } from './ledger';
import { findById, locateEntry, tierCollection } from './tiers';
import { restateForRecall } from './vectors';

/**
 * The nightly pass's writes. None relies on a transaction: every record has a deterministic
 * `_id` and is written by upsert, every annotation is a version-guarded read-modify-write,
 * and every move copies before it deletes (core/tiers.ts), so each operation can be rerun
 * after a crash at any point and converges. Every change leaves a ledger record.
 */

/**
 * Documents one version-guarded delete statement names: the server tests each document it
 * finds against every id and version of the statement, so its cost grows with their square.
 */
const DELETES_PER_STATEMENT = 100;

/**
 * The tiers of one agent as core/tiers.ts sees them; every operation is scoped by agentId
 * (docs/invariants.md, Agent-scoped). Every statement selects by `_id`, one or many, which
 * every MongoDB-protocol server serves from its primary index.
 */
export function agentTiers(store: Store, agentId: string): BatchTierOps<Entry> {
  return {
    get: (tier, id) => findById(tierCollection(store, tier), agentId, id),
    async put(tier, doc) {
      await tierCollection(store, tier).replaceOne({ _id: doc._id, agentId }, doc, { upsert: true });
      await withdrawErased(store, agentId, [doc._id]);
    },
    // A delete that matches ends a move: the entry is now in the other tier only.
    async removeVersion(tier, id, version) {
      const res = await tierCollection(store, tier).deleteOne({ _id: id, agentId, version });
      await countMoved(store, agentId, tier, res.deletedCount);
      return res.deletedCount === 1;
    },
    // New copies go in as one batch insert; a copy already there (an interrupted move's)
    // may be stale, and is replaced.
    async putMany(tier, docs) {
      const collection = tierCollection(store, tier);
      const existing = await insertIgnoringExisting(collection, docs);
      const replacing = docs.filter((doc) => existing.has(doc._id));
      if (replacing.length > 0) {
        await collection.bulkWrite(
          replacing.map((doc) => ({
            replaceOne: { filter: { _id: doc._id, agentId }, replacement: doc, upsert: true },
          })),
          { ordered: true },
        );
      }
      await withdrawErased(
        store,
        agentId,
        docs.map((d) => d._id),
      );
    },
    // Many to a statement: FerretDB runs each statement as a query and a transaction, so one
    // per document cost both per document. The server finds them by `_id` (store/byIds.ts) and
    // deletes each only while it is at the version given.
    async removeVersions(tier, keys) {
      const statements: { id: string; version: number }[][] = [];
      for (let i = 0; i < keys.length; i += DELETES_PER_STATEMENT) {
        statements.push(keys.slice(i, i + DELETES_PER_STATEMENT));
      }
      const deleted = await allWithin(statements, CALL_FAN_OUT, async (chunk) => {
        const res = await tierCollection(store, tier).deleteMany({
          _id: { $in: chunk.map((k) => k.id) },
          agentId,
          $or: chunk.map((k) => ({ _id: k.id, version: k.version })),
        });
        return res.deletedCount;
      });
      const total = deleted.reduce((sum, n) => sum + n, 0);
      await countMoved(store, agentId, tier, total);
      return total;
    },
    async moved(from, to, moves) {
      await countChanges(
        store,
        agentId,
        moves.map((m) => ({ before: { entry: m.source, tier: from }, after: { entry: m.target, tier: to } })),
      );
    },
  };
}

/**
 * What a refresh or rehydration sets, as a state to widen by: hot, with its new salience and
 * `dormantAt`. Activity and expiry it leaves as they are, so widening by it takes the entry's own.
 */
function refreshed(step: Pick<RefreshStep, 'salience' | 'dormantAt'>): RecallState {
  return {
    tier: 'hot',
    isActive: false,
    dormantAt: step.dormantAt,
    salience: step.salience,
    freshUntil: Number.NEGATIVE_INFINITY,
  };
}

/** A refreshed hot entry as the census counts it: before the refresh and after. */
function refreshedCopy(step: RefreshStep & { entry: Entry }, asOf: number): { before: Copy; after: Copy } {
  return {
    before: { entry: step.entry, tier: 'hot' },
    after: { entry: applyPatch(step.entry, refreshPatch(step, asOf)), tier: 'hot' },
  };
}

// Expire --------------------------------------------------------------------------------

export async function expireEntry(store: Store, ctx: RunContext, entry: Entry): Promise<void> {
  await recordEvent(store, ctx, 'expire', entry._id, 'volatile fact past freshUntil', {
    freshUntil: entry.validity.freshUntil,
  });
  const copies = await annotate(store, ctx.agentId, entry._id, (e) =>
    dueForExpiry(e, ctx.asOf) ? combinePatches(expirePatch(ctx.asOf), settlePatch(e, 'expire')) : undefined,
  );
  // Renewed or gone since the plan read it: no expiry of this run stands, so none is counted.
  if (!copies.some((c) => c.entry.expiredAt === ctx.asOf))
    await withdrawEvent(store, ctx, 'expire', entry._id);
}

/** The record of a change that did not happen after all (the phases' counts are read from them). */
async function withdrawEvent(store: Store, ctx: RunContext, event: string, entryId: string): Promise<void> {
  await store.ledger.deleteOne({ _id: ledgerId(ctx, event, entryId), agentId: ctx.agentId });
}

// Refresh and rehydrate ----------------------------------------------------------------

/**
 * A refresh of a batch some of whose entries changed since they were read: each is refreshed
 * on its own (annotate counts what it changes), and one the batch already refreshed, at the
 * version after the one read, is counted here.
 */
async function refreshOneByOne(
  store: Store,
  ctx: RunContext,
  steps: readonly (RefreshStep & { entry: Entry })[],
): Promise<void> {
  for (const step of steps) {
    let byBatch = false;
    await annotate(store, ctx.agentId, step.id, (e) => {
      if (e.refreshedAt !== ctx.asOf) return refreshPatch(step, ctx.asOf);
      byBatch = e.version === step.entry.version + 1;
      return undefined;
    });
    if (byBatch) await countChanges(store, ctx.agentId, [refreshedCopy(step, ctx.asOf)]);
  }
}

/** Refreshes per bulk write: a chunk whose versions moved is refreshed again entry by entry. */
const REFRESH_CHUNK = 16;

/**
 * Refreshes of hot entries, a batch at a time: the ledger records, then one update per entry
 * guarded by the version the plan read. A batch in which some entry changed since is done
 * again one entry at a time (a no-op for those already refreshed).
 */
export async function refreshHotEntries(
  store: Store,
  ctx: RunContext,
  steps: readonly (RefreshStep & { entry: Entry })[],
): Promise<void> {
  await recordEvents(
    store,
    ctx,
    steps.map((step) => ({
      event: 'refresh',
      entryId: step.id,
      reason: 'a logged query matched the gated entry',
      inputs: { salience: step.salience, dormantAt: step.dormantAt },
    })),
  );
  // Written a chunk at a time, each chunk's stale versions then refreshed one by one.
  for (let i = 0; i < steps.length; i += REFRESH_CHUNK) {
    const chunk = steps.slice(i, i + REFRESH_CHUNK);
    await widenForRecall(
      store,
      ctx.agentId,
      new Map(chunk.map((step) => [step.id, refreshed(step)])),
      new Map(chunk.map((step) => [step.id, recallStateOf(step.entry, 'hot')])),
    );
    const res = await store.hot.bulkWrite(
      chunk.map((step) => ({
        updateOne: {
          filter: { _id: step.id, agentId: ctx.agentId, version: step.entry.version },
          update: {
            $set: {
              ...refreshPatch(step, ctx.asOf).set,
              ...gateKeys({ agentId: ctx.agentId, terms: step.entry.terms }, step.dormantAt),
              ...writeDayKey({ ...step.entry, refreshedAt: ctx.asOf }),
            },
            $inc: { version: 1 },
          },
        },
      })),
      { ordered: false },
    );
    // Only when every entry took this chunk's write is its state after it known here.
    let known: Map<string, RecallState> | undefined;
    if (res.modifiedCount < chunk.length) await refreshOneByOne(store, ctx, chunk);
    else {
      const copies = chunk.map((step) => refreshedCopy(step, ctx.asOf));
      await countChanges(store, ctx.agentId, copies);
      known = new Map(copies.map(({ after }) => [after.entry._id, recallStateOf(after.entry, 'hot')]));
    }
    await restateForRecall(
      store,
      ctx.agentId,
      chunk.map((step) => step.id),
      ctx.asOf,
      { known },
    );
  }
}

/**
 * Cold → hot with the refreshed salience: copy to hot, then delete from cold
 * (docs/invariants.md, Moves lose nothing).
 */
export async function rehydrateEntry(store: Store, ctx: RunContext, step: RefreshStep): Promise<MoveOutcome> {
  await recordEvent(store, ctx, 'rehydrate', step.id, 'a logged query matched the cold entry', {
    salience: step.salience,
    dormantAt: step.dormantAt,
  });
  const patch = refreshPatch(step, ctx.asOf);
  await widenForRecall(store, ctx.agentId, new Map([[step.id, refreshed(step)]]));
  const moved = await moveBetweenTiers(agentTiers(store, ctx.agentId), step.id, 'cold', 'hot', (cold) => ({
    ...applyPatch(cold, { set: patch.set, unset: ['spilledAt'] }),
    ...gateKeys(cold, step.dormantAt),
    ...writeDayKey({ ...cold, refreshedAt: ctx.asOf }),
    version: cold.version + 1,
  }));
  // Erased since the plan read it: nothing was moved, and nothing is counted.
  if (moved === 'absent') await withdrawEvent(store, ctx, 'rehydrate', step.id);
  await restateForRecall(store, ctx.agentId, [step.id], ctx.asOf);
  return moved;
}

/**
 * These hot entries leave default recall's postings (their `liveKeys` go), each only at the
 * version the caller read: one that changed since keeps them, which costs default recall a
 * read, never a hit (it applies the gate to what it reads).
 */
export async function dropLiveKeys(store: Store, ctx: RunContext, entries: readonly Entry[]): Promise<void> {
  if (entries.length === 0) return;
  await store.hot.bulkWrite(
    entries.map((e) => ({
      updateOne: {
        filter: { _id: e._id, agentId: ctx.agentId, version: e.version },
        update: { $unset: { liveKeys: '' }, $inc: { version: 1 } },
      },
    })),
    { ordered: false },
  );
}

/** The agent's recalls logged on the days `[from, to)` leave the query log, a day at a time (the indexed `{agentId, day}`). */
export async function dropQueries(store: Store, ctx: RunContext, before: number): Promise<void> {
  await store.queries.deleteMany({ agentId: ctx.agentId, day: { $lt: before } });
}

// Reclaim -------------------------------------------------------------------------------

/**
 * Hot → cold with salience and provenance intact, a batch at a time: the ledger records
 * first, then the copies to cold, then the deletes from hot (docs/invariants.md, Moves lose nothing).
 */
export async function spillEntries(
  store: Store,
  ctx: RunContext,
  batch: readonly { step: ReclaimStep; entry: Entry }[],
): Promise<number> {
  if (batch.length === 0) return 0;
  await recordEvents(
    store,
    ctx,
    batch.map(({ step }) => ({
      event: 'spill',
      entryId: step.id,
      reason: step.why,
      inputs: { rank: step.rank, ...step.inputs },
    })),
  );
  const moved = await moveManyBetweenTiers(
    agentTiers(store, ctx.agentId),
    batch.map((b) => b.entry),
    'hot',
    'cold',
    (hot) => ({ ...hot, spilledAt: ctx.asOf }),
  );
  // Cold now: the search leaves them to deep recall without a read.
  await restateForRecall(
    store,
    ctx.agentId,
    batch.map((b) => b.entry._id),
    ctx.asOf,
    { known: new Map(batch.map(({ entry }) => [entry._id, recallStateOf(entry, 'cold')])) },
  );
  return moved;
}

/**
 * The copies this run's moves made, looked at again for an erasure (docs/invariants.md,
 * Erasure wins). A move writes its copy first and looks after, so an attempt that stopped
 * in between may have left a copy of an erased entry that no later plan reads (reclaim plans
 * from hot, refresh from the cold entries recall asked for); the ledger names each entry a
 * move takes before it copies it. Returns how many copies were withdrawn.
 */
export async function withdrawErasedCopies(store: Store, ctx: RunContext): Promise<number> {
  let withdrawn = 0;
  for (const event of ['spill', 'rehydrate']) {
    const moves = { agentId: ctx.agentId, runId: ctx.runId, event };
    for await (const page of inBatches(store.ledger, moves, IDS_PER_READ, { entryId: 1 })) {
      withdrawn += (
        await withdrawErased(
          store,
          ctx.agentId,
          page.map((r) => r.entryId),
        )
      ).size;
    }
  }
  return withdrawn;
}

/**
 * Delete an entry the two-key check proved dead. The tombstone (terms, atoms, reason, time
 * and the summary standing in — never content) and the ledger record come first
 * (docs/invariants.md, Two-key deletion), then the entry leaves both tiers (it may be in
 * both after an interrupted spill), only at the version the decision read. When that delete
 * matches nothing because the entry changed (a concurrent refresh, its stand-in unlinked by
 * an erasure), it stays and its tombstone and ledger record are withdrawn: false. False too,
 * with nothing written, when the entry was erased since the plan read it.
 */
export async function evictEntry(
  store: Store,
  ctx: RunContext,
  entry: Entry,
  step: ReclaimStep,
): Promise<boolean> {
  // An erasure's tombstone is never replaced by one that holds the entry's terms and atoms
  // (docs/invariants.md, Erasure wins): the write is guarded on the tombstone read here (an
  // earlier attempt's, or none), so an erasure landing in between makes it insert a second
  // tombstone of the id, which the store refuses.
  const prior = await findById(store.tombstones, ctx.agentId, entry._id);
  if (prior && isErasure(prior)) return false;
  const tombstone: Omit<Tombstone, '_id'> = {
    agentId: ctx.agentId,
    terms: entry.terms,
    termKeys: termKeys(ctx.agentId, entry.terms),
    reason: step.why,
    deletedAt: ctx.asOf,
    ...(step.standIn ? { standIn: step.standIn } : {}),
    ...(entry.subject !== undefined && entry.attribute !== undefined
      ? {
          subject: entry.subject,
          attribute: entry.attribute,
          writtenAt: entry.writtenAt,
          ...(entry.restoredAt !== undefined && { restoredAt: entry.restoredAt }),
        }
      : {}),
    atoms: entry.atoms,
    runId: ctx.runId,
  };
  try {
    const written = await store.tombstones.replaceOne(
      { _id: entry._id, agentId: ctx.agentId, reason: prior ? prior.reason : { $exists: false } },
      tombstone,
      { upsert: true },
    );
    if (written.upsertedCount === 1) await countTombstones(store, ctx.agentId, [{ to: step.why }]);
  } catch (err) {
    if (isDuplicateKey(err)) return false;
    throw err;
  }
  await recordEvent(store, ctx, 'evict', entry._id, step.why, {
    rank: step.rank,
    ...step.inputs,
    ...(step.standIn ? { standIn: step.standIn } : {}),
  });
  if ((await deleteEntry(store, ctx.agentId, entry._id, entry.version)).length > 0) return true;
  if (!(await locateEntry(store, ctx.agentId, entry._id))) return true;
  const withdrawn = await store.tombstones.deleteOne({
    _id: entry._id,
    agentId: ctx.agentId,
    runId: ctx.runId,
  });
  if (withdrawn.deletedCount === 1) await countTombstones(store, ctx.agentId, [{ from: step.why }]);
  await withdrawEvent(store, ctx, 'evict', entry._id);
  return false;
}

// Consolidate ---------------------------------------------------------------------------

/**
 * Store a summary (unless either tier already holds it) and link each source to the summary as
 * stored, lossless when the stored text keeps all of the source's facts (key B of the two-key
 * check). The id is the sources', so an earlier attempt may have stored other text (a model
 * asked again answers otherwise): the links are assessed against the stored text, which is
 * what would stand in (docs/invariants.md, Lossy unless proven). A retired summary of exactly
 * these sources, which the caller read as current, is reinstated; a summary no longer stored
 * (erased) gets no links. Returns a source erased since the cluster was read, if any: the
 * summary holds its content and must go too (the erasure found no summary to rebuild when it
 * looked); the caller removes it as erasure does.
 */
export async function writeSummary(
  store: Store,
  ctx: RunContext,
  summary: Entry,
  sources: readonly { id: string; text: string }[],
): Promise<{ erasedSource?: string }> {
  // Counted into hot as it lands (a crash in between leaves the count low until reclaim's
  // next full read sets it), so tonight's reclaim sees it.
  const created = (await insertNewEntries(store, [summary])).get(summary._id) === 'created';
  if (created) {
    await countArrived(store, ctx.agentId, 1);
    await countChanges(store, ctx.agentId, [{ after: { entry: summary, tier: 'hot' } }]);
  }
  const stored = created ? summary : (await locateEntry(store, ctx.agentId, summary._id))?.entry;
  if (!stored) return {};
  const [erasedSource] = await withdrawErased(store, ctx.agentId, stored.derivedFrom ?? []);
  if (erasedSource !== undefined) return { erasedSource };
  const derived = new Set(stored.derivedFrom);
  const { lossless } = assessSummary(
    sources.filter((s) => derived.has(s.id)),
    stored.text,
  );
  // Ids only: the ledger outlives an erasure of a source by its retention, so it never holds
  // the facts a summary lost, only whose (docs/invariants.md, Erasure wins).
  await recordEvent(store, ctx, 'summarise', stored._id, 'near-duplicate cluster merged', {
    derivedFrom: stored.derivedFrom,
    lossy_summary: stored.lossy_summary,
    lossySources: [...lossless].filter(([, ok]) => !ok).map(([id]) => id),
  });
  if (!stored.isActive) await annotate(store, ctx.agentId, stored._id, reinstatePatch);
  for (const [sourceId, ok] of lossless) {
    await annotate(store, ctx.agentId, sourceId, (e) => claimPatch(e, stored._id, ok, { link: true }));
  }
  return {};
}

/** Each source of the summary is released from it (`releasePatch`); a rerun changes nothing. */
export async function releaseSources(
  store: Store,
  agentId: string,
  summary: Pick<Entry, '_id' | 'derivedFrom'>,
): Promise<void> {
  for (const id of summary.derivedFrom ?? []) {
    await annotate(store, agentId, id, (e) => releasePatch(e, summary._id));
  }
}

/**
 * A summary built from a superseded fact leaves default recall
 * (docs/invariants.md, Current summaries): the ledger record and the retirement first, so
 * from then on no eviction takes it as a stand-in, then its sources are released. Each step
 * is idempotent, and the phase finds the summary again on a rerun, retired or not, so a
 * crash anywhere converges.
 */
export async function retireSummary(
  store: Store,
  ctx: RunContext,
  summary: Entry,
  cause: SupersededSource,
): Promise<void> {
  if (summary.isActive) {
    await recordEvent(store, ctx, 'retire', summary._id, 'built from a superseded fact', { ...cause });
    await annotate(store, ctx.agentId, summary._id, retirePatch);
  }
  // A source reclaim deleted with this summary standing in keeps it as its stand-in: the
  // facts are still there, for deep recall; its tombstone says the stand-in was retired.
  for (const id of summary.derivedFrom ?? []) {
    await store.tombstones.updateOne(
      { _id: id, agentId: ctx.agentId, 'standIn.summaryId': summary._id },
      { $set: { 'standIn.retired': true } },
    );
  }
  await releaseSources(store, ctx.agentId, summary);
}

// Supersede and restore -----------------------------------------------------------------

export async function supersedeEntry(
  store: Store,
  ctx: RunContext,
  olderId: string,
  newerId: string,
): Promise<void> {
  await recordEvent(store, ctx, 'supersede', olderId, 'a newer fact about the same subject and attribute', {
    supersededBy: newerId,
  });
  await annotate(store, ctx.agentId, olderId, (e) =>
    e.isActive && e.supersededBy === undefined ? supersedePatch(newerId) : undefined,
  );
  await annotate(store, ctx.agentId, newerId, (e) =>
    e.supersedes === olderId ? undefined : supersedesPatch(olderId),
  );
}
