import { randomUUID } from 'node:crypto';
import type { MemoryPolicy } from '../core/entry';
import {
  POSTINGS_BUDGET,
  rankCandidates,
  recallHit,
  type RecallHit,
  type RecallRequest,
} from '../core/recall';
import { terms } from '../core/text';
import type { Store, Tombstone } from './db';
import { findCandidates, logQuery } from './entries';
import { termKey } from './terms';
import { locateEntry } from './nightly';

export interface MissingEvidence {
  tombstoneId: string;
  deletedAt: number;
  reason: string;
  /** The summary standing in for the deleted entry, and whether it lost facts. */
  standIn?: Tombstone['standIn'];
  matchedTerms: string[];
}

export interface RecallResult {
  hits: RecallHit[];
  /**
   * Deep recall only: deleted entries whose terms match the query
   * (docs/invariants.md, Missing evidence reported).
   */
  missing?: MissingEvidence[];
  asOf: number;
  /** Entries that shared a term with the query and passed the tier filters: what was ranked. */
  candidates: number;
  /**
   * Deep recall only: the entries that superseded a hit, each chain followed to its current
   * fact, whether or not they match the query (the supersession walk).
   */
  successors?: RecallHit[];
}

/** Longest supersession chain deep recall follows (a guard against a corrupt cycle). */
const MAX_CHAIN = 32;

async function supersessionSuccessors(
  store: Store,
  agentId: string,
  hits: RecallHit[],
  now: number,
  policy: MemoryPolicy,
): Promise<RecallHit[]> {
  const seen = new Set<string>();
  const successors: RecallHit[] = [];
  let frontier = hits.map((h) => h.supersededBy).filter((id): id is string => id !== undefined);
  for (let depth = 0; frontier.length > 0 && depth < MAX_CHAIN; depth++) {
    const next: string[] = [];
    for (const id of frontier) {
      if (seen.has(id)) continue;
      seen.add(id);
      const found = await locateEntry(store, agentId, id);
      if (!found) continue;
      const hit = recallHit(found, now, policy.halfLifeMs, 0);
      successors.push(hit);
      if (hit.supersededBy) next.push(hit.supersededBy);
    }
    frontier = next;
  }
  return successors;
}

/** Tombstones holding any of the terms: one equality read per term, merged by id. */
async function tombstonesMatching(store: Store, agentId: string, queryTerms: string[]): Promise<Tombstone[]> {
  const perTerm = await Promise.all(
    queryTerms.map((term) =>
      store.tombstones
        .find({ termKeys: termKey(agentId, term) })
        .limit(POSTINGS_BUDGET.deep)
        .toArray(),
    ),
  );
  return [
    ...new Map(perTerm.flat().flatMap((t) => (t.agentId === agentId ? [[t._id, t] as const] : []))).values(),
  ];
}

/**
 * A direct, indexed read (recall does not go through Temporal). It appends to the query log
 * and changes nothing else (docs/invariants.md, Read-only recall).
 */
export async function recall(store: Store, req: RecallRequest, policy: MemoryPolicy): Promise<RecallResult> {
  const now = req.asOf ?? Date.now();
  const queryTerms = terms(req.query);
  const [candidates, stones] = await Promise.all([
    findCandidates(store, { agentId: req.agentId, terms: queryTerms, now, deep: req.deep }),
    req.deep ? tombstonesMatching(store, req.agentId, queryTerms) : [],
  ]);
  const hits = rankCandidates(terms(req.query), candidates, { now, k: req.k, ...policy });
  const result: RecallResult = { hits, asOf: now, candidates: candidates.length };
  if (req.deep) {
    result.successors = await supersessionSuccessors(store, req.agentId, hits, now, policy);
    result.missing = stones.map((t) => {
      const m: MissingEvidence = {
        tombstoneId: t._id,
        deletedAt: t.deletedAt,
        reason: t.reason,
        matchedTerms: t.terms.filter((x) => queryTerms.includes(x)),
      };
      if (t.standIn) m.standIn = t.standIn;
      return m;
    });
  }
  await logQuery(store, {
    _id: randomUUID(),
    agentId: req.agentId,
    query: req.query,
    terms: queryTerms,
    at: now,
    deep: req.deep,
    k: req.k,
    hitIds: hits.map((h) => h.id),
    ...(result.missing ? { missingIds: result.missing.map((m) => m.tombstoneId) } : {}),
  });
  return result;
}
