import { asBackground } from './workClass';
import { randomUUID } from 'node:crypto';
import type { MemoryPolicy } from '../core/entry';
import { backgroundOf, foundByMeaning, semanticDepth, semanticShare, type Background } from '../core/hybrid';
import {
  assertKeptByQueryLog,
  couldEnterTopK,
  expectedTopK,
  inDefaultRecall,
  oldestKeptAsOf,
  POSTINGS_BUDGET,
  queryTermsOf,
  rankHybrid,
  recallHit,
  rankScored,
  scoreLexicalInTurns,
  type Candidate,
  type HitView,
  type RecallHit,
  type RecallRequest,
  type Scored,
  withinRankedBudget,
} from '../core/recall';
import { allWithin } from '../core/allWithin';
import { CALL_FAN_OUT, type QueryLogRecord, type Store, type Tombstone } from './db';
import { findCandidates, logQuery, relogHits } from './entries';
import { erasureMark } from './erasure';
import { termKey } from './terms';
import { hitViewReader, locateEntries } from './tiers';
import { previousRunAsOf } from './runs';
import type { Neighbour, SemanticSearch, VectorIndexes } from './vectorIndexes';
import { DAY_MS, salienceAt } from '../core/salience';

export interface MissingEvidence {
  tombstoneId: string;
  deletedAt: number;
  reason: string;
  /** The summary standing in for the deleted entry, and whether it lost facts. */
  standIn?: Tombstone['standIn'];
  matchedTerms: string[];
}

/** An entry that superseded a hit: found by the supersession walk, not by the query. */
export type Successor = Omit<RecallHit, 'foundBy' | 'similarity'>;

/**
 * How this recall retrieved: hybrid (lexical and semantic, fused), or lexical only, and then
 * why (no embeddings endpoint, the endpoint failed, the agent's index is too large or still
 * loading), so a caller never mistakes a lexical-only answer for a semantic one.
 */
export type Retrieval =
  | {
      mode: 'hybrid';
      model: string;
      /**
       * Entries whose vector is of another model, or of the same at other dimensions: found
       * lexically only until `memgate reembed`.
       */
      otherModelVectors: number;
      /** Entries whose vector is unusable (not finite, zero, of the wrong length): found lexically only. */
      badVectors: number;
      /**
       * Nearest neighbours default recall's filter (tier, gate, activity, expiry) rejected inside
       * the search, from the state kept beside their vectors: none of them was read.
       */
      filteredNeighbours: number;
      /** Time to embed the query, apart from the recall itself. */
      queryEmbeddingMs: number;
      /**
       * The agent's index was still reading vector changes when the recall stopped waiting
       * (MEMGATE_RECALL_INDEX_WAIT_MS): entries embedded since may be found by words only.
       */
      indexCatchingUp: boolean;
    }
  | { mode: 'lexical'; reason: string };

/** What a semantic recall brings: the query's vector, or why there is none. */
export type SemanticQuery =
  | {
      indexes: VectorIndexes;
      model: string;
      vector: Float32Array;
      /** The reference passages' vectors, of the same model (core/referencePassages.ts). */
      reference: readonly Float32Array[];
      /** Time to embed the query (and, once per process, the reference passages). */
      embeddingMs: number;
      /**
       * When the recall began (`performance.now()`): the index must reflect every change
       * acknowledged before it, and a catch-up that started since (while the query embedded)
       * does.
       */
      since: number;
    }
  | { unavailable: string };

export interface RecallResult {
  hits: RecallHit[];
  retrieval: Retrieval;
  /**
   * Deep recall only: deleted entries whose terms match the query
   * (docs/invariants.md, Missing evidence reported).
   */
  missing?: MissingEvidence[];
  asOf: number;
  /**
   * What was ranked: entries that shared a term with the query and passed the tier filters,
   * and the nearest neighbours that passed them too.
   */
  candidates: number;
  /**
   * Candidates read but not ranked: their text passed the most one recall ranks
   * (core/recall.ts, MAX_RANKED_CHARS). Absent when every candidate read was ranked.
   */
  candidatesOverBudget?: number;
  /**
   * Deep recall only: the entries that superseded a hit, each chain followed to its current
   * fact, whether or not they match the query (the supersession walk).
   */
  successors?: Successor[];
}

