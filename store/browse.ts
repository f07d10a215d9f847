import type { Collection } from 'mongodb';
import type { SummaryRow } from '../audit/records';
import { atoms } from '../core/atoms';
import { PAGES_PER_LEVEL, type EntriesCursor } from '../core/browse';
import { censusAsOf, type Census } from '../core/census';
import type { Entry, Tier } from '../core/entry';
import { agentInScope } from '../core/keys';
import type { AgentRecord, LedgerRecord, Store, Tombstone } from './db';
import { pageKey } from './entries';
import type { RunRecord } from './runs';
import { findById, locateEntry, tierCollection, TIERS } from './tiers';

/**
 * What the memory browser reads (docs/browser.md), each by `_id` or by equality on an indexed
 * field: an agent's census from its record, its nights from `runs`, its entries a page at a
 * time, an entry with its ledger and its stand-in. None reads a whole agent.
 */

/** Agents read per page of the registry while looking for those a key covers. */
const REGISTRY_PAGE = 1_000;
/** Registry pages one listing reads at most before it answers with where to go on. */
const REGISTRY_PAGES_PER_LISTING = 10;

/** A page of the registered agents a key's pattern covers, in id order, after `after`. */
export async function agentsInScope(
  store: Store,
  request: { pattern: string; after?: string; limit: number },
): Promise<{ agents: { agentId: string; firstWriteAt: number }[]; next?: string }> {
  const agents: { agentId: string; firstWriteAt: number }[] = [];
  let after = request.after;
  for (let page = 0; page < REGISTRY_PAGES_PER_LISTING; page++) {
    const records = await store.agents
      .find(after === undefined ? {} : { _id: { $gt: after } }, { projection: { _id: 1, firstWriteAt: 1 } })
      .sort({ _id: 1 })
      .limit(REGISTRY_PAGE)
      .toArray();
    for (const r of records) {
      after = r._id;
      if (!agentInScope(request.pattern, r._id)) continue;
      agents.push({ agentId: r._id, firstWriteAt: r.firstWriteAt });
      if (agents.length === request.limit) return { agents, next: r._id };
    }
    if (records.length < REGISTRY_PAGE) return { agents };
  }
  return { agents, ...(after !== undefined && { next: after }) };
}

/** An agent as the browser opens it: its census now, from its record alone. */
export interface AgentOverview {
  agentId: string;
  firstWriteAt: number;
  census: Census;
}

export async function agentOverview(
  store: Store,
  agentId: string,
  now: number,
): Promise<AgentOverview | undefined> {
  const record: AgentRecord | null = await store.agents.findOne({ _id: agentId });
  if (!record) return undefined;
  return { agentId, firstWriteAt: record.firstWriteAt, census: censusAsOf(record.census, now) };
}

/** One night of an agent, as its run recorded it. */
export interface Night {
  runId: string;
  asOf: number;
  finishedAt: number;
  counts: Record<string, number>;
  /** Milliseconds per phase; absent from runs recorded before they were kept. */
  durations?: Record<string, number>;
  /** The census as of the night; absent from runs recorded before it was kept. */
  census?: Census;
}

/**
 * The agent's nights, newest first, before `before` (an `asOf`): its run records, found by
 * the indexed kind and agent (a run record per night, pruned after the run retention).
 */
export async function agentNights(
  store: Store,
  request: { agentId: string; before?: number; limit: number },
): Promise<{ nights: Night[]; next?: number }> {
  const runs = (await (store.runs as unknown as Collection<RunRecord>)
    .find({ kind: 'agent', agentId: request.agentId })
    .toArray()) as (RunRecord & Partial<Night>)[];
  const older = runs
    .filter((r) => r.agentId === request.agentId && (request.before === undefined || r.asOf < request.before))
    .sort((a, b) => b.asOf - a.asOf);
  const nights = older.slice(0, request.limit).map((r) => ({
    runId: r._id,
    asOf: r.asOf,
    finishedAt: r.finishedAt,
    counts: r.counts,
    ...(r.durations && { durations: r.durations }),
    ...(r.census && { census: r.census }),
  }));
  return { nights, ...(older.length > request.limit && { next: nights.at(-1)!.asOf }) };
}

/**
 * The characters of entry ids (base64url) in the order ids sort: page `i` of a level holds
 * the ids whose first characters spell `i` in this alphabet.
 */
