import { describe, expect, it } from 'vitest';
import { terms } from '../../core/text';
import fixture from '../fixtures/paraphrase.json';

/**
 * The paraphrase fixture is what its checks say it is (test/integration/paraphrase.test.ts,
 * bench/retrieval.ts): words counted as recall counts them, with the project's own `terms`.
 */

const sets = Object.entries(fixture.sets);

function shared(a: string, b: string): string[] {
  const other = new Set(terms(b));
  return terms(a).filter((t) => other.has(t));
}

describe('the paraphrase fixture', () => {
  it('has a main and a held-out set', () => {
    expect(Object.keys(fixture.sets).sort()).toEqual(['heldOut', 'main']);
  });

  it.each(sets)('%s: at least 30 facts with a question each, and 60 notes', (_, set) => {
    expect(set.facts.length).toBeGreaterThanOrEqual(30);
    expect(set.notes).toHaveLength(60);
    for (const text of [...set.facts.flatMap((f) => [f.fact, f.question]), ...set.notes]) {
      // Recall refuses a query without a searchable word, and an entry without one is noise.
      expect(terms(text).length, text).toBeGreaterThan(0);
    }
  });

  it.each(sets)('%s: each question shares at most one term with its fact', (_, set) => {
    const over = set.facts.filter((f) => shared(f.question, f.fact).length > 1);
    expect(over.map((f) => [f.id, shared(f.question, f.fact)])).toEqual([]);
  });

  it.each(sets)('%s: notes are lexical noise, at most one term with any question', (_, set) => {
    const pairs = set.notes.flatMap((note) =>
      set.facts.map((f) => ({ note, id: f.id, terms: shared(note, f.question) })),
    );
    expect(pairs.filter((p) => p.terms.length > 1)).toEqual([]);
    // About a third share a word with some question, so lexical recall is not handed the answer.
    const noisy = new Set(pairs.filter((p) => p.terms.length === 1).map((p) => p.note)).size;
    expect(noisy).toBeGreaterThanOrEqual(15);
    expect(noisy).toBeLessThanOrEqual(30);
  });

  it('ids are unique, and no text appears twice across the sets', () => {
    const ids = sets.flatMap(([, set]) => set.facts.map((f) => f.id));
    expect(new Set(ids).size).toBe(ids.length);
    const texts = sets.flatMap(([, set]) => [
      ...set.facts.flatMap((f) => [f.fact, f.question]),
      ...set.notes,
    ]);
    const normalised = texts.map((t) => t.trim().toLowerCase());
    expect(normalised.filter((t, i) => normalised.indexOf(t) !== i)).toEqual([]);
  });
});
