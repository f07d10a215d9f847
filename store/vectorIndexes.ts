import type { Config } from '../core/config';
import { BACKGROUND_SAMPLE } from '../core/hybrid';
import { VectorIndex, type Neighbour } from '../core/vectorIndex';
import type { Store, VectorRecord } from './db';
import { vectorDefect, type EmbeddingSpace } from '../core/vectorDefects';
import { FeedReader } from './vectorFeed';
import { agentVectors, countVectors, decodeVector, inSpace } from './vectors';

/**
 * The nearest-neighbour indexes a recall-serving process holds: one per agent and space, in
 * memory, loaded on the agent's first semantic recall and kept current from the feed of
 * vector changes (store/vectors.ts), which any process may write. A recall reads one counter
 * and, when it moved, the feed pages since; it never scans the agent's vectors.
 *
 * Memory is bounded by one budget per process (VectorBudget), over every VectorIndexes in
 * it (a `memgate start` process has the client's and the worker's) and every load in flight,
 * enforced as each page of a load arrives and when it completes, whether or not a search
 * still waits for it (core/vectorIndex.ts gives the bytes a vector costs): the least
 * recently recalled agents' indexes are dropped to make room, and an agent with more
 * vectors than the whole budget is recalled lexically, said in its result, until a recount
 * (at most once per `REFUSAL_RECHECK_MS`) finds it has shrunk to fit.
 *
 * A load reads every vector of the agent (95.7 s for 400,000 on the local stack), so a
 * search waits for it at most `loadWaitMs`, then answers that the index is still loading
 * while the load goes on: a recall is then lexical and says so, instead of holding its
 * caller past any client's timeout. A catch-up is bounded the same way: past the wait, the
 * search answers from the index as it stands, saying so, and the catch-up goes on. That is
 * safe for erasure: recall reads every neighbour from the store before it returns it.
 */

/** Records per read while an index loads. */
const LOAD_BATCH = 2_000;

interface Loaded {
  index: VectorIndex;
  /** The agent's feed, read from before the load: every change since is applied from it. */
  reader: FeedReader;
  /**
   * Ids whose vector is of another space (another model, or the same at other dimensions):
   * not searched until `memgate reembed` converts them.
   */
  otherModel: Set<string>;
  /** Ids whose vector of this space is unusable (core/vectorDefects.ts): skipped, counted. */
  bad: Set<string>;
  lastUsed: number;
  /**
   * Catch-ups run one at a time (two would apply the same records in either order), and a
   * search that arrives while one runs queues one more behind it, which later ones share:
   * it reads the counter when it starts, so it covers each of them.
   */
  catchingUp?: Promise<void>;
  queuedCatchUp?: Promise<void>;
  /** Set on a load stopped for want of room (VectorBudget): it was not kept. */
  noRoom?: true;
}

export type SemanticSearch =
  | {
      available: true;
      neighbours: Neighbour[];
      /** The query's similarities to a sample of the agent's vectors (core/hybrid.ts, Background). */
      background: number[];
      /** Entries whose vector is of another space than the query's, so not searched. */
      otherModel: number;
      /** Entries whose vector is unusable (not finite, zero, of the wrong length), so not searched. */
      bad: number;
      /**
       * The index had not read every change yet when the wait ran out: vectors stored or
       * changed since the last catch-up may be missing from `neighbours`.
       */
      catchingUp: boolean;
    }
  | { available: false; reason: string };

export interface VectorIndexLimits {
  /** Vectors the process holds, over all agents and every VectorIndexes in it. */
  maxVectors: number;
  /** How long a search waits for an agent's index to load; unset, as long as the load takes. */
  loadWaitMs?: number;
  /** How often a refused agent's vectors are counted again; REFUSAL_RECHECK_MS unless set. */
  refusalRecheckMs?: number;
  /**
   * How long a change number may stay unlogged before this process fences it
   * (store/vectorFeed.ts): a few store timeouts, so only a crashed or stalled writer's is.
   */
  fenceDelayMs: number;
}

/** Store timeouts a change number may stay unlogged before a reader fences it. */
const FENCE_AFTER_STORE_TIMEOUTS = 4;

/** The limits of a recall-serving process, from its configuration. */
export function vectorIndexLimitsOf(config: Config): VectorIndexLimits {
  return {
    maxVectors: config.vectorIndexMaxVectors,
    loadWaitMs: config.recallIndexWaitMs,
    fenceDelayMs: FENCE_AFTER_STORE_TIMEOUTS * config.storeTimeoutMs,
  };
}

