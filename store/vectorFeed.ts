import { FeedWatermark, type PendingChange } from '../core/feedWatermark';
import { insertIgnoringExisting, type Store, type VectorChange, type VectorRecord } from './db';
import { changeId, FEED_PAGE, feedKey } from './vectors';

/**
 * A reader of an agent's vector feed (store/vectors.ts, the feed): what a process holding the
 * agent's index in memory applies to stay current with every other process's writes and
 * erasures, whatever order concurrent writers land in. No record is ever skipped, and no
 * time is assumed for that: a number is resolved only when its entry's record is seen at it
 * or later, or when the reader fenced it in the log so that no record can be written at it.
 *
 * Each call reads the counter, then, for the numbers still holes (counted, nothing logged at
 * them seen yet), the pages of the log and of the records that hold them, by equality on
 * `feedKey` (docs/invariants.md, Index-driven). A hole is fenced once it has been one for
 * `fenceDelayMs` since this reader first counted it: a writer logs its numbers one store call
 * after taking them, so a few store timeouts is long enough that only a crashed or stalled
 * writer is fenced; one that was only slow takes another number and goes on.
 *
 * A change logged whose record is not yet at it (pending) is read again by a point read of
 * its record on every call until it resolves. A writer that crashed between its log and its
 * record leaves one: it costs that point read per call until a later change of the same entry
 * (its retried embedding, its erasure) resolves it.
 *
 * Where a reader starts is kept on the feed's document (`resolvedThrough`, `unresolved`), so
 * a new reader reads the log from there, not from the first number. The night trims the log
 * (`trimFeed`): the changes of pages wholly resolved go, so it holds about what is in flight,
 * not one document per change ever made.
 */
export class FeedReader {
  private constructor(
    private readonly store: Store,
    private readonly agentId: string,
    private readonly fenceDelayMs: number,
    /** What the calls so far resolved, their records applied. */
    private watermark: FeedWatermark,
    /** `resolvedThrough`, and how many `unresolved`, as last written here or read at start. */
    private kept: { through: number; unresolved: number },
  ) {}

  /** The feed's `trimmedThrough` as the last call read it. */
  private trimmed = 0;

  /**
   * A reader of the agent's feed, started before its index loads: every change the load may
   * miss (one numbered before the load, landing after it read the record) is one it reads.
   */
  static async start(store: Store, agentId: string, opts: { fenceDelayMs: number }): Promise<FeedReader> {
    const feed = await store.vectorFeeds.findOne({ _id: agentId });
    const kept = { through: feed?.resolvedThrough ?? 0, unresolved: feed?.unresolved?.length ?? 0 };
    const watermark = new FeedWatermark(kept.through, feed?.unresolved ?? []);
    const reader = new FeedReader(store, agentId, opts.fenceDelayMs, watermark, kept);
    watermark.observe(feed?.seq ?? 0, performance.now());
    return reader;
  }

  /**
   * A reader that goes on from where one stood (`position` of a reader whose index was
   * persisted with it), or undefined if the feed is behind it: the store is not the one it
   * read, and its index is not derived from this store.
   */
  static async resume(
    store: Store,
    agentId: string,
    opts: { fenceDelayMs: number },
    from: FeedPosition,
  ): Promise<FeedReader | undefined> {
    const feed = await store.vectorFeeds.findOne({ _id: agentId });
    if ((feed?.seq ?? 0) < from.through) return undefined;
    const watermark = new FeedWatermark(from.through, from.pending);
    const kept = { through: feed?.resolvedThrough ?? 0, unresolved: feed?.unresolved?.length ?? 0 };
    const reader = new FeedReader(store, agentId, opts.fenceDelayMs, watermark, kept);
    watermark.observe(feed?.seq ?? 0, performance.now());
    return reader;
  }

