import { resolve } from 'node:path';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AuditActivities } from '../../activities';
import { AUDIT_ARMS } from '../../audit/records';
import { auditProgressQuery, memgateAudit, type AuditInput } from '../../audit/workflow';
import type { QuestionRef } from '../../audit/messages';
import { startWorkflowEnv, stubbedWorker, typedFailure } from '../support/stubbedWorker';

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await startWorkflowEnv();
});
afterAll(async () => {
  await env?.teardown();
});

const workflowsPath = resolve(__dirname, '../../audit/workflow.ts');

type Carried = NonNullable<Parameters<typeof memgateAudit>[1]>;
type Name = keyof AuditActivities;
interface Call {
  name: Name;
  questionId?: string;
  arm?: string;
  attempt: number;
}

const ref = (questionId: string, index: number): QuestionRef => ({
  file: '/data/lme.json',
  index,
  questionId,
});
const Q1 = ref('q1', 0);
const Q2 = ref('q2', 1);
const Q3 = ref('q3', 2);
/** Records each stubbed arm saves. */
const RECORDS_PER_ARM = 4;

/**
 * The audit's activities, recording each call: a question in `unclean` fails the denominator
 * filter, `gate` may hold a call until the test lets it go, and `fail` runs first in each and
 * may throw.
 */
function auditStubs(
  opts: {
    questions?: QuestionRef[];
    unclean?: string[];
    gate?: (call: Call) => Promise<void> | undefined;
    fail?: (call: Call) => void;
  } = {},
) {
  const calls: Call[] = [];
  const tasks: unknown[] = [];
  const hit = async (name: Name, questionId?: string, arm?: string) => {
    const call = { name, questionId, arm, attempt: Context.current().info.attempt };
    calls.push(call);
    await opts.gate?.(call);
    opts.fail?.(call);
  };
  const listAuditQuestions: AuditActivities['listAuditQuestions'] = async (input) => {
    tasks.push(input);
    await hit('listAuditQuestions');
    return opts.questions ?? [Q1, Q2];
  };
  const prepareAuditQuestion: AuditActivities['prepareAuditQuestion'] = async (task) => {
    await hit('prepareAuditQuestion', task.ref.questionId);
    const cleanGold = !(opts.unclean ?? []).includes(task.ref.questionId);
    return { units: 30, tokens: 900, goldUnits: 2, cleanGold };
  };
  const runAuditArm: AuditActivities['runAuditArm'] = async (task) => {
    tasks.push(task);
    await hit('runAuditArm', task.ref.questionId, task.arm);
    return { records: RECORDS_PER_ARM, reused: false };
  };
  const releaseAuditQuestion: AuditActivities['releaseAuditQuestion'] = async (task) => {
    await hit('releaseAuditQuestion', task.ref.questionId);
  };
  const activities: AuditActivities = {
    listAuditQuestions,
    prepareAuditQuestion,
    runAuditArm,
    releaseAuditQuestion,
  };
  return { activities, calls, tasks };
}

const SETTINGS: AuditInput['settings'] = {
  budgets: [200, 400],
  reader: 'evidence',
  judge: 'match',
  restoreCapTokens: 100,
  ranker: 'bm25',
};

let seq = 0;
function auditInput(overrides: Partial<AuditInput> = {}): AuditInput {
  return {
    runId: `r-${Date.now()}-${seq++}`,
    source: '/data/lme.json',
    settings: SETTINGS,
    concurrency: 1,
    ...overrides,
  };
}

function startAudit(taskQueue: string, input: AuditInput, carried?: Carried) {
  return env.client.workflow.start(memgateAudit, {
    taskQueue,
    workflowId: `audit-${input.runId}`,
    args: carried ? [input, carried] : [input],
  });
}

/** One question's steps, in the order the workflow takes them. */
function questionSteps(questionId: string): [Name, string?, string?][] {
  return [
    ['prepareAuditQuestion', questionId],
    ...AUDIT_ARMS.map((arm): [Name, string, string] => ['runAuditArm', questionId, arm]),
    ['releaseAuditQuestion', questionId],
  ];
}

function gate() {
  let open!: () => void;
  const closed = new Promise<void>((done) => (open = done));
  return { closed, open };
}

