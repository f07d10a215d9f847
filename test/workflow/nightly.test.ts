import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NightlyActivities } from '../../activities';
import type { PhaseInput } from '../../activities/nightly';
import { parseConfig } from '../../core/config';
import type { PhaseCounts } from '../../core/messages';
import {
  COUNT_FIELDS,
  NIGHT_PHASES,
  type NightPhaseName,
  type PhaseOutcome,
} from '../../core/nightly/registry';
import { policyOf } from '../../core/policy';
import {
  consolidateAgent,
  MAX_ERROR_CHARS,
  MAX_FAILURES_LISTED,
  nightlyConsolidation,
} from '../../workflows/nightly';
import { consolidateAgentWorkflowId, consolidationRunId } from '../../core/ids';
import { startWorkflowEnv, stubbedWorker, typedFailure } from '../support/stubbedWorker';

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await startWorkflowEnv();
});
afterAll(async () => {
  await env?.teardown();
});

const policy = policyOf(parseConfig({}));

/** What every stubbed phase reports for one agent: each count distinct, so a swapped one shows. */
const COUNTS = Object.fromEntries(COUNT_FIELDS.map((field, i) => [field, i + 1])) as PhaseCounts;
const STORE = { hot: 10, cold: 2, tombstones: 1 };
const PRUNED = { ledger: 3, runs: 1 };

type Name = keyof NightlyActivities;
interface Call {
  name: Name;
  agentId?: string;
  workflowId: string;
  attempt: number;
}

/**
 * The night's activities, recording each call; `fail` runs first in each and may throw. The
 * agent listing pages through `agents`.
 */
function nightStubs(opts: { agents?: string[]; fail?: (call: Call) => void } = {}) {
  const calls: Call[] = [];
  const runs: PhaseInput[] = [];
  const listings: Parameters<NightlyActivities['nightlyAgents']>[0][] = [];
  const pruned: Parameters<NightlyActivities['pruneRecords']>[0][] = [];
  const recorded: Parameters<NightlyActivities['recordNightly']>[0][] = [];
  const reported: PhaseCounts[] = [];
  const hit = (name: Name, agentId?: string) => {
    const { info } = Context.current();
    const call = {
      name,
      agentId,
      workflowId: info.workflowExecution?.workflowId ?? '',
      attempt: info.attempt,
    };
    calls.push(call);
    opts.fail?.(call);
  };
  const phase = (name: Name, run: PhaseInput) => {
    runs.push(run);
    hit(name, run.agentId);
  };
  const currentPolicy: NightlyActivities['currentPolicy'] = async () => {
    hit('currentPolicy');
    return policy;
  };
  const phaseStubs = Object.fromEntries(
    NIGHT_PHASES.map(({ name, counts }) => [
      `${name}Phase`,
      async (run: PhaseInput): Promise<PhaseOutcome> => {
        phase(`${name}Phase`, run);
        // Beside its counts, what the run leaves out (refresh's queries, reclaim's hotBefore).
        return { ...Object.fromEntries(counts.map((field) => [field, COUNTS[field]])), beside: 99 };
      },
    ]),
  ) as Pick<NightlyActivities, `${NightPhaseName}Phase`>;
  const reportPhase: NightlyActivities['reportPhase'] = async (run, counts) => {
    phase('reportPhase', run);
    reported.push(counts);
    return { runId: run.runId, agentId: run.agentId, asOf: run.asOf, counts, store: STORE };
  };
  const nightlyAgents: NightlyActivities['nightlyAgents'] = async (input) => {
    listings.push(input);
    hit('nightlyAgents');
    const after = input.after;
    const agentIds = (opts.agents ?? [])
      .filter((a) => after === undefined || a > after)
      .slice(0, input.limit);
    return { agentIds, concurrency: 2 };
  };
  const pruneRecords: NightlyActivities['pruneRecords'] = async (input) => {
    pruned.push(input);
    hit('pruneRecords');
    return PRUNED;
  };
  const recordNightly: NightlyActivities['recordNightly'] = async (input) => {
    recorded.push(input);
    hit('recordNightly');
  };
  const activities: NightlyActivities = {
    currentPolicy,
    ...phaseStubs,
    reportPhase,
    nightlyAgents,
    pruneRecords,
    recordNightly,
  };
  return { activities, calls, runs, listings, pruned, recorded, reported };
}

const AGENT_ORDER: Name[] = [
  'currentPolicy',
  ...NIGHT_PHASES.map(({ name }) => `${name}Phase` as const),
  'reportPhase',
];

let seq = 0;
const asOf = Date.now() - 3_600_000;

function consolidate(taskQueue: string, agentId: string, at = asOf) {
  return env.client.workflow.execute(consolidateAgent, {
    taskQueue,
    workflowId: `consolidate-${agentId}-${Date.now()}-${seq++}`,
    args: [{ agentId, asOf: at }],
  });
}

