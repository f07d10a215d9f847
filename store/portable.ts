import { createHash } from 'node:crypto';
import { oldestWriteDay, type Entry, type Tier } from '../core/entry';
import { awaitsCounting } from '../core/nightly/plans';
import { InvalidInputError, NotFoundError } from '../core/errors';
import { countTerms } from '../core/text';
import {
  entryLine,
  exportLineText,
  ExportReader,
  headerLine,
  refusedLine,
  type EntryLine,
  type TombstoneLine,
} from '../core/exportFormat';
import { countImported, countWrittenOn, registerAgent } from './agents';
import { countChanges, countTombstones } from './census';
import {
  derivedFromErased,
  erasedSourceOf,
  inBatches,
  insertIgnoringExisting,
  isErasure,
  type Store,
  type Tombstone,
} from './db';
import { gateKeys, pageKeys, termKeys, writeDayKey } from './entries';
import { findById, TIERS, tierCollection } from './tiers';
import { findByIds } from './byIds';
import { withdrawErased } from './erasure';
import { termKey } from './terms';

/**
 * Export and import of one agent (docs/export.md). The export reads the agent's tombstones,
 * then its hot and cold entries, a page at a time with store cursors, and hands each page on
 * as one chunk of lines only when its reader asks for the next: it holds one page however
 * large the agent. The import writes what it reads a page at a time, as the write path and
 * the night would have left it.
 */

/** Records per page: one cursor batch and one chunk of lines, a few hundred kilobytes. */
const PAGE = 500;

// A field added to Tombstone fails compilation here until the format says what becomes of it.
const everyTombstoneField: [
  Exclude<keyof Omit<Tombstone, 'agentId' | 'termKeys'>, keyof Omit<TombstoneLine, 'type'>>,
] extends [never]
  ? true
  : never = true;
void everyTombstoneField;

/** Whether the agent was ever given an id (the write path's registry): it holds or held entries. */
export async function agentHoldsIds(store: Store, agentId: string): Promise<boolean> {
  return (await store.entryIds.findOne({ agentId }, { projection: { _id: 1 } })) !== null;
}

/**
 * The agent's export as chunks of JSON Lines: the header, then each page of tombstones, hot
 * and cold entries as one chunk, then the end line. The header comes once the store has
 * answered that the agent holds something, and before any cursor opens: a caller that awaits
 * it has learnt of an unknown agent (NotFound) or an unreachable store before it sends
 * anything, and one that never asks for more holds nothing of the store.
 */
export async function* exportChunks(
  store: Store,
  agentId: string,
  exportedAt: number,
): AsyncGenerator<string, void, undefined> {
  if (!(await agentHoldsIds(store, agentId))) {
    throw new NotFoundError(`agent ${agentId} has stored nothing to export`, { agentId });
  }
  yield exportLineText(headerLine(agentId, exportedAt));
  let records = 0;
  for await (const stones of inBatches(store.tombstones, { agentId }, PAGE)) {
    records += stones.length;
    yield stones
      .map(({ agentId: _agent, termKeys: _keys, ...stone }) =>
        exportLineText({ type: 'tombstone', ...stone }),
      )
      .join('');
  }
  for (const tier of TIERS) {
    for await (const entries of inBatches(tierCollection(store, tier), { agentId }, PAGE)) {
      records += entries.length;
      yield entries.map((entry) => exportLineText(entryLine(entry, tier))).join('');
    }
  }
  yield exportLineText({ type: 'end', records });
}

export interface ImportResult {
  agentId: string;
  /** The agent the export was taken from. */
  from: string;
  /** Whether the ids are the export's own (the same agent); else each is mapped (docs/export.md). */
  idsKept: boolean;
  /** The input's lines, blank ones included, as a refusal numbers them. */
  lines: number;
  imported: { tombstones: number; hot: number; cold: number };
  /** Records whose id the agent already held, or held behind a tombstone: left as they were. */
  skipped: number;
  /**
   * Erasures the export carried for entries the agent still holds (only an import into an
   * agent that already had entries can meet one): each still needs `memgate forget`.
   */
  erasuresNotApplied: string[];
}

