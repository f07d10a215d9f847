import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { Config } from '../core/config';
import { BACKGROUND_SAMPLE } from '../core/hybrid';
import { StackUnavailableError } from '../core/errors';
import { vectorDefect, type EmbeddingSpace } from '../core/vectorDefects';
import { VectorEngine } from '../vectorEngine/engine';
import type { Neighbour, PersistedAt } from '../vectorEngine/protocol';
import type { Store, VectorRecord } from './db';
import { FeedReader, type FeedPosition } from './vectorFeed';
import { agentVectors, countVectors, decodeVector, inSpace, onVectorsCleared } from './vectors';
import { saveNowOrWait } from '../core/indexSaves';
import { compactionDue } from '../core/vectorCompaction';
import { keepDirectory, persistedIds, persistedIndexes } from '../vectorEngine/persisted';

export type { Neighbour };

/**
 * The nearest-neighbour indexes a recall-serving process holds: one per agent and space, in
 * the process's vector engine (vectorEngine/), loaded on the agent's first semantic recall
 * and kept current from the feed of vector changes (store/vectors.ts), which any process may
 * write. A recall reads one counter and, when it moved, the feed pages since; it never scans
 * the agent's vectors. The store holds every vector: an index is derived from it, and never
 * the only copy of anything.
 *
 * Persisted (when the process is given a directory): an index is saved with the feed
 * position it reflects, once loaded and then, while it changes, `SAVE_DELAY_MS` after a change
 * at a pause in the process's searches (core/indexSaves.ts); a process that starts opens it
 * and reads only the changes since, instead of every vector of the agent. A removal deletes
 * what was persisted at once (vectorEngine/thread.ts, Erasure); the next save has none of it.
 *
 * Memory is bounded by one budget per process (VectorBudget), over every VectorIndexes in
 * it (a `memgate start` process has one, which its worker shares) and every load in flight,
 * enforced as each page of a load arrives and when it completes, whether or not a search
 * still waits for it: the least recently recalled agents' indexes are dropped to make room
 * (a recall whose index goes while it waits is lexical, and says so), and an agent with more
 * vectors than the whole budget is recalled lexically, said in its result, until a recount (at
 * most once per `REFUSAL_RECHECK_MS`) finds it has shrunk to fit.
 *
 * A load from the store reads every vector of the agent, so a search waits for it at most
 * `loadWaitMs`, then answers that the index is still loading while the load goes on: a
 * recall is then lexical and says so, instead of holding its caller past any client's
 * timeout. A catch-up is bounded the same way: past the wait, the search answers from the
 * index as it stands, saying so, and the catch-up goes on. That is safe for erasure: recall
 * reads every neighbour from the store before it returns it.
 */

/** Records per read while an index loads. */
const LOAD_BATCH = 2_000;
/**
 * Vectors per request to the engine while loading: the engine serves requests in order, so
 * a search that arrives during a load waits for at most one such batch (about 50 ms).
 */
const ENGINE_BATCH = 64;
/** How long after a change an index is saved again: saves are a whole file each. */
export const SAVE_DELAY_MS = 30_000;
/**
 * How often erasures are looked for in the indexes a process holds or persisted, whether or
 * not anyone recalls their agents: an erased vector leaves them within about this long.
 */
export const ERASURE_SWEEP_MS = 60_000;

/** The name of an agent's index of one embedding space, in this process. */
function indexKey(agentId: string, space: EmbeddingSpace): string {
  return `${agentId}\0${space.model}\0${space.dimensions}`;
}

interface Loaded {
  /** The engine's name for this index. */
  key: string;
  agentId: string;
  space: EmbeddingSpace;
  /** Vectors it holds. */
  size: number;
  /** Scrubs in its graph: it is built afresh once they pass a share of it (core/vectorCompaction.ts). */
  scrubs: number;
  /** Set while a build afresh from the store is under way to replace it. */
  compacting?: true;
  /** After a build afresh that was not swapped in: the scrubs at which to try again. */
  compactAgainAt?: number;
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
  /**
   * The latest catch-up that did not fail, and when it started (`performance.now()`): it read
   * the counter then, so it reflects every change acknowledged before that.
   */
  latestCatchUp?: { startedAt: number; done: Promise<void> };
  /** Set on a load stopped for want of room (VectorBudget): it was not kept. */
  noRoom?: true;
  /**
   * Set once dropped (for room, refused, its set closed): the engine holds it no longer, so
   * nothing more is sent for it, and a search that held it answers lexically.
   */
  dropped?: true;
  /** Where this process persists the index, when it is the one that saves it. */
  persisted?: PersistedAt;
  /** A save is due (a change since the last one). */
  saveTimer?: NodeJS.Timeout;
}

