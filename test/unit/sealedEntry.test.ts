import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { openEntry, openSealedWrite, sealEntry } from '../../codec/sealedEntry';
import {
  encodedBytes,
  MAX_ENTRY_BYTES,
  MAX_WRITE_BYTES,
  parseWriteRequest,
  type WriteEntry,
  type WriteRequestInput,
} from '../../core/entry';
import { InvalidInputError } from '../../core/errors';
import { isSealedWrite, MAX_SEALED_ENTRY_CHARS, parseWriteUpdate, type SealedWrite } from '../../core/sealed';
import { entryId } from '../../core/ids';
import { WriteCoalescer } from '../../core/writeCoalescer';
import { writtenEntryId } from '../../store/entries';

const LIMITS = { maxTextChars: 16_000, maxEntriesPerWrite: 100 };
const NOW = Date.UTC(2026, 11, 1);

describe('an entry sealed under its own key', () => {
  it('opens as what was sealed, under its key, agent and id only', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), (text, agentId) => {
        const key = randomBytes(32);
        const sealed = sealEntry(agentId, 'e1', { text }, key);
        expect(openEntry(agentId, 'e1', sealed, key)).toEqual({ text });
        expect(openEntry(agentId, 'e2', sealed, key)).toBeUndefined();
        expect(openEntry(`${agentId}x`, 'e1', sealed, key)).toBeUndefined();
        expect(openEntry(agentId, 'e1', sealed, randomBytes(32))).toBeUndefined();
      }),
    );
  });

  it('does not open once altered, and holds its text in no readable form', () => {
    const key = randomBytes(32);
    const text = 'The vendor needs 30 days of notice.';
    const sealed = sealEntry('a', 'e1', { text }, key);
    expect(Buffer.from(sealed, 'base64').toString('latin1')).not.toContain('vendor');
    const bytes = Buffer.from(sealed, 'base64');
    bytes.writeUInt8(bytes.readUInt8(bytes.length - 1) ^ 1, bytes.length - 1);
    expect(openEntry('a', 'e1', bytes.toString('base64'), key)).toBeUndefined();
  });
});

describe('a sealed write as the workflow and the persisting activity take it', () => {
  const agentId = 'agent-1';
  const entry = {
    text: 'Lunch orders close at eleven.',
    source: { origin: 'agent' as const },
    writtenAt: NOW,
  };
  const id = entryId(agentId, entry);

  it('is taken by its envelope, and refused when the envelope is wrong', () => {
    const key = randomBytes(32);
    const write = { agentId, entries: [{ id, sealed: sealEntry(agentId, id, entry, key) }] };
    expect(parseWriteUpdate(write, LIMITS, NOW)).toEqual(write);
    for (const bad of [
      { agentId, entries: [{ id, sealed: 'not base64!' }] },
      { agentId, entries: [{ id: '$gt', sealed: 'AAAA' }] },
      { agentId, entries: [{ id, sealed: 'A'.repeat(MAX_SEALED_ENTRY_CHARS + 4) }] },
      // Each entry within its bound, together past the write's.
      {
        agentId,
        entries: Array.from({ length: 17 }, (_, i) => ({
          id: `e${i}`,
          sealed: 'A'.repeat(MAX_SEALED_ENTRY_CHARS),
        })),
      },
      { agentId, entries: [{ id, sealed: 'AAAA', text: 'in clear too' }] },
    ]) {
      expect(() => parseWriteUpdate(bad, LIMITS, NOW)).toThrow(InvalidInputError);
    }
  });

  it('is told from any JSON value without throwing: sealed only when every entry is one (fast-check)', () => {
    const sealedEntry = fc.record({ id: fc.string(), sealed: fc.string() });
    fc.assert(
      fc.property(
        fc.oneof(
          fc.jsonValue(),
          fc.record({ agentId: fc.string(), entries: fc.array(fc.oneof(sealedEntry, fc.jsonValue())) }),
        ),
        (value) => {
          const entries = (value as { entries?: unknown } | null)?.entries;
          const expected =
            typeof (value as { agentId?: unknown } | null)?.agentId === 'string' &&
            Array.isArray(entries) &&
            entries.length > 0 &&
            entries.every(
              (e) =>
                typeof (e as { id?: unknown } | null)?.id === 'string' &&
                typeof (e as { sealed?: unknown } | null)?.sealed === 'string',
            );
          expect(isSealedWrite(value)).toBe(expected);
        },
      ),
    );
    for (const entries of [[null], ['x'], [{ id, sealed: 'AAAA' }, null], [{ id, sealed: 7 }]]) {
      expect(isSealedWrite({ agentId, entries })).toBe(false);
    }
  });

  it("takes at most each call's own limit of entries, however calls under other limits interleave (fast-check)", () => {
    const sealedEntries = (n: number) =>
      Array.from({ length: n }, (_, i) => ({ id: `e${i}`, sealed: 'AAAA' }));
    fc.assert(
      fc.property(
        fc.array(fc.record({ limit: fc.integer({ min: 1, max: 6 }), n: fc.integer({ min: 1, max: 8 }) }), {
          minLength: 1,
          maxLength: 20,
        }),
        (calls) => {
          for (const { limit, n } of calls) {
            const write = { agentId, entries: sealedEntries(n) };
            const parse = () => parseWriteUpdate(write, { ...LIMITS, maxEntriesPerWrite: limit }, NOW);
            if (n <= limit) expect(parse()).toEqual(write);
            else expect(parse).toThrow(`at most ${limit} entries per write`);
          }
        },
      ),
    );
  });

  it('opens with its keys; an entry whose key is gone is erased, one sealed as another id is refused', () => {
    const key = randomBytes(32);
    const sealed = sealEntry(agentId, id, entry, key);
    const write = { agentId, entries: [{ id, sealed }] };
    expect(openSealedWrite(write, new Map([[id, key]]), LIMITS, NOW).write.entries).toMatchObject([entry]);
    expect(openSealedWrite(write, new Map(), LIMITS, NOW)).toEqual({
      write: { agentId, entries: [] },
      erased: [id],
    });
    const other = entryId(agentId, { ...entry, text: 'Something else.' });
    const misnamed = { agentId, entries: [{ id: other, sealed: sealEntry(agentId, other, entry, key) }] };
    expect(() => openSealedWrite(misnamed, new Map([[other, key]]), LIMITS, NOW)).toThrow(InvalidInputError);
    const empty = {
      agentId,
      entries: [{ id, sealed: sealEntry(agentId, id, { ...entry, text: ' ' }, key) }],
    };
    expect(() => openSealedWrite(empty, new Map([[id, key]]), LIMITS, NOW)).toThrow(InvalidInputError);
  });
});

