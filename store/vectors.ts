import { createHash } from 'node:crypto';
import { Binary } from 'mongodb';
import type { Entry, Tier } from '../core/entry';
import { recallStateOf, sameRecallState, widerRecallState, type RecallState } from '../core/recall';
import { vectorDefect, type EmbeddingSpace } from '../core/vectorDefects';
import { inBatches, insertIgnoringExisting, type Store, type VectorRecord } from './db';
import { locateEntries, TIERS, tierCollection } from './tiers';
import { findByIds } from './byIds';

/**
 * Entries' vectors and the feed of their changes. A vector is written after its entry and
 * checked against it after (docs/invariants.md, Erasure wins): every remover of content
 * removes the content first and the vector second, so in any interleaving one of the two
 * leaves no vector of content that is gone.
 *
 * The feed: every change to an agent's vectors (a vector stored, a vector removed) takes the
 * agent's next change number, logs the change at it (`vectorChanges`, one document per number)
 * and only then writes the record with it, over an older number only. A process holding the
 * agent's index in memory reads, by equality on `feedKey`, only the pages of the log and of
 * the records that hold numbers it has not resolved (store/vectorFeed.ts). A number is
 * claimed once, by its `_id` in the log: a reader that finds one unlogged too long logs a
 * fence there, and its writer, finding the number taken, takes another.
 */

/** Change numbers per feed page: what one equality read returns at most. */
export const FEED_PAGE = 256;

export function feedKey(agentId: string, seq: number): string {
  return `${agentId} ${Math.floor(seq / FEED_PAGE)}`;
}

/** What a vector was computed from: the same text, the same digest. */
export function textHash(text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 22);
}

export function encodeVector(v: Float32Array): Binary {
  return new Binary(Buffer.from(v.buffer, v.byteOffset, v.byteLength));
}

/** The dimensions of a record's space: as written, else its vector's length. */
export function recordDimensions(r: Pick<VectorRecord, 'dimensions' | 'vector'>): number | undefined {
  return r.dimensions ?? (r.vector ? r.vector.buffer.length / Float32Array.BYTES_PER_ELEMENT : undefined);
}

/** Whether a record holds a vector of this space (usable or not: vectorDefect judges that). */
export function inSpace(r: VectorRecord, space: EmbeddingSpace): r is VectorRecord & { vector: Binary } {
  return r.vector !== undefined && r.model === space.model && recordDimensions(r) === space.dimensions;
}

export function decodeVector(b: Binary): Float32Array {
  const bytes = b.buffer;
  // Copied: the driver's buffer may be a view at an offset Float32Array cannot start on.
  const copy = new Uint8Array(bytes.length);
  copy.set(bytes);
  return new Float32Array(copy.buffer);
}

/** The `_id` in the log of an agent's change number. */
export function changeId(agentId: string, seq: number): string {
  return `${agentId} ${seq}`;
}

/** Take `n` change numbers of the agent's feed; returns the first. */
export async function takeChangeNumbers(store: Store, agentId: string, n: number): Promise<number> {
  const feed = await store.vectorFeeds.findOneAndUpdate(
    { _id: agentId },
    { $inc: { seq: n } },
    { upsert: true, returnDocument: 'after' },
  );
  return feed!.seq - n + 1;
}

/**
 * Log each entry's change at its number (`entryIds[i]` at `first + i`) before its record is
 * written. A number already taken in the log was fenced by a reader: nothing is written at
 * it, and the entry takes a fresh number and is logged again. Returns each entry's number.
 * (A retried insert that finds its own change takes a fresh number too: the later change of
 * the same entry resolves the earlier one.)
 */
export async function logChanges(
  store: Store,
  agentId: string,
  entryIds: readonly string[],
  first: number,
): Promise<number[]> {
  const seqs = entryIds.map((_, i) => first + i);
  let unlogged = entryIds.map((_, i) => i);
  for (;;) {
    const taken = await insertIgnoringExisting(
      store.vectorChanges,
      unlogged.map((i) => ({
        _id: changeId(agentId, seqs[i]!),
        agentId,
        seq: seqs[i]!,
        entryId: entryIds[i]!,
        feedKey: feedKey(agentId, seqs[i]!),
      })),
    );
    unlogged = unlogged.filter((i) => taken.has(changeId(agentId, seqs[i]!)));
    if (unlogged.length === 0) return seqs;
    const fresh = await takeChangeNumbers(store, agentId, unlogged.length);
    unlogged.forEach((i, k) => (seqs[i] = fresh + k));
  }
}

