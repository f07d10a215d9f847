import { bundleWorkflowCode } from '@temporalio/worker';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { TestProject } from 'vitest/node';
import { parseConfig } from '../../core/config';
import { obtainTemporalCli } from '../../stack/stack';

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
  const { code } = await bundleWorkflowCode({
    workflowsPath: resolve(__dirname, '../../workflows/index.ts'),
    logger: quietLogger,
  });
  const dir = resolve(config.stateDir, 'test');
  mkdirSync(dir, { recursive: true });
  const workflowsBundlePath = join(dir, `workflows-bundle-${process.pid}.js`);
  writeFileSync(workflowsBundlePath, code);
  project.provide('temporalCliPath', temporalCliPath);
  project.provide('workflowsBundlePath', workflowsBundlePath);
  return () => rmSync(workflowsBundlePath, { force: true });
}

const quietLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (m: string) => console.warn(m),
  error: (m: string) => console.error(m),
};
