import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * `memgate` runs its TypeScript sources when dist/ is older than them (bin/memgate.cjs), as it
 * is after any edit. The commands that load the worker lazily must start from there too:
 * with nothing listening, each fails as StackUnavailable, not on a module it cannot resolve.
 */
const root = join(__dirname, '..', '..');

function fromSources(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `require(${JSON.stringify(join(root, 'scripts', 'bootstrap.cjs'))}).runCliFromSources(${JSON.stringify(args)}).then((c) => process.exit(c))`,
    ],
    {
      // Another directory than the project's: the installed command runs from anywhere.
      cwd: join(root, 'test'),
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        // Nothing listens on the discard port.
        TEMPORAL_ADDRESS: '127.0.0.1:9',
        MONGODB_URI: 'mongodb://127.0.0.1:9/',
        MEMGATE_STORE_TIMEOUT_MS: '2000',
      },
    },
  );
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stderr })));
}

describe('the CLI from its TypeScript sources', () => {
  // `memgate worker` imports the worker before it connects (`serve` and `start` after).
  it('starts `memgate worker`, which loads the worker lazily', async () => {
    const { code, stderr } = await fromSources(['worker']);
    expect(stderr).not.toContain('ERR_MODULE_NOT_FOUND');
    expect(stderr).toContain('[StackUnavailable]');
    expect(code).toBe(1);
  }, 120_000);
});
