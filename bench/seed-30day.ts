/**
 * The seed's observed 30-day run (store capped at 250,000 entries, half-life 72 h, gate 0.15,
 * about 1.2 M recalls) as a SIMULATION: the `core/` decisions driven over an in-memory model
 * of one agent's store, for two policies side by side on the same workload — the seed's
 * salience-ranked deletion and memgate's nightly pass (sim/). Then the same workload,
 * scaled down, through the real stack (client writes and recalls, the consolidateAgent
 * workflow each night), whose per-night decisions must equal the simulation's at that scale.
 *
 * Env: BENCH_SEED30_SCALE (default 1: the seed's size), BENCH_SEED30_SEED (default 30),
 * BENCH_SEED30_STACK_DAYS (default 7; 0 skips the real-stack run, which stores 360 entries).
 */
import { parseConfig, type Config } from '../core/config';
import { type DecisionComparison, compareDecisions, runThroughStack } from '../sim/stack';
import { seedScenario, stackScenario } from '../sim/scenario';
import { simulate, type PolicyOutcome } from '../sim/simulate';
import type { WorkloadParams } from '../sim/workload';
import { emit, round, startBenchEnv } from './support';

const SCALE = Number(process.env.BENCH_SEED30_SCALE ?? 1);
const STACK_DAYS = Number(process.env.BENCH_SEED30_STACK_DAYS ?? 7);
const SEED = Number(process.env.BENCH_SEED30_SEED ?? 30);

const log = (line: string) => console.error(line);

function summary(o: PolicyOutcome) {
  const { answers } = o;
  return {
    evictions: o.evictions,
    evictionsBelowGate: o.evictionsBelowGate,
    shareBelowGate: o.shareBelowGate,
    belowGateNeededWithin5Days: o.belowGateNeededWithin5Days,
    shareOfBelowGateNeeded: o.shareOfBelowGateNeeded,
    belowGateMatchedByQueryWithin5Days: o.belowGateMatchedByQueryWithin5Days,
    evictedByRole: o.evictedByRole,
    answers: {
      judged: answers.judged,
      correct: answers.correct,
      stale: answers.stale,
      staleFromDraftSummary: answers.staleFromDraft,
      staleFromSupersededFact: answers.staleFromSupersededFact,
      silentGaps: answers.silentGaps,
      reportedGaps: answers.reportedGaps,
    },
    maxJudgedRecallCandidates: o.maxJudgedCandidates,
    ...(o.policy === 'memgate'
      ? {
          spills: o.decisions.spill,
          rehydrations: o.decisions.rehydrate,
          tombstonedDeletions: o.tombstones,
          missingReports: answers.missingReports,
        }
      : {}),
    nightly: o.decisions,
    firstNightOverCapacity: o.firstPressureNight ?? null,
    finalStore: o.final,
    seconds: o.seconds,
  };
}

/** Wrong answers (stale or silent) per policy, and memgate's as a share of the baseline's. */
function sideBySide(baseline: PolicyOutcome, memgate: PolicyOutcome) {
  const wrong = (o: PolicyOutcome) => o.answers.stale + o.answers.silentGaps;
  return {
    staleOrSilentAnswers: { baseline: wrong(baseline), memgate: wrong(memgate) },
    memgateToBaselineStaleOrSilent: wrong(baseline) ? round(wrong(memgate) / wrong(baseline), 3) : null,
    memgateToBaselineEvictions: baseline.evictions ? round(memgate.evictions / baseline.evictions, 3) : null,
  };
}

async function simulateBoth(params: WorkloadParams, config: Config, agentId: string, keepNights: boolean) {
  const baseline = await simulate(params, config, 'salience-deletion', { agentId });
  log(`[simulation] salience-deletion done in ${baseline.outcome.seconds}s`);
  const memgate = await simulate(params, config, 'memgate', { agentId, keepNights });
  log(`[simulation] memgate done in ${memgate.outcome.seconds}s`);
  return { baseline, memgate };
}

async function stackRun() {
  const { params, env: overrides } = stackScenario(STACK_DAYS);
  const env = await startBenchEnv(overrides);
  try {
    const agentId = `seed30-${env.runId}`;
    const sim = await simulateBoth(params, env.config, agentId, true);
    const stack = await runThroughStack(env.client, env.config, params, agentId, log);
    const comparison: DecisionComparison = compareDecisions(sim.memgate.nights!, stack.nights);
    const stackAnswers = stack.answers;
    return {
      label: 'real stack (client writes and recalls, consolidateAgent each night), scaled down',
      days: params.days,
      capacity: env.config.hotCapacity,
      lowWatermark: env.config.lowWatermark,
      writes: stack.writes,
      recalls: stack.recalls,
      decisionsMatchSimulation: comparison.match,
      nightsCompared: comparison.nights,
      decisionCounts: comparison.counts,
      differences: comparison.differences,
      answers: {
        judged: stackAnswers.judged,
        correct: stackAnswers.correct,
        stale: stackAnswers.stale,
        silentGaps: stackAnswers.silentGaps,
        reportedGaps: stackAnswers.reportedGaps,
        missingReports: stackAnswers.missingReports,
      },
      simulationAtThisScale: {
        'salience-deletion': summary(sim.baseline.outcome),
        memgate: summary(sim.memgate.outcome),
        sideBySide: sideBySide(sim.baseline.outcome, sim.memgate.outcome),
      },
      secondsIn: stack.secondsIn,
      seconds: stack.seconds,
    };
  } finally {
    await env.close();
  }
}

async function main() {
  const { params, env } = seedScenario(SCALE, SEED);
  const sim = await simulateBoth(params, parseConfig(env), 'seed30', false);
  const result: Record<string, unknown> = {
    bench: 'seed-30day',
    simulation: {
      label: 'simulation: core/ decisions over an in-memory model of the store (not the real stack)',
      scale: SCALE,
      seed: SEED,
      capacity: Number(env.MEMGATE_HOT_CAPACITY),
      halfLifeHours: Number(env.MEMGATE_HALF_LIFE_HOURS),
      gateThreshold: Number(env.MEMGATE_GATE_THRESHOLD),
      days: params.days,
      writes: sim.baseline.outcome.writes,
      recalls: sim.baseline.outcome.recalls,
      judgedQuestions: sim.baseline.outcome.answers.judged,
      seedObserved: { evictions: 4_700, shareBelowGate: 0.61, shareOfBelowGateNeededAgain: 0.07 },
      'salience-deletion': summary(sim.baseline.outcome),
      memgate: summary(sim.memgate.outcome),
      sideBySide: sideBySide(sim.baseline.outcome, sim.memgate.outcome),
    },
  };
  if (STACK_DAYS > 0) result.stack = await stackRun();
  emit(result);
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