/** Numbers for these entries' changes, logged: what every change of a record takes first. */
async function numberChanges(store: Store, agentId: string, entryIds: readonly string[]): Promise<number[]> {
  return logChanges(store, agentId, entryIds, await takeChangeNumbers(store, agentId, entryIds.length));
}

/** The agent's last change number (0 before its first vector). */
export async function lastChangeNumber(store: Store, agentId: string): Promise<number> {
  return (await store.vectorFeeds.findOne({ _id: agentId }))?.seq ?? 0;
}

/**
 * The records of one feed page changed after `afterSeq`: equality on the page's key (an
 * index serves it on every server), the rest filtered by the server within the page.
 */
export async function feedPage(
  store: Store,
  agentId: string,
  page: number,
  afterSeq: number,
): Promise<VectorRecord[]> {
  const found = await store.vectors.find({ feedKey: `${agentId} ${page}`, seq: { $gt: afterSeq } }).toArray();
  return found.filter((r) => r.agentId === agentId);
}

/** How many of the agent's records hold a vector (any model): what a refused index would load. */
export async function countVectors(store: Store, agentId: string): Promise<number> {
  return store.vectors.countDocuments({ agentId, vector: { $exists: true } });
}

/** Every vector record of an agent, a batch at a time: loading an index, paging `reembed`. */
export async function* agentVectors(
  store: Store,
  agentId: string,
  batch: number,
): AsyncGenerator<VectorRecord[]> {
  yield* inBatches(store.vectors, { agentId }, batch);
}

/** An entry and the tier it was found in: where its `embed` work is settled. */
export interface EmbedTarget {
  id: string;
  tier: Tier;
}

export interface ToEmbed extends EmbedTarget {
  text: string;
  textHash: string;
  /** The entry's recall state as read: written beside its vector. */
  recall: RecallState;
}

/**
 * Of these ids, the entries (either tier) still awaiting a vector of `space`: stored, and
 * with no vector of that space for their current text. The rest need nothing. Only an entry
 * that records the model can have a current vector, so only its record is read (a new
 * entry's never is: the write path's embedding costs no read of the vectors). A record of
 * the same model at other dimensions is of another space, so its entry is embedded again.
 */
export async function entriesToEmbed(
  store: Store,
  agentId: string,
  ids: readonly string[],
  space: EmbeddingSpace,
): Promise<{ toEmbed: ToEmbed[]; current: EmbedTarget[] }> {
  const { model } = space;
  const unique = [...new Set(ids)];
  // Many by id in one read a tier, not a read per entry: a lane embeds up to MAX_EMBED_IDS at a
  // time, and as many point reads at once would queue the writes behind them for the store.
  const located = await locateEntries(store, agentId, unique);
  await dropVectorsOfErased(
    store,
    agentId,
    unique.filter((id) => !located.has(id)),
  );
  const records = await findByIds(
    store.vectors,
    unique.filter((id) => located.get(id)?.entry.embeddedWith === model),
  );
  const toEmbed: ToEmbed[] = [];
  const current: EmbedTarget[] = [];
  unique.forEach((id) => {
    const found = located.get(id);
    if (!found) return;
    const hash = textHash(found.entry.text);
    const r = records.get(id);
    if (r && r.agentId === agentId && inSpace(r, space) && r.textHash === hash && r.seq > 0)
      current.push({ id, tier: found.tier });
    else
      toEmbed.push({
        id,
        tier: found.tier,
        text: found.entry.text,
        textHash: hash,
        recall: recallStateOf(found.entry, found.tier),
      });
  });
  return { toEmbed, current };
}

/**
 * Of these ids, none stored, those gone for good (behind a tombstone: erased or evicted) lose
 * any vector they still have. An attempt that stored a vector after the entry's erasure had
 * dropped its vectors, then failed before it looked at the entry again, left one; its retry
 * comes here (docs/invariants.md, Erasure wins). Only behind a tombstone: an entry read
 * mid-move can be missed in both tiers, and it keeps its vector.
 */
async function dropVectorsOfErased(store: Store, agentId: string, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  const stones = await findByIds(store.tombstones, ids, { _id: 1, agentId: 1 });
  const gone = ids.filter((id) => stones.get(id)?.agentId === agentId);
  if (gone.length > 0) await dropVectors(store, agentId, gone, Date.now());
}