/** Longest supersession chain deep recall follows (a guard against a corrupt cycle). */
const MAX_CHAIN = 32;

/**
 * Entries the supersession walk reads in all, over every hit's chain: k hits each at the end
 * of a long chain would otherwise cost k × MAX_CHAIN reads. A chain the walk stops short of
 * still shows where it goes on: the last successor's `supersededBy`.
 */
const MAX_SUCCESSOR_READS = 64;

async function supersessionSuccessors(
  store: Store,
  agentId: string,
  hits: RecallHit[],
  now: number,
  policy: MemoryPolicy,
): Promise<Successor[]> {
  const seen = new Set<string>();
  const successors: Successor[] = [];
  let frontier = hits.map((h) => h.supersededBy).filter((id): id is string => id !== undefined);
  for (let depth = 0; frontier.length > 0 && depth < MAX_CHAIN && seen.size < MAX_SUCCESSOR_READS; depth++) {
    // One step of every chain at once, in the order of the hits.
    const step = [...new Set(frontier)]
      .filter((id) => !seen.has(id))
      .slice(0, MAX_SUCCESSOR_READS - seen.size);
    for (const id of step) seen.add(id);
    const located = await locateEntries(store, agentId, step);
    frontier = [];
    for (const f of step.map((id) => located.get(id))) {
      if (!f) continue;
      const { foundBy: _walk, ...hit } = recallHit(f, now, policy.halfLifeMs, 0, 'lexical');
      successors.push(hit);
      if (hit.supersededBy) frontier.push(hit.supersededBy);
    }
  }
  return successors;
}

/** Tombstones holding any of the terms: one equality read per term, merged by id. */
async function tombstonesMatching(store: Store, agentId: string, queryTerms: string[]): Promise<Tombstone[]> {
  const perTerm = await allWithin(queryTerms, CALL_FAN_OUT, (term) =>
    store.tombstones
      .find({ termKeys: termKey(agentId, term) })
      .limit(POSTINGS_BUDGET.deep)
      .toArray(),
  );
  return [
    ...new Map(perTerm.flat().flatMap((t) => (t.agentId === agentId ? [[t._id, t] as const] : []))).values(),
  ];
}

/** Neighbours read per round, side by side: one read by `_id` per tier (store/tiers.ts, `hitViewReader`). */
const NEIGHBOUR_READS = 16;

/** A neighbour the search found, with the most it can score before it is read. */
interface Unread extends Neighbour {
  bound: number;
}

/**
 * What the search arm brings: the neighbours that stand out of the query's background, best
 * bound first. When the lexical arm is still reading, reads of the first of them start at
 * once, beside it rather than after it (docs/recall.md, The engine in memgate): a read the
 * lexical candidates turn out to hold is one point read wasted; a read recall waits for
 * after the lexical arm costs its whole latency.
 */
interface SemanticArm {
  query: Extract<SemanticQuery, { vector: Float32Array }>;
  search: Extract<SemanticSearch, { available: true }>;
  background: Background;
  neighbours: Neighbour[];
  /** The neighbours, nearest first: the first that passes the filter keeps a place in the top k. */
  nearestFirst: Neighbour[];
  unread: Unread[];
  read(n: Neighbour): Promise<Candidate<HitView> | undefined>;
}

function semanticArm(
  store: Store,
  req: RecallRequest,
  now: number,
  semantic: Extract<SemanticQuery, { vector: Float32Array }>,
  search: Extract<SemanticSearch, { available: true }>,
  halfLifeMs: number,
  prefetch: boolean,
): SemanticArm {
  const background = backgroundOf([
    ...search.background,
    ...semantic.reference.map((r) => cosine(semantic.vector, r)),
  ])!;
  const neighbours = search.neighbours.filter((n) => foundByMeaning(n.similarity, background));
  const unread = neighbours
    .map((n) => ({
      ...n,
      bound:
        semanticShare(n.similarity, background) * (n.salience ? salienceAt(n.salience, now, halfLifeMs) : 1),
    }))
    .sort((a, b) => b.bound - a.bound);
  const reads = new Map<string, Promise<Candidate<HitView> | undefined>>();
  const views = hitViewReader(store, req.agentId);
  const read = ({ id, tier }: Neighbour) => {
    let found = reads.get(id);
    if (!found) {
      found = req.deep
        ? views.locate(id, tier)
        : views
            .find('hot', id)
            .then((entry) =>
              entry && inDefaultRecall(entry, now) ? { entry, tier: 'hot' as const } : undefined,
            );
      // A read recall never waits for (the lexical arm held the entry) must not go unhandled.
      found.catch(() => undefined);
      reads.set(id, found);
    }
    return found;
  };
  const nearestFirst = [...neighbours].sort((a, b) => b.similarity - a.similarity);
  if (prefetch) {
    for (const n of [...nearestFirst.slice(0, 1), ...unread.slice(0, Math.min(req.k, NEIGHBOUR_READS))])
      void read(n);
  }
  return { query: semantic, search, background, neighbours, nearestFirst, unread, read };
}

