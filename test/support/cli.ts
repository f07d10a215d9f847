import { execFile, spawn, type ChildProcess } from 'node:child_process';
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
/** The test environment's embeddings server, for a process that runs against configured servers. */
function embeddingsEnv(env: TestEnv): Record<string, string> {
  return 'url' in env.endpoints.embeddings ? { MEMGATE_EMBEDDINGS_URL: env.endpoints.embeddings.url } : {};
}

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
          ...embeddingsEnv(env),
          ...extraEnv,
        },
      },
      (err, stdout, stderr) => done({ code: err ? Number(err.code) : 0, stdout, stderr }),
    );
  });
}

/**
 * `memgate worker` as its own process against a test environment's servers, database and
 * task queue, for tests that kill it (SIGKILL: no shutdown, no cleanup). Resolves once it
 * polls.
 */
export async function spawnWorker(
  env: TestEnv,
  extraEnv: Record<string, string> = {},
): Promise<ChildProcess> {
  const child = spawn('node', [CLI, 'worker'], {
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: env.endpoints.temporalAddress,
      MONGODB_URI: env.endpoints.mongoUri,
      MEMGATE_DB: env.config.database,
      MEMGATE_TASK_QUEUE: env.config.taskQueue,
      ...embeddingsEnv(env),
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((ready, failed) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('polling task queue')) ready();
    });
    child.once('exit', (code) => failed(new Error(`memgate worker exited (${code}) before polling`)));
  });
  return child;
}

/** SIGKILL, and wait until the process is gone. */
export async function killWorker(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((done) => child.once('exit', done));
  child.kill('SIGKILL');
  await gone;
}
