/** Lexical normalisation shared by writes (entry `terms`), recall and tombstones. */

const STOPWORDS = new Set(
  (
    'a an and are as at be but by for from had has have he her his i if in into is it its me my no not of on or our ' +
    'she so that the their them then there these they this to was we were what when where which who will with you your ' +
    'do does did can could would should about than too very just also been being am any some how why'
  ).split(' '),
);

/** A light suffix stripper: enough for "limits"/"limit" and "throttling"/"throttle" to meet. */
function stem(word: string): string {
  if (word.length > 5 && word.endsWith('ing')) return word.slice(0, -3);
  if (word.length > 4 && word.endsWith('ies')) return word.slice(0, -3) + 'y';
  if (word.length > 3 && word.endsWith('es') && /(ss|x|ch|sh)es$/.test(word)) return word.slice(0, -2);
  if (word.length > 3 && word.endsWith('s') && !word.endsWith('ss')) return word.slice(0, -1);
  return word;
}

/** Tokens in order, with repeats (for term frequency). */
export function termSequence(text: string): string[] {
  const out: string[] = [];
  // Compatibility forms first: NFKC turns a styled letter (𝐇) into a plain capital, which
  // lowercasing must then see.
  for (const raw of text
    .normalize('NFKC')
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)) {
    if (!raw || STOPWORDS.has(raw)) continue;
    out.push(stem(raw));
  }
  return out;
}

/** Distinct normalised terms, the candidate key for recall. */
export function terms(text: string): string[] {
  return [...new Set(termSequence(text))];
}

/**
 * The distinct terms, in order of first occurrence, and how often each occurs: what an entry
 * stores, so that recall scores it from the store instead of tokenising its text again.
 */
export function countTerms(text: string): { terms: string[]; termCounts: number[] } {
  const counts = new Map<string, number>();
  for (const t of termSequence(text)) counts.set(t, (counts.get(t) ?? 0) + 1);
  return { terms: [...counts.keys()], termCounts: [...counts.values()] };
}

/**
 * Token count estimate used for budgets: about four characters per token for English
 * prose, which is what BPE tokenizers of current models average. Deterministic and cheap.
 */
export function countTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}