/** The usable vectors of `space` these entries have (read by their ids), by id; an id without one is left out. */
export async function vectorsOf(
  store: Store,
  agentId: string,
  ids: readonly string[],
  space: EmbeddingSpace,
): Promise<Map<string, Float32Array>> {
  const records = await findByIds(store.vectors, ids);
  const out = new Map<string, Float32Array>();
  for (const r of records.values()) {
    if (r.agentId !== agentId || !inSpace(r, space)) continue;
    const v = decodeVector(r.vector);
    if (!vectorDefect(v, space.dimensions)) out.set(r._id, v);
  }
  return out;
}

/**
 * Store vectors of `space`, then look again: a vector whose entry is gone, or whose text
 * changed since it was read, leaves at once (docs/invariants.md, Erasure wins). Returns the
 * entries that kept their vector, with the tier they were found in just now.
 */
export async function storeVectors(
  store: Store,
  agentId: string,
  space: EmbeddingSpace,
  items: readonly (ToEmbed & { vector: Float32Array })[],
  at: number,
): Promise<EmbedTarget[]> {
  // An unusable vector is not stored: its entry keeps its `embed` work, for the night to retry.
  items = items.filter((item) => !vectorDefect(item.vector, space.dimensions));
  if (items.length === 0) return [];
  await writeOvertaken(store, agentId, space, items, at);
  const located = await locateEntries(
    store,
    agentId,
    items.map((item) => item.id),
  );
  // Where the entry is now, if it still holds the text its vector was made from.
  const keptAt = (item: ToEmbed) => {
    const found = located.get(item.id);
    return found && textHash(found.entry.text) === item.textHash ? found : undefined;
  };
  const stale = items.filter((item) => !keptAt(item));
  if (stale.length)
    await dropVectors(
      store,
      agentId,
      stale.map((s) => s.id),
      at,
    );
  // An entry whose state changed since it was read: its record is stated again (restateForRecall).
  const moved = items.filter((item) => {
    const found = located.get(item.id);
    return found && !sameRecallState(item.recall, recallStateOf(found.entry, found.tier));
  });
  if (moved.length)
    await restateForRecall(
      store,
      agentId,
      moved.map((m) => m.id),
      at,
    );
  return items.flatMap((item) => {
    const found = keptAt(item);
    return found ? [{ id: item.id, tier: found.tier }] : [];
  });
}

/** How many times a vector is numbered again after a state-only change overtook its write. */
const VECTOR_WRITE_ROUNDS = 3;

/**
 * Number and write these vectors. A restate (store/vectors.ts, restateForRecall) numbered after
 * one and landing first leaves the record at a higher number with the vector it had (another
 * model's), and the write, over a lower number only, matches nothing: each such vector is
 * numbered and written again. A record a later write cleared (an erasure) or gave another
 * text's vector is left to it.
 */
async function writeOvertaken(
  store: Store,
  agentId: string,
  space: EmbeddingSpace,
  items: readonly (ToEmbed & { vector: Float32Array })[],
  at: number,
): Promise<void> {
  let due = items;
  for (let round = 0; round < VECTOR_WRITE_ROUNDS && due.length > 0; round++) {
    const seqs = await numberChanges(
      store,
      agentId,
      due.map((item) => item.id),
    );
    await writeVectorRecords(store, agentId, space, due, seqs, at);
    const stored = await findByIds(
      store.vectors,
      due.map((item) => item.id),
      { agentId: 1, model: 1, dimensions: 1, textHash: 1, vector: 1, seq: 1 },
    );
    due = due.filter((item, i) => {
      const r = stored.get(item.id);
      if (!r || r.agentId !== agentId || r.seq <= seqs[i]!) return false;
      // The same text's vector, of another space: what this write replaces, still there.
      return r.vector !== undefined && r.textHash === item.textHash && !inSpace(r, space);
    });
  }
}

/**
 * Write the records of stored vectors, each at its logged number, over a record of a lower
 * number only: a record written at a higher one is a later change, which this one must not
 * undo, whatever order the two land in. A new entry's record is inserted (one command for
 * all); an existing one is replaced under that condition.
 */
