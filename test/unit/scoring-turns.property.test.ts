import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildEntry, memoryPolicy } from '../../core/entry';
import { episode } from '../support/memories';
import { SCORING_TURN_CHARS, scoreLexical, scoreLexicalInTurns, type Candidate } from '../../core/recall';

const policy = memoryPolicy({ halfLifeHours: 72, gateThreshold: 0.15 });
const WORDS = ['dock', 'courier', 'pallet', 'boiler', 'supplier', 'notice', 'period', 'lab', 'door', 'code'];

function candidate(i: number, text: string): Candidate {
  return { entry: buildEntry(`e${i}`, 'agent', episode(text, 1_700_000_000_000 + i), policy), tier: 'hot' };
}

/** The candidate as an entry stored before term counts were kept: recall tokenises its text. */
function withoutCounts({ entry, tier }: Candidate): Candidate {
  const { termCounts: _counts, ...older } = entry;
  return { entry: older, tier };
}

const text = fc
  .array(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 40 })
  .map((words) => words.join(' '));

/** How many turns the event loop took while `work` ran. */
async function turnsDuring(work: () => unknown): Promise<number> {
  let turns = 0;
  let running = true;
  const turn = () => {
    if (!running) return;
    turns++;
    setImmediate(turn);
  };
  setImmediate(turn);
  await work();
  running = false;
  return turns;
}

describe('lexical scoring in turns (core/recall.ts)', () => {
  it('scores as scoring in one go does, whatever the texts and where the turns fall', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(text, { minLength: 0, maxLength: 30 }),
        fc.subarray(WORDS, { minLength: 1 }),
        async (texts, query) => {
          const candidates = texts.map((t, i) => candidate(i, t));
          expect(await scoreLexicalInTurns(query, candidates)).toEqual(scoreLexical(query, candidates));
        },
      ),
    );
  });

  it('scores an entry from its stored term counts, not from its text', () => {
    fc.assert(
      fc.property(fc.array(text, { maxLength: 30 }), fc.subarray(WORDS, { minLength: 1 }), (texts, query) => {
        const stored = texts.map((t, i) => candidate(i, t));
        // The same counts over a text that holds none of the words: only the counts can score.
        const blanked = stored.map(({ entry, tier }) => ({ entry: { ...entry, text: '—' }, tier }));
        expect(scoreLexical(query, blanked).map((s) => s.lexical)).toEqual(
          scoreLexical(query, stored.map(withoutCounts)).map((s) => s.lexical),
        );
      }),
    );
  });

  it('gives the event loop a turn while it tokenises a deep recall of long entries; in one go it gives none', async () => {
    // 64 entries of 16,000 characters stored without their counts: five times what one turn tokenises.
    const long = Array.from({ length: 64 }, (_, i) =>
      withoutCounts(
        candidate(
          i,
          Array.from({ length: 2_600 }, (_, w) => WORDS[(w * 7 + i) % WORDS.length])
            .join(' ')
            .slice(0, 16_000),
        ),
      ),
    );
    const chars = long.reduce((n, c) => n + c.entry.text.length, 0);
    expect(chars).toBeGreaterThan(4 * SCORING_TURN_CHARS);
    expect(await turnsDuring(() => scoreLexical(['dock', 'courier'], long))).toBe(0);
    expect(await turnsDuring(() => scoreLexicalInTurns(['dock', 'courier'], long))).toBeGreaterThanOrEqual(4);
  });
});
