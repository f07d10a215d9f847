import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';

/**
 * `memgate` runs its TypeScript sources when dist/ is older than them (bin/memgate.cjs), as it
 * is after any edit. The commands that load the worker lazily must start from there too:
 * with nothing listening, each fails as StackUnavailable, not on a module it cannot resolve.
 * The sources run in a child of the command, which must not outlive it.
 */
const root = join(__dirname, '..', '..');

/** `memgate <args>` as bin/memgate.cjs runs it when dist/ is stale: a wrapper and its child. */
function spawnFromSources(args: string[], env: Record<string, string | undefined>) {
  return spawn(
    process.execPath,
    [
      '-e',
      `require(${JSON.stringify(join(root, 'scripts', 'bootstrap.cjs'))}).runCliFromSources(${JSON.stringify(args)}).then((c) => process.exit(c))`,
    ],
    // Another directory than the project's: the installed command runs from anywhere.
    { cwd: join(root, 'test'), env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env } },
  );
}

/** A process's state and parent, from /proc (Linux); undefined once it is gone. */
function processStat(pid: number | string): { state: string; parent: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After the command's name, in parentheses: the state, then the parent's pid.
    const [state, parent] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: state!, parent: Number(parent) };
  } catch {
    return undefined;
  }
}

const childrenOf = (pid: number) =>
  readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name) && processStat(name)?.parent === pid)
    .map(Number);

/** Not gone, and not a zombie its new parent has yet to reap. */
const isRunning = (pid: number) => ![undefined, 'Z'].includes(processStat(pid)?.state);

function fromSources(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawnFromSources(args, {
    // Nothing listens on the discard port.
    TEMPORAL_ADDRESS: '127.0.0.1:9',
    MONGODB_URI: 'mongodb://127.0.0.1:9/',
    MEMGATE_STORE_TIMEOUT_MS: '2000',
  });
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

  it('stops when the command that started it is killed outright', async () => {
    const id = randomUUID().slice(0, 8);
    const wrapper = spawnFromSources(['worker'], {
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      MONGODB_URI: inject('mongoUri'),
      MEMGATE_DB: `test_orphan_${id}`,
      MEMGATE_TASK_QUEUE: `orphan-${id}`,
    });
    let child: number | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        let out = '';
        wrapper.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          if (out.includes('memgate worker polling task queue')) resolve();
        });
        wrapper.on('exit', (code) => reject(new Error(`the worker ended first (${code})`)));
      });
      [child] = childrenOf(wrapper.pid!);
      expect(child).toBeDefined();
      wrapper.kill('SIGKILL');
      // It shuts down as on SIGTERM; a worker that kept running would poll the queue unowned.
      for (let waited = 0; isRunning(child!) && waited < 60_000; waited += 250) {
        await new Promise((r) => setTimeout(r, 250));
      }
      expect(isRunning(child!)).toBe(false);
    } finally {
      wrapper.kill('SIGKILL');
      if (child !== undefined && isRunning(child)) process.kill(child, 'SIGKILL');
    }
  }, 180_000);
});