export async function writeVectorRecords(
  store: Store,
  agentId: string,
  space: EmbeddingSpace,
  items: readonly (ToEmbed & { vector: Float32Array })[],
  seqs: readonly number[],
  at: number,
): Promise<void> {
  const records: VectorRecord[] = items.map((item, i) => ({
    _id: item.id,
    agentId,
    model: space.model,
    dimensions: space.dimensions,
    vector: encodeVector(item.vector),
    textHash: item.textHash,
    recall: item.recall,
    seq: seqs[i]!,
    feedKey: feedKey(agentId, seqs[i]!),
    at,
  }));
  const existing = await insertIgnoringExisting(store.vectors, records);
  if (existing.size === 0) return;
  await store.vectors.bulkWrite(
    records
      .filter((r) => existing.has(r._id))
      .map(({ _id, ...replacement }) => ({
        replaceOne: { filter: { _id, agentId, seq: { $lt: replacement.seq } }, replacement },
      })),
    { ordered: false },
  );
}

/**
 * The vectors of these ids leave (the records stay, content-free, as the change others must
 * see). Called after the content itself is gone or replaced.
 */
export async function dropVectors(
  store: Store,
  agentId: string,
  ids: readonly string[],
  at: number,
): Promise<void> {
  // Many by id in one read: erasing an agent drops a page of its vectors at a time.
  const found = await findByIds(store.vectors, ids, { _id: 1, agentId: 1 });
  const present = [...new Set(ids)].filter((id) => found.get(id)?.agentId === agentId);
  if (present.length === 0) return;
  await clearVectorRecords(store, agentId, present, await numberChanges(store, agentId, present), at);
}

/**
 * Called, and awaited, once an agent's vectors have been cleared: the indexes of this process
 * apply the erasure at once (store/vectorIndexes.ts), rather than at their next sweep.
 */
const clearedListeners = new Set<(agentId: string) => Promise<void>>();

/** Listen for cleared vectors; returns the call that stops listening. */
export function onVectorsCleared(listener: (agentId: string) => Promise<void>): () => void {
  clearedListeners.add(listener);
  return () => clearedListeners.delete(listener);
}

/** Clear these records' vectors, each at its logged number, over a lower number only (as writeVectorRecords). */
export async function clearVectorRecords(
  store: Store,
  agentId: string,
  ids: readonly string[],
  seqs: readonly number[],
  at: number,
): Promise<void> {
  await store.vectors.bulkWrite(
    ids.map((_id, i) => ({
      updateOne: {
        filter: { _id, agentId, seq: { $lt: seqs[i]! } },
        update: {
          $set: { seq: seqs[i]!, feedKey: feedKey(agentId, seqs[i]!), at },
          $unset: { vector: '', textHash: '' },
        },
      },
    })),
    { ordered: false },
  );
  // A listener that fails leaves the erasure to its sweep: the records are cleared either way.
  await Promise.all([...clearedListeners].map((l) => l(agentId).catch(() => undefined)));
}

/**
 * Write again the recall state kept beside these entries' vectors (core/recall.ts,
 * RecallState), after a change of tier, activity, gate or expiry, so that the search filters
 * on what the entry is now. Each record whose state differs takes a change number first; the
 * entry is read after that, so the record written at the highest number holds the entry's
 * latest state, whatever order concurrent changes land in. With `widen`, the state written
 * admits at least that too: called before a change that admits more (a rehydration, a
 * refresh, a reinstatement), so that a crash between the change and the next call leaves a
 * state that costs a read, not a hit. An entry with no vector needs nothing.
 *
 * With `known`, the state a caller just read or wrote for an entry stands in for the first
 * look, which only tells which records differ: a record that already holds it needs nothing
 * from this change (a later change restates it itself), and every record written is still
 * written from a read made after its number.
 */
