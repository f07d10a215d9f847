import { z } from 'zod';
import {
  agentIdSchema,
  builtOncePerLimits,
  encodedBytes,
  MAX_ENTRY_BYTES,
  MAX_EPOCH_MS,
  MAX_WRITE_BYTES,
  parseWriteRequest,
  writeEntrySchema,
  zodIssues,
  type WriteLimits,
  type WriteRequest,
} from './entry';
import { InvalidInputError } from './errors';
import { entryIdSchema } from './messages';

/**
 * A write as it travels through Temporal: each entry sealed by the client with a key of its
 * own (codec/sealedEntry.ts), so that its text, provenance and everything else it carries are
 * unreadable in any history once `forget` deletes that key (docs/invariants.md, Erased from
 * Temporal history). The workflow only checks the envelope; the activity that persists the
 * write opens each entry with its key and checks what it holds. The id travels beside the
 * sealed entry: it names the key, and the activity derives it again from what it opens.
 */

/** AES-GCM's nonce and tag, before base64. */
export const SEAL_OVERHEAD_BYTES = 28;

/** Base64 characters of `bytes` sealed. */
export function sealedChars(bytes: number): number {
  return 4 * Math.ceil((bytes + SEAL_OVERHEAD_BYTES) / 3);
}

/**
 * Bytes of JSON the client adds to an entry between checking its size as given and sealing
 * it: every default its parse fills in, and the `writtenAt` it fixes, at their longest
 * (client/client.ts, write). Read off the schema, so a default added there is counted here.
 */
export const ADDED_BEFORE_SEALING_BYTES = (() => {
  const given = { text: 'x' };
  const parsed = writeEntrySchema({ maxTextChars: 1, maxEntriesPerWrite: 1 }).parse(given);
  return encodedBytes({ ...parsed, writtenAt: MAX_EPOCH_MS }) - encodedBytes(given);
})();

/**
 * The most base64 characters the sealed entries of an Update of `n` entries hold when the
 * client sealed them: one write it accepted carries at most MAX_WRITE_BYTES as given, each
 * entry then grown by ADDED_BEFORE_SEALING_BYTES; writes it coalesced carry at most that as
 * grown (core/writeCoalescer.ts). Each entry is sealed with a nonce and tag of its own and
 * rounded up to a whole base64 group on its own. Only ever widened: a write a recorded history
 * took must still be taken on replay.
 */
export function maxSealedChars(n: number): number {
  return sealedChars(MAX_WRITE_BYTES + n * (ADDED_BEFORE_SEALING_BYTES + SEAL_OVERHEAD_BYTES)) + 4 * n;
}

/** The most base64 characters of one sealed entry: one the client accepted, grown as above. */
export const MAX_SEALED_ENTRY_CHARS = sealedChars(MAX_ENTRY_BYTES + ADDED_BEFORE_SEALING_BYTES);

export const sealedEntrySchema = z.strictObject({
  id: entryIdSchema,
  sealed: z
    .string()
    .max(MAX_SEALED_ENTRY_CHARS, `at most ${MAX_SEALED_ENTRY_CHARS} characters`)
    .regex(/^[A-Za-z0-9+/]+={0,2}$/, 'base64'),
});
export type SealedEntry = z.output<typeof sealedEntrySchema>;

export interface SealedWrite {
  agentId: string;
  entries: SealedEntry[];
}

/** What the agent's workflow takes as a write: sealed, or in clear as before sealing existed. */
export type WriteUpdate = WriteRequest | SealedWrite;

/**
 * Whether `w` has a sealed write's shape: every entry an id and a sealed string. Total, since
 * the codec endpoint asks it of any JSON a caller sends; its bounds are parseWriteUpdate's.
 */
export function isSealedWrite(w: unknown): w is SealedWrite {
  const v = w as { agentId?: unknown; entries?: unknown } | null;
  return (
    typeof v?.agentId === 'string' &&
    Array.isArray(v.entries) &&
    v.entries.length > 0 &&
    v.entries.every((e) => {
      const entry = e as { id?: unknown; sealed?: unknown } | null;
      return typeof entry?.id === 'string' && typeof entry.sealed === 'string';
    })
  );
}

// The agent's workflow parses every write twice (its validator and its handler).
const sealedWriteSchema = builtOncePerLimits((limits) =>
  z.strictObject({
    agentId: agentIdSchema,
    entries: z
      .array(sealedEntrySchema)
      .min(1, 'at least one entry')
      .max(limits.maxEntriesPerWrite, `at most ${limits.maxEntriesPerWrite} entries per write`),
  }),
);

/**
 * Parse a write as the agent's workflow takes it, or throw InvalidInputError; pure, for the
 * Update validator. A write in clear is still taken, so that a history recorded before
 * writes were sealed replays as it ran.
 */
export function parseWriteUpdate(input: unknown, limits: WriteLimits, now: number): WriteUpdate {
  const entries = (input as { entries?: unknown } | null)?.entries;
  const sealed =
    Array.isArray(entries) && entries.some((e) => (e as { sealed?: unknown } | null)?.sealed !== undefined);
  if (!sealed) return parseWriteRequest(input, limits, now);
  const parsed = sealedWriteSchema(limits).safeParse(input);
  if (!parsed.success) throw new InvalidInputError('invalid write', zodIssues(parsed.error));
  // The sealed entries alone: their ids and the agent id around them are bounded by their schemas.
  const most = maxSealedChars(parsed.data.entries.length);
  const chars = parsed.data.entries.reduce((n, e) => n + e.sealed.length, 0);
  if (chars > most) {
    throw new InvalidInputError('invalid write', [
      { path: 'entries', message: `${chars} characters sealed; a sealed write carries at most ${most}` },
    ]);
  }
  return parsed.data;
}