describe('consolidateAgent, with its activities stubbed', () => {
  it('reads the policy once, runs the phases in order under it, and returns the report', async () => {
    const s = nightStubs();
    const w = await stubbedWorker(env, s.activities);
    const report = await w.run(() => consolidate(w.taskQueue, 'ca-1'));
    expect(s.calls.map((c) => c.name)).toEqual(AGENT_ORDER);
    const runId = consolidationRunId('ca-1', asOf);
    expect(s.runs).toHaveLength(AGENT_ORDER.length - 1);
    for (const run of s.runs) expect(run).toEqual({ agentId: 'ca-1', asOf, runId, policy });
    expect(s.reported).toEqual([COUNTS]);
    expect(report).toEqual({ runId, agentId: 'ca-1', asOf, counts: COUNTS, store: STORE });
  });

  it('retries a phase that fails once, and goes on', async () => {
    const s = nightStubs({
      fail: ({ name, attempt }) => {
        if (name === 'supersedePhase' && attempt === 1) throw new Error('the store went away');
      },
    });
    const w = await stubbedWorker(env, s.activities);
    const report = await w.run(() => consolidate(w.taskQueue, 'ca-2'));
    const retried = AGENT_ORDER.indexOf('supersedePhase');
    expect(s.calls.map((c) => c.name)).toEqual([
      ...AGENT_ORDER.slice(0, retried + 1),
      ...AGENT_ORDER.slice(retried),
    ]);
    expect(s.calls.filter((c) => c.name === 'supersedePhase').map((c) => c.attempt)).toEqual([1, 2]);
    expect(report.counts).toEqual(COUNTS);
  });

  it('finishes the night with nothing embedded when the embed phase fails every attempt or has no endpoint', async () => {
    const s = nightStubs({
      fail: ({ name, agentId }) => {
        if (name !== 'embedPhase' || agentId !== 'ca-3') return;
        // Retryable, with a delay of its own: the attempts (4) are what is tested, so 1 + 1 + 1 s
        // of waiting instead of the policy's 1 + 2 + 4 s.
        throw ApplicationFailure.create({
          message: 'the embeddings endpoint is down',
          nonRetryable: false,
          nextRetryDelay: '1 second',
        });
      },
    });
    const embedPhase: NightlyActivities['embedPhase'] = async (run) =>
      run.agentId === 'ca-3b' ? { unavailable: 'no embeddings endpoint' } : s.activities.embedPhase(run);
    const w = await stubbedWorker(env, { ...s.activities, embedPhase });
    await w.run(async () => {
      const report = await consolidate(w.taskQueue, 'ca-3');
      expect(s.calls.filter((c) => c.name === 'embedPhase').map((c) => c.attempt)).toEqual([1, 2, 3, 4]);
      expect(report.counts).toEqual({ ...COUNTS, embedded: 0 });
      expect(s.reported).toEqual([{ ...COUNTS, embedded: 0 }]);
      const without = await consolidate(w.taskQueue, 'ca-3b');
      expect(without.counts).toEqual({ ...COUNTS, embedded: 0 });
    });
  });

  it('fails with the type of a non-retryable phase failure, unretried, and stops there', async () => {
    const s = nightStubs({
      fail: ({ name, agentId, workflowId }) => {
        if (name === 'reclaimPhase' && agentId === 'ca-4') {
          throw ApplicationFailure.create({
            type: 'EvictionBoundaryError',
            nonRetryable: true,
            message: 'evicting it would let stale facts stand in',
          });
        }
        // Retryable as thrown, but of a type the retry policy never retries.
        if (name === 'currentPolicy' && workflowId.startsWith('consolidate-ca-4b-')) {
          throw ApplicationFailure.retryable('no policy stored', 'InvalidConfig');
        }
      },
    });
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      const failure = typedFailure(await consolidate(w.taskQueue, 'ca-4').catch((e: unknown) => e));
      expect(failure.type).toBe('EvictionBoundaryError');
      expect(s.calls.map((c) => c.name)).toEqual(
        AGENT_ORDER.slice(0, AGENT_ORDER.indexOf('reclaimPhase') + 1),
      );
      s.calls.length = 0;
      const config = typedFailure(await consolidate(w.taskQueue, 'ca-4b').catch((e: unknown) => e));
      expect(config.type).toBe('InvalidConfig');
      expect(s.calls.map((c) => [c.name, c.attempt])).toEqual([['currentPolicy', 1]]);
    });
  });

  it('fails typed on a bad input, and calls nothing', async () => {
    const s = nightStubs();
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      const badId = typedFailure(await consolidate(w.taskQueue, 'not an id').catch((e: unknown) => e));
      expect(badId.type).toBe('InvalidInput');
      const ahead = typedFailure(
        await consolidate(w.taskQueue, 'ca-5', Date.now() + 3_600_000).catch((e: unknown) => e),
      );
      expect(ahead.type).toBe('InvalidInput');
      expect(ahead.message).toContain('future');
    });
    expect(s.calls).toHaveLength(0);
  });
});