/**
 * The semantic list: the nearest neighbours that pass the same tier filter as lexical
 * candidates (default recall: hot, active, unexpired, above the gate), at most `depth`. A
 * neighbour the lexical candidates hold costs nothing; any other is read by `_id` only while
 * it could still enter the top k, the most it could score first: its semantic share (it
 * shares no word with the query, or it would be a lexical candidate) times its salience now,
 * from the state kept beside its vector (1 where none is). So a recall reads the neighbours
 * that can change its answer, not every one that is near.
 */
async function semanticRanking(
  arm: SemanticArm,
  now: number,
  lexical: readonly Scored[] & { ceiling: number },
  opts: { k: number; depth: number; background: Background; halfLifeMs: number },
): Promise<{ candidate: Candidate<HitView>; similarity: number }[]> {
  const known = new Map(lexical.map((s) => [s.candidate.entry._id, s.candidate]));
  const ranked: { candidate: Candidate<HitView>; similarity: number }[] = [];
  for (const n of arm.neighbours) {
    const c = known.get(n.id);
    if (c && ranked.length < opts.depth) ranked.push({ candidate: c, similarity: n.similarity });
  }
  // The nearest keeps a place whatever it scores (core/hybrid.ts, placeNearest), so it is
  // read first; one the read rejects hands the place to the next nearest.
  const tried = new Set<string>();
  for (const n of arm.nearestFirst) {
    if (known.has(n.id) || ranked.length >= opts.depth) break;
    tried.add(n.id);
    const candidate = await arm.read(n);
    if (candidate) {
      ranked.push({ candidate, similarity: n.similarity });
      break;
    }
  }
  const unread = arm.unread.filter((n) => !known.has(n.id) && !tried.has(n.id));
  for (let i = 0; i < unread.length && ranked.length < opts.depth;) {
    const hits = rankHybrid(lexical, ranked, { now, ...opts });
    const round: Unread[] = [];
    // Short of k hits, as many as are missing (each may still fail the filter); then those
    // that could still enter the top k.
    const wanted = hits.length < opts.k ? Math.min(NEIGHBOUR_READS, opts.k - hits.length) : NEIGHBOUR_READS;
    while (i < unread.length && round.length < wanted && couldEnterTopK(hits, opts.k, unread[i]!.bound))
      round.push(unread[i++]!);
    if (round.length === 0) break;
    const found = await Promise.all(round.map((n) => arm.read(n)));
    round.forEach((n, j) => {
      const candidate = found[j];
      if (candidate && ranked.length < opts.depth) ranked.push({ candidate, similarity: n.similarity });
    });
  }
  return ranked;
}

/** Of unit vectors, as the embedder returns them. */
function cosine(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}

/** What the query log keeps of a recall's hits: their ids, and those found by meaning. */
function loggedHits(
  hits: readonly Pick<RecallHit, 'id' | 'foundBy'>[],
): Pick<QueryLogRecord, 'hitIds' | 'meaningIds'> {
  return {
    hitIds: hits.map((h) => h.id),
    meaningIds: hits.filter((h) => h.foundBy !== 'lexical').map((h) => h.id),
  };
}

function sameHits(
  a: Pick<QueryLogRecord, 'hitIds' | 'meaningIds'>,
  b: Pick<QueryLogRecord, 'hitIds' | 'meaningIds'>,
): boolean {
  const same = (x: readonly string[] = [], y: readonly string[] = []) =>
    x.length === y.length && x.every((id, i) => id === y[i]);
  return same(a.hitIds, b.hitIds) && same(a.meaningIds, b.meaningIds);
}

