import { createHash } from 'node:crypto';
import type { Entry, Tier } from '../core/entry';
import { registeredAgents } from './agents';
import { inBatches, isErasure, type Store, type Tombstone } from './db';
import { storedEntries, supersededSinceDeleted, TIERS, tierCollection } from './tiers';
import type { SavedMeta } from './vectorIndexes';
import { persistedIds, persistedIndexes } from '../vectorEngine/persisted';

/**
 * `memgate verify`: the store's promises, checked from what it holds (never silently
 * lose a fact, keep none it was told to forget).
 * - `unaccounted`: an id the agent was given is in neither tier and behind no tombstone.
 * - `in-both-tiers`: a move left two copies (an interrupted move, until a night finishes it).
 * - `resurrected`: an entry is stored although a tombstone says it was deleted or erased.
 * - `erased-content`: an erased entry's content or id lives on in a summary built from it, in
 *   the query log, in its tombstone's terms, or as its embedding.
 * - `stand-in-missing` / `stand-in-inactive` / `stand-in-not-lossless`: an eviction tombstone
 *   names a summary that is gone, or no longer active without the tombstone saying it was
 *   retired, or that lacks an atom of the deleted entry although it claimed to hold them all.
 * - `summary-not-current`: an active summary is built from an entry that is superseded, or
 *   deleted and superseded since (docs/invariants.md, Current summaries).
 *
 * A finding is reported only when a second reading of the agent finds it too: a write, a
 * move or an erasure under way passes through such states and is out of them by then.
 * - `term-overcounted`: a term's document frequency (`term_stats`) counts more entries than the
 *   stored ones holding it, so it still counts an entry that is gone, such as an erased one
 *   (docs/invariants.md, Erasure wins); counts may err low, never high. Named by a digest of
 *   the term, which may be erased content. Not reported for an agent with an id unaccounted
 *   for: the entry that vanished took its terms along unseen.
 * - `erased-in-vector-index`: a vector index this process persisted (MEMGATE_VECTOR_INDEX_DIR)
 *   holds a vector the store no longer has: an erasure it has not applied yet, because it was
 *   saved by a process that is not running, or by one that has not swept since
 *   (docs/invariants.md, Erased from derived indexes). That process's next sweep, or its next
 *   hybrid recall of the agent, applies the erasure and deletes the file.
 * - `unreadable-vector-index`: a state file in MEMGATE_VECTOR_INDEX_DIR does not read whole (a
 *   save cut off by a machine lost before it reached the disk), so whether it holds an erased
 *   vector cannot be told. It never opens; the next sweep deletes it.
 * - `erased-in-temporal-history`: an erased entry can still be read in a run of the agent's
 *   workflow (client/historyCheck.ts, which `memgate verify` runs beside these).
 */
export type VerifyCheck =
  | 'unaccounted'
  | 'in-both-tiers'
  | 'resurrected'
  | 'erased-content'
  | 'stand-in-missing'
  | 'stand-in-inactive'
  | 'stand-in-not-lossless'
  | 'summary-not-current'
  | 'term-overcounted'
  | 'erased-in-vector-index'
  | 'unreadable-vector-index'
  | 'erased-in-temporal-history';

export interface VerifyFinding {
  check: VerifyCheck;
  agentId: string;
  id: string;
  detail: string;
}

export interface VerifyReport {
  ok: boolean;
  agents: number;
  /** How many ids, tombstones and query-log records were read. */
  checked: { ids: number; tombstones: number };
  findings: VerifyFinding[];
}

/** Every registered agent (or one), read in batches of `batch`. */
export async function verifyStore(
  store: Store,
  opts: { agentId?: string; batch: number; vectorIndexDir?: string },
): Promise<VerifyReport> {
  const report: VerifyReport = {
    ok: true,
    agents: 0,
    checked: { ids: 0, tombstones: 0 },
    findings: [],
  };
  const pages = async function* (): AsyncGenerator<string[]> {
    if (opts.agentId !== undefined) return yield [opts.agentId];
    for (let after: string | undefined; ;) {
      const page = await registeredAgents(store, {
        ...(after !== undefined && { after }),
        limit: opts.batch,
      });
      if (page.length > 0) yield page;
      if (page.length < opts.batch) return;
      after = page.at(-1);
    }
  };
  for await (const page of pages()) {
    for (const agentId of page) {
      report.agents++;
      const first = await verifyAgent(store, agentId, opts.batch);
      report.checked.ids += first.checked.ids;
      report.checked.tombstones += first.checked.tombstones;
      if (first.findings.length === 0) continue;
      // A write, a move or an erasure under way passes through states that would be findings
      // (an id registered before its entry is inserted, a copy in each tier, an entry stored
      // beside the tombstone that is about to remove it). Such a state is over by a second
      // reading; what is wrong stays, so only what both readings find is reported.
      const again = new Set((await verifyAgent(store, agentId, opts.batch)).findings.map(findingKey));
      const confirmed = first.findings.filter((f) => again.has(findingKey(f)));
      // An entry that vanished took its terms along unseen: its terms' counts are not judged.
      const vanished = confirmed.some((f) => f.check === 'unaccounted');
      report.findings.push(...confirmed.filter((f) => !(vanished && f.check === 'term-overcounted')));
    }
  }
  if (opts.vectorIndexDir !== undefined) await verifyPersistedIndexes(store, opts, report);
  report.ok = report.findings.length === 0;
  return report;
}