/**
 * What is persisted beside an index, besides its vectors: whose it is (`memgate verify` reads
 * it), where its feed stood, its skipped ids.
 */
export interface SavedMeta {
  database: string;
  agentId: string;
  position: FeedPosition;
  otherModel: string[];
  bad: string[];
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
      /** Neighbours default recall's filter rejected inside the search: none of them was read. */
      rejected: number;
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
  /** Where the process persists its indexes; unset, it keeps none (each start loads from the store). */
  persistDir?: string;
  /** How long after a change an index is saved again; SAVE_DELAY_MS unless set. */
  saveDelayMs?: number;
  /** How often erasures are swept for; ERASURE_SWEEP_MS unless set. */
  erasureSweepMs?: number;
}

/** Store timeouts a change number may stay unlogged before a reader fences it. */
const FENCE_AFTER_STORE_TIMEOUTS = 4;

/** The limits of a recall-serving process, from its configuration. */
export function vectorIndexLimitsOf(config: Config): VectorIndexLimits {
  return {
    maxVectors: config.vectorIndexMaxVectors,
    loadWaitMs: config.recallIndexWaitMs,
    fenceDelayMs: FENCE_AFTER_STORE_TIMEOUTS * config.storeTimeoutMs,
    persistDir: config.vectorIndexDir,
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
   * Drop the least recently used loaded indexes of every member, but those in `keep`, while
   * the total is over the budget. Whether `keep` itself fits is its caller's to judge.
   */
  makeRoom(...keep: Loaded[]): void {
    let total = this.held;
    if (total <= this.maxVectors) return;
    const candidates = [...this.members]
      .flatMap((m) => m.evictable(keep))
      .sort((a, b) => a.loaded.lastUsed - b.loaded.lastUsed);
    for (const c of candidates) {
      if (total <= this.maxVectors) break;
      c.drop();
      total -= c.loaded.size;
    }
  }
}

interface Loading {
  done: Promise<Loaded>;
  /** The index as far as it has been read: its size is the load's progress. */
  progress: { size: number };
}

/** Indexes this process persists: one VectorIndexes saves each (two in a process would race). */
const savedHere = new Set<string>();
let instances = 0;
let compactions = 0;

export class VectorIndexes {
  private readonly loaded = new Map<string, Loaded>();
  private readonly loading = new Map<string, Loading>();
  /** The progress of each build afresh in flight (compact). */
  private readonly compacting = new Set<{ size: number }>();
  /** Agents refused for their size: how many vectors they had, and when that was counted. */
  private readonly tooLarge = new Map<string, { size: number; countedAt: number }>();
  private readonly maxVectors: number;
  private readonly budget: VectorBudget;
  /** Started on first use: a process that never searches by meaning runs no engine thread. */
  private get engine(): VectorEngine {
    return VectorEngine.forProcess();
  }
  /** Distinguishes this instance's indexes from another's in the same engine. */
  private readonly instance = instances++;

  private readonly limits: VectorIndexLimits;

  constructor(
    private readonly store: Store,
    limits: VectorIndexLimits,
  ) {
    // One process keeps a directory (vectorEngine/persisted.ts, keepDirectory); another one
    // loads its indexes from the store, as if it persisted none.
    const dir = limits.persistDir;
    const keeps = dir === undefined || keepDirectory(dir);
    if (!keeps) {
      process.emitWarning(
        `${dir} (MEMGATE_VECTOR_INDEX_DIR) is kept by another running process: this one loads its vector indexes from the store and persists none; give it a directory of its own`,
        'MemgateWarning',
      );
    }
    this.limits = keeps ? limits : { ...limits, persistDir: undefined };
    this.maxVectors = limits.maxVectors;
    this.budget = VectorBudget.forProcess(limits.maxVectors);
    this.budget.members.add(this);
    this.stopListening = onVectorsCleared((agentId) => this.sweepErasures(agentId));
    this.stopWatchingEngine = VectorEngine.onStopped(() => this.forgetHeld());
    if (this.limits.persistDir !== undefined) {
      // The first one interval after start, not at it: a one-shot command (a CLI write) does not
      // pay for reading the directory, and a serving process has swept within the interval.
      this.sweepTimer = setInterval(() => {
        void this.sweepErasures().catch(() => undefined);
      }, limits.erasureSweepMs ?? ERASURE_SWEEP_MS);
      this.sweepTimer.unref();
    }
  }

  private readonly sweepTimer: NodeJS.Timeout | undefined;
  private readonly stopListening: () => void;
  private readonly stopWatchingEngine: () => void;
  /** Set by close: a load that ends after it keeps nothing. */
  private closed = false;

  /**
   * The engine's thread stopped, and every index it held with it: none is searched any more,
   * and the agent's next recall loads it into the next engine (from its file, if this process
   * saved one, else from the store).
   */
  private forgetHeld(): void {
    for (const [key, l] of [...this.loaded]) this.letGo(key, l);
  }

  /**
   * Apply the erasures no recall has brought yet (docs/invariants.md, Erased from derived
   * indexes): every index held catches up, which deletes what was persisted of one that lost
   * a vector; and an index persisted in the directory but not held here, whose feed has since
   * cleared a vector it holds, is deleted (its agent's next recall loads from the store). One
   * agent's, or every agent's.
   */
  async sweepErasures(agentId?: string): Promise<void> {
    for (const [key, l] of [...this.loaded]) {
      if (agentId !== undefined && l.agentId !== agentId) continue;
      await this.caughtUp(l);
      // Built afresh meanwhile (compact): the index that replaced it takes the erasure too.
      const now = this.loaded.get(key);
      if (now && now !== l) await this.caughtUp(now);
    }
    const dir = this.limits.persistDir;
    if (dir === undefined) return;
    const held = new Set([...this.loaded.values()].flatMap((l) => (l.persisted ? [l.persisted.base] : [])));
    for (const { at, header } of persistedIndexes(dir)) {
      if (held.has(at.base) || savedHere.has(at.base)) continue;
      // A state that does not read whole never opens, and may hold an erased vector: it goes.
      if (!header) {
        await this.engine.request({ op: 'unlink', at });
        continue;
      }
      const meta = header.meta as Partial<SavedMeta> | null;
      if (meta?.database !== this.store.db.databaseName || !meta.agentId || !meta.position) continue;
      if (agentId !== undefined && meta.agentId !== agentId) continue;
      const persisted = persistedIds(at);
      if (!persisted) {
        await this.engine.request({ op: 'unlink', at });
        continue;
      }
      const ids = new Set(persisted);
      const reader = await FeedReader.resume(
        this.store,
        meta.agentId,
        { fenceDelayMs: this.limits.fenceDelayMs },
        meta.position,
      );
      let erased = !reader;
      await reader?.next(async (records) => {
        erased = records.some((r) => ids.has(r._id) && !r.vector);
      });
      if (erased) await this.engine.request({ op: 'unlink', at });
    }
  }

  /** Vectors held now, over all agents. */
  get size(): number {
    let n = 0;
    for (const l of this.loaded.values()) n += l.size;
    return n;
  }

  /** Vectors held and read so far by loads in flight: what counts against the budget. */
  get held(): number {
    let n = this.size;
    for (const l of this.loading.values()) n += l.progress.size;
    for (const progress of this.compacting) n += progress.size;
    return n;
  }

  /** This instance's loaded indexes the budget may drop, but those in `keep`. */
  evictable(keep: readonly Loaded[]): { loaded: Loaded; drop: () => void }[] {
    return [...this.loaded]
      .filter(([, l]) => !keep.includes(l))
      .map(([key, l]) => ({ loaded: l, drop: () => this.drop(key, l) }));
  }

  private drop(key: string, l: Loaded): void {
    this.letGo(key, l);
    void this.engine.request({ op: 'drop', key: l.key }).catch(() => undefined);
  }

  /** No longer held here: nothing more is sent for it, and its file is the erasure sweep's again. */
  private letGo(key: string, l: Loaded): void {
    this.loaded.delete(key);
    l.dropped = true;
    clearTimeout(l.saveTimer);
    if (l.persisted) savedHere.delete(l.persisted.base);
  }

  /**
   * Leave the process's budget: this instance's indexes no longer count (its client closed).
   * Those with unsaved changes are saved first.
   */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweepTimer);
    this.stopListening();
    this.stopWatchingEngine();
    const open = [...this.loaded];
    this.loaded.clear();
    this.budget.members.delete(this);
    await Promise.all(
      open.map(async ([key, l]) => {
        if (l.saveTimer) await this.save(l).catch(() => undefined);
        this.drop(key, l);
      }),
    );
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
    const l = this.loaded.get(key);
    if (l) this.drop(key, l);
    this.tooLarge.set(key, { size, countedAt: Date.now() });
  }

  /**
   * Start loading the agent's index of `space`, or catching it up, now: a recall calls it
   * before it embeds its query, so that the index is ready when the vector is. A failure is
   * left to the search that follows, which meets it again.
   */
  prepare(agentId: string, space: EmbeddingSpace): void {
    const key = indexKey(agentId, space);
    if (this.tooLarge.has(key)) return;
    const l = this.loaded.get(key);
    (l ? this.caughtUp(l) : this.load(key, agentId, space)).catch(() => undefined);
  }

  /**
   * The `k` nearest of the agent's vectors of `model` at the query's dimensions to `query`
   * (unit length). With `defaultRecallAt`, only those default recall takes at that time
   * (core/recall.ts, stateInDefaultRecall), judged inside the search, which widens for the
   * rest of `k` only while fewer than `enough` passed. With `untilLoaded` (a
   * caller no one waits for: the night), the search waits for the load and the catch-up
   * however long they take, not `loadWaitMs`.
   */
  async nearest(
    agentId: string,
    model: string,
    query: Float32Array,
    k: number,
    opts: { defaultRecallAt?: number; enough?: number; since?: number; untilLoaded?: true } = {},
  ): Promise<SemanticSearch> {
    const space: EmbeddingSpace = { model, dimensions: query.length };
    const key = indexKey(agentId, space);
    const refused = await this.stillTooLarge(key, agentId);
    if (refused !== undefined) return this.refusal(refused);
    const wait = opts.untilLoaded ? undefined : this.limits.loadWaitMs;
    let l = this.loaded.get(key) ?? (await this.withinWait(this.load(key, agentId, space), wait))?.value;
    const size = this.tooLarge.get(key)?.size;
    if (size !== undefined) return this.refusal(size);
    if (l?.noRoom) {
      return {
        available: false,
        reason: `other agents' vector indexes being loaded fill this process's budget (MEMGATE_VECTOR_INDEX_MAX_VECTORS=${this.maxVectors}); recall is lexical until there is room`,
      };
    }
    if (!l) {
      const read = this.loading.get(key)?.progress.size ?? 0;
      return {
        available: false,
        reason: `the agent's vector index is loading into memory (${read} vectors so far); recall is lexical until it is loaded`,
      };
    }
    let caughtUp = await this.withinWait(this.caughtUp(l, opts.since), wait);
    const successor = this.loaded.get(key);
    if (l.dropped && successor) {
      // Built afresh meanwhile (compact), or loaded again by another recall: that one answers.
      l = successor;
      caughtUp = await this.withinWait(this.caughtUp(l, opts.since), wait);
    }
    if (l.size > this.maxVectors) {
      this.refuse(key, l.size);
      return this.refusal(l.size);
    }
    // Dropped for another agent's index while this waited: the engine holds it no longer.
    if (l.dropped) {
      return {
        available: false,
        reason: `the agent's vector index was dropped while this recall waited, to make room for other agents' (MEMGATE_VECTOR_INDEX_MAX_VECTORS=${this.maxVectors}); recall is lexical until it is loaded again`,
      };
    }
    l.lastUsed = Date.now();
    this.budget.makeRoom(l);
    const found = await this.engine.request({
      op: 'search',
      key: l.key,
      // A copy: the request transfers its buffer, and the caller keeps its vector.
      query: query.slice(),
      k,
      ...(opts.defaultRecallAt === undefined ? {} : { defaultRecallAt: opts.defaultRecallAt }),
      ...(opts.enough === undefined ? {} : { enough: opts.enough }),
      sample: BACKGROUND_SAMPLE,
    });
    return {
      available: true,
      neighbours: found.neighbours,
      background: found.background,
      otherModel: l.otherModel.size,
      bad: l.bad.size,
      rejected: found.rejected,
      catchingUp: caughtUp === undefined,
    };
  }

  private refusal(size: number): SemanticSearch {
    return {
      available: false,
      reason: `the agent has ${size} vectors, more than this process may hold (MEMGATE_VECTOR_INDEX_MAX_VECTORS=${this.maxVectors})`,
    };
  }

  /** What `work` settles to, or undefined once it outlasts `wait` (it goes on); unset, no bound. */
  private async withinWait<T>(work: Promise<T>, wait: number | undefined): Promise<{ value: T } | undefined> {
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

  /** Where this process persists the agent's index of `space`, if it persists indexes. */
  private persistedAt(agentId: string, space: EmbeddingSpace): PersistedAt | undefined {
    const dir = this.limits.persistDir;
    if (dir === undefined) return undefined;
    const name = createHash('sha256')
      .update(`${this.store.db.databaseName}\0${agentId}\0${space.model}\0${space.dimensions}`)
      .digest('base64url')
      .slice(0, 32);
    return { base: join(dir, name) };
  }

  private load(key: string, agentId: string, space: EmbeddingSpace): Promise<Loaded> {
    let pending = this.loading.get(key);
    if (!pending) {
      const progress = { size: 0 };
      const done = (async () => {
        const engine = this.engine;
        const at = this.persistedAt(agentId, space);
        const saves = at !== undefined && !savedHere.has(at.base);
        if (saves) savedHere.add(at.base);
        const engineKey = `${this.instance}\0${key}`;
        let l: Loaded & { opened?: true };
        try {
          l =
            (at && (await this.open(engineKey, agentId, space, at))) ??
            (await this.loadFromStore(engineKey, key, agentId, space, progress));
          // Stopped after its last answer: what it loaded is gone (forgetHeld ran before this was held).
          if (engine.stopped)
            throw new StackUnavailableError('the vector engine thread stopped during the load');
        } catch (err) {
          // Failed as it read (the store gone): it holds nothing. Its file is the erasure
          // sweep's again, and what the engine had begun to hold goes, out of the budget.
          if (saves) savedHere.delete(at.base);
          void this.engine.request({ op: 'drop', key: engineKey }).catch(() => undefined);
          throw err;
        }
        if (saves) l.persisted = at;
        // Closed meanwhile: it would be held outside the budget, which counts this set no more.
        if (this.closed) l.dropped = true;
        if (l.noRoom || this.tooLarge.has(key) || l.dropped) {
          if (saves) savedHere.delete(at.base);
          void this.engine.request({ op: 'drop', key: engineKey }).catch(() => undefined);
          return l;
        }
        // Counted as held from here on, no longer as read by a load.
        progress.size = 0;
        this.loaded.set(key, l);
        this.budget.makeRoom(l);
        if (compactionDue(l)) this.compact(l);
        // Saved once caught up, so that the position it is saved with is past what the load read.
        if (l.persisted && !l.opened) {
          await this.caughtUp(l).catch(() => undefined);
          await this.save(l);
        }
        return l;
      })().finally(() => this.loading.delete(key));
      // A load no search waits for any more may still fail: the next search loads again, and
      // a failure it waits for reaches it.
      done.catch(() => undefined);
      pending = { done, progress };
      this.loading.set(key, pending);
    }
    return pending.done;
  }

  /** The index as this process persisted it, going on from its feed position; none if there is none to trust. */
  private async open(
    engineKey: string,
    agentId: string,
    space: EmbeddingSpace,
    at: PersistedAt,
  ): Promise<(Loaded & { opened: true }) | undefined> {
    const opened = await this.engine.request({
      op: 'open',
      key: engineKey,
      dimensions: space.dimensions,
      at,
    });
    if (!opened) return undefined;
    const meta = opened.meta as SavedMeta;
    const reader = await FeedReader.resume(
      this.store,
      agentId,
      { fenceDelayMs: this.limits.fenceDelayMs },
      meta.position,
    );
    if (!reader) {
      // Saved from another store of the same name: not derived from this one.
      await this.engine.request({ op: 'unlink', at });
      return undefined;
    }
    return {
      key: engineKey,
      agentId,
      space,
      size: opened.size,
      scrubs: opened.scrubs,
      reader,
      otherModel: new Set(meta.otherModel),
      bad: new Set(meta.bad),
      lastUsed: Date.now(),
      opened: true,
    };
  }

  /** With `replacing` (a rebuild beside it, compact): kept while this loads, and the load stops once it is gone. */
  private async loadFromStore(
    engineKey: string,
    key: string,
    agentId: string,
    space: EmbeddingSpace,
    progress: { size: number },
    replacing?: Loaded,
  ): Promise<Loaded & { opened?: true }> {
    await this.engine.request({ op: 'create', key: engineKey, dimensions: space.dimensions });
    // The feed first: a change made while the records are read is read from it after.
    const reader = await FeedReader.start(this.store, agentId, { fenceDelayMs: this.limits.fenceDelayMs });
    const l: Loaded = {
      key: engineKey,
      agentId,
      space,
      size: 0,
      scrubs: 0,
      reader,
      otherModel: new Set(),
      bad: new Set(),
      lastUsed: Date.now(),
    };
    for await (const page of agentVectors(this.store, agentId, LOAD_BATCH)) {
      for (let i = 0; i < page.length; i += ENGINE_BATCH) {
        await this.apply(l, page.slice(i, i + ENGINE_BATCH));
        progress.size = l.size;
      }
      reader.loaded(page);
      if (l.size > this.maxVectors) {
        this.refuse(key, l.size);
        return l;
      }
      // Room is made as the load grows; a load that other loads in flight leave none for
      // stops, so that loads together never hold more than the budget. The next search
      // loads again.
      this.budget.makeRoom(l, ...(replacing ? [replacing] : []));
      if (this.budget.held > this.maxVectors || replacing?.dropped) {
        l.noRoom = true;
        return l;
      }
    }
    return l;
  }

  /** Records' current states into the index: each its usable vector of this space, or none. */
  private async apply(l: Loaded, records: readonly VectorRecord[]): Promise<void> {
    const { space } = l;
    const upserts: { id: string; state?: VectorRecord['recall'] }[] = [];
    const vectors: Float32Array[] = [];
    const removals: string[] = [];
    for (const r of records) {
      l.otherModel.delete(r._id);
      l.bad.delete(r._id);
      if (!r.vector) {
        removals.push(r._id);
        continue;
      }
      if (!inSpace(r, space)) {
        removals.push(r._id);
        l.otherModel.add(r._id);
        continue;
      }
      const vector = decodeVector(r.vector);
      if (vectorDefect(vector, space.dimensions)) {
        removals.push(r._id);
        l.bad.add(r._id);
        continue;
      }
      upserts.push(r.recall ? { id: r._id, state: r.recall } : { id: r._id });
      vectors.push(vector);
    }
    // A dropped index takes nothing more: a later load reads the agent's vectors anew.
    if ((upserts.length === 0 && removals.length === 0) || l.dropped) return;
    const matrix = new Float32Array(vectors.length * space.dimensions);
    vectors.forEach((v, i) => matrix.set(v, i * space.dimensions));
    const applied = await this.engine.request({
      op: 'apply',
      key: l.key,
      upserts,
      vectors: matrix,
      removals,
    });
    l.size = applied.size;
    l.scrubs = applied.scrubs;
    if (l.persisted) this.scheduleSave(l);
    if (compactionDue(l)) this.compact(l);
  }

  /**
   * Build the agent's index afresh from the store beside the one that serves, and swap it in
   * once caught up: its graph has no scrubs (core/vectorCompaction.ts). Searches go on in the
   * old one meanwhile; the build counts against the budget as a load does, and the budget
   * keeps the old one for it. With no room for both, the old one goes instead, what was
   * persisted of it first: the agent's next recall loads it from the store (lexical
   * meanwhile, and saying so). A build that fails or finds its index gone (dropped, refused,
   * closed) is dropped, and is tried again once the scrubs have doubled.
   */
  private compact(l: Loaded): void {
    const key = indexKey(l.agentId, l.space);
    if (l.compacting || l.dropped || this.loaded.get(key) !== l) return;
    if (l.scrubs < (l.compactAgainAt ?? 0)) return;
    if (this.budget.held + l.size > this.maxVectors) {
      if (l.persisted) void this.engine.request({ op: 'unlink', at: l.persisted }).catch(() => undefined);
      this.drop(key, l);
      return;
    }
    l.compacting = true;
    const progress = { size: 0 };
    this.compacting.add(progress);
    const engineKey = `${this.instance}\0${key}\0${++compactions}`;
    const stillWanted = (fresh: Loaded) =>
      !fresh.noRoom && !l.dropped && this.loaded.get(key) === l && !this.tooLarge.has(key);
    void (async () => {
      const fresh = await this.loadFromStore(engineKey, key, l.agentId, l.space, progress, l);
      if (stillWanted(fresh)) await this.caughtUp(fresh);
      if (!stillWanted(fresh)) throw new Error('not swapped in');
      fresh.persisted = l.persisted;
      fresh.lastUsed = l.lastUsed;
      clearTimeout(l.saveTimer);
      // Applies and searches on the old one stop here (apply, nearest), and what it persisted
      // goes: a removal from here on reaches the new one, which has no file yet.
      l.dropped = true;
      progress.size = 0;
      this.loaded.set(key, fresh);
      if (l.persisted) void this.engine.request({ op: 'unlink', at: l.persisted }).catch(() => undefined);
      void this.engine.request({ op: 'drop', key: l.key }).catch(() => undefined);
      await this.caughtUp(fresh);
      if (fresh.persisted) await this.save(fresh);
    })()
      .catch(() => {
        if (this.loaded.get(key)?.key === engineKey) return;
        void this.engine.request({ op: 'drop', key: engineKey }).catch(() => undefined);
        l.compactAgainAt = 2 * l.scrubs;
      })
      .finally(() => {
        l.compacting = undefined;
        this.compacting.delete(progress);
      });
  }

  /**
   * A save `saveDelayMs` after a change, at a pause in the process's searches: it holds the
   * engine's thread, which every index of the process shares (core/indexSaves.ts).
   */
  private scheduleSave(l: Loaded): void {
    if (l.saveTimer) return;
    const delay = this.limits.saveDelayMs ?? SAVE_DELAY_MS;
    const dueAt = performance.now() + delay;
    const attempt = (wait: number) => {
      l.saveTimer = setTimeout(() => {
        const { lastSearchAt } = this.engine;
        const answer = saveNowOrWait({
          dueAt,
          now: performance.now(),
          ...(lastSearchAt === undefined ? {} : { lastSearchAt }),
        });
        if (answer === 'save') void this.save(l).catch(() => undefined);
        else attempt(answer);
      }, wait);
      l.saveTimer.unref();
    };
    attempt(delay);
  }

  /**
   * Persist the index with the feed position it reflects: taken when no catch-up runs, and
   * sent before any later change, since the engine serves requests in order.
   */
  private async save(l: Loaded): Promise<void> {
    clearTimeout(l.saveTimer);
    l.saveTimer = undefined;
    const at = l.persisted;
    if (!at) return;
    while (l.catchingUp || l.queuedCatchUp) await (l.queuedCatchUp ?? l.catchingUp)!.catch(() => undefined);
    // Dropped meanwhile: nothing is held to save, and the file may be another load's now.
    if (l.dropped) return;
    const meta: SavedMeta = {
      database: this.store.db.databaseName,
      agentId: l.agentId,
      position: l.reader.position,
      otherModel: [...l.otherModel],
      bad: [...l.bad],
    };
    await this.engine.request({ op: 'save', key: l.key, at, meta });
  }

  /** A catch-up that starts after this call: the one queued, or a new one. */
  /**
   * A catch-up that reflects every change acknowledged before `since` (`performance.now()`),
   * or before now: one that started since serves (`prepare` starts one while a query embeds).
   */
  private caughtUp(l: Loaded, since?: number): Promise<void> {
    const latest = l.latestCatchUp;
    if (since !== undefined && latest && latest.startedAt >= since) return latest.done;
    if (l.queuedCatchUp) return l.queuedCatchUp;
    const before = l.catchingUp?.catch(() => undefined) ?? Promise.resolve();
    const next: Promise<void> = before.then(async () => {
      l.queuedCatchUp = undefined;
      l.catchingUp = next;
      const started = { startedAt: performance.now(), done: next };
      l.latestCatchUp = started;
      try {
        await this.catchUp(l);
      } catch (err) {
        if (l.latestCatchUp === started) l.latestCatchUp = undefined;
        throw err;
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

  private async catchUp(l: Loaded): Promise<void> {
    await l.reader.next(async (records) => {
      for (let i = 0; i < records.length; i += ENGINE_BATCH)
        await this.apply(l, records.slice(i, i + ENGINE_BATCH));
    });
  }
}
