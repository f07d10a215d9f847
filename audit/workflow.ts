import {
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { AuditActivities } from '../activities';
import type { QuestionRef } from './messages';
import { AUDIT_ARMS } from './records';
import { parseInput } from '../core/messages';
import { auditInputSchema, type AuditInput } from './messages';
import { asApplicationFailure } from '../core/failures';

/** The restore-counterfactual audit: one workflow per run id, resumable. */
export type { AuditInput };

export interface AuditProgress {
  runId: string;
  questions: number;
  questionsDone: number;
  /** Question × arm activities. */
  steps: number;
  stepsDone: number;
  running: string[];
  excluded: number;
}

export type AuditResult = Omit<AuditProgress, 'running'> & { records: number };

/** What a run hands the next one when history grows long. */
interface Carried {
  questions: QuestionRef[];
  done: string[];
  records: number;
  excluded: number;
}

export const auditProgressQuery = defineQuery<AuditProgress>('progress');

export function auditWorkflowId(runId: string): string {
  return `memgate-audit-${runId}`;
}

/**
 * The audit runs on a queue of its own, served by the worker `memgate audit` brings along:
 * an experiment never takes a production worker's slots, nor a production worker its files.
 */
export function auditTaskQueue(taskQueue: string): string {
  return `${taskQueue}-audit`;
}

const { listAuditQuestions, releaseAuditQuestion } = proxyActivities<AuditActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 5 },
});

// With `--ranker hybrid` the first sight of a haystack embeds its turns (minutes on a small
// CPU); it heartbeats per batch, so a lost worker is still noticed within a minute.
const { prepareAuditQuestion } = proxyActivities<AuditActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 5 },
});

// An arm heartbeats after each read, so a lost worker is noticed in seconds; a retry resumes
// at the budget it reached. Model readers make an arm long, hence the generous overall bound.
const { runAuditArm } = proxyActivities<AuditActivities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', maximumAttempts: 5 },
});

export async function memgateAudit(raw: AuditInput, carried?: Carried): Promise<AuditResult> {
  let input: AuditInput;
  try {
    input = parseInput(auditInputSchema, raw, 'audit');
  } catch (err) {
    throw asApplicationFailure(err);
  }
  let questions = carried?.questions ?? [];
  const done = new Set(carried?.done ?? []);
  let records = carried?.records ?? 0;
  let excluded = carried?.excluded ?? 0;
  let stepsDone = done.size * AUDIT_ARMS.length;
  const running = new Set<string>();

  // Registered before the first await, so progress answers while the data is still being listed.
  setHandler(auditProgressQuery, () => ({
    runId: input.runId,
    questions: questions.length,
    questionsDone: done.size,
    steps: questions.length * AUDIT_ARMS.length,
    stepsDone,
    running: [...running],
    excluded,
  }));

  if (!carried) {
    questions = await listAuditQuestions({
      source: input.source,
      ...(input.questionIds ? { questionIds: input.questionIds } : {}),
      ...(input.limit ? { limit: input.limit } : {}),
    });
  }
  const queue = questions.filter((q) => !done.has(q.questionId));
  const auditQuestion = async (ref: QuestionRef) => {
    const task = { runId: input.runId, ref, settings: input.settings };
    const prepared = await prepareAuditQuestion(task);
    if (!prepared.cleanGold) excluded++;
    for (const arm of AUDIT_ARMS) {
      const outcome = await runAuditArm({ ...task, arm, cleanGold: prepared.cleanGold });
      records += outcome.records;
      stepsDone++;
    }
    await releaseAuditQuestion(task);
  };
  const lane = async () => {
    // Stop taking questions when history is long; the in-flight ones finish first.
    while (queue.length > 0 && !workflowInfo().continueAsNewSuggested) {
      const ref = queue.shift()!;
      running.add(ref.questionId);
      await auditQuestion(ref);
      running.delete(ref.questionId);
      done.add(ref.questionId);
    }
  };
  await Promise.all(Array.from({ length: input.concurrency }, lane));

  if (queue.length > 0) {
    await condition(allHandlersFinished);
    await continueAsNew<typeof memgateAudit>(input, { questions, done: [...done], records, excluded });
  }
  return {
    runId: input.runId,
    questions: questions.length,
    questionsDone: done.size,
    steps: questions.length * AUDIT_ARMS.length,
    stepsDone,
    excluded,
    records,
  };
}