/** One reading of one agent. */
async function verifyAgent(store: Store, agentId: string, batch: number): Promise<VerifyReport> {
  const report: VerifyReport = { ok: true, agents: 1, checked: { ids: 0, tombstones: 0 }, findings: [] };
  await verifyIds(store, agentId, batch, report);
  await verifyTombstones(store, agentId, batch, report);
  await verifyTermCounts(store, agentId, batch, report);
  return report;
}

const findingKey = (f: VerifyFinding) => `${f.check} ${f.id}`;

/**
 * Each vector index persisted in the directory, of this store (and agent): every id it holds
 * has its vector in the store. Point reads by `_id`, a batch at a time.
 */
async function verifyPersistedIndexes(
  store: Store,
  opts: { agentId?: string; batch: number; vectorIndexDir?: string },
  report: VerifyReport,
): Promise<void> {
  for (const { at, header } of persistedIndexes(opts.vectorIndexDir!)) {
    const unreadable = (agentId: string) =>
      report.findings.push({
        check: 'unreadable-vector-index',
        agentId,
        id: at.base,
        detail: `the index persisted at ${at.base} does not read whole, so what it holds cannot be told; the next sweep deletes it`,
      });
    if (!header) {
      unreadable('');
      continue;
    }
    const meta = header.meta as Partial<SavedMeta> | null;
    if (meta?.database !== store.db.databaseName || meta.agentId === undefined) continue;
    const agentId = meta.agentId;
    if (opts.agentId !== undefined && agentId !== opts.agentId) continue;
    const ids = persistedIds(at);
    if (!ids) {
      unreadable(agentId);
      continue;
    }
    for (let i = 0; i < ids.length; i += opts.batch) {
      const batch = ids.slice(i, i + opts.batch);
      const held = await Promise.all(
        batch.map((_id) =>
          store.vectors.findOne({ _id, agentId, vector: { $exists: true } }, { projection: { _id: 1 } }),
        ),
      );
      batch.forEach((id, j) => {
        if (held[j]) return;
        report.findings.push({
          check: 'erased-in-vector-index',
          agentId,
          id,
          detail: `its vector is gone from the store, and the index persisted at ${at.base} still holds it`,
        });
      });
    }
  }
}

/** Each id the agent was ever given (the write path's registry): where is it now? */
async function verifyIds(store: Store, agentId: string, batch: number, report: VerifyReport): Promise<void> {
  for await (const records of inBatches(store.entryIds, { agentId }, batch)) {
    const ids = records.map((r) => r._id);
    report.checked.ids += ids.length;
    const [hot, cold, stones] = await Promise.all([
      present(store, 'hot', agentId, ids),
      present(store, 'cold', agentId, ids),
      presentStones(store, agentId, ids),
    ]);
    for (const id of ids) {
      const where = [hot.has(id) && 'hot', cold.has(id) && 'cold'].filter(Boolean).join(' and ');
      if (!where && !stones.has(id)) {
        report.findings.push({
          check: 'unaccounted',
          agentId,
          id,
          detail: 'in neither tier, and no tombstone',
        });
      }
      if (hot.has(id) && cold.has(id)) {
        report.findings.push({ check: 'in-both-tiers', agentId, id, detail: 'a copy in hot and in cold' });
      }
      if (where && stones.has(id)) {
        report.findings.push({
          check: 'resurrected',
          agentId,
          id,
          detail: `stored in ${where} behind a tombstone (${stones.get(id)!.reason})`,
        });
      }
      const stored = hot.get(id) ?? cold.get(id);
      if (stored?.kind === 'summary' && stored.isActive)
        await verifySummaryCurrent(store, agentId, stored, report);
    }
  }
}

/**
 * An active summary stands for current entries only: no source of it still stored is
 * superseded, and no source reclaim deleted has been superseded since (its tombstone keeps
 * its subject, attribute and time).
 */
async function verifySummaryCurrent(
  store: Store,
  agentId: string,
  summary: StoredView,
  report: VerifyReport,
): Promise<void> {
  const { present, gone } = await storedEntries(store, agentId, summary.derivedFrom ?? []);
  for (const source of present) if (!source.isActive) notCurrent(source._id, 'which is superseded');
  const deleted = await supersededSinceDeleted(store, agentId, gone);
  if (deleted) notCurrent(deleted, 'which reclaim deleted and a newer fact has superseded since');

  function notCurrent(sourceId: string, why: string): void {
    report.findings.push({
      check: 'summary-not-current',
      agentId,
      id: summary._id,
      detail: `active, and built from ${sourceId}, ${why}`,
    });
  }
}