export async function restateForRecall(
  store: Store,
  agentId: string,
  ids: readonly string[],
  at: number,
  {
    widen,
    known,
  }: { widen?: ReadonlyMap<string, RecallState>; known?: ReadonlyMap<string, RecallState> } = {},
): Promise<void> {
  const unique = [...new Set(ids)];
  // Many by id in one read each (store/byIds.ts): the vectors' records, then the entries.
  const stored = await findByIds(store.vectors, unique, { agentId: 1, recall: 1, vector: 1 });
  const records = unique.map((id) => {
    const record = stored.get(id);
    return record?.agentId === agentId && record.vector !== undefined ? record : undefined;
  });
  const stateOf = (found: { entry: Entry; tier: Tier } | undefined) =>
    found && recallStateOf(found.entry, found.tier);
  const unknown = unique.filter((id) => !known?.has(id));
  const firstLook = await locateEntries(store, agentId, unknown);
  const looked = unique.map((id) => known?.get(id) ?? stateOf(firstLook.get(id)));
  const wanted = (id: string, now: RecallState | undefined): RecallState | undefined => {
    const wider = widen?.get(id);
    return now && wider ? widerRecallState(now, wider) : now;
  };
  const changed = unique.filter((id, i) => {
    const r = records[i];
    const state = wanted(id, looked[i]);
    return r !== undefined && state !== undefined && !sameRecallState(r.recall, state);
  });
  if (changed.length === 0) return;
  const seqs = await numberChanges(store, agentId, changed);
  // Hot first for each, after its number (store/tiers.ts, locateEntries).
  const located = await locateEntries(store, agentId, changed);
  const after = changed.map((id) => stateOf(located.get(id)));
  await store.vectors.bulkWrite(
    changed.map((_id, i) => {
      const state = wanted(_id, after[i]);
      const numbered = { seq: seqs[i]!, feedKey: feedKey(agentId, seqs[i]!), at };
      return {
        updateOne: {
          filter: { _id, agentId, seq: { $lt: seqs[i]! } },
          // An entry in neither tier was deleted (a move copies before it deletes): its vector
          // goes here too. Its remover's clear may have numbered its change before this one and
          // land after it, matching nothing (docs/invariants.md, Erased from derived indexes).
          update: state
            ? { $set: { ...numbered, recall: state } }
            : { $set: numbered, $unset: { vector: '', textHash: '' } },
        },
      };
    }),
    { ordered: false },
  );
}

/**
 * The entries' `embed` work is done: it leaves their pending lists, in the tier each was
 * found in, and each records the model. (An entry moved since keeps `embed` in its new
 * copy; the night settles it, embedding it again if need be.) The version is left
 * alone: a vector changes nothing the nightly phases decide on, so it must not fail their
 * version-guarded writes.
 */
export async function settleEmbedded(
  store: Store,
  agentId: string,
  targets: readonly EmbedTarget[],
  model: string,
): Promise<void> {
  for (const tier of TIERS) {
    const ids = targets.filter((t) => t.tier === tier).map((t) => t.id);
    if (ids.length === 0) continue;
    await tierCollection(store, tier).bulkWrite(
      ids.map((_id) => ({
        updateOne: {
          filter: { _id, agentId },
          update: { $pull: { pending: 'embed' }, $set: { embeddedWith: model } },
        },
      })),
      { ordered: false },
    );
  }
}

/**
 * Entries (either tier) still awaiting their vector, a page at a time, with their text: the
 * nightly `embed` phase and `memgate reembed`. Each page is settled before the next is read.
 */
export async function* awaitingEmbedding(
  store: Store,
  agentId: string,
  batch: number,
): AsyncGenerator<Pick<Entry, '_id' | 'text'>[]> {
  for (const tier of TIERS) {
    yield* inBatches<Pick<Entry, '_id' | 'text'>>(
      tierCollection(store, tier) as never,
      { agentId, pending: 'embed' },
      batch,
      { _id: 1, text: 1 },
    );
  }
}

/** Whether any hot entry of the agent still awaits its vector: the write path's embedding has not settled. */
export async function hotAwaitingEmbedding(store: Store, agentId: string): Promise<boolean> {
  return (await store.hot.findOne({ agentId, pending: 'embed' }, { projection: { _id: 1 } })) !== null;
}

/**
 * Every entry of the agent (either tier) awaits its vector again: `memgate reembed` after a
 * change of model. One pass over the agent's entries; rerun, it marks the same entries.
 */
export async function markForEmbedding(
  store: Store,
  agentId: string,
  batch: number,
  onPage: () => void,
): Promise<number> {
  let marked = 0;
  for (const tier of TIERS) {
    const collection = tierCollection(store, tier);
    for await (const page of inBatches(collection, { agentId }, batch, { _id: 1 })) {
      await collection.bulkWrite(
        page.map(({ _id }) => ({
          updateOne: { filter: { _id, agentId }, update: { $addToSet: { pending: 'embed' as const } } },
        })),
        { ordered: false },
      );
      marked += page.length;
      onPage();
    }
  }
  return marked;
}
