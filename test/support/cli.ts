import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { TestEnv } from './env';

const CLI = join(__dirname, '..', '..', 'bin', 'memgate.cjs');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the installed `memgate` command against a test environment's servers, database and
 * task queue. Asynchronous on purpose: the worker that serves the command runs in the test's
 * own process.
 */
export function runMemgate(
  env: TestEnv,
  args: string[],
  extraEnv: Record<string, string> = {},
): Promise<CliResult> {
  return new Promise((done) => {
    execFile(
      'node',
      [CLI, ...args],
      {
        env: {
          ...process.env,
          TEMPORAL_ADDRESS: env.endpoints.temporalAddress,
          MONGODB_URI: env.endpoints.mongoUri,
          MEMGATE_DB: env.config.database,
          MEMGATE_TASK_QUEUE: env.config.taskQueue,
          ...extraEnv,
        },
      },
      (err, stdout, stderr) => done({ code: err ? Number(err.code) : 0, stdout, stderr }),
    );
  });
}