const ID_ALPHABET = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
/** Entries a page aims at: the level of the pages is the one whose pages hold about this many. */
export const ENTRIES_PER_PAGE = 50;
/** Pages read side by side while a listing fills. */
const PAGES_AT_ONCE = 4;

/** The level whose pages hold about `ENTRIES_PER_PAGE` of `entries`: 64 pages, or 4,096. */
export function pageLevel(entries: number): 1 | 2 {
  return entries <= PAGES_PER_LEVEL[1] * ENTRIES_PER_PAGE ? 1 : 2;
}

function pagePrefix(level: 1 | 2, page: number): string {
  return level === 1
    ? ID_ALPHABET[page]!
    : ID_ALPHABET[Math.floor(page / ID_ALPHABET.length)]! + ID_ALPHABET[page % ID_ALPHABET.length]!;
}

/** A copy of an entry as the browser lists it. */
export interface Located {
  entry: Entry;
  tier: Tier;
}

/** The entries of one page of a level, both tiers, in id order (mid-move, the hot copy). */
async function entriesOfPage(store: Store, agentId: string, level: 1 | 2, page: number): Promise<Located[]> {
  const key = pageKey(agentId, pagePrefix(level, page));
  const found = new Map<string, Located>();
  for (const tier of TIERS) {
    // By the page key alone, as postings are read (store/entries.ts, entriesWithTerm), and the
    // agent checked in code (docs/invariants.md, Agent-scoped).
    for (const entry of await tierCollection(store, tier).find({ pageKeys: key }).toArray()) {
      if (entry.agentId === agentId && !found.has(entry._id)) found.set(entry._id, { entry, tier });
    }
  }
  return [...found.values()].sort((a, b) => (a.entry._id < b.entry._id ? -1 : 1));
}

/**
 * Up to `limit` of the agent's entries from where the cursor stands, in id order, and the
 * cursor after them; whole pages are read, a few side by side, until `limit` are found.
 */
export async function entriesPage(
  store: Store,
  request: { agentId: string; cursor: EntriesCursor; limit: number },
): Promise<{ entries: Located[]; next?: EntriesCursor }> {
  const { agentId, limit } = request;
  const { level } = request.cursor;
  const pages = PAGES_PER_LEVEL[level];
  const entries: Located[] = [];
  let page = request.cursor.page;
  let after = request.cursor.after;
  while (page < pages) {
    const batch = Array.from({ length: Math.min(PAGES_AT_ONCE, pages - page) }, (_, i) => page + i);
    const read = await Promise.all(batch.map((p) => entriesOfPage(store, agentId, level, p)));
    for (const [i, found] of read.entries()) {
      for (const located of found) {
        if (after !== undefined && located.entry._id <= after) continue;
        entries.push(located);
        if (entries.length === limit) {
          const last = located.entry._id;
          const rest = found.at(-1)!.entry._id > last;
          const next = rest ? batch[i]! : batch[i]! + 1;
          return {
            entries,
            ...(next < pages && { next: { level, page: next, ...(rest && { after: last }) } }),
          };
        }
      }
      after = undefined;
    }
    page += batch.length;
  }
  return { entries };
}

/** One event of an entry's life: from its ledger, or from the entry itself (`written`). */
export interface LifecycleEvent {
  at: number;
  event: string;
  reason: string;
  runId?: string;
  inputs?: Record<string, unknown>;
}

/** A summary that stands in for the entry, and which of the entry's atoms its text keeps. */
export interface StandIn {
  summaryId: string;
  /** Where the summary is; absent when it is no longer stored. */
  tier?: Tier;
  text?: string;
  lossy: boolean;
  isActive?: boolean;
  keeps: string[];
  lacks: string[];
}

/** An entry's page: the entry (or the tombstone it left), its lifecycle and its stand-ins. */
export interface EntryDetail {
  entryId: string;
  stored?: Located;
  tombstone?: Omit<Tombstone, 'termKeys' | 'agentId'>;
  lifecycle: LifecycleEvent[];
  standIns: StandIn[];
}

/**
 * The entry or its tombstone, by `_id`; its ledger records, by the indexed agent and entry;
 * and each summary standing in for it (those it is subsumed by, or its tombstone's), by `_id`.
 * Undefined when the agent never had such an entry, or the ledger no longer remembers it.
 */
