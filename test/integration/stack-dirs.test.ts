import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * `memgate stack up` (and `npm start`, which runs it) with a cache or state directory it
 * cannot make: InvalidConfig naming the variable, exit 2, rather than the file system's error
 * with a stack trace.
 */
const CLI = resolve(__dirname, '..', '..', 'bin', 'memgate.cjs');
const scratch = mkdtempSync(join(tmpdir(), 'memgate-dirs-'));
// A file where a directory must go.
const file = join(scratch, 'a-file');
writeFileSync(file, '');
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function stackUp(env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  return new Promise((done) =>
    execFile('node', [CLI, 'stack', 'up'], { env: { ...process.env, ...env } }, (err, _stdout, stderr) =>
      done({ code: err ? Number(err.code) : 0, stderr }),
    ),
  );
}

describe('stack up with a directory it cannot make', () => {
  it.each([
    ['MEMGATE_CACHE_DIR', { MEMGATE_CACHE_DIR: join(file, 'cache') }],
    ['MEMGATE_STATE_DIR', { MEMGATE_STATE_DIR: join(file, 'state') }],
  ])('%s: InvalidConfig naming it, exit 2', async (variable, env) => {
    const run = await stackUp(env);
    expect(run.stderr).toContain(`error [InvalidConfig]: ${variable}=`);
    expect(run.stderr).not.toContain('    at ');
    expect(run.code).toBe(2);
  });
});