/** A refused agent is recounted at most this often: a count reads the agent's records. */
export const REFUSAL_RECHECK_MS = 60_000;

/**
 * The vectors one process may hold, shared by every VectorIndexes of it that is given the
 * same bound (a process reads its configuration once, so that is all of them): what they
 * hold and what their loads have read so far count against it together.
 */
export class VectorBudget {
  private static readonly ofProcess = new Map<number, VectorBudget>();
  readonly members = new Set<VectorIndexes>();

  private constructor(readonly maxVectors: number) {}

  static forProcess(maxVectors: number): VectorBudget {
    let budget = VectorBudget.ofProcess.get(maxVectors);
    if (!budget) VectorBudget.ofProcess.set(maxVectors, (budget = new VectorBudget(maxVectors)));
    return budget;
  }

  /** Vectors held and being loaded, over every member. */
  get held(): number {
    let n = 0;
    for (const m of this.members) n += m.held;
    return n;
  }

  /**
   * Drop the least recently used loaded indexes of every member, but `keep`'s, while the
   * total is over the budget. Whether `keep` itself fits is its caller's to judge.
   */
  makeRoom(keep: Loaded | undefined): void {
    let total = this.held;
    if (total <= this.maxVectors) return;
    const candidates = [...this.members]
      .flatMap((m) => m.evictable(keep))
      .sort((a, b) => a.loaded.lastUsed - b.loaded.lastUsed);
    for (const c of candidates) {
      if (total <= this.maxVectors) break;
      c.drop();
      total -= c.loaded.index.size;
    }
  }
}

interface Loading {
  done: Promise<Loaded>;
  /** The index as far as it has been read: its size is the load's progress. */
  index: VectorIndex;
}

export class VectorIndexes {
  private readonly loaded = new Map<string, Loaded>();
  private readonly loading = new Map<string, Loading>();
  /** Agents refused for their size: how many vectors they had, and when that was counted. */
  private readonly tooLarge = new Map<string, { size: number; countedAt: number }>();
  private readonly maxVectors: number;
  private readonly budget: VectorBudget;

  constructor(
    private readonly store: Store,
    private readonly limits: VectorIndexLimits,
  ) {
    this.maxVectors = limits.maxVectors;
    this.budget = VectorBudget.forProcess(limits.maxVectors);
    this.budget.members.add(this);
  }

  /** Vectors held now, over all agents. */
  get size(): number {
    let n = 0;
    for (const l of this.loaded.values()) n += l.index.size;
    return n;
  }

  /** Vectors held and read so far by loads in flight: what counts against the budget. */
  get held(): number {
    let n = this.size;
    for (const l of this.loading.values()) n += l.index.size;
    return n;
  }

  /** This instance's loaded indexes the budget may drop, but `keep`. */
  evictable(keep: Loaded | undefined): { loaded: Loaded; drop: () => void }[] {
    return [...this.loaded]
      .filter(([, l]) => l !== keep)
      .map(([key, l]) => ({ loaded: l, drop: () => this.loaded.delete(key) }));
  }

  /** Leave the process's budget: this instance's indexes no longer count (its client closed). */
  close(): void {
    this.loaded.clear();
    this.budget.members.delete(this);
  }

  /**
   * Whether an agent refused for its size still is: recounted at most once per recheck
   * interval, so a refused agent's recall costs no count but now and then.
   */
  private async stillTooLarge(key: string, agentId: string): Promise<number | undefined> {
    const refused = this.tooLarge.get(key);
    if (!refused) return undefined;
    if (Date.now() - refused.countedAt < (this.limits.refusalRecheckMs ?? REFUSAL_RECHECK_MS)) {
      return refused.size;
    }
    const size = await countVectors(this.store, agentId);
    if (size > this.maxVectors) {
      this.tooLarge.set(key, { size, countedAt: Date.now() });
      return size;
    }
    this.tooLarge.delete(key);
    return undefined;
  }

  private refuse(key: string, size: number): void {
    this.loaded.delete(key);
    this.tooLarge.set(key, { size, countedAt: Date.now() });
  }

