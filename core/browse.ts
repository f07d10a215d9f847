import { z } from 'zod';
import { agentIdSchema, isExpired, type Entry, type MemoryPolicy, type Tier } from './entry';
import { entryIdSchema } from './messages';
import { salienceAt } from './salience';

/**
 * The memory browser's requests and the shapes of what it lists (docs/browser.md): pure, for
 * the client that validates them and the server whose schemas describe them.
 */

/** The latest instant a Date holds (core/entry.ts, epochMs), for a query string's number. */
const MAX_EPOCH_MS = 8.64e15;

/** Entries, agents or nights one page may hold. */
export const MAX_PAGE = 200;

/**
 * A whole number, from a query string in decimal digits or from a caller as a number.
 * z.coerce alone reads '' and blanks as 0 (an empty `before=` listed nothing) and takes
 * '1e3' or '0x10'. The strings are only its spelling: the API documents `inner`.
 */
function fromQuery<S extends z.ZodType>(inner: S) {
  return z.preprocess((v) => (typeof v === 'string' && /^\d{1,16}$/.test(v) ? Number(v) : v), inner);
}
const whole = (min: number, max: number) =>
  z.number('a whole number in decimal digits').int().min(min).max(max);

const limit = (fallback: number) => fromQuery(whole(1, MAX_PAGE).default(fallback));

export const agentsRequestSchema = z.strictObject({
  after: agentIdSchema.optional(),
  limit: limit(100),
});

export const nightsRequestSchema = z.strictObject({
  agentId: agentIdSchema,
  /** Nights before this `asOf` (the `next` of the page before). */
  before: fromQuery(whole(0, MAX_EPOCH_MS)).optional(),
  limit: limit(60),
});

/** Where a listing of an agent's entries stands: the level of its pages, the next page, the last id given. */
export interface EntriesCursor {
  level: 1 | 2;
  page: number;
  after?: string;
}

/** A cursor as text, `<level>.<page>` or `<level>.<page>.<entry id>`: opaque to a caller, which passes back the `next` it got. */
export function entriesCursorText(cursor: EntriesCursor): string {
  return [cursor.level, cursor.page, ...(cursor.after !== undefined ? [cursor.after] : [])].join('.');
}

export function parseEntriesCursor(text: string): EntriesCursor {
  const [level, page, after] = text.split('.');
  return { level: Number(level) as 1 | 2, page: Number(page), ...(after !== undefined && { after }) };
}

/** Pages of a level: each is one or two characters of a base64url id. */
export const PAGES_PER_LEVEL = { 1: 64, 2: 64 * 64 } as const;

const entriesCursorSchema = z
  .string()
  .regex(/^[12]\.\d{1,4}(\.[A-Za-z0-9_-]{1,64})?$/, 'a cursor from the `next` of an earlier page')
  .refine((text) => {
    const { level, page } = parseEntriesCursor(text);
    return page < PAGES_PER_LEVEL[level];
  }, 'a cursor from the `next` of an earlier page');

export const entriesRequestSchema = z.strictObject({
  agentId: agentIdSchema,
  cursor: entriesCursorSchema.optional(),
  limit: limit(50),
});

export const entryRequestSchema = z.strictObject({ agentId: agentIdSchema, entryId: entryIdSchema });

/** Where an entry stands: cold, or in hot as the census counts it (core/census.ts) but as of now. */
export type EntryState = 'active' | 'dormant' | 'superseded' | 'expired' | 'inactive' | 'cold';

export function entryState(entry: Entry, tier: Tier, now: number): EntryState {
  if (tier === 'cold') return 'cold';
  if (!entry.isActive) return entry.supersededBy !== undefined ? 'superseded' : 'inactive';
  if (isExpired(entry, now) || entry.expiredAt !== undefined) return 'expired';
  return entry.dormantAt > now ? 'active' : 'dormant';
}

/** Characters of an entry's text a listing shows. */
export const LISTED_TEXT_CHARS = 160;

/** An entry as a page of the listing shows it. */
export interface ListedEntry {
  id: string;
  tier: Tier;
  kind: Entry['kind'];
  /** Its first `LISTED_TEXT_CHARS` characters. */
  text: string;
  state: EntryState;
  salience: number;
  lossy_summary?: boolean;
  writtenAt: number;
}

export function listedEntry(entry: Entry, tier: Tier, now: number, memory: MemoryPolicy): ListedEntry {
  return {
    id: entry._id,
    tier,
    kind: entry.kind,
    text: entry.text.length > LISTED_TEXT_CHARS ? `${entry.text.slice(0, LISTED_TEXT_CHARS)}…` : entry.text,
    state: entryState(entry, tier, now),
    salience: salienceAt(entry.salience, now, memory.halfLifeMs),
    ...(entry.kind === 'summary' && { lossy_summary: entry.lossy_summary !== false }),
    writtenAt: entry.writtenAt,
  };
}

/** An entry as its page shows it: what it holds and where it stands, without the store's lookup keys. */
export type ShownEntry = Omit<
  Entry,
  'agentId' | 'termKeys' | 'liveKeys' | 'dormantKey' | 'lastWriteKey' | 'pageKeys' | 'termCounts' | 'terms'
> & { tier: Tier; state: EntryState; salienceNow: number };

export function shownEntry(entry: Entry, tier: Tier, now: number, memory: MemoryPolicy): ShownEntry {
  const {
    agentId: _agent,
    termKeys: _termKeys,
    liveKeys: _liveKeys,
    dormantKey: _dormantKey,
    lastWriteKey: _lastWriteKey,
    pageKeys: _pageKeys,
    termCounts: _termCounts,
    terms: _terms,
    ...shown
  } = entry;
  return {
    ...shown,
    tier,
    state: entryState(entry, tier, now),
    salienceNow: salienceAt(entry.salience, now, memory.halfLifeMs),
  };
}