describe('nightlyConsolidation, with its activities stubbed', () => {
  it('pages through the agents, runs one child each, reports the one that failed, and records the night', async () => {
    const agents = ['nc-a', 'nc-b', 'nc-c'];
    const s = nightStubs({
      agents,
      fail: ({ name, agentId }) => {
        if (name === 'expirePhase' && agentId === 'nc-b') {
          throw ApplicationFailure.create({
            type: 'InvalidInput',
            nonRetryable: true,
            message: 'a bad entry',
          });
        }
      },
    });
    const w = await stubbedWorker(env, s.activities);
    const workflowId = `nightly-${Date.now()}-${seq++}`;
    const result = await w.run(() =>
      env.client.workflow.execute(nightlyConsolidation, {
        taskQueue: w.taskQueue,
        workflowId,
        args: [{ asOf, agentsPerPage: 1 }],
      }),
    );
    const double = Object.fromEntries(Object.entries(COUNTS).map(([k, v]) => [k, 2 * v])) as PhaseCounts;
    expect(result).toEqual({
      asOf,
      agents: 3,
      completed: 2,
      failed: [{ agentId: 'nc-b', error: 'a bad entry' }],
      totals: double,
    });
    // A page of one agent at a time, the last one empty.
    expect(s.listings).toEqual([
      { limit: 1 },
      { after: 'nc-a', limit: 1 },
      { after: 'nc-b', limit: 1 },
      { after: 'nc-c', limit: 1 },
    ]);
    // One child per agent, named by the agent and the night; the failed one was not retried.
    const expired = s.calls.filter((c) => c.name === 'expirePhase');
    expect(expired.map((c) => [c.agentId, c.workflowId])).toEqual(
      agents.map((a) => [a, consolidateAgentWorkflowId(a, asOf)]),
    );
    expect(s.calls.filter((c) => c.name === 'reportPhase').map((c) => c.agentId)).toEqual(['nc-a', 'nc-c']);
    // The parent's own steps, after every child.
    const own = s.calls.filter((c) => c.workflowId === workflowId).map((c) => c.name);
    expect(own).toEqual([
      'nightlyAgents',
      'nightlyAgents',
      'nightlyAgents',
      'nightlyAgents',
      'currentPolicy',
      'pruneRecords',
      'recordNightly',
    ]);
    expect(s.pruned).toEqual([{ asOf, policy }]);
    expect(s.recorded).toEqual([
      {
        runId: `nightly@${new Date(asOf).toISOString()}`,
        asOf,
        counts: { agents: 3, completed: 2, failed: 1, ...double, ...PRUNED },
      },
    ]);
  });

  it('lists the first failures, each message cut short, and counts the rest: its report travels whole through continue-as-new', async () => {
    const agents = Array.from(
      { length: MAX_FAILURES_LISTED + 5 },
      (_, i) => `nf-${String(i).padStart(3, '0')}`,
    );
    const first = `${NIGHT_PHASES[0]!.name}Phase`;
    const s = nightStubs({
      agents,
      fail: ({ name, agentId }) => {
        if (name === first && agentId) {
          throw ApplicationFailure.create({
            type: 'InvalidInput',
            nonRetryable: true,
            message: 'x'.repeat(20_000),
          });
        }
      },
    });
    const w = await stubbedWorker(env, s.activities);
    const result = await w.run(() =>
      env.client.workflow.execute(nightlyConsolidation, {
        taskQueue: w.taskQueue,
        workflowId: `nightly-${Date.now()}-${seq++}`,
        args: [{ asOf, agentsPerPage: 50 }],
      }),
    );
    expect(result).toMatchObject({ agents: agents.length, completed: 0, failedUnlisted: 5 });
    expect(result.failed).toHaveLength(MAX_FAILURES_LISTED);
    for (const f of result.failed) expect(f.error.length).toBeLessThanOrEqual(MAX_ERROR_CHARS);
    expect(s.recorded[0]?.counts).toMatchObject({ agents: agents.length, failed: agents.length });
  }, 300_000);

  it('runs for now when no instant is given, and fails typed on a bad input', async () => {
    const s = nightStubs();
    const w = await stubbedWorker(env, s.activities);
    await w.run(async () => {
      const before = Date.now();
      const empty = await env.client.workflow.execute(nightlyConsolidation, {
        taskQueue: w.taskQueue,
        workflowId: `nightly-now-${Date.now()}-${seq++}`,
        args: [{}],
      });
      expect(empty).toMatchObject({ agents: 0, completed: 0, failed: [] });
      expect(empty.asOf).toBeGreaterThanOrEqual(before - 1000);
      expect(empty.asOf).toBeLessThanOrEqual(Date.now());
      expect(s.recorded).toHaveLength(1);
      s.calls.length = 0;
      for (const input of [{ agentsPerPage: 0 }, { asOf: Date.now() + 3_600_000 }]) {
        const failure = typedFailure(
          await env.client.workflow
            .execute(nightlyConsolidation, {
              taskQueue: w.taskQueue,
              workflowId: `nightly-bad-${Date.now()}-${seq++}`,
              args: [input],
            })
            .catch((e: unknown) => e),
        );
        expect(failure.type).toBe('InvalidInput');
      }
      expect(s.calls).toHaveLength(0);
    });
  });
});