/** What each tombstone promises: erased content is gone, a stand-in stands in. */
async function verifyTombstones(
  store: Store,
  agentId: string,
  batch: number,
  report: VerifyReport,
): Promise<void> {
  for await (const stones of inBatches(store.tombstones, { agentId }, batch)) {
    report.checked.tombstones += stones.length;
    for (const stone of stones) {
      if (isErasure(stone)) await verifyErased(store, agentId, stone, report);
      else if (stone.standIn && !stone.standIn.erased) await verifyStandIn(store, agentId, stone, report);
    }
  }
}

async function verifyErased(store: Store, agentId: string, stone: Tombstone, report: VerifyReport) {
  const id = stone._id;
  const found = (detail: string) => report.findings.push({ check: 'erased-content', agentId, id, detail });
  if (stone.terms.length > 0 || stone.termKeys.length > 0) found('its tombstone still holds terms');
  for (const tier of TIERS) {
    const summaries = await tierCollection(store, tier)
      .find({ agentId, derivedFrom: id }, { projection: { _id: 1 } })
      .toArray();
    for (const s of summaries) found(`summary ${s._id} in ${tier} is built from it`);
  }
  const queries = await store.queries.find({ agentId, hitIds: id }, { projection: { _id: 1 } }).toArray();
  if (queries.length > 0) found(`${queries.length} logged recalls returned it`);
  const missed = await store.queries.find({ agentId, missingIds: id }, { projection: { _id: 1 } }).toArray();
  if (missed.length > 0) found(`${missed.length} logged deep recalls name it as missing`);
  // Its record may stay (the vector feed numbers it); its embedding may not.
  const vector = await store.vectors.findOne(
    { _id: id, agentId, vector: { $exists: true } },
    { projection: { _id: 1 } },
  );
  if (vector) found('its embedding is still stored');
}

/** Each counted term of the agent is held by as many stored entries (either tier) as it counts. */
async function verifyTermCounts(
  store: Store,
  agentId: string,
  batch: number,
  report: VerifyReport,
): Promise<void> {
  for await (const stats of inBatches(store.termStats, { agentId }, batch)) {
    const held = await Promise.all(stats.map((s) => holders(store, agentId, s._id, s.df)));
    stats.forEach((s, i) => {
      if (held[i]! >= s.df) return;
      report.findings.push({
        check: 'term-overcounted',
        agentId,
        id: `term:${createHash('sha256').update(s._id).digest('base64url').slice(0, 16)}`,
        detail: `counted for ${s.df} entries, held by ${held[i]} stored entries`,
      });
    });
  }
}

/** How many stored entries the term of `key` counts (those that hold it, counted), up to `atMost`. */
async function holders(store: Store, agentId: string, key: string, atMost: number): Promise<number> {
  const ids = new Set<string>();
  for (const tier of TIERS) {
    const found = await tierCollection(store, tier)
      // An entry awaiting its count (a write no night has counted) is not in the term's count.
      .find({ termKeys: key, agentId, pending: { $ne: 'terms' } }, { projection: { _id: 1 } })
      .limit(Math.max(1, atMost))
      .toArray();
    for (const { _id } of found) ids.add(_id);
  }
  return ids.size;
}

async function verifyStandIn(store: Store, agentId: string, stone: Tombstone, report: VerifyReport) {
  const { summaryId, lossy, retired } = stone.standIn!;
  const finding = (check: VerifyCheck, detail: string) =>
    report.findings.push({ check, agentId, id: stone._id, detail });
  let summary: Entry | null = null;
  for (const tier of TIERS)
    summary ??= await tierCollection(store, tier).findOne({ _id: summaryId, agentId });
  if (!summary) return void finding('stand-in-missing', `its stand-in ${summaryId} is stored nowhere`);
  // A retired stand-in is inactive by design, and its tombstone says so.
  if (!summary.isActive && !retired) {
    finding('stand-in-inactive', `its stand-in ${summaryId} is inactive and not marked retired`);
  }
  if (!lossy && stone.atoms) {
    const held = new Set(summary.atoms);
    const lost = stone.atoms.filter((a) => !held.has(a));
    if (lost.length > 0) {
      finding('stand-in-not-lossless', `its lossless stand-in ${summaryId} lacks ${lost.join(', ')}`);
    }
  }
}

/** What verify reads of a stored entry. */
type StoredView = Pick<Entry, '_id' | 'kind' | 'isActive' | 'derivedFrom'>;

async function present(
  store: Store,
  tier: Tier,
  agentId: string,
  ids: string[],
): Promise<Map<string, StoredView>> {
  const projection = { _id: 1, kind: 1, isActive: 1, derivedFrom: 1 };
  const found = await Promise.all(
    ids.map((_id) => tierCollection(store, tier).findOne({ _id, agentId }, { projection })),
  );
  return new Map(found.flatMap((d) => (d ? [[d._id, d as StoredView] as const] : [])));
}

async function presentStones(store: Store, agentId: string, ids: string[]): Promise<Map<string, Tombstone>> {
  const found = await Promise.all(ids.map((_id) => store.tombstones.findOne({ _id, agentId })));
  return new Map(found.flatMap((d) => (d ? [[d._id, d] as const] : [])));
}
