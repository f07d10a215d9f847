import type { RecallHit } from '../core/recall';

/**
 * The agent's reader and the judge of its answers. The reader asks deep recall for
 * everything about a subject and takes, among every statement of the attribute it finds
 * (facts, and summaries of earlier drafts, verbatim or inside consolidation summaries), the
 * one with the latest date — a careful reader, so a wrong answer means the right evidence
 * was not there to read.
 */

export type Verdict = 'correct' | 'stale' | 'silent-gap' | 'reported-gap';

export interface Answer {
  value: string;
  /** The date the statement carries (YYYY-MM-DD). */
  dated: string;
  /** A fact states the value; a draft summary states an older one. */
  from: 'fact' | 'draft';
  hitId: string;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export function readAnswer(
  hits: readonly Pick<RecallHit, 'id' | 'text'>[],
  subject: string,
  attribute: string,
): Answer | undefined {
  const about = `the ${escape(attribute)} of ${escape(subject)}`;
  const fact = new RegExp(`As of (\\d{4}-\\d{2}-\\d{2}), ${about} is ([^.]+)\\.`, 'g');
  const draft = new RegExp(
    `Summary of an earlier draft \\((\\d{4}-\\d{2}-\\d{2})\\): ${about} was ([^.]+)\\.`,
    'g',
  );
  let best: Answer | undefined;
  for (const hit of hits) {
    if (!hit.text.includes(attribute)) continue;
    for (const [pattern, from] of [
      [fact, 'fact'],
      [draft, 'draft'],
    ] as const) {
      for (const m of hit.text.matchAll(pattern)) {
        const candidate: Answer = { value: m[2]!, dated: m[1]!, from, hitId: hit.id };
        // Same date: a fact outranks a draft, so a tie cannot turn a right answer stale.
        if (
          !best ||
          candidate.dated > best.dated ||
          (candidate.dated === best.dated && from === 'fact' && best.from === 'draft')
        )
          best = candidate;
      }
    }
  }
  return best;
}

export interface Judgement {
  verdict: Verdict;
  /** For a stale answer: whether a draft summary or an outdated fact supplied it. */
  staleFrom?: 'draft' | 'superseded-fact';
}

/**
 * Correct: the current value. Stale: another value (a disagreeing summary or a superseded
 * fact). No statement at all is a silent gap unless recall reported deleted evidence
 * (`missing`), which makes it a reported gap.
 */
export function judge(answer: Answer | undefined, truth: string, missingReported: number): Judgement {
  if (!answer) return { verdict: missingReported > 0 ? 'reported-gap' : 'silent-gap' };
  if (answer.value === truth) return { verdict: 'correct' };
  return { verdict: 'stale', staleFrom: answer.from === 'draft' ? 'draft' : 'superseded-fact' };
}

export class Tally {
  judged = 0;
  correct = 0;
  stale = 0;
  staleFromDraft = 0;
  staleFromSupersededFact = 0;
  silentGaps = 0;
  reportedGaps = 0;
  /** Judged queries whose deep recall listed deleted evidence (`missing`). */
  missingReports = 0;

  add(j: Judgement, missingReported: number): void {
    this.judged++;
    if (missingReported > 0) this.missingReports++;
    if (j.verdict === 'correct') this.correct++;
    else if (j.verdict === 'silent-gap') this.silentGaps++;
    else if (j.verdict === 'reported-gap') this.reportedGaps++;
    else {
      this.stale++;
      if (j.staleFrom === 'draft') this.staleFromDraft++;
      else this.staleFromSupersededFact++;
    }
  }
}
