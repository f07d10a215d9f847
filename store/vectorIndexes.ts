import { VectorIndex, type Neighbour } from '../core/vectorIndex';
import type { Store, VectorRecord } from './db';
import { agentVectors, decodeVector, FEED_PAGE, feedPage, lastChangeNumber } from './vectors';

/**
 * The nearest-neighbour indexes a recall-serving process holds: one per agent and model, in
 * memory, loaded on the agent's first semantic recall and kept current from the feed of
 * vector changes (store/vectors.ts), which any process may write. A recall reads one counter
 * and, when it moved, the feed pages since; it never scans the agent's vectors.
 *
 * Memory is bounded by `maxVectors` over all agents (core/vectorIndex.ts gives the bytes a
 * vector costs): the least recently recalled agents' indexes are dropped to make room, and
 * an agent with more vectors than the whole bound is recalled lexically, said in its result.
 *
 * A load reads every vector of the agent (95.7 s for 400,000 on the local stack), so a
 * search waits for it at most `loadWaitMs`, then answers that the index is still loading
 * while the load goes on: a recall is then lexical and says so, instead of holding its
 * caller past any client's timeout. A catch-up is bounded the same way: past the wait, the
 * search answers from the index as it stands, saying so, and the catch-up goes on. That is
 * safe for erasure: recall reads every neighbour from the store before it returns it.
 */

/**
 * A change number is read again for this long after it was first counted: a writer takes
 * its number a moment before its record lands, so a page read in between can miss it.
 */
const SETTLE_MS = 5_000;

/**
 * How far behind the counter a change number may still be in flight (a few writers'
 * batches): a record numbered further back has landed. It bounds what a load, and each
 * catch-up, reads again; SETTLE_MS bounds it in time.
 */
const IN_FLIGHT = 2 * FEED_PAGE;

/** Records per read while an index loads. */
const LOAD_BATCH = 2_000;

interface Loaded {
  index: VectorIndex;
  /** Every change up to this number is in the index. */
  settled: number;
  /** Counters seen, with when: `settled` trails the counter by SETTLE_MS. */
  seen: { seq: number; at: number }[];
  /** Ids whose vector is of another model: not searched until `memgate reembed` converts them. */
  otherModel: Set<string>;
  lastUsed: number;
  /**
   * Catch-ups run one at a time (two would apply the same records in either order), and a
   * search that arrives while one runs queues one more behind it, which later ones share:
   * it reads the counter when it starts, so it covers each of them.
   */
  catchingUp?: Promise<void>;
  queuedCatchUp?: Promise<void>;
}

export type SemanticSearch =
  | {
      available: true;
      neighbours: Neighbour[];
      /** Entries whose vector is of another model than the query's, so not searched. */
      otherModel: number;
      /**
       * The index had not read every change yet when the wait ran out: vectors stored or
       * changed since the last catch-up may be missing from `neighbours`.
       */
      catchingUp: boolean;
    }
  | { available: false; reason: string };

export interface VectorIndexLimits {
  /** Vectors held, over all agents. */
  maxVectors: number;
  /** How long a search waits for an agent's index to load; unset, as long as the load takes. */
  loadWaitMs?: number;
}

interface Loading {
  done: Promise<Loaded>;
  /** The index as far as it has been read: its size is the load's progress. */
  index: VectorIndex;
}

export class VectorIndexes {
  private readonly loaded = new Map<string, Loaded>();
  private readonly loading = new Map<string, Loading>();
  private readonly tooLarge = new Map<string, number>();
  private readonly maxVectors: number;

  constructor(
    private readonly store: Store,
    private readonly limits: VectorIndexLimits,
  ) {
    this.maxVectors = limits.maxVectors;
  }

  /** Vectors held now, over all agents. */
  get size(): number {
    let n = 0;
    for (const l of this.loaded.values()) n += l.index.size;
    return n;
  }

  /** The `k` nearest of the agent's vectors of `model` to `query` (unit length). */
  async nearest(agentId: string, model: string, query: Float32Array, k: number): Promise<SemanticSearch> {
    const key = `${agentId}\0${model}`;
    const refused = this.tooLarge.get(key);
    if (refused !== undefined) return this.refusal(refused);
    const l =
      this.loaded.get(key) ?? (await this.withinWait(this.load(key, agentId, model, query.length)))?.value;
    if (!l) {
      const read = this.loading.get(key)?.index.size ?? 0;
      return {
        available: false,
        reason: `the agent's vector index is loading into memory (${read} vectors so far); recall is lexical until it is loaded`,
      };
    }
    const caughtUp = await this.withinWait(this.caughtUp(l, agentId, model));
    if (l.index.size > this.maxVectors) {
      this.loaded.delete(key);
      this.tooLarge.set(key, l.index.size);
      return this.refusal(l.index.size);
    }
    l.lastUsed = Date.now();
    this.makeRoom(key);
    return {
      available: true,
      neighbours: l.index.search(query, k),
      otherModel: l.otherModel.size,
      catchingUp: caughtUp === undefined,
    };
  }

