import { bundleWorkflowCode } from '@temporalio/worker';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const quietLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (m: string) => console.warn(m),
  error: (m: string) => console.error(m),
};

/**
 * Every workflow of `workflows/`, bundled once for all of a project's test files, into a file
 * of this run's own: test runs side by side must not read each other's half-written bundle.
 */
export async function writeWorkflowBundle(stateDir: string, name: string): Promise<string> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: resolve(__dirname, '../../workflows/index.ts'),
    logger: quietLogger,
  });
  const dir = resolve(stateDir, 'test');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}-${process.pid}.js`);
  writeFileSync(path, code);
  return path;
}