describe('a write the client accepts, sealed as the client seals it', () => {
  const agentId = 'agent-1';

  /** As client/client.ts does: parsed (defaults filled in), dated, each entry sealed under a key. */
  function sealedByClient(entries: WriteEntry[]): { write: SealedWrite; keys: Map<string, Buffer> } {
    for (const e of entries) e.writtenAt ??= NOW;
    const keys = new Map<string, Buffer>();
    const write = {
      agentId,
      entries: entries.map((e) => {
        const id = writtenEntryId(agentId, { ...e, writtenAt: e.writtenAt! });
        keys.set(id, randomBytes(32));
        return { id, sealed: sealEntry(agentId, id, e, keys.get(id)!) };
      }),
    };
    return { write, keys };
  }

  /** The workflow takes it, and the persisting activity opens it, as what the client accepted. */
  function expectTaken(entries: WriteEntry[]): void {
    const { write, keys } = sealedByClient(entries);
    expect(parseWriteUpdate(write, LIMITS, NOW)).toEqual(write);
    expect(openSealedWrite(write, keys, LIMITS, NOW).write.entries).toEqual(entries);
  }

  const accepted = (request: WriteRequestInput) => parseWriteRequest(request, LIMITS, NOW).entries;

  it('passes the workflow: an entry at the byte limit, 100 entries at the write limit, 16 large ones', () => {
    const writes: WriteRequestInput[] = [
      // 65,436 bytes as JSON, the escapes of control characters six bytes each.
      { agentId, entries: [{ text: 'x' + '\u0001'.repeat(10_904) }] },
      {
        agentId,
        entries: Array.from({ length: 100 }, (_, i) => ({ text: `${i}`.padEnd(10_470, 'a') })),
      },
      {
        agentId,
        entries: Array.from({ length: 16 }, (_, i) => ({ text: `${i}${'\u0001'.repeat(10_900)}` })),
      },
    ];
    for (const request of writes) {
      expect(encodedBytes(request)).toBeLessThanOrEqual(MAX_WRITE_BYTES);
      for (const e of request.entries) expect(encodedBytes(e)).toBeLessThanOrEqual(MAX_ENTRY_BYTES);
      expectTaken(accepted(request));
    }
    // Near the limit, as the first two above are.
    expect(encodedBytes(writes[1])).toBeGreaterThan(MAX_WRITE_BYTES - 1_000);
  });

  it("passes the workflow as the coalescer joins callers' writes into one Update", async () => {
    const sent: number[] = [];
    const coalescer = new WriteCoalescer<number>(async (_agent, entries) => {
      expectTaken(entries);
      sent.push(entries.length);
      await new Promise((r) => setTimeout(r, 1));
      return entries.map((_, i) => i);
    }, LIMITS.maxEntriesPerWrite);
    const big = (i: number) => ({ text: `${i}${'\u0001'.repeat(10_900)}` });
    const small = (i: number) => ({ text: `small ${i}` });
    // The first goes out at once; the others, large and small, wait for it and ride together.
    const writes = [[small(0)], ...Array.from({ length: 20 }, (_, i) => [big(i), small(i + 1)])];
    await Promise.all(writes.map((entries) => coalescer.write(agentId, accepted({ agentId, entries }))));
    expect(Math.max(...sent)).toBeGreaterThan(2);
  });
});