export async function entryDetail(
  store: Store,
  agentId: string,
  entryId: string,
): Promise<EntryDetail | undefined> {
  const [stored, stone, records] = await Promise.all([
    locateEntry(store, agentId, entryId),
    findById(store.tombstones, agentId, entryId),
    ledgerOf(store, agentId, entryId),
  ]);
  if (!stored && !stone && records.length === 0) return undefined;
  const lifecycle: LifecycleEvent[] = records.map((r) => ({
    at: r.at,
    event: r.event,
    reason: r.reason,
    ...(r.runId !== undefined && { runId: r.runId }),
    ...(r.inputs && { inputs: r.inputs }),
  }));
  if (stored) lifecycle.push({ at: stored.entry.writtenAt, event: 'written', reason: 'written' });
  const links = stored
    ? (stored.entry.subsumedBy ?? []).map((s) => ({ summaryId: s.summaryId, lossy: !s.lossless }))
    : stone?.standIn
      ? [{ summaryId: stone.standIn.summaryId, lossy: stone.standIn.lossy }]
      : [];
  const standIns = await Promise.all(
    links.map(async (link) => {
      const [summary, summarised] = await Promise.all([
        locateEntry(store, agentId, link.summaryId),
        ledgerOf(store, agentId, link.summaryId),
      ]);
      for (const r of summarised.filter((r) => r.event === 'summarise')) {
        lifecycle.push({
          at: r.at,
          event: 'summarised into',
          reason: `summary ${link.summaryId}`,
          ...(r.runId !== undefined && { runId: r.runId }),
        });
      }
      return standIn(link, summary, stored?.entry.atoms ?? stone?.atoms ?? []);
    }),
  );
  const { termKeys: _keys, agentId: _agent, ...tombstone } = stone ?? ({} as Tombstone);
  return {
    entryId,
    ...(stored && { stored }),
    ...(stone && { tombstone }),
    lifecycle: lifecycle.sort((a, b) => a.at - b.at || order(a.event) - order(b.event)),
    standIns,
  };
}

/** Events at one instant, in the order a night makes them. */
const EVENT_ORDER = ['written', 'expire', 'refresh', 'rehydrate', 'supersede', 'summarised into', 'spill'];
function order(event: string): number {
  const i = EVENT_ORDER.indexOf(event);
  return i === -1 ? EVENT_ORDER.length : i;
}

async function ledgerOf(store: Store, agentId: string, entryId: string): Promise<LedgerRecord[]> {
  const records = await store.ledger.find({ agentId, entryId }).toArray();
  return records.filter((r) => r.agentId === agentId);
}

/**
 * Which of the entry's fact atoms (core/atoms.ts: those its tombstone kept, once it is evicted)
 * the summary's stored text holds.
 */
function standIn(
  link: { summaryId: string; lossy: boolean },
  summary: Located | undefined,
  entryAtoms: readonly string[],
): StandIn {
  if (!summary) return { summaryId: link.summaryId, lossy: link.lossy, keeps: [], lacks: [...entryAtoms] };
  const held = new Set(atoms(summary.entry.text));
  return {
    summaryId: link.summaryId,
    tier: summary.tier,
    text: summary.entry.text,
    lossy: link.lossy,
    isActive: summary.entry.isActive,
    keeps: entryAtoms.filter((a) => held.has(a)),
    lacks: entryAtoms.filter((a) => !held.has(a)),
  };
}

/** The audit's last recorded run: its summary rows (audit/records.ts). */
export interface AuditRun {
  runId: string;
  at: number;
  title: string;
  rows: SummaryRow[];
}

/** Records the summary of an audit run (`memgate audit`), for the browser's chart. */
export async function recordAuditRun(store: Store, run: AuditRun): Promise<void> {
  await (store.runs as unknown as Collection<RunRecord & Omit<AuditRun, 'runId'>>).replaceOne(
    { _id: `audit:${run.runId}` },
    { kind: 'audit', asOf: run.at, status: 'completed', finishedAt: run.at, counts: {}, ...run },
    { upsert: true },
  );
}

/** The newest recorded audit run, if any (their records are few: one per run). */
export async function lastAuditRun(store: Store): Promise<AuditRun | undefined> {
  const runs = (await (store.runs as unknown as Collection<RunRecord>)
    .find({ kind: 'audit' })
    .toArray()) as (RunRecord & AuditRun)[];
  const last = runs.sort((a, b) => b.at - a.at)[0];
  return last && { runId: last.runId, at: last.at, title: last.title, rows: last.rows };
}
