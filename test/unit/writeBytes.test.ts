import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  encodedBytes,
  MAX_ENTRY_BYTES,
  MAX_WRITE_BYTES,
  parseWriteRequest,
  type WriteEntry,
} from '../../core/entry';
import { InvalidInputError } from '../../core/errors';
import { WriteCoalescer } from '../../core/writeCoalescer';

/**
 * Writes are limited in bytes as they travel (JSON, UTF-8), not in UTF-16 code units: a
 * Temporal Update payload above 2 MB is refused by the server, and control characters take
 * six bytes each once escaped.
 */
const LIMITS = { maxTextChars: 16_000, maxEntriesPerWrite: 100 };
const NOW = Date.UTC(2026, 0, 1);

function rejected(request: unknown): InvalidInputError {
  try {
    parseWriteRequest(request, LIMITS, NOW);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidInputError);
    return err as InvalidInputError;
  }
  return expect.unreachable('accepted');
}

describe('byte limits on writes', () => {
  it('counts what travels: UTF-8 of the JSON, escapes included', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (text) => {
        expect(encodedBytes({ text })).toBe(new TextEncoder().encode(JSON.stringify({ text })).length);
      }),
    );
  });

  it('refuses one entry of 16,000 control characters (96 kB escaped), within the character limit', () => {
    const err = rejected({ agentId: 'a1', entries: [{ text: 'x' + '\u0001'.repeat(15_999) }] });
    expect(err.issues).toEqual([expect.objectContaining({ path: 'entries.0' })]);
    expect(err.message).toContain(`${MAX_ENTRY_BYTES}`);
  });

  it('refuses 100 valid entries whose total is past the write limit, naming it', () => {
    const text = 'é'.repeat(8_000); // 16 kB each, 1.6 MB in all
    const err = rejected({
      agentId: 'a1',
      entries: Array.from({ length: 100 }, (_, i) => ({ text: `${i}${text}` })),
    });
    expect(err.issues).toEqual([expect.objectContaining({ path: 'entries' })]);
    expect(err.message).toContain(`${MAX_WRITE_BYTES}`);
  });

  it('accepts a write just under both limits', () => {
    const text = 'a'.repeat(MAX_ENTRY_BYTES - 200);
    const n = Math.floor(MAX_WRITE_BYTES / MAX_ENTRY_BYTES) - 1;
    const request = { agentId: 'a1', entries: Array.from({ length: n }, () => ({ text })) };
    expect(parseWriteRequest(request, { ...LIMITS, maxTextChars: 100_000 }, NOW).entries).toHaveLength(n);
  });

  it('the coalescer never sends more bytes in one Update than one write may carry', async () => {
    const sent: number[] = [];
    const coalescer = new WriteCoalescer<number>(async (_agent, entries) => {
      sent.push(entries.reduce((n, e) => n + encodedBytes(e), 0));
      await new Promise((r) => setTimeout(r, 1));
      return entries.map((_, i) => i);
    }, 100);
    const big = { text: 'b'.repeat(MAX_ENTRY_BYTES - 100) } as WriteEntry;
    // Forty callers of one large entry each, all while the first is in flight.
    await Promise.all(Array.from({ length: 40 }, () => coalescer.write('a1', [big])));
    expect(sent.length).toBeGreaterThan(1);
    for (const bytes of sent) expect(bytes).toBeLessThanOrEqual(MAX_WRITE_BYTES);
  });
});
