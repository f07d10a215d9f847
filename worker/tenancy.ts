import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { onBehalfOf } from '../store/tenant';

/**
 * Every activity sends its store commands on behalf of the workflow that called it
 * (store/tenant.ts), so that one agent's burst of activities takes turns at the store with
 * everyone else's work instead of queueing it all behind.
 */
export const activityTenancy: ActivityInterceptorsFactory = (ctx) => {
  const workflowId = ctx.info.workflowExecution?.workflowId;
  return {
    inbound: {
      execute: (input, next) =>
        workflowId === undefined ? next(input) : onBehalfOf(`workflow:${workflowId}`, () => next(input)),
    },
  };
};
