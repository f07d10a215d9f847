import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../core/config';
import { runningServers, stackDown, type StackSettings } from '../../stack/stack';

/**
 * A pid file outlives its server across a reboot, and its number may then be another
 * process's. `memgate stack down` and the status must know that process is not the server:
 * they leave it running, and the file goes. Before, `stack down` sent SIGTERM to the process
 * group of that number, and failed (ESRCH, a stack trace) when it led none, keeping the file.
 */
const config = parseConfig(process.env);
let state: string;
let settings: StackSettings;
let stranger: ChildProcess;

beforeAll(() => {
  state = mkdtempSync(join(tmpdir(), 'memgate-pids-'));
  settings = {
    cacheDir: config.cacheDir,
    stateDir: state,
    temporalPort: config.temporalPort,
    temporalUiPort: config.temporalUiPort,
    mongoPort: config.mongoPort,
    postgresPort: config.postgresPort,
    embeddingsPort: config.embeddingsPort,
    embeddingsQueryServers: config.embeddingsQueryServers,
    embeddingsPassagesPort: config.embeddingsPassagesPort,
    storeConnections: config.storeConnections,
    storeProcesses: config.storeProcesses,
    storeTimeoutMs: config.storeTimeoutMs,
  };
  // A process of this test's own group: it leads none.
  stranger = spawn('sleep', ['60'], { stdio: 'ignore' });
});
afterAll(() => {
  stranger?.kill('SIGKILL');
  rmSync(state, { recursive: true, force: true });
});

const running = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('a pid file whose number another process now has', () => {
  it('is no server: stack down leaves the process be and removes the file', async () => {
    const pidFile = join(state, 'temporal.pid');
    writeFileSync(pidFile, String(stranger.pid));
    expect(runningServers(settings).temporal).toBeUndefined();
    expect(await stackDown(settings, ['temporal'], 0)).toEqual([]);
    expect(running(stranger.pid!)).toBe(true);
    expect(existsSync(pidFile)).toBe(false);
  });

  it.skipIf(!existsSync('/proc/self/stat'))(
    'is no server when that process leads a group of its own but began at another time',
    async () => {
      // A process group leader, as a shell or another daemon is.
      const leader = spawn('sleep', ['60'], { stdio: 'ignore', detached: true });
      try {
        const pidFile = join(state, 'ferretdb.pid');
        writeFileSync(pidFile, `${leader.pid} 1\n`);
        expect(runningServers(settings).ferretdb).toBeUndefined();
        expect(await stackDown(settings, ['ferretdb'], 0)).toEqual([]);
        expect(running(leader.pid!)).toBe(true);
        expect(existsSync(pidFile)).toBe(false);
      } finally {
        leader.kill('SIGKILL');
      }
    },
  );
});