  /** The `k` nearest of the agent's vectors of `model` at the query's dimensions to `query` (unit length). */
  async nearest(agentId: string, model: string, query: Float32Array, k: number): Promise<SemanticSearch> {
    const space: EmbeddingSpace = { model, dimensions: query.length };
    const key = `${agentId}\0${model}\0${query.length}`;
    const refused = await this.stillTooLarge(key, agentId);
    if (refused !== undefined) return this.refusal(refused);
    const l = this.loaded.get(key) ?? (await this.withinWait(this.load(key, agentId, space)))?.value;
    const size = this.tooLarge.get(key)?.size;
    if (size !== undefined) return this.refusal(size);
    if (l?.noRoom) {
      return {
        available: false,
        reason: `other agents' vector indexes being loaded fill this process's budget (MEMGATE_VECTOR_INDEX_MAX_VECTORS=${this.maxVectors}); recall is lexical until there is room`,
      };
    }
    if (!l) {
      const read = this.loading.get(key)?.index.size ?? 0;
      return {
        available: false,
        reason: `the agent's vector index is loading into memory (${read} vectors so far); recall is lexical until it is loaded`,
      };
    }
    const caughtUp = await this.withinWait(this.caughtUp(l, agentId, space));
    if (l.index.size > this.maxVectors) {
      this.refuse(key, l.index.size);
      return this.refusal(l.index.size);
    }
    l.lastUsed = Date.now();
    this.budget.makeRoom(l);
    return {
      available: true,
      neighbours: l.index.search(query, k),
      background: l.index.sampleSimilarities(query, BACKGROUND_SAMPLE),
      otherModel: l.otherModel.size,
      bad: l.bad.size,
      catchingUp: caughtUp === undefined,
    };
  }

  private refusal(size: number): SemanticSearch {
    return {
      available: false,
      reason: `the agent has ${size} vectors, more than this process may hold (MEMGATE_VECTOR_INDEX_MAX_VECTORS=${this.maxVectors})`,
    };
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

  private load(key: string, agentId: string, space: EmbeddingSpace): Promise<Loaded> {
    let pending = this.loading.get(key);
    if (!pending) {
      const index = new VectorIndex(space.dimensions);
      const done = (async () => {
        // The feed first: a change made while the records are read is read from it after.
        const reader = await FeedReader.start(this.store, agentId, {
          fenceDelayMs: this.limits.fenceDelayMs,
        });
        const l: Loaded = {
          index,
          reader,
          otherModel: new Set(),
          bad: new Set(),
          lastUsed: Date.now(),
        };
        for await (const page of agentVectors(this.store, agentId, LOAD_BATCH)) {
          for (const r of page) apply(l, r, space);
          if (l.index.size > this.maxVectors) {
            this.refuse(key, l.index.size);
            return l;
          }
          // Room is made as the load grows; a load that other loads in flight leave none for
          // stops, so that loads together never hold more than the budget. The next search
          // loads again.
          this.budget.makeRoom(l);
          if (this.budget.held > this.maxVectors) {
            l.noRoom = true;
            return l;
          }
        }
        this.loaded.set(key, l);
        this.budget.makeRoom(l);
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
  private caughtUp(l: Loaded, agentId: string, space: EmbeddingSpace): Promise<void> {
    if (l.queuedCatchUp) return l.queuedCatchUp;
    const before = l.catchingUp?.catch(() => undefined) ?? Promise.resolve();
    const next: Promise<void> = before.then(async () => {
      l.queuedCatchUp = undefined;
      l.catchingUp = next;
      try {
        await this.catchUp(l, space);
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

  private async catchUp(l: Loaded, space: EmbeddingSpace): Promise<void> {
    for (const r of await l.reader.next()) apply(l, r, space);
  }
}

/** A record's current state into the index: its usable vector of this space, or none. */
function apply(l: Loaded, r: VectorRecord, space: EmbeddingSpace): void {
  l.otherModel.delete(r._id);
  l.bad.delete(r._id);
  if (!r.vector) {
    l.index.remove(r._id);
    return;
  }
  if (!inSpace(r, space)) {
    l.index.remove(r._id);
    l.otherModel.add(r._id);
    return;
  }
  const vector = decodeVector(r.vector);
  if (vectorDefect(vector, space.dimensions)) {
    l.index.remove(r._id);
    l.bad.add(r._id);
    return;
  }
  l.index.upsert(r._id, vector);
}
