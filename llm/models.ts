/**
 * The model roles memgate uses (docs/audit.md, Models). Each has a deterministic local
 * implementation and one for any OpenAI-compatible endpoint. They do I/O, so only
 * activities call them, and Temporal's activity retry policy retries them.
 */

export interface ScoredText {
  id: string;
  text: string;
  role: 'user' | 'assistant';
}

/**
 * Scores each memory unit 1-10 for general, long-term importance. It is never shown the
 * question a later reader will face: the signature has no place for one.
 */
export interface ImportanceScorer {
  readonly name: string;
  score(units: ScoredText[]): Promise<number[]>;
}

export interface Snippet {
  id: string;
  text: string;
  /** When it was said, as the reader should see it. */
  date: string;
  role: 'user' | 'assistant';
  /** The restore cap cut this snippet's text. */
  truncated?: boolean;
}

/**
 * What only the offline `evidence` reader looks at: the reference answer and the evidence
 * turns. Model readers never send it anywhere.
 */
export interface ReaderReference {
  answer: string;
  evidenceIds: string[];
}

export interface ReaderInput {
  question: string;
  questionDate: string;
  snippets: Snippet[];
  reference: ReaderReference;
}

/** The answer a reader gives when the snippets do not hold one. */
export const DONT_KNOW = "I don't know";

export interface Reader {
  readonly name: string;
  answer(input: ReaderInput): Promise<string>;
}

export interface JudgeInput {
  question: string;
  reference: string;
  response: string;
}

export interface Judge {
  readonly name: string;
  correct(input: JudgeInput): Promise<boolean>;
}
