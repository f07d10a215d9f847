/**
 * A few unrelated memories, the first of them found by `PARAPHRASE`, which shares no word with
 * it (after stop words and stemming): what the semantic tests write and recall.
 */
export const MEMORIES = [
  'My favourite colour is teal.',
  'The quarterly report is due on the fifth of March.',
  'Our office moved to a building near the harbour.',
  'The espresso machine on floor two needs descaling.',
  'The dentist appointment is on Friday morning.',
  'Our cat refuses to eat the new brand of food.',
] as const;

export const PARAPHRASE = 'Which hue do I prefer?';

/** A plain episode as the write path would take it: what store-level tests build entries from. */
export function episode(text: string, writtenAt: number) {
  return {
    text,
    kind: 'episode' as const,
    salience: 0.5,
    source: { origin: 'agent' as const },
    confidence: 0.5,
    verified: false,
    volatile: false,
    writtenAt,
  };
}
