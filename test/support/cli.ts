import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { freePort } from '../../stack/stack';
import type { TestEnv } from './env';

export { freePort };

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
/**
 * A memgate process's environment: the test environment's servers, database, task queue and
 * embeddings endpoint, and `extra` over them.
 */
function processEnv(env: TestEnv, extra: Record<string, string>): NodeJS.ProcessEnv {
  return {
    ...process.env,
    // A directory of its own, as every process needs (vectorEngine/persisted.ts, keepDirectory).
    MEMGATE_VECTOR_INDEX_DIR: join(dirname(env.config.vectorIndexDir), `process-${randomUUID()}`),
    TEMPORAL_ADDRESS: env.endpoints.temporalAddress,
    MONGODB_URI: env.endpoints.mongoUri,
    MEMGATE_DB: env.config.database,
    MEMGATE_TASK_QUEUE: env.config.taskQueue,
    ...('queryUrls' in env.endpoints.embeddings
      ? {
          MEMGATE_EMBEDDINGS_URL: env.endpoints.embeddings.queryUrls.join(','),
          MEMGATE_EMBEDDINGS_PASSAGES_URL: env.endpoints.embeddings.passagesUrl,
        }
      : {}),
    ...extra,
  };
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
        env: processEnv(env, extraEnv),
      },
      (err, stdout, stderr) => done({ code: err ? Number(err.code) : 0, stdout, stderr }),
    );
  });
}

/**
 * The command with its output read as `| head -1` reads it: the pipe closed after the first
 * chunk, while the command still writes.
 */
export function runMemgateClosingEarly(env: TestEnv, args: string[]): Promise<CliResult> {
  return new Promise((done) => {
    const child = spawn('node', [CLI, ...args], {
      env: processEnv(env, {}),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.once('data', (chunk: Buffer) => {
      stdout = chunk.toString();
      child.stdout.destroy();
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('close', (code, signal) => done({ code: code ?? (signal ? 128 : 1), stdout, stderr }));
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
    env: processEnv(env, extraEnv),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await untilPrinted(child, 'polling task queue', 'memgate worker exited before polling');
  return child;
}

/** SIGKILL, and wait until the process is gone. */
export async function killWorker(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((done) => child.once('exit', done));
  child.kill('SIGKILL');
  await gone;
}

/**
 * `memgate serve` as its own process against a test environment's servers, database and task
 * queue, on a free port. Resolves with the process and its base URL once it listens.
 */
export async function spawnServe(
  env: TestEnv,
  extraEnv: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const child = spawn('node', [CLI, 'serve'], {
    env: processEnv(env, { MEMGATE_HTTP_PORT: String(port), ...extraEnv }),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await untilPrinted(child, 'memgate HTTP API on', 'memgate serve exited before listening');
  return { child, url: `http://127.0.0.1:${port}` };
}

/** Resolves once the process has printed `text` on its standard output; fails if it exits first. */
function untilPrinted(child: ChildProcess, text: string, exited: string): Promise<void> {
  return new Promise((ready, failed) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes(text)) ready();
    });
    child.once('exit', (code) => failed(new Error(`${exited} (exit ${code})`)));
  });
}
