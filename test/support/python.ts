import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { expandHome } from '../../stack/stack';

const run = promisify(execFile);

/** The official Temporal Python SDK, pinned: the client no one here wrote. */
export const TEMPORALIO_PYTHON = 'temporalio==1.35.0';

/** The OpenAPI fuzzer, pinned: it reads the served document and nothing else of ours. */
export const SCHEMATHESIS_PYTHON = 'schemathesis==4.32.5';

/**
 * A Python with these pinned packages, in a virtual environment created once in the cache
 * outside the repository (like the server binaries) and reused by later runs. The directory is
 * named by the pins, so changing one makes a fresh environment.
 */
export async function pythonWith(cacheDir: string, packages: readonly string[]): Promise<string> {
  const name = packages.map((p) => p.replace('==', '-')).join('+');
  const venv = resolve(expandHome(cacheDir), `python-${name}`);
  const python = join(venv, 'bin', 'python');
  if (!existsSync(join(venv, '.ready'))) {
    await run('python3', ['-m', 'venv', venv]);
    await run(join(venv, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', ...packages], {
      timeout: 600_000,
    });
    await run(python, ['-c', "open(__import__('sys').argv[1], 'w').close()", join(venv, '.ready')]);
  }
  return python;
}

/** A Python with the Temporal SDK (see `pythonWith`). */
export function pythonWithTemporal(cacheDir: string): Promise<string> {
  return pythonWith(cacheDir, [TEMPORALIO_PYTHON]);
}

/** Runs test/python/<script> with the arguments; its stdout is one JSON document. */
export async function runPython(python: string, script: string, args: string[]): Promise<unknown> {
  const { stdout } = await run(python, [join(__dirname, '..', 'python', script), ...args], {
    timeout: 120_000,
  });
  return JSON.parse(stdout);
}
