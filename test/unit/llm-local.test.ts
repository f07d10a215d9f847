import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  evidenceReader,
  heuristicImportance,
  heuristicImportanceScorer,
  matchesReference,
  normalisedMatchJudge,
} from '../../llm/local';
import { DONT_KNOW, type ReaderInput } from '../../llm/models';

const input = (ids: string[], truncated: string[] = []): ReaderInput => ({
  question: 'Where is my shoe rack?',
  questionDate: '2023-06-23',
  snippets: ids.map((id) => ({
    id,
    text: `text of ${id}`,
    date: '2023-05-01',
    role: 'user',
    truncated: truncated.includes(id),
  })),
  reference: { answer: 'in my closet', evidenceIds: ['g1', 'g2'] },
});

describe('evidence reader', () => {
  it('answers the reference only when every evidence turn is in the context, whole', async () => {
    expect(await evidenceReader.answer(input(['a', 'g1', 'g2']))).toBe('in my closet');
    expect(await evidenceReader.answer(input(['a', 'g1']))).toBe(DONT_KNOW);
    expect(await evidenceReader.answer(input(['g1', 'g2'], ['g2']))).toBe(DONT_KNOW);
  });
});

describe('normalised-match judge', () => {
  it('matches across case, punctuation, articles and spelled-out numbers', async () => {
    expect(matchesReference({ question: '', reference: '4 days.', response: 'It took four days' })).toBe(
      true,
    );
    expect(matchesReference({ question: '', reference: '$50', response: 'You paid 50 dollars.' })).toBe(true);
    expect(
      matchesReference({ question: '', reference: 'The Glass Menagerie', response: 'glass menagerie' }),
    ).toBe(true);
    expect(matchesReference({ question: '', reference: '1,300', response: 'about 1300 points' })).toBe(true);
  });

  it('rejects different values and "I don\'t know"', async () => {
    expect(
      await normalisedMatchJudge.correct({ question: '', reference: '14 days', response: '30 days' }),
    ).toBe(false);
    expect(await normalisedMatchJudge.correct({ question: '', reference: '5', response: '5.5 hours' })).toBe(
      false,
    );
    expect(
      await normalisedMatchJudge.correct({ question: '', reference: 'road bike', response: DONT_KNOW }),
    ).toBe(false);
  });
});

describe('heuristic importance', () => {
  it('scores 1-10, deterministically, without any question', async () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 400 }),
        fc.constantFrom('user' as const, 'assistant' as const),
        (text, role) => {
          const s = heuristicImportance({ id: 'x', text, role });
          expect(Number.isInteger(s) && s >= 1 && s <= 10).toBe(true);
          expect(heuristicImportance({ id: 'y', text, role })).toBe(s);
        },
      ),
    );
    expect(await heuristicImportanceScorer.score([])).toEqual([]);
  });

  it('ranks a fact-dense personal statement above an acknowledgement', () => {
    const fact = heuristicImportance({
      id: 'a',
      role: 'user',
      text: 'I moved to Lisbon on May 3, 2023 and my rent is $1,200 a month for 2 bedrooms.',
    });
    const ack = heuristicImportance({ id: 'b', role: 'assistant', text: 'Sounds good!' });
    expect(fact).toBeGreaterThan(ack);
  });
});
