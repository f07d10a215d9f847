import { rmSync } from 'node:fs';
import type { TestProject } from 'vitest/node';
import { parseConfig } from '../../core/config';
import { obtainTemporalCli } from '../../stack/stack';
import { writeWorkflowBundle } from './workflowBundle';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The cached Temporal CLI of the pinned version, whose dev server each workflow test file starts. */
    temporalCliPath: string;
    /** Every workflow of `workflows/`, bundled once for all the files. */
    workflowsBundlePath: string;
  }
}

/**
 * The workflow tier needs only the Temporal CLI: each file starts its own dev server
 * (`TestWorkflowEnvironment.createLocal`) and a worker whose activities are stubs, so no store
 * and no embeddings server is involved.
 */
export default async function setup(project: TestProject) {
  const config = parseConfig(process.env);
  const temporalCliPath = await obtainTemporalCli(config, (line) => console.log(`[workflow tests] ${line}`));
  const workflowsBundlePath = await writeWorkflowBundle(config.stateDir, 'workflows-bundle');
  project.provide('temporalCliPath', temporalCliPath);
  project.provide('workflowsBundlePath', workflowsBundlePath);
  return () => rmSync(workflowsBundlePath, { force: true });
}
