import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildEntry, memoryPolicy, parseWriteRequest } from '../../core/entry';
import { InvalidInputError } from '../../core/errors';
import { entryLine, ExportReader, exportLineText, headerLine } from '../../core/exportFormat';
import { parseRecallRequest } from '../../core/recall';
import { terms } from '../../core/text';
import { admitSchema } from '../../core/window/model';
import { episode } from '../support/memories';
import { thrownBy } from '../support/thrown';

/**
 * A lone UTF-16 surrogate has no UTF-8 form: the store keeps U+FFFD in its place, so what it
 * held would not be what was written, nor what the entry's id was derived from. Every string a
 * write or a recall carries is refused with one, typed, naming its field.
 */
const LIMITS = { maxTextChars: 16_000, maxEntriesPerWrite: 100 };
const NOW = Date.UTC(2026, 0, 1);

const loneSurrogate = fc.oneof(
  fc.integer({ min: 0xd800, max: 0xdbff }).map((c) => String.fromCharCode(c)),
  fc.integer({ min: 0xdc00, max: 0xdfff }).map((c) => String.fromCharCode(c)),
);
/**
 * Searchable words around it, so that every other check of the field passes: a stopword such
 * as "a" would fail a recall query's own check (`terms`) as well.
 */
const word = fc.stringMatching(/^[a-z]{1,8}$/).filter((w) => terms(w).length > 0);
const withLone = fc.tuple(word, loneSurrogate, word).map(([a, s, b]) => `${a}${s}${b}`);

/** A write of every string field, `field` given `value`. */
function writeWith(field: string, value: string): unknown {
  const entry: Record<string, unknown> = {
    text: 'The notice period is 30 days.',
    kind: 'fact',
    idempotencyKey: 'k1',
    source: { origin: 'user', sessionId: 's1', ref: 'r1' },
    subject: 'contract',
    attribute: 'notice',
  };
  if (field.startsWith('source.')) entry.source = { ...(entry.source as object), [field.slice(7)]: value };
  else entry[field] = value;
  return { agentId: 'a1', entries: [entry] };
}

const FIELDS = ['text', 'idempotencyKey', 'source.sessionId', 'source.ref', 'subject', 'attribute'];

const refusal = (parse: () => unknown) => thrownBy(parse, InvalidInputError);

describe('a string with a lone surrogate', () => {
  it('is refused in every string field of a write, naming the field (fast-check)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...FIELDS), withLone, (field, value) => {
        const err = refusal(() => parseWriteRequest(writeWith(field, value), LIMITS, NOW));
        expect(err.issues.map((i) => i.path)).toEqual([`entries.0.${field}`]);
      }),
    );
  });

  it('is refused as a recall query, naming it (fast-check)', () => {
    fc.assert(
      fc.property(withLone, (query) => {
        const err = refusal(() => parseRecallRequest({ agentId: 'a1', query }, NOW));
        expect(err.issues.map((i) => i.path)).toEqual(['query']);
      }),
    );
  });

  it('is told from a well-formed one: surrogate pairs and any other text are taken (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...FIELDS),
        fc.tuple(word, fc.string({ unit: 'grapheme', minLength: 0, maxLength: 8 })),
        (field, [a, rest]) => {
          const value = `notice ${a}\u{1F600}${rest}`;
          const [entry] = parseWriteRequest(writeWith(field, value), LIMITS, NOW).entries;
          const got = field.startsWith('source.')
            ? (entry!.source as Record<string, unknown>)[field.slice(7)]
            : (entry as Record<string, unknown>)[field];
          expect(got).toBe(value);
          expect(parseRecallRequest({ agentId: 'a1', query: value }, NOW).query).toBe(value);
        },
      ),
    );
  });

  it('is refused as a context window segment label (fast-check)', () => {
    fc.assert(
      fc.property(withLone, (label) => {
        const parsed = admitSchema.safeParse({ segmentId: 's1', tokens: 10, salience: 0.5, label });
        expect(parsed.success).toBe(false);
        expect(parsed.error?.issues.map((i) => i.path.join('.'))).toEqual(['label']);
      }),
    );
  });

  it("is refused in an import's entry line, which would store it (fast-check)", () => {
    const policy = memoryPolicy({ halfLifeHours: 168, gateThreshold: 0.2 });
    fc.assert(
      fc.property(withLone, (text) => {
        const reader = new ExportReader();
        reader.read(exportLineText(headerLine('a1', NOW)).trimEnd());
        const line = entryLine(buildEntry('e1', 'a1', episode(text, NOW), policy), 'hot');
        // JSON keeps the lone surrogate as an escape, and gives it back as it was.
        const err = refusal(() => reader.read(JSON.stringify(line)));
        expect(err.issues.map((i) => i.path)).toEqual(['text']);
      }),
    );
  });
});