describe('memgateAudit, with its activities stubbed', () => {
  it('lists the questions, then prepares, runs every arm and releases each, and counts it all', async () => {
    const s = auditStubs({ unclean: ['q2'] });
    const w = await stubbedWorker(env, s.activities, { workflowsPath });
    const input = auditInput({ questionIds: ['q1', 'q2'], limit: 2 });
    const result = await w.run(async () => (await startAudit(w.taskQueue, input)).result());
    const steps = AUDIT_ARMS.length * 2;
    expect(result).toEqual({
      runId: input.runId,
      questions: 2,
      questionsDone: 2,
      steps,
      stepsDone: steps,
      excluded: 1,
      records: steps * RECORDS_PER_ARM,
    });
    expect(s.calls.map((c) => [c.name, c.questionId, c.arm].filter((x) => x !== undefined))).toEqual([
      ['listAuditQuestions'],
      ...questionSteps('q1'),
      ...questionSteps('q2'),
    ]);
    expect(s.tasks[0]).toEqual({ source: '/data/lme.json', questionIds: ['q1', 'q2'], limit: 2 });
    // Each arm is told the run, the question, the settings and what its preparation found.
    expect(s.tasks.slice(1)).toContainEqual({
      runId: input.runId,
      ref: Q2,
      settings: input.settings,
      arm: 'memgate',
      cleanGold: false,
    });
  });

  it('answers its progress while listing and while an arm runs', async () => {
    const listing = gate();
    const arm = gate();
    const s = auditStubs({
      gate: (c) =>
        c.name === 'listAuditQuestions'
          ? listing.closed
          : c.questionId === 'q1' && c.arm === 'fifo'
            ? arm.closed
            : undefined,
    });
    const w = await stubbedWorker(env, s.activities, { workflowsPath });
    const input = auditInput();
    await w.run(async () => {
      // Let every held activity go whatever fails: the worker's shutdown waits for them.
      try {
        const h = await startAudit(w.taskQueue, input);
        await vi.waitFor(() => expect(s.calls).toHaveLength(1), { timeout: 10_000, interval: 50 });
        await expect(h.query(auditProgressQuery)).resolves.toEqual({
          runId: input.runId,
          questions: 0,
          questionsDone: 0,
          steps: 0,
          stepsDone: 0,
          running: [],
          excluded: 0,
        });
        listing.open();
        await vi.waitFor(() => expect(s.calls.at(-1)).toMatchObject({ questionId: 'q1', arm: 'fifo' }), {
          timeout: 10_000,
          interval: 50,
        });
        await expect(h.query(auditProgressQuery)).resolves.toEqual({
          runId: input.runId,
          questions: 2,
          questionsDone: 0,
          steps: 2 * AUDIT_ARMS.length,
          stepsDone: 1,
          running: ['q1'],
          excluded: 0,
        });
        arm.open();
        await expect(h.result()).resolves.toMatchObject({
          questionsDone: 2,
          stepsDone: 2 * AUDIT_ARMS.length,
        });
        await expect(h.query(auditProgressQuery)).resolves.toMatchObject({ running: [], questionsDone: 2 });
      } finally {
        listing.open();
        arm.open();
      }
    });
  });

  it('goes on from the state a previous run carried, without listing or redoing its questions', async () => {
    const held = gate();
    const s = auditStubs({
      unclean: ['q3'],
      gate: (c) => (c.name === 'prepareAuditQuestion' ? held.closed : undefined),
    });
    const w = await stubbedWorker(env, s.activities, { workflowsPath });
    const input = auditInput({ concurrency: 2 });
    const carried: Carried = { questions: [Q1, Q2, Q3], done: ['q1'], records: 10, excluded: 1 };
    await w.run(async () => {
      try {
        const h = await startAudit(w.taskQueue, input, carried);
        // Both lanes hold a question, and nothing of them is done yet.
        await vi.waitFor(() => expect(s.calls).toHaveLength(2), { timeout: 10_000, interval: 50 });
        const progress = await h.query(auditProgressQuery);
        expect(progress).toMatchObject({
          questions: 3,
          questionsDone: 1,
          steps: 3 * AUDIT_ARMS.length,
          stepsDone: AUDIT_ARMS.length,
          excluded: 1,
        });
        expect(progress.running.sort()).toEqual(['q2', 'q3']);
        held.open();
        await expect(h.result()).resolves.toEqual({
          runId: input.runId,
          questions: 3,
          questionsDone: 3,
          steps: 3 * AUDIT_ARMS.length,
          stepsDone: 3 * AUDIT_ARMS.length,
          excluded: 2,
          records: 10 + 2 * AUDIT_ARMS.length * RECORDS_PER_ARM,
        });
      } finally {
        held.open();
      }
    });
    expect(s.calls.some((c) => c.name === 'listAuditQuestions')).toBe(false);
    expect(s.calls.some((c) => c.questionId === 'q1')).toBe(false);
    expect(new Set(s.calls.map((c) => c.questionId))).toEqual(new Set(['q2', 'q3']));
  });

  it('retries an arm that fails once, and counts it once', async () => {
    const s = auditStubs({
      questions: [Q1],
      fail: ({ arm, attempt }) => {
        if (arm === 'memgate' && attempt === 1) throw new Error('the reader timed out');
      },
    });
    const w = await stubbedWorker(env, s.activities, { workflowsPath });
    const result = await w.run(async () => (await startAudit(w.taskQueue, auditInput())).result());
    expect(result).toMatchObject({
      questionsDone: 1,
      stepsDone: AUDIT_ARMS.length,
      records: AUDIT_ARMS.length * RECORDS_PER_ARM,
    });
    expect(s.calls.filter((c) => c.arm === 'memgate').map((c) => c.attempt)).toEqual([1, 2]);
  });

  it('fails typed on a bad input, and on a typed failure of a step, unretried', async () => {
    const s = auditStubs({
      fail: ({ name }) => {
        if (name === 'listAuditQuestions') {
          throw ApplicationFailure.create({
            type: 'InvalidInput',
            nonRetryable: true,
            message: 'no such question in /data/lme.json: q9',
          });
        }
      },
    });
    const w = await stubbedWorker(env, s.activities, { workflowsPath });
    await w.run(async () => {
      for (const bad of [auditInput({ concurrency: 0 }), auditInput({ runId: 'not/an/id' })]) {
        const h = await env.client.workflow.start(memgateAudit, {
          taskQueue: w.taskQueue,
          workflowId: `audit-bad-${Date.now()}-${seq++}`,
          args: [bad],
        });
        const failure = typedFailure(await h.result().catch((e: unknown) => e));
        expect(failure.type).toBe('InvalidInput');
      }
      expect(s.calls).toHaveLength(0);
      const h = await startAudit(w.taskQueue, auditInput({ questionIds: ['q9'] }));
      const failure = typedFailure(await h.result().catch((e: unknown) => e));
      expect(failure.type).toBe('InvalidInput');
      expect(failure.message).toContain('q9');
    });
    expect(s.calls.map((c) => [c.name, c.attempt])).toEqual([['listAuditQuestions', 1]]);
  });
});
