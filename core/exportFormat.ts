import { z } from 'zod';
import { agentIdSchema, epochMs, wellFormedString, zodIssues, type Entry, type Tier } from './entry';
import { InvalidInputError, type Issue } from './errors';
import { entryIdSchema } from './messages';

/**
 * An agent's export (docs/export.md): JSON Lines, read and written by `memgate export`,
 * `GET /v1/agents/{agentId}/export` and `memgate import`. One header line, the agent's
 * tombstones, its hot and cold entries as stored, and an end line that counts the records
 * between, so a cut-off export is told from a whole one. Every line is checked against these
 * schemas on the way in; the export writes its lines from the same types.
 */

export const EXPORT_FORMAT = 'memgate-export';
export const EXPORT_VERSION = 1;
/** The media type of an export served over HTTP. */
export const EXPORT_MEDIA_TYPE = 'application/x-ndjson';

/**
 * The longest line an import reads, in bytes: far above any stored entry (a write carries at
 * most 64 KiB of one, core/entry.ts), and what bounds the memory one line can take.
 */
export const MAX_EXPORT_LINE_BYTES = 4 * 1024 * 1024;

/** A term never holds a space: the store keys postings by `<agentId> <term>` (store/terms.ts). */
const term = wellFormedString.regex(/^\S+$/, 'a term: no spaces');
const instant = z.number().min(0);

const headerLineSchema = z.strictObject({
  type: z.literal('header'),
  format: z.literal(EXPORT_FORMAT, `must be "${EXPORT_FORMAT}"`),
  version: z.literal(EXPORT_VERSION, `must be ${EXPORT_VERSION}: the only version this memgate reads`),
  /** The agent exported: an import into another agent maps every id (docs/export.md). */
  agentId: agentIdSchema,
  exportedAt: epochMs,
  /** Vectors are not exported: the importing deployment embeds the entries with its own model. */
  vectors: z.literal(false),
});

/** A tombstone as stored, without the agent and its lookup keys (the import derives both). */
const tombstoneLineSchema = z.strictObject({
  type: z.literal('tombstone'),
  _id: entryIdSchema,
  terms: z.array(term),
  reason: wellFormedString.min(1),
  deletedAt: instant,
  standIn: z
    .strictObject({
      summaryId: entryIdSchema,
      lossy: z.boolean(),
      erased: z.boolean().optional(),
      retired: z.boolean().optional(),
    })
    .optional(),
  subject: wellFormedString.optional(),
  attribute: wellFormedString.optional(),
  writtenAt: instant.optional(),
  restoredAt: instant.optional(),
  atoms: z.array(wellFormedString).optional(),
  runId: wellFormedString.optional(),
});

const portableEntrySchema = z.strictObject({
  _id: entryIdSchema,
  kind: z.enum(['episode', 'fact', 'constraint', 'summary']),
  text: wellFormedString,
  tokens: z.number().int().min(0),
  terms: z.array(term),
  atoms: z.array(wellFormedString),
  source: z.strictObject({
    origin: z.enum(['user', 'agent', 'tool', 'consolidation']),
    sessionId: wellFormedString.optional(),
    turn: z.number().int().min(0).optional(),
    ref: wellFormedString.optional(),
  }),
  writtenAt: epochMs,
  salience: z.strictObject({ base: z.number().gt(0).max(1), at: instant }),
  dormantAt: z.number(),
  confidence: z.number().min(0).max(1),
  verified: z.boolean(),
  corroborations: z.array(z.strictObject({ source: wellFormedString, at: instant })),
  validity: z.strictObject({ volatile: z.boolean(), freshUntil: epochMs.optional() }),
  expiredAt: instant.optional(),
  subject: wellFormedString.optional(),
  attribute: wellFormedString.optional(),
  isActive: z.boolean(),
  supersededBy: entryIdSchema.optional(),
  supersedes: entryIdSchema.optional(),
  restoredAt: instant.optional(),
  derivedFrom: z.array(entryIdSchema).optional(),
  lossy_summary: z.boolean().optional(),
  lossyReasons: z.array(wellFormedString).optional(),
  subsumedBy: z.array(z.strictObject({ summaryId: entryIdSchema, lossless: z.boolean() })).optional(),
  refreshedAt: instant.optional(),
  spilledAt: instant.optional(),
  pending: z.array(z.enum(['terms', 'cluster', 'supersede', 'expire', 'embed'])).optional(),
  version: z.number().int().min(1),
});

/**
 * What an entry line carries of a stored entry: every field but the agent, the lookup keys
 * derived from its terms, `dormantAt` and id (the import derives them for its own agent), the
 * term counts (derived from its text) and the model of a vector that is not exported.
 */