/**
 * The id a record takes in the importing agent: its own in the agent it came from, else a
 * digest of it and the importing agent. Ids are unique across agents, so a record can keep
 * its id only in its own agent; its references to others are mapped alike, and a rerun maps
 * every id the same way.
 */
export function importedId(from: string, to: string, id: string): string {
  if (from === to) return id;
  return createHash('sha256')
    .update('import\0')
    .update(to)
    .update('\0')
    .update(id)
    .digest('base64url')
    .slice(0, 32);
}

/**
 * Import an export's lines into the agent. Every line is checked (core/exportFormat.ts); at
 * the first it refuses, what came before it is written and the import stops with
 * InvalidInputError naming the line: nothing of that line or after it is written. Records the
 * agent already holds are skipped, so an interrupted import is finished by running it again;
 * the caller decides whether an agent that already holds entries may take one
 * (`--into-existing`).
 */
export async function importExport(
  store: Store,
  agentId: string,
  lines: AsyncIterable<string>,
  at: number,
): Promise<ImportResult> {
  const reader = new ExportReader();
  const result: ImportResult = {
    agentId,
    from: '',
    idsKept: false,
    lines: 0,
    imported: { tombstones: 0, hot: 0, cold: 0 },
    skipped: 0,
    erasuresNotApplied: [],
  };
  let writer: PageWriter | undefined;
  let page: (TombstoneLine | EntryLine)[] = [];
  try {
    for await (const text of lines) {
      const line = reader.read(text);
      result.lines++;
      if (line === undefined) continue;
      if (line.type === 'header') {
        const from = line.agentId;
        result.from = from;
        result.idsKept = from === agentId;
        writer = new PageWriter(store, agentId, (id) => importedId(from, agentId, id), at, result);
      } else if (line.type === 'tombstone' || line.type === 'entry') {
        if (line.type === 'tombstone' && isErasure(line) && (line.terms.length > 0 || line.atoms?.length)) {
          throw refusedLine(result.lines, 'an erasure tombstone holds no terms and no atoms');
        }
        page.push(line);
        if (page.length >= PAGE) {
          await writer!.write(page);
          page = [];
        }
      }
    }
    reader.finish();
  } catch (err) {
    if (err instanceof InvalidInputError && writer) {
      await writer.write(page);
      await writer.finish();
    }
    throw err;
  }
  await writer!.write(page);
  await writer!.finish();
  return result;
}

/**
 * Distinct terms an import counts before it writes their document frequencies: one write of
 * them all costs a fraction of one per page (a term in many pages is written once), and a
 * crash loses at most this many terms' counts, which then err low, as the night's can.
 */
const TERMS_PER_COUNT = 50_000;
/** Term documents per insert. */
const INSERT_BATCH = 1000;