/**
 * The hits recall expects before it reads a neighbour: the lexical candidates fused with the
 * neighbours they hold, and each unread neighbour at its bound (core/recall.ts, expectedTopK).
 */
function expectedHits(
  arm: SemanticArm,
  now: number,
  lexical: readonly Scored[] & { ceiling: number },
  opts: { k: number; background: Background; halfLifeMs: number },
): Pick<RecallHit, 'id' | 'foundBy'>[] {
  const known = new Map(lexical.map((s) => [s.candidate.entry._id, s.candidate]));
  const held = arm.neighbours.flatMap((n) => {
    const candidate = known.get(n.id);
    return candidate ? [{ candidate, similarity: n.similarity }] : [];
  });
  return expectedTopK(
    rankHybrid(lexical, held, { now, ...opts }),
    arm.unread.filter((n) => !known.has(n.id)),
    opts.k,
    arm.nearestFirst[0]?.id,
  );
}

function missingEvidence(t: Tombstone, queryTerms: readonly string[]): MissingEvidence {
  const m: MissingEvidence = {
    tombstoneId: t._id,
    deletedAt: t.deletedAt,
    reason: t.reason,
    matchedTerms: t.terms.filter((x) => queryTerms.includes(x)),
  };
  if (t.standIn) m.standIn = t.standIn;
  return m;
}

/**
 * A recall whose `asOf` is older than the agent's query log keeps is refused before anything
 * is read or logged (core/recall.ts `oldestKeptAsOf`). One within the retention of this
 * process's clock is kept by every night not ahead of it, so only a recall further back
 * reads when the agent's last night ran.
 */
export async function assertAsOfKept(
  store: Store,
  req: RecallRequest,
  queryLogRetentionDays: number,
  now: number,
): Promise<void> {
  if (req.asOf === undefined || req.asOf >= now - queryLogRetentionDays * DAY_MS) return;
  const lastNight = await previousRunAsOf(store, Number.MAX_SAFE_INTEGER, {
    kind: 'agent',
    agentId: req.agentId,
  });
  if (lastNight === undefined) return;
  assertKeptByQueryLog(req.asOf, oldestKeptAsOf(lastNight, queryLogRetentionDays), queryLogRetentionDays);
}

/**
 * A direct, indexed read (recall does not go through Temporal). It appends to the query log
 * and changes nothing else (docs/invariants.md, Read-only recall). With a query vector, the
 * agent's nearest neighbours join the lexical candidates (hybrid); without one, recall is
 * lexical and its result says why. The lexical reads do not wait for the query's embedding.
 */
export function recall(
  store: Store,
  req: RecallRequest,
  policy: MemoryPolicy,
  semantic: Promise<SemanticQuery>,
): Promise<RecallResult> {
  // A deep recall reads both tiers and up to twice the postings, for a caller who asked for
  // everything: it yields the store to recalls and writes that read a handful.
  return req.deep
    ? asBackground(() => recallNow(store, req, policy, semantic))
    : recallNow(store, req, policy, semantic);
}