  private refusal(size: number): SemanticSearch {
    return {
      available: false,
      reason: `the agent has ${size} vectors, more than this process may hold (MEMGATE_VECTOR_INDEX_MAX_VECTORS=${this.maxVectors})`,
    };
  }

  /** Drop the least recently used other indexes while the total is over the bound. */
  private makeRoom(keep: string): void {
    const others = [...this.loaded]
      .filter(([k]) => k !== keep)
      .sort(([, a], [, b]) => a.lastUsed - b.lastUsed);
    let total = this.size;
    for (const [k, l] of others) {
      if (total <= this.maxVectors) break;
      this.loaded.delete(k);
      total -= l.index.size;
    }
  }

  /** What `work` settles to, or undefined once it outlasts `loadWaitMs` (it goes on). */
  private async withinWait<T>(work: Promise<T>): Promise<{ value: T } | undefined> {
    const wait = this.limits.loadWaitMs;
    const settled = work.then((value) => ({ value }));
    if (wait === undefined) return settled;
    let timer: NodeJS.Timeout | undefined;
    // A wait of 0 loses the race even to work that answers at once: no timer to outrun.
    const waited =
      wait === 0
        ? Promise.resolve(undefined)
        : new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), wait)));
    try {
      return await Promise.race([settled, waited]);
    } finally {
      clearTimeout(timer);
    }
  }

  private load(key: string, agentId: string, model: string, dimensions: number): Promise<Loaded> {
    let pending = this.loading.get(key);
    if (!pending) {
      const index = new VectorIndex(dimensions);
      const done = (async () => {
        // The counter first: a change made while the records are read is read again after.
        const counter = await lastChangeNumber(this.store, agentId);
        const l: Loaded = {
          index,
          // A record numbered just before the counter may land after the read passed it.
          settled: Math.max(0, counter - IN_FLIGHT),
          seen: [{ seq: counter, at: Date.now() }],
          otherModel: new Set(),
          lastUsed: Date.now(),
        };
        for await (const page of agentVectors(this.store, agentId, LOAD_BATCH)) {
          for (const r of page) apply(l, r, model);
          if (l.index.size > this.maxVectors) break;
        }
        this.loaded.set(key, l);
        return l;
      })().finally(() => this.loading.delete(key));
      // A load no search waits for any more may still fail: the next search loads again, and
      // a failure it waits for reaches it.
      done.catch(() => undefined);
      pending = { done, index };
      this.loading.set(key, pending);
    }
    return pending.done;
  }

  /** A catch-up that starts after this call: the one queued, or a new one. */
  private caughtUp(l: Loaded, agentId: string, model: string): Promise<void> {
    if (l.queuedCatchUp) return l.queuedCatchUp;
    const before = l.catchingUp?.catch(() => undefined) ?? Promise.resolve();
    const next: Promise<void> = before.then(async () => {
      l.queuedCatchUp = undefined;
      l.catchingUp = next;
      try {
        await this.catchUp(l, agentId, model);
      } finally {
        if (l.catchingUp === next) l.catchingUp = undefined;
      }
    });
    l.queuedCatchUp = next;
    // A catch-up no search waits for any more may fail: the next one reads the same changes,
    // and a failure a search waits for reaches it.
    next.catch(() => undefined);
    return next;
  }

  private async catchUp(l: Loaded, agentId: string, model: string): Promise<void> {
    const now = Date.now();
    const counter = await lastChangeNumber(this.store, agentId);
    const last = l.seen[l.seen.length - 1]!;
    if (counter !== last.seq) l.seen.push({ seq: counter, at: now });
    // Settled: the newest counter seen at least SETTLE_MS ago; every record up to it has landed.
    while (l.seen.length > 1 && now - l.seen[1]!.at >= SETTLE_MS) l.seen.shift();
    const settledNow = now - l.seen[0]!.at >= SETTLE_MS ? l.seen[0]!.seq : l.settled;
    if (counter > l.settled) {
      for (
        let page = Math.floor((l.settled + 1) / FEED_PAGE);
        page <= Math.floor(counter / FEED_PAGE);
        page++
      ) {
        for (const r of await feedPage(this.store, agentId, page, l.settled)) apply(l, r, model);
      }
    }
    // Read again while unsettled: at most the last IN_FLIGHT numbers, for at most SETTLE_MS.
    l.settled = Math.max(l.settled, settledNow, counter - IN_FLIGHT);
  }
}

/** A record's current state into the index: its vector of this model, or none. */
function apply(l: Loaded, r: VectorRecord, model: string): void {
  if (r.vector && r.model === model) {
    l.index.upsert(r._id, decodeVector(r.vector));
    l.otherModel.delete(r._id);
  } else {
    l.index.remove(r._id);
    if (r.vector) l.otherModel.add(r._id);
    else l.otherModel.delete(r._id);
  }
}