/** Writes pages of one import: tombstones first, then entries, each with its id registered. */
class PageWriter {
  private registered = false;
  /** Entries holding each term key, of those written and not yet counted. */
  private readonly termCounts = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly agentId: string,
    private readonly mapId: (id: string) => string,
    private readonly at: number,
    private readonly result: ImportResult,
  ) {}

  async write(page: readonly (TombstoneLine | EntryLine)[]): Promise<void> {
    if (page.length === 0) return;
    if (!this.registered) {
      // The night fans out over registered agents (and `memgate verify` with no agent reads them).
      await registerAgent(this.store, this.agentId, this.at);
      this.registered = true;
    }
    const stones = page
      .filter((l): l is TombstoneLine => l.type === 'tombstone')
      .map((l) => this.tombstone(l));
    await this.writeTombstones(stones);
    const counts: Partial<Record<Tier, number>> = {};
    for (const tier of TIERS) {
      const entries = page
        .filter((l): l is EntryLine => l.type === 'entry' && l.tier === tier)
        .map((l) => this.entry(l));
      const inserted = await this.writeEntries(tier, entries);
      this.result.imported[tier] += inserted.length;
      await countChanges(
        this.store,
        this.agentId,
        inserted.map((entry) => ({ after: { entry, tier } })),
      );
      // The nightly run counts a write (its terms, its tier) once its `terms` work is settled;
      // one whose work is still pending is counted by the night, as it would have been. A
      // summary is in hot's count from its writing on, its terms counted by the next night.
      const settled = inserted.filter((e) => !e.pending?.includes('terms'));
      const inHotCount = inserted.filter((e) => !awaitsCounting(e));
      if (tier === 'cold') counts.cold = inserted.length;
      else {
        counts.hot = inHotCount.length;
        if (inHotCount.length > 0) await countWrittenOn(this.store, this.agentId, oldestWriteDay(inHotCount));
      }
      for (const e of settled) {
        for (const key of new Set(e.terms.map((t) => termKey(this.agentId, t))))
          this.termCounts.set(key, (this.termCounts.get(key) ?? 0) + 1);
      }
    }
    if (this.termCounts.size >= TERMS_PER_COUNT) await this.finish();
    await countImported(this.store, this.agentId, counts);
  }

  /**
   * The counted terms into the document frequencies: a term new to the agent is inserted with
   * its count (an import into a new agent finds nearly all of them new), only the others are
   * incremented, a command per few terms.
   */
  async finish(): Promise<void> {
    const counts = [...this.termCounts];
    this.termCounts.clear();
    for (let i = 0; i < counts.length; i += INSERT_BATCH) {
      const batch = counts.slice(i, i + INSERT_BATCH);
      const known = await insertIgnoringExisting(
        this.store.termStats,
        batch.map(([_id, df]) => ({ _id, agentId: this.agentId, df })),
      );
      if (known.size === 0) continue;
      await this.store.termStats.bulkWrite(
        batch
          .filter(([_id]) => known.has(_id))
          .map(([_id, df]) => ({
            updateOne: {
              filter: { _id },
              update: { $inc: { df }, $setOnInsert: { agentId: this.agentId } },
              upsert: true,
            },
          })),
        { ordered: false },
      );
    }
  }

  private tombstone(line: TombstoneLine): Tombstone {
    const { type: _type, _id, standIn, ...rest } = line;
    const stone: Tombstone = {
      ...rest,
      _id: this.mapId(_id),
      agentId: this.agentId,
      termKeys: termKeys(this.agentId, line.terms),
    };
    if (standIn) stone.standIn = { ...standIn, summaryId: this.mapId(standIn.summaryId) };
    // The reason may name an entry too: the id it has here.
    const source = erasedSourceOf(line.reason);
    if (source !== undefined) stone.reason = derivedFromErased(this.mapId(source));
    return stone;
  }

  /** The stored form for this agent: its keys, and awaiting a vector of this deployment's model. */
  private entry(line: EntryLine): Entry {
    const { type: _type, tier: _tier, live, ...portable } = line;
    // Terms again from the text, with their counts, as this deployment's recall reads them.
    const counted = countTerms(portable.text);
    const entry: Entry = {
      ...portable,
      ...counted,
      _id: this.mapId(portable._id),
      agentId: this.agentId,
      termKeys: termKeys(this.agentId, counted.terms),
      pageKeys: pageKeys(this.agentId, this.mapId(portable._id)),
      pending: [...new Set([...(portable.pending ?? []), 'embed' as const])],
    };
    const { liveKeys, dormantKey } = gateKeys(entry, entry.dormantAt);
    entry.dormantKey = dormantKey;
    entry.lastWriteKey = writeDayKey(entry).lastWriteKey;
    if (live) entry.liveKeys = liveKeys;
    if (portable.supersededBy !== undefined) entry.supersededBy = this.mapId(portable.supersededBy);
    if (portable.supersedes !== undefined) entry.supersedes = this.mapId(portable.supersedes);
    if (portable.derivedFrom) entry.derivedFrom = portable.derivedFrom.map(this.mapId);
    if (portable.subsumedBy) {
      entry.subsumedBy = portable.subsumedBy.map((s) => ({ ...s, summaryId: this.mapId(s.summaryId) }));
    }
    return entry;
  }

  /** Ids already registered: only those can be stored or behind a tombstone already. */
  private async register(ids: string[]): Promise<Set<string>> {
    return insertIgnoringExisting(
      this.store.entryIds,
      ids.map((_id) => ({ _id, agentId: this.agentId })),
    );
  }

  private async writeTombstones(page: Tombstone[]): Promise<void> {
    const stones = this.firstOfEach(page);
    if (stones.length === 0) return;
    const seen = await this.register(stones.map((s) => s._id));
    const stored = await Promise.all(stones.map((s) => seen.has(s._id) && this.storedEntry(s._id)));
    const fresh: Tombstone[] = [];
    stones.forEach((stone, i) => {
      if (!stored[i]) return void fresh.push(stone);
      // The agent holds the entry: the tombstone would stand behind a live entry.
      this.result.skipped++;
      if (isErasure(stone)) this.result.erasuresNotApplied.push(stone._id);
    });
    const existing = await insertIgnoringExisting(this.store.tombstones, fresh);
    await this.listErasuresHeldOtherwise(fresh.filter((s) => existing.has(s._id) && isErasure(s)));
    this.result.imported.tombstones += fresh.length - existing.size;
    await countTombstones(
      this.store,
      this.agentId,
      fresh.filter((stone) => !existing.has(stone._id)).map((stone) => ({ to: stone.reason })),
    );
    this.result.skipped += existing.size;
  }

  /**
   * Erasures the file brings for ids the agent holds behind a tombstone that is not one (an
   * eviction's keeps terms of the text, and its stand-in the facts): listed, as for an entry
   * held, since only `forget` erases what they derived (docs/invariants.md, Erasure wins).
   */
  private async listErasuresHeldOtherwise(erasures: Tombstone[]): Promise<void> {
    if (erasures.length === 0) return;
    const held = await findByIds(
      this.store.tombstones,
      erasures.map((s) => s._id),
      { agentId: 1, reason: 1 },
    );
    for (const { _id } of erasures) {
      const stone = held.get(_id);
      if (stone?.agentId === this.agentId && !isErasure(stone)) this.result.erasuresNotApplied.push(_id);
    }
  }

  /**
   * The entries inserted: none behind a tombstone (docs/invariants.md, Erasure wins), none
   * already there.
   */
  private async writeEntries(tier: Tier, entries: Entry[]): Promise<Entry[]> {
    const unique = this.firstOfEach(entries);
    if (unique.length === 0) return [];
    const seen = await this.register(unique.map((e) => e._id));
    const behindTombstone = await Promise.all(
      unique.map((e) => seen.has(e._id) && findById(this.store.tombstones, this.agentId, e._id)),
    );
    const unerased = unique.filter((_, i) => !behindTombstone[i]);
    // One copy of an entry: none beside one in the other tier, whether it moved there since
    // the export (or a night moved it between an interrupted import and its rerun), or the
    // export caught it mid-move, in both (hot's, written first, is the one kept).
    const elsewhere = await findByIds(
      tierCollection(this.store, tier === 'hot' ? 'cold' : 'hot'),
      unerased.filter((e) => seen.has(e._id)).map((e) => e._id),
      { agentId: 1 },
    );
    const fresh = unerased.filter((e) => elsewhere.get(e._id)?.agentId !== this.agentId);
    this.result.skipped += unique.length - fresh.length;
    const existing = await insertIgnoringExisting(tierCollection(this.store, tier), fresh);
    this.result.skipped += existing.size;
    const inserted = fresh.filter((e) => !existing.has(e._id));
    // Erasure wins (docs/invariants.md): a forget of a held id that landed after the look above
    // finds this copy gone only if it is withdrawn now.
    const withdrawn = await withdrawErased(
      this.store,
      this.agentId,
      inserted.filter((e) => seen.has(e._id)).map((e) => e._id),
    );
    this.result.skipped += withdrawn.size;
    return inserted.filter((e) => !withdrawn.has(e._id));
  }

  /** A page's records, the first of each id: a repeated one is skipped. */
  private firstOfEach<T extends { _id: string }>(records: T[]): T[] {
    const unique = new Map<string, T>();
    for (const r of records) {
      if (unique.has(r._id)) this.result.skipped++;
      else unique.set(r._id, r);
    }
    return [...unique.values()];
  }

  private async storedEntry(id: string): Promise<boolean> {
    for (const tier of TIERS)
      if (await findById(tierCollection(this.store, tier), this.agentId, id)) return true;
    return false;
  }
}
