import { atoms, wordsToDigits } from '../core/atoms';
import { countTokens } from '../core/text';
import {
  DONT_KNOW,
  type ImportanceScorer,
  type Judge,
  type JudgeInput,
  type Reader,
  type ReaderInput,
  type ScoredText,
} from './models';

/**
 * The deterministic local models: the defaults when no endpoint is configured, and the
 * offline settings of the audit.
 */

const FIRST_PERSON = /\b(i|i'm|i've|i'd|my|mine|me|we|our)\b/gi;

/**
 * Offline importance, 1-10, from the text alone: what the user says about themselves, and
 * how many concrete facts (numbers, dates, names, quantities) a unit carries, count for more
 * than long generic assistant prose or a one-line acknowledgement.
 */
export function heuristicImportance(unit: ScoredText): number {
  let score = unit.role === 'user' ? 4 : 2;
  score += Math.min(2, (unit.text.match(FIRST_PERSON) ?? []).length / 3);
  const facts = atoms(unit.text).length;
  score += Math.min(3, facts / (unit.role === 'user' ? 2 : 6));
  if (countTokens(unit.text) < 10) score -= 2;
  return Math.max(1, Math.min(10, Math.round(score)));
}

export const heuristicImportanceScorer: ImportanceScorer = {
  name: 'heuristic',
  score: async (units) => units.map(heuristicImportance),
};

/**
 * The `evidence` reader: right iff every evidence turn is in the read context, whole. It
 * answers with the reference then, and with "I don't know" otherwise, so any judge can grade it.
 */
export function evidenceAnswer(input: ReaderInput): string {
  const whole = new Set(input.snippets.filter((s) => !s.truncated).map((s) => s.id));
  return input.reference.evidenceIds.every((id) => whole.has(id)) ? input.reference.answer : DONT_KNOW;
}

export const evidenceReader: Reader = {
  name: 'evidence',
  answer: async (input) => evidenceAnswer(input),
};

const ARTICLES = new Set(['a', 'an', 'the']);

/** Lower case, numbers as digits, no punctuation, no articles. */
export function normaliseAnswer(text: string): string[] {
  return wordsToDigits(text.normalize('NFKC').toLowerCase())
    .replace(/(\d),(\d{3})/g, '$1$2')
    .split(/[^\p{L}\p{N}.]+|(?<!\d)\.|\.(?!\d)/u)
    .filter((w) => w && !ARTICLES.has(w));
}

/** Normalised match: the reference, normalised, appears as a run of words in the response. */
export function matchesReference({ reference, response }: JudgeInput): boolean {
  const ref = normaliseAnswer(reference);
  const got = normaliseAnswer(response);
  if (ref.length === 0 || got.length < ref.length) return false;
  for (let i = 0; i + ref.length <= got.length; i++) {
    if (ref.every((w, j) => got[i + j] === w)) return true;
  }
  return false;
}

export const normalisedMatchJudge: Judge = {
  name: 'match',
  correct: async (input) => matchesReference(input),
};