async function recallNow(
  store: Store,
  req: RecallRequest,
  policy: MemoryPolicy,
  semantic: Promise<SemanticQuery>,
): Promise<RecallResult> {
  const now = req.asOf ?? Date.now();
  const queryTerms = queryTermsOf(req.query);
  const logId = randomUUID();
  // Before any entry is read: what an erasure racing this recall would change (logQuery).
  const before = await erasureMark(store, req.agentId);
  let lexicalRead = false;
  const [{ ranked: candidates, overBudget }, stones, arm] = await Promise.all([
    findCandidates(store, { agentId: req.agentId, terms: queryTerms, now, deep: req.deep }).then((found) => {
      lexicalRead = true;
      return withinRankedBudget(found);
    }),
    req.deep ? tombstonesMatching(store, req.agentId, queryTerms) : [],
    // The words are read while the query embeds; the meaning once it has.
    semantic.then(async (query): Promise<SemanticArm | { unavailable: string }> => {
      if ('unavailable' in query) return query;
      const found = await query.indexes.nearest(
        req.agentId,
        query.model,
        query.vector,
        semanticDepth(req.k),
        // Default recall's filter is applied inside the search; deep recall takes every tier.
        // The depth past k gives lexical candidates their semantic share: not worth a wider
        // search once k neighbours pass the filter.
        { ...(req.deep ? {} : { defaultRecallAt: now, enough: req.k }), since: query.since },
      );
      if (!found.available) return { unavailable: found.reason };
      return semanticArm(store, req, now, query, found, policy.halfLifeMs, !lexicalRead);
    }),
  ]);
  const missing = req.deep ? stones.map((t) => missingEvidence(t, queryTerms)) : undefined;
  const record = (found: readonly Pick<RecallHit, 'id' | 'foundBy'>[]): Omit<QueryLogRecord, 'day'> => ({
    _id: logId,
    agentId: req.agentId,
    query: req.query,
    terms: queryTerms,
    at: now,
    deep: req.deep,
    k: req.k,
    ...loggedHits(found),
    ...(missing ? { missingIds: missing.map((m) => m.tombstoneId) } : {}),
  });
  let hits: RecallHit[];
  let retrieval: Retrieval;
  let ranked = candidates.length;
  /** Hybrid recall's record, written from the hits it expects while it reads the neighbours. */
  let early:
    | { expected: Pick<RecallHit, 'id' | 'foundBy'>[]; logged: Promise<{ failed: unknown } | undefined> }
    | undefined;
  /**
   * No record of a recall whose caller got an error: the night refreshes and rehydrates what
   * the log says recalls returned. Deleted once its insert has settled (a delete that ran
   * first would leave it); a store that fails the delete too keeps it.
   */
  const unlog = async () => {
    await early?.logged;
    await store.queries.deleteOne({ _id: logId, agentId: req.agentId }).catch(() => undefined);
  };
  if ('unavailable' in arm) {
    hits = rankScored(await scoreLexicalInTurns(queryTerms, candidates), { now, k: req.k, ...policy });
    retrieval = { mode: 'lexical', reason: arm.unavailable };
  } else {
    const lexical = await scoreLexicalInTurns(queryTerms, candidates);
    const scale = { k: req.k, background: arm.background, halfLifeMs: policy.halfLifeMs };
    const expected = expectedHits(arm, now, lexical, scale);
    // Settled here, awaited below: a failure must not go unhandled while the reads run.
    const logged = logQuery(store, record(expected), before).then(
      () => undefined,
      (err: unknown) => ({ failed: err }),
    );
    early = { expected, logged };
    let semanticRanked;
    try {
      semanticRanked = await semanticRanking(arm, now, lexical, { ...scale, depth: semanticDepth(req.k) });
    } catch (err) {
      await unlog();
      throw err;
    }
    const known = new Set(candidates.map((c) => c.entry._id));
    ranked += semanticRanked.filter((s) => !known.has(s.candidate.entry._id)).length;
    hits = rankHybrid(lexical, semanticRanked, { now, ...scale });
    retrieval = {
      mode: 'hybrid',
      model: arm.query.model,
      otherModelVectors: arm.search.otherModel,
      badVectors: arm.search.bad,
      filteredNeighbours: arm.search.rejected,
      queryEmbeddingMs: arm.query.embeddingMs,
      indexCatchingUp: arm.search.catchingUp,
    };
  }
  const result: RecallResult = { hits, retrieval, asOf: now, candidates: ranked };
  if (overBudget > 0) result.candidatesOverBudget = overBudget;
  try {
    if (missing) {
      result.successors = await supersessionSuccessors(store, req.agentId, hits, now, policy);
      result.missing = missing;
    }
    if (!early) {
      await logQuery(store, record(hits), before);
    } else {
      const settled = await early.logged;
      if (settled) throw settled.failed;
      const found = loggedHits(hits);
      if (!sameHits(loggedHits(early.expected), found)) {
        const expectedIds = new Set(early.expected.map((h) => h.id));
        await relogHits(
          store,
          { _id: logId, agentId: req.agentId },
          found,
          found.hitIds.filter((id) => !expectedIds.has(id)),
        );
      }
    }
  } catch (err) {
    await unlog();
    throw err;
  }
  return result;
}