  /** Where a reader that resumes (`resume`) goes on from what this one's calls have applied. */
  get position(): FeedPosition {
    const through = this.watermark.horizon;
    return { through, pending: this.watermark.pendingThrough(through) };
  }

  /**
   * Records a load read, in their current state, now applied: the numbers they stand at are
   * resolved as if read from the feed, so the catch-up after a load reads only the pages of
   * numbers no record stands at any more (changes overwritten since), not the whole feed.
   */
  loaded(records: readonly VectorRecord[]): void {
    for (const r of records) if (r.agentId === this.agentId) this.watermark.recordSeen(r._id, r.seq);
  }

  /** Every change number up to this was trimmed from the log (trimFeed), as the last call read. */
  get trimmedThrough(): number {
    return this.trimmed;
  }

  /** Every change number up to this is applied (by the calls so far). */
  get settled(): number {
    return this.watermark.settled;
  }

  /** The agent's change counter as last read. */
  get counter(): number {
    return this.watermark.counter;
  }

  /** Numbers counted but not yet resolved: holes and pending changes. */
  get unresolved(): number {
    return this.watermark.unresolved;
  }

  /**
   * Hand `apply` the records to apply since the last call (or the load), each in its current
   * state, in no order: each at a number this reader had not resolved. Applying a record's
   * current state is idempotent. The numbers they resolve count as resolved only once `apply`
   * has returned (docs/invariants.md, No feed gap): a call that fails part-way, in a read or
   * write of the store or in `apply`, leaves the reader where it stood, and the next call hands
   * over the same changes again. Calls run one at a time, after the load.
   */
  async next(apply: (records: VectorRecord[]) => Promise<void>): Promise<void> {
    const { store, agentId } = this;
    const feed = await store.vectorFeeds.findOne({ _id: agentId });
    const now = performance.now();
    // Counting numbers resolves none, so it stands whatever follows: a hole is fenced as long
    // after it was first counted, even if a call failed since.
    this.watermark.observe(feed?.seq ?? 0, now);
    const watermark = this.watermark.copy();
    // The newest state read of each entry, and the entries one of whose states was new.
    const read = new Map<string, VectorRecord>();
    const fresh = new Set<string>();
    const seen = (r: VectorRecord) => {
      if (r.agentId !== agentId) return;
      if (watermark.recordSeen(r._id, r.seq)) fresh.add(r._id);
      if ((read.get(r._id)?.seq ?? -1) < r.seq) read.set(r._id, r);
    };
    const after = watermark.settled;
    const pages = [...new Set(watermark.holeNumbers().map((seq) => Math.floor(seq / FEED_PAGE)))];
    for (const page of pages) {
      const filter = { feedKey: `${agentId} ${page}`, seq: { $gt: after } };
      const [changes, records] = await Promise.all([
        store.vectorChanges.find(filter).toArray(),
        store.vectors.find(filter).toArray(),
      ]);
      for (const c of changes) if (c.agentId === agentId) watermark.changeSeen(c.seq, changeEntry(c));
      records.forEach(seen);
    }
    // Every number the night trimmed was resolved before (trimFeed): one whose record no page
    // held has its record at a later number, so it resolves empty, with no fence to wait for.
    this.trimmed = feed?.trimmedThrough ?? 0;
    for (const seq of watermark.holeNumbers()) if (seq <= this.trimmed) watermark.changeSeen(seq, undefined);
    // A fence that stands after a failed call is read from its page by the next one.
    await this.fence(watermark, watermark.holesOlderThan(now, this.fenceDelayMs));
    // A change seen after its entry's newer record (on a later page) is resolved by it.
    [...read.values()].forEach(seen);
    const again = await Promise.all(
      watermark.pendingEntries().map((_id) => store.vectors.findOne({ _id, agentId })),
    );
    for (const r of again) if (r) seen(r);
    await apply([...fresh].map((id) => read.get(id)!));
    this.watermark = watermark;
    await this.keep();
  }