export type PortableEntry = Omit<
  Entry,
  | 'agentId'
  | 'termKeys'
  | 'liveKeys'
  | 'dormantKey'
  | 'lastWriteKey'
  | 'pageKeys'
  | 'embeddedWith'
  | 'termCounts'
>;

// A field added to Entry fails compilation here until the format says what becomes of it.
const everyEntryField: [Exclude<keyof PortableEntry, keyof z.output<typeof portableEntrySchema>>] extends [
  never,
]
  ? true
  : never = true;
void everyEntryField;

const entryLineSchema = portableEntrySchema.extend({
  type: z.literal('entry'),
  tier: z.enum(['hot', 'cold']),
  /** Default recall reads it (it holds `liveKeys`): the last night found it above the gate. */
  live: z.boolean(),
});

const endLineSchema = z.strictObject({
  type: z.literal('end'),
  /** Tombstone and entry lines between the header and this line. */
  records: z.number().int().min(0),
});

/** Any line of an export; the OpenAPI document describes the HTTP export's lines with it. */
export const exportLineSchema = z.discriminatedUnion('type', [
  headerLineSchema,
  tombstoneLineSchema,
  entryLineSchema,
  endLineSchema,
]);

export type HeaderLine = z.output<typeof headerLineSchema>;
export type TombstoneLine = z.output<typeof tombstoneLineSchema>;
export type EntryLine = z.output<typeof entryLineSchema>;
export type EndLine = z.output<typeof endLineSchema>;
export type ExportLine = z.output<typeof exportLineSchema>;

/** One line of an export as written: JSON and its newline. */
export function exportLineText(line: ExportLine): string {
  return `${JSON.stringify(line)}\n`;
}

export function headerLine(agentId: string, exportedAt: number): HeaderLine {
  return {
    type: 'header',
    format: EXPORT_FORMAT,
    version: EXPORT_VERSION,
    agentId,
    exportedAt,
    vectors: false,
  };
}

/** A stored entry's line. */
export function entryLine(entry: Entry, tier: Tier): EntryLine {
  const {
    agentId: _agent,
    termKeys: _termKeys,
    liveKeys,
    dormantKey: _dormantKey,
    lastWriteKey: _lastWriteKey,
    pageKeys: _pageKeys,
    embeddedWith: _model,
    termCounts: _counts,
    ...portable
  } = entry;
  return { type: 'entry', tier, live: liveKeys !== undefined, ...portable };
}

/** A refused line: its number, and that nothing of it (or after it) was written. */
export function refusedLine(lineNo: number, why: string, issues: Issue[] = []) {
  return new InvalidInputError(
    `invalid export: line ${lineNo} refused (${why}); nothing of it or after it was written`,
    issues,
  );
}

/**
 * The order an export's lines come in: the header first, tombstones before entries (so an
 * entry a tombstone covers is never written, docs/invariants.md, Erasure wins), nothing after
 * the end line, whose count must match. A blank line carries no record and is passed over: an
 * editor's final newline or a shell's concatenation leaves them. Pure: the import feeds it
 * every line in turn, and its refusals name the line of the input.
 */
export class ExportReader {
  private seenEntry = false;
  private records = 0;
  private ended = false;
  private lines = 0;
  private seenLine = false;

  /** The next line, parsed and checked; undefined for a blank one; or InvalidInputError naming its line number. */
  read(text: string): ExportLine | undefined {
    const lineNo = ++this.lines;
    if (text.trim() === '') return undefined;
    const first = !this.seenLine;
    this.seenLine = true;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw refusedLine(lineNo, `not JSON: ${(err as Error).message}`);
    }
    const parsed = exportLineSchema.safeParse(json);
    if (!parsed.success)
      throw refusedLine(lineNo, 'not a line of the export format', zodIssues(parsed.error));
    const line = parsed.data;
    if (this.ended) throw refusedLine(lineNo, 'a line after the end line');
    if (first !== (line.type === 'header')) {
      throw refusedLine(lineNo, first ? 'the first line must be the header' : 'a second header');
    }
    if (line.type === 'tombstone') {
      if (this.seenEntry) throw refusedLine(lineNo, 'a tombstone after an entry: tombstones come first');
      this.records++;
    } else if (line.type === 'entry') {
      this.seenEntry = true;
      this.records++;
    } else if (line.type === 'end') {
      if (line.records !== this.records) {
        throw refusedLine(
          lineNo,
          `the end line counts ${line.records} records, and ${this.records} came before it`,
        );
      }
      this.ended = true;
    }
    return line;
  }

  /** At the end of the input: an export without its end line was cut off. */
  finish(): void {
    if (!this.ended) {
      throw refusedLine(
        this.lines + 1,
        this.seenLine ? 'the export ends without its end line: it was cut off' : 'the input is empty',
      );
    }
  }
}
