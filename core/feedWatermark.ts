/**
 * What a reader of an agent's vector feed (store/vectorFeed.ts) knows of its change numbers:
 * every number up to `settled` is resolved, and above it each number the counter has passed
 * is resolved, or a hole (no change logged at it yet), or pending (its change is logged, its
 * entry's record not yet seen at it or later). Only the unresolved are kept, so memory follows
 * them, not the span they hold open.
 *
 * Pure bookkeeping: the reader says what it read, this says what is left to read. `settled`
 * never passes an unresolved number, whatever order the changes land in.
 */
export class FeedWatermark {
  private seenCounter: number;
  /** Hole → when the counter was first seen past it (a monotonic clock's reading). */
  private readonly holes = new Map<number, number>();
  /** Pending number → its entry. */
  private readonly pending = new Map<number, string>();
  /** Entry → its pending numbers. */
  private readonly pendingOf = new Map<string, Set<number>>();

  /**
   * Every number up to `through` is resolved but these pending ones (`horizon` and
   * `pendingThrough` of an earlier reader of the same feed).
   */
  constructor(through: number, pending: readonly PendingChange[] = []) {
    this.seenCounter = through;
    for (const p of pending) if (p.seq <= through) this.pend(p.seq, p.entryId);
  }

  /**
   * A copy to resolve numbers in: the reader keeps it only once the records that resolved them
   * are applied, so a call that fails part-way resolves nothing.
   */
  copy(): FeedWatermark {
    const c = new FeedWatermark(this.seenCounter);
    for (const [seq, at] of this.holes) c.holes.set(seq, at);
    for (const [seq, entryId] of this.pending) c.pend(seq, entryId);
    return c;
  }

  /** The highest counter seen: numbers above it are not known yet. */
  get counter(): number {
    return this.seenCounter;
  }

  /** Every number up to this is resolved. */
  get settled(): number {
    let settled = this.horizon;
    for (const seq of this.pending.keys()) settled = Math.min(settled, seq - 1);
    return settled;
  }

  /**
   * Every number up to this is resolved or pending: none is a hole. With `pendingThrough`, it
   * is where a reader that starts later can begin.
   */
  get horizon(): number {
    let lowest = this.seenCounter + 1;
    for (const seq of this.holes.keys()) lowest = Math.min(lowest, seq);
    return lowest - 1;
  }

  /** The pending changes up to `seq`. */
  pendingThrough(seq: number): PendingChange[] {
    return [...this.pending].flatMap(([s, entryId]) => (s <= seq ? [{ seq: s, entryId }] : []));
  }

  /** Numbers counted and not yet resolved. */
  get unresolved(): number {
    return this.holes.size + this.pending.size;
  }

  /** The counter read at `now`: the numbers it passed since the last one are holes. */
  observe(counter: number, now: number): void {
    for (let seq = this.seenCounter + 1; seq <= counter; seq++) this.holes.set(seq, now);
    this.seenCounter = Math.max(this.seenCounter, counter);
  }

  /** The holes, ascending. */
  holeNumbers(): number[] {
    return [...this.holes.keys()].sort((a, b) => a - b);
  }

  /** The holes first counted at least `delay` before `now`: for the reader to fence. */
  holesOlderThan(now: number, delay: number): number[] {
    return [...this.holes].flatMap(([seq, at]) => (now - at >= delay ? [seq] : []));
  }

  /** The entries with a pending change: each needs its record read again. */
  pendingEntries(): string[] {
    return [...this.pendingOf.keys()];
  }

  /**
   * The change logged at a hole: the entry it writes, or none for a fence (no record is ever
   * written at a fenced number, so it resolves empty). A number not a hole is left as it is.
   */
  changeSeen(seq: number, entryId: string | undefined): void {
    if (this.holes.delete(seq) && entryId !== undefined) this.pend(seq, entryId);
  }

  /**
   * An entry's record, seen at `seq`: that number is resolved, and so is every pending change
   * of the entry at or below it (their state is overwritten by this one). Returns whether it
   * resolved any: whether this state is one the reader must apply. A number above the
   * counter is not counted yet; once it is, the record is seen at it again.
   */
  recordSeen(entryId: string, seq: number): boolean {
    let resolved = this.holes.delete(seq);
    for (const p of this.pendingOf.get(entryId) ?? []) {
      if (p <= seq) {
        this.unpend(entryId, p);
        resolved = true;
      }
    }
    return resolved;
  }

  private pend(seq: number, entryId: string): void {
    this.pending.set(seq, entryId);
    const of = this.pendingOf.get(entryId);
    if (of) of.add(seq);
    else this.pendingOf.set(entryId, new Set([seq]));
  }

  private unpend(entryId: string, seq: number): void {
    this.pending.delete(seq);
    const of = this.pendingOf.get(entryId);
    of?.delete(seq);
    if (of?.size === 0) this.pendingOf.delete(entryId);
  }
}

/** A change logged at `seq` for `entryId`, whose record was not yet seen at it or later. */
export interface PendingChange {
  seq: number;
  entryId: string;
}
