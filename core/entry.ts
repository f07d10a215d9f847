import { z } from 'zod';
import { atoms } from './atoms';
import { assertNotAhead } from './clock';
import { InvalidInputError, type Issue } from './errors';
import { dayOf, dormantAt, HOUR_MS, type Salience } from './salience';
import { countTerms, countTokens } from './text';

/** The entry document, identical in `entries_hot` and `entries_cold`. */
export type EntryKind = 'episode' | 'fact' | 'constraint' | 'summary';
export type Origin = 'user' | 'agent' | 'tool' | 'consolidation';
export type Tier = 'hot' | 'cold';

/**
 * Nightly work an entry still awaits. Each phase finds its own work by equality on this
 * field (an index serves it on every server) and settles it, so a night reads what changed
 * since the last one instead of the whole store (docs/invariants.md, Index-driven).
 * `terms`: its terms are not yet in the document frequencies; `cluster`: not yet compared
 * with its neighbours; `supersede`: a fact whose subject was not yet checked; `expire`: a
 * volatile fact not yet past `freshUntil`; `embed`: no vector of its current text yet (the
 * agent's workflow embeds new entries soon after the write; the night embeds what is left).
 */
export type PendingWork = 'terms' | 'cluster' | 'supersede' | 'expire' | 'embed';

export interface Provenance {
  origin: Origin;
  sessionId?: string;
  turn?: number;
  ref?: string;
}

export interface Entry {
  _id: string;
  agentId: string;
  kind: EntryKind;
  text: string;
  tokens: number;
  terms: string[];
  /**
   * How often each of `terms` occurs in the text, in the same order: BM25's term frequencies
   * and length, so that recall scores a candidate without tokenising it. Absent on entries
   * stored before it was kept, which recall tokenises.
   */
  termCounts?: number[];
  atoms: string[];
  source: Provenance;
  writtenAt: number;
  salience: Salience;
  /** When salience falls below the gate; default recall requires dormantAt > now. */
  dormantAt: number;
  confidence: number;
  verified: boolean;
  corroborations: { source: string; at: number }[];
  validity: { volatile: boolean; freshUntil?: number };
  /** Set by the expire phase once a volatile fact is past freshUntil; never deleted for it. */
  expiredAt?: number;
  /** Subject and attribute of a fact, so a newer fact about the same pair supersedes it. */
  subject?: string;
  attribute?: string;
  isActive: boolean;
  supersededBy?: string;
  supersedes?: string;
  /** Set by `memgate restore`: only a fact written after it supersedes this one again. */
  restoredAt?: number;
  derivedFrom?: string[];
  lossy_summary?: boolean;
  lossyReasons?: string[];
  subsumedBy?: { summaryId: string; lossless: boolean }[];
  refreshedAt?: number;
  spilledAt?: number;
  pending?: PendingWork[];
  /** The model of the entry's vector (store/vectors.ts), once it has one. */
  embeddedWith?: string;
  /**
   * `<agentId> <term>` for each term: the store's lookup key for an agent's postings, one
   * equality that one index serves precisely in a table many agents share (store/entries.ts).
   */
  termKeys?: string[];
  /**
   * The term keys again, while the last nightly run found the entry above the gate: default
   * recall reads these, so it does not read the postings of dormant entries. Kept on every
   * entry whose `dormantAt` moves; dropped by the night after `dormantAt` passes.
   */
  liveKeys?: string[];
  /** `<agentId> <dayOf(dormantAt)>`: how the night finds the entries that went dormant. */
  dormantKey?: string;
  /**
   * `<agentId> <dayOf(lastWriteAt)>`: how reclaim reads hot from the entries written longest
   * ago (core/nightly/phases.ts, reclaimPhase) instead of reading every hot entry.
   */
  lastWriteKey?: string;
  /**
   * `<agentId> <first n characters of the id>` for n = 1 and 2: the agent's entries in pages
   * of about equal size, each read by equality, in id order (store/browse.ts).
   */
  pageKeys?: string[];
  version: number;
}

/** The last time the document was written: the original write or a refresh. */
export function lastWriteAt(e: Pick<Entry, 'writtenAt' | 'refreshedAt'>): number {
  return Math.max(e.writtenAt, e.refreshedAt ?? e.writtenAt);
}

/** The day of the entry's last write (its `lastWriteKey`). */
export function lastWriteDay(e: Pick<Entry, 'writtenAt' | 'refreshedAt'>): number {
  return dayOf(lastWriteAt(e));
}

/** The earliest last-write day of these entries, and no later than `atMost` (Infinity for none). */
export function oldestWriteDay(
  entries: readonly Pick<Entry, 'writtenAt' | 'refreshedAt'>[],
  atMost = Infinity,
): number {
  return entries.reduce((day, e) => Math.min(day, lastWriteDay(e)), atMost);
}

