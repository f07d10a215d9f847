import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { expect, vi } from 'vitest';

/** Worker Versioning on the dev server (docs/versioning.md), for tests with two versions. */

/** Makes the version current, and waits until the task queue routes by it. */
export async function setCurrentVersion(
  env: TestWorkflowEnvironment,
  deploymentName: string,
  buildId: string,
): Promise<void> {
  const namespace = env.namespace ?? 'default';
  // A version exists once one of its workers has polled; until then the server refuses.
  for (let attempt = 0; ; attempt++) {
    try {
      await env.client.workflowService.setWorkerDeploymentCurrentVersion({
        namespace,
        deploymentName,
        buildId,
      });
      break;
    } catch (err) {
      if (attempt >= 100) throw err;
      await new Promise((done) => setTimeout(done, 200));
    }
  }
  await vi.waitFor(
    async () => {
      const { workerDeploymentInfo } = await env.client.workflowService.describeWorkerDeployment({
        namespace,
        deploymentName,
      });
      // ROUTING_CONFIG_UPDATE_STATE_COMPLETED: every partition of the task queue routes by it.
      expect(workerDeploymentInfo?.routingConfigUpdateState).toBe(2);
    },
    { timeout: 20_000, interval: 100 },
  );
}

/** The build id of the version a run (the latest, without `runId`) is pinned to. */
export async function buildIdOf(
  env: TestWorkflowEnvironment,
  workflowId: string,
  runId?: string,
): Promise<string | null | undefined> {
  const described = await env.client.workflow.getHandle(workflowId, runId).describe();
  return described.raw.workflowExecutionInfo?.versioningInfo?.deploymentVersion?.buildId;
}