  /**
   * Claim these holes in the log: one claimed is resolved empty (its writer, if alive, finds
   * the number taken and takes another); one its writer logged meanwhile is its change.
   */
  private async fence(watermark: FeedWatermark, holes: readonly number[]): Promise<void> {
    if (holes.length === 0) return;
    const { store, agentId } = this;
    const taken = await insertIgnoringExisting(
      store.vectorChanges,
      holes.map((seq) => ({
        _id: changeId(agentId, seq),
        agentId,
        seq,
        feedKey: feedKey(agentId, seq),
        fenced: true as const,
      })),
    );
    for (const seq of holes) if (!taken.has(changeId(agentId, seq))) watermark.changeSeen(seq, undefined);
    const logged = await Promise.all([...taken].map((_id) => store.vectorChanges.findOne({ _id, agentId })));
    for (const c of logged) if (c) watermark.changeSeen(c.seq, changeEntry(c));
  }

  /**
   * Where a later reader can start: written once it moved a page on, or once the changes it
   * wrote as unresolved are all resolved (a batch that was in flight), so one write costs a
   * page of changes or ends a batch. The conditional update keeps a further point another
   * reader wrote (at one point, any reader's list is a valid one). Not written while many are
   * pending, which would make the document large.
   */
  private async keep(): Promise<void> {
    const { store, agentId, watermark } = this;
    const through = watermark.horizon;
    const unresolved = watermark.pendingThrough(through);
    const moved = through >= this.kept.through + FEED_PAGE;
    const cleared = this.kept.unresolved > 0 && unresolved.length === 0 && through >= this.kept.through;
    if (!(moved || cleared) || unresolved.length > FEED_PAGE) return;
    await store.vectorFeeds.updateOne(
      { _id: agentId, resolvedThrough: { $not: { $gt: through } } },
      { $set: { resolvedThrough: through, unresolved } },
    );
    this.kept = { through, unresolved: unresolved.length };
  }
}

/** Every change number up to `through` is resolved but the `pending` ones. */
export interface FeedPosition {
  through: number;
  pending: PendingChange[];
}

/** The entry a logged change writes, or none for a fence. */
function changeEntry(c: VectorChange): string | undefined {
  return c.fenced ? undefined : c.entryId;
}

/**
 * Trim the agent's log of changes (a nightly step): delete, a page at a time by equality on
 * `feedKey`, the logged changes of the pages wholly at or below what a reader that reads the
 * feed now has resolved (`settled`: below every change still in flight, logged or not), and
 * raise `trimmedThrough` first, so that a reader knows a number there with no change is not a
 * hole. Fences stay: deleted, a stalled writer could log its fenced number after all. A
 * reader that read the document before the raise and the page after the delete fences such a
 * number instead, which is harmless: it was resolved, and its record moved to a later one.
 * Returns how many changes went.
 */
export async function trimFeed(
  store: Store,
  agentId: string,
  opts: { fenceDelayMs: number },
): Promise<number> {
  const reader = await FeedReader.start(store, agentId, opts);
  // Nothing to apply: only how far the feed is resolved is wanted.
  await reader.next(async () => undefined);
  const from = Math.floor((reader.trimmedThrough + 1) / FEED_PAGE);
  const through = Math.floor((reader.settled + 1) / FEED_PAGE) - 1;
  if (through < from) return 0;
  const trimmedThrough = (through + 1) * FEED_PAGE - 1;
  await store.vectorFeeds.updateOne(
    { _id: agentId, trimmedThrough: { $not: { $gte: trimmedThrough } } },
    { $set: { trimmedThrough } },
  );
  let deleted = 0;
  for (let page = from; page <= through; page++) {
    const { deletedCount } = await store.vectorChanges.deleteMany({
      feedKey: feedKey(agentId, page * FEED_PAGE),
      fenced: { $ne: true },
    });
    deleted += deletedCount;
  }
  return deleted;
}
