import type { AdmitInput, AdvanceTurnInput, RehydrateInput, WindowSettingsInput } from '../../core/window';

/**
 * The seed's case (issue 4), as a sequence of window operations: at turn 12 a pinned 9,000-token
 * JSON tool output forces out the API rate-limits table; at turn 19 a throttling question
 * raises the table to 0.72, and the only segment whose removal would make room is the span
 * holding the user's constraint, which is pinned.
 */
export const SEED_SETTINGS: WindowSettingsInput = {
  capacity: 40_000,
  decay: 0.85,
  rehydrationThreshold: 0.6,
  margin: 0.1,
};

export type WindowStep = { turnTo: number; scores?: AdvanceTurnInput['scores'] } | { admit: AdmitInput };

export const CONSTRAINT = 'user-constraint';
export const RATE_LIMITS = 'api-rate-limits';
export const SUMMARY = 'rate-limits-summary';
export const JSON_DUMP = 'tool-json-dump';
export const TOOL_LOOP = 'fetch-usage-loop';

export const SEED_STEPS: WindowStep[] = [
  { turnTo: 1 },
  {
    admit: {
      segmentId: CONSTRAINT,
      tokens: 2_000,
      salience: 0.8,
      label: 'user constraint: responses must not exceed 500 tokens',
      pin: { kind: 'explicit' },
    },
  },
  { turnTo: 2 },
  { admit: { segmentId: RATE_LIMITS, tokens: 2_400, salience: 0.9, label: 'table of API rate limits' } },
  { turnTo: 4 },
  { admit: { segmentId: 'design-doc', tokens: 12_000, salience: 0.9, label: 'service design document' } },
  { turnTo: 8 },
  { admit: { segmentId: 'client-code', tokens: 10_000, salience: 0.95, label: 'API client source' } },
  { turnTo: 10 },
  { admit: { segmentId: 'chat-10', tokens: 6_300, salience: 0.9, label: 'discussion of retries' } },
  { turnTo: 11 },
  {
    admit: {
      segmentId: SUMMARY,
      tokens: 300,
      salience: 0.9,
      label: 'summary: 100 requests/min per key, 429 with Retry-After when exceeded',
    },
  },
  { turnTo: 12 },
  {
    admit: {
      segmentId: JSON_DUMP,
      tokens: 9_000,
      salience: 0.91,
      label: 'JSON output of the usage tool',
      pin: { kind: 'toolLoop', loopId: TOOL_LOOP },
    },
  },
  { turnTo: 17 },
  { admit: { segmentId: 'chat-17', tokens: 24_000, salience: 0.95, label: 'log excerpt under review' } },
  { turnTo: 18 },
  { admit: { segmentId: 'chat-18', tokens: 2_800, salience: 0.9, label: 'error analysis' } },
  // The tool loop is still running: it scores its dump at 0.88 this turn.
  { turnTo: 19, scores: { [JSON_DUMP]: 0.88 } },
  { admit: { segmentId: 'question-19', tokens: 500, salience: 0.95, label: 'how do we avoid throttling?' } },
];

/** Turn 19: the throttling question raises the table's salience to 0.72. */
export const SEED_REHYDRATION: RehydrateInput = { segmentId: RATE_LIMITS, salience: 0.72 };

/** Plays the steps through any window API (pure core or the workflow client). */
export async function playSteps(
  steps: WindowStep[],
  ops: {
    turn(): number | Promise<number>;
    advanceTurn(input: AdvanceTurnInput): unknown;
    admit(input: AdmitInput): unknown;
  },
): Promise<void> {
  for (const step of steps) {
    if ('admit' in step) {
      await ops.admit(step.admit);
      continue;
    }
    for (let turn = await ops.turn(); turn < step.turnTo; turn++) {
      await ops.advanceTurn(turn + 1 === step.turnTo && step.scores ? { scores: step.scores } : {});
    }
  }
}
