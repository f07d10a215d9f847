import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stackScenario } from '../../sim/scenario';
import { simulate, type SimulationRun } from '../../sim/simulate';
import { compareDecisions, runThroughStack, type StackRun } from '../../sim/stack';
import { startTestEnv, type TestEnv } from '../support/env';
import { expectVerified } from '../support/verify';

/**
 * The seed's 30-day scenario, scaled down to 360 entries and 10 days: the workload through
 * the real stack (client writes and recalls, the consolidateAgent workflow each night) must
 * make exactly the decisions the simulation makes, and answer every judged question right,
 * where the seed's salience-ranked deletion answers some stale or not at all.
 */
const { params, env: overrides } = stackScenario(10);

describe('seed 30-day scenario, scaled down, through the real stack', () => {
  let env: TestEnv;
  let memgate: SimulationRun;
  let baseline: SimulationRun;
  let stack: StackRun;
  let agentId: string;

  beforeAll(async () => {
    env = await startTestEnv(overrides);
    agentId = env.agent('seed30');
    memgate = await simulate(params, env.config, 'memgate', { agentId, keepNights: true });
    baseline = await simulate(params, env.config, 'salience-deletion', { agentId });
    stack = await runThroughStack(env.client, env.config, params, agentId);
  }, 900_000); // ten scaled-down nights through the real stack; a guard, not a timing assertion

  afterAll(async () => {
    await env?.close();
  });

  it('makes the same decisions as the simulation, night by night', () => {
    const comparison = compareDecisions(memgate.nights!, stack.nights);
    expect(comparison.differences).toEqual([]);
    expect(comparison.match).toBe(true);
    expect(comparison.nights).toBe(params.days);
    // The comparison covers every kind of move the pass makes under pressure.
    for (const kind of ['refresh', 'rehydrate', 'summarise', 'supersede', 'spill', 'expire'] as const) {
      expect(comparison.counts[kind], kind).toBeGreaterThan(0);
    }
  });

  it('leaves a store memgate verify passes', async () => {
    await expectVerified(env, agentId);
  });

  it('answers every judged question with the current value, as the simulation does', () => {
    expect(stack.answers.judged).toBeGreaterThan(100);
    expect(stack.answers.correct).toBe(stack.answers.judged);
    expect(stack.answers).toEqual(memgate.outcome.answers);
  });

  it('where salience-ranked deletion answers stale or silently misses', () => {
    const { answers } = baseline.outcome;
    expect(answers.judged).toBe(stack.answers.judged);
    expect(answers.stale + answers.silentGaps).toBeGreaterThan(0);
    expect(baseline.outcome.evictionsBelowGate).toBeGreaterThan(0);
  });
});
