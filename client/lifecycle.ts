import { ActivityFailure, ChildWorkflowFailure, WorkflowFailedError, type Client } from '@temporalio/client';
import type { ConsolidationReport } from '../activities/consolidation';
import { assertNotAhead } from '../core/clock';
import type { Config } from '../core/config';
import {
  consolidateAgentInputSchema,
  forgetInputSchema,
  parseInput,
  restoreInputSchema,
} from '../core/inputs';
import type { RestoreResult } from '../store/lifecycle';
import {
  consolidateAgent,
  consolidateAgentWorkflowId,
  forget,
  forgetWorkflowId,
  restore,
  restoreWorkflowId,
} from '../workflows/consolidation';
import { toMemgateError } from './errors';

/** The failure a workflow or one of its activities raised, as the MemgateError it started as. */
function unwrap(err: unknown): unknown {
  let cause = err;
  while (
    cause instanceof WorkflowFailedError ||
    cause instanceof ActivityFailure ||
    cause instanceof ChildWorkflowFailure
  ) {
    if (!cause.cause) break;
    cause = cause.cause;
  }
  const typed = toMemgateError(cause);
  return typed === cause ? toMemgateError(err) : typed;
}

async function run<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw unwrap(err);
  }
}

/**
 * Operator actions on the memory lifecycle, each a durable workflow on the worker's queue:
 * a consolidation run now, a restore of a superseded (or expired) entry, an erasure.
 */
export class LifecycleClient {
  constructor(
    private readonly temporal: Client,
    private readonly config: Pick<Config, 'taskQueue'>,
  ) {}

  /** Run one agent's nightly pass as of `asOf`; joins a run of the same agent and instant already under way. */
  async consolidate(input: { agentId: string; asOf: number }): Promise<ConsolidationReport> {
    const { agentId, asOf } = parseInput(consolidateAgentInputSchema, input, 'consolidation');
    assertNotAhead(asOf, Date.now(), 'asOf', 'consolidation');
    return run(() =>
      this.temporal.workflow.execute(consolidateAgent, {
        workflowId: consolidateAgentWorkflowId(agentId, asOf),
        taskQueue: this.config.taskQueue,
        args: [{ agentId, asOf }],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    );
  }

  /** Reverse a supersession, or renew an expired volatile fact until `freshUntil`. */
  async restore(input: { agentId: string; entryId: string; freshUntil?: number }): Promise<RestoreResult> {
    const request = parseInput(restoreInputSchema, input, 'restore');
    return run(() =>
      this.temporal.workflow.execute(restore, {
        workflowId: restoreWorkflowId(request.agentId, request.entryId),
        taskQueue: this.config.taskQueue,
        args: [request],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    );
  }

  /** Erase an entry (I10); NotFoundError when the agent has no such entry. */
  async forget(input: { agentId: string; entryId: string }) {
    const request = parseInput(forgetInputSchema, input, 'forget');
    return run(() =>
      this.temporal.workflow.execute(forget, {
        workflowId: forgetWorkflowId(request.agentId, request.entryId),
        taskQueue: this.config.taskQueue,
        args: [request],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    );
  }
}