/** What a newly stored entry (a write or a summary) leaves for the nightly run. */
export function initialPending(e: Pick<Entry, 'kind' | 'subject' | 'validity'>): PendingWork[] {
  const work: PendingWork[] = ['terms'];
  if (e.kind !== 'summary') work.push('cluster');
  if (e.subject !== undefined) work.push('supersede');
  if (e.validity.volatile && e.validity.freshUntil !== undefined) work.push('expire');
  work.push('embed');
  return work;
}

/** Tenant ids are plain identifiers: never an object, never a `$` operator. */
export const agentIdSchema = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/,
    'an identifier of 1-128 of A-Z a-z 0-9 . _ : - (no $, no spaces)',
  );

/**
 * A string with no lone UTF-16 surrogate. It has no UTF-8 form, so the store (and any payload)
 * would keep U+FFFD in its place: what was kept would not be what was sent, nor what an id
 * was derived from.
 */
export const wellFormedString = z
  .string()
  .refine((s) => s.isWellFormed(), 'must be well-formed Unicode (no lone surrogate)');

/** The latest instant a Date can hold, in epoch milliseconds. */
export const MAX_EPOCH_MS = 8.64e15;

/** An instant in epoch milliseconds, within what a Date can hold. */
export const epochMs = z.number().int().min(0).max(MAX_EPOCH_MS);

export interface WriteLimits {
  maxTextChars: number;
  maxEntriesPerWrite: number;
}

export function writeEntrySchema(limits: WriteLimits) {
  return z
    .strictObject({
      text: wellFormedString
        .max(limits.maxTextChars, `at most ${limits.maxTextChars} characters`)
        .refine((t) => t.trim().length > 0, 'must not be empty'),
      kind: z.enum(['episode', 'fact', 'constraint']).default('episode'),
      salience: z.number().gt(0, 'must be in (0, 1]').max(1, 'must be in (0, 1]').default(0.5),
      idempotencyKey: wellFormedString.min(1).max(256).optional(),
      source: z
        .strictObject({
          origin: z.enum(['user', 'agent', 'tool']),
          sessionId: wellFormedString.min(1).max(256).optional(),
          turn: z.number().int().min(0).optional(),
          ref: wellFormedString.min(1).max(1024).optional(),
        })
        .default({ origin: 'agent' }),
      writtenAt: epochMs.optional(),
      confidence: z.number().min(0).max(1).default(0.5),
      verified: z.boolean().default(false),
      volatile: z.boolean().default(false),
      freshUntil: epochMs.optional(),
      subject: wellFormedString.min(1).max(256).optional(),
      attribute: wellFormedString.min(1).max(256).optional(),
    })
    .refine((e) => e.freshUntil === undefined || e.volatile, {
      error: 'freshUntil is only meaningful for a volatile fact',
      path: ['freshUntil'],
    })
    .refine((e) => (e.subject === undefined) === (e.attribute === undefined), {
      error: 'subject and attribute go together',
      path: ['attribute'],
    });
}

export type WriteEntryInput = z.input<ReturnType<typeof writeEntrySchema>>;
export type WriteEntry = z.output<ReturnType<typeof writeEntrySchema>>;

/**
 * `build`, run once per distinct limits and kept: building a zod schema costs far more than
 * running it, and the schemas of a write are needed at every write.
 */
export function builtOncePerLimits<S>(build: (limits: WriteLimits) => S): (limits: WriteLimits) => S {
  const built = new Map<string, S>();
  return (limits) => {
    const key = `${limits.maxTextChars}:${limits.maxEntriesPerWrite}`;
    let schema = built.get(key);
    if (schema === undefined) {
      schema = build(limits);
      built.set(key, schema);
    }
    return schema;
  };
}

export const writeRequestSchema = builtOncePerLimits(buildWriteRequestSchema);

function buildWriteRequestSchema(limits: WriteLimits) {
  return z.strictObject({
    agentId: agentIdSchema,
    entries: z
      .array(writeEntrySchema(limits))
      .min(1, 'at least one entry')
      .max(limits.maxEntriesPerWrite, `at most ${limits.maxEntriesPerWrite} entries per write`),
  });
}

export type WriteRequestInput = { agentId: string; entries: WriteEntryInput[] };
export type WriteRequest = { agentId: string; entries: WriteEntry[] };

export function zodIssues(error: z.ZodError): Issue[] {
  return error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
}

/**
 * Bytes a write may carry as it travels (UTF-8 of its JSON): it is one Temporal Update
 * payload (the server refuses payloads over 2 MB by default and gRPC messages over 4 MB), and
 * the workflow persists writes in batches under the same bound. Control characters take six
 * bytes each once escaped, so a character limit alone does not bound this.
 */
export const MAX_WRITE_BYTES = 1024 * 1024;
/** Bytes one entry may carry as it travels, so that a full write of large entries still fits. */
export const MAX_ENTRY_BYTES = 64 * 1024;

/** UTF-8 bytes of a value's JSON: what a payload of it weighs. Pure, for the workflow too. */
export function encodedBytes(value: unknown): number {
  const json = JSON.stringify(value) ?? '';
  let bytes = 0;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < json.length) {
      const next = json.charCodeAt(i + 1);
      if (next >= 0xdc00 && next < 0xe000) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

function assertWithinBytes(input: unknown): void {
  const entries = (input as { entries: unknown[] }).entries;
  const issues: Issue[] = [];
  entries.forEach((e, i) => {
    const bytes = encodedBytes(e);
    if (bytes > MAX_ENTRY_BYTES) {
      issues.push({ path: `entries.${i}`, message: `${bytes} bytes as JSON; at most ${MAX_ENTRY_BYTES}` });
    }
  });
  const total = encodedBytes(input);
  if (issues.length === 0 && total > MAX_WRITE_BYTES) {
    issues.push({
      path: 'entries',
      message: `${total} bytes as JSON; a write carries at most ${MAX_WRITE_BYTES}`,
    });
  }
  if (issues.length > 0) throw new InvalidInputError('invalid write', issues);
}

/**
 * Parse or throw InvalidInputError; pure, so the workflow's Update validator can run it.
 * `now` is the deciding clock: a write may not be dated past it by more than the clock skew
 * allowed (its salience would start above its base).
 */
export function parseWriteRequest(input: unknown, limits: WriteLimits, now: number): WriteRequest {
  const request = parsedWrite(input, limits);
  assertWithinBytes(input);
  assertDatedBy(request, now);
  return request;
}

/**
 * The entries opened from a sealed write, parsed as parseWriteRequest does but for their
 * bytes: the client checked those as given, then filled in defaults and a date, and the
 * workflow bounded them sealed (core/sealed.ts, ADDED_BEFORE_SEALING_BYTES).
 */
export function parseOpenedWrite(input: unknown, limits: WriteLimits, now: number): WriteRequest {
  const request = parsedWrite(input, limits);
  assertDatedBy(request, now);
  return request;
}

function parsedWrite(input: unknown, limits: WriteLimits): WriteRequest {
  const parsed = writeRequestSchema(limits).safeParse(input);
  if (!parsed.success) throw new InvalidInputError('invalid write', zodIssues(parsed.error));
  return parsed.data;
}

function assertDatedBy(request: WriteRequest, now: number): void {
  request.entries.forEach((e, i) => {
    if (e.writtenAt !== undefined) assertNotAhead(e.writtenAt, now, `entries.${i}.writtenAt`, 'write');
  });
}

export interface MemoryPolicy {
  halfLifeMs: number;
  gateThreshold: number;
}

export function memoryPolicy(config: { halfLifeHours: number; gateThreshold: number }): MemoryPolicy {
  return { halfLifeMs: config.halfLifeHours * HOUR_MS, gateThreshold: config.gateThreshold };
}

/** The stored document for a validated write; `writtenAt` must already be fixed. */
export function buildEntry(
  id: string,
  agentId: string,
  input: WriteEntry & { writtenAt: number },
  policy: MemoryPolicy,
): Entry {
  const salience = { base: input.salience, at: input.writtenAt };
  const entry: Entry = {
    _id: id,
    agentId,
    kind: input.kind,
    text: input.text,
    tokens: countTokens(input.text),
    ...countTerms(input.text),
    atoms: atoms(input.text),
    source: input.source,
    writtenAt: input.writtenAt,
    salience,
    dormantAt: dormantAt(salience, policy.halfLifeMs, policy.gateThreshold),
    confidence: input.confidence,
    verified: input.verified,
    corroborations: [],
    validity:
      input.freshUntil === undefined
        ? { volatile: input.volatile }
        : { volatile: true, freshUntil: input.freshUntil },
    isActive: true,
    version: 1,
  };
  if (input.subject !== undefined) {
    entry.subject = input.subject.toLowerCase();
    entry.attribute = input.attribute?.toLowerCase();
  }
  entry.pending = initialPending(entry);
  return entry;
}

/** expired = volatile && now > freshUntil. */
export function isExpired(entry: Pick<Entry, 'validity'>, now: number): boolean {
  return (
    entry.validity.volatile && entry.validity.freshUntil !== undefined && now > entry.validity.freshUntil
  );
}
