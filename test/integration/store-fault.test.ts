import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { parseConfig } from '../../core/config';
import { StackUnavailableError } from '../../core/errors';
import { restartFerretDb, runningServers, stackDown, type StackSettings } from '../../stack/stack';
import { startTestEnv, type TestEnv } from '../support/env';
import { freePort, killWorker, runMemgate, spawnServe } from '../support/cli';
import { expectVerified } from '../support/verify';

/**
 * A store that stops answering (docs/invariants.md, No store wedge): FerretDB paused with
 * SIGSTOP in the middle of writes and recalls. Callers get StackUnavailable naming the
 * operation within the timeout, never a hang; after SIGCONT everything resumes and nothing
 * acknowledged is lost. Then the local stack's watchdog (`memgate stack watch`) restarts a
 * FerretDB that stays paused. This FerretDB is the test's own, on the stack's PostgreSQL, so
 * that pausing it stalls no other test.
 */
const TIMEOUT_MS = 2_000;
/** Room for a loaded machine's scheduling on top of the timeout: still far from a hang. */
const SLACK_MS = 3_000;

const CLI = join(__dirname, '..', '..', 'bin', 'memgate.cjs');

const postgres = inject('postgres');
const scratch = mkdtempSync(join(tmpdir(), 'memgate-fault-'));
let settings: StackSettings;
let env: TestEnv;
let watchdog: ChildProcess | undefined;

/** The pid of this test's FerretDB, as its state directory records it. */
const ferretdbPid = () => {
  const pid = runningServers(settings).ferretdb;
  if (pid === undefined) throw new Error("this test's FerretDB is not running");
  return pid;
};

/**
 * The store settings of this test's processes: a pool of 16 shared by at most four (this one,
 * `memgate serve`, a CLI command, the watchdog).
 */
const STORE = { MEMGATE_STORE_CONNECTIONS: '16', MEMGATE_STORE_PROCESSES: '4' };

// It starts a FerretDB of its own on the local stack's PostgreSQL: with configured servers
// (TEMPORAL_ADDRESS, MONGODB_URI) there is none to start it on, and it does not run.
beforeAll(async () => {
  if (!postgres) return;
  const config = parseConfig(process.env);
  // The stack's PostgreSQL, its secrets, and a state directory of this test's own.
  copyFileSync(postgres.secrets, join(scratch, 'postgres-secrets.json'));
  settings = {
    cacheDir: config.cacheDir,
    stateDir: scratch,
    temporalPort: config.temporalPort,
    temporalUiPort: config.temporalUiPort,
    mongoPort: await freePort(),
    postgresPort: postgres.port,
    embeddingsPort: config.embeddingsPort,
    embeddingsQueryServers: config.embeddingsQueryServers,
    embeddingsPassagesPort: config.embeddingsPassagesPort,
    storeConnections: 16,
    storeProcesses: 4,
    storeTimeoutMs: TIMEOUT_MS,
  };
  await restartFerretDb(settings, () => undefined);
  env = await startTestEnv(
    { ...STORE, MEMGATE_STORE_TIMEOUT_MS: String(TIMEOUT_MS), MEMGATE_WRITE_TIMEOUT_MS: '4000' },
    { mongoUri: `mongodb://127.0.0.1:${settings.mongoPort}/` },
  );
}, 180_000);

afterAll(async () => {
  if (watchdog) await killWorker(watchdog);
  try {
    process.kill(ferretdbPid(), 'SIGCONT');
  } catch {
    // already gone
  }
  await env?.close();
  if (settings) await stackDown(settings, ['ferretdb'], 0);
  rmSync(scratch, { recursive: true, force: true });
});

/** How a call ended, and how long it took. */
async function timed(work: () => Promise<unknown>): Promise<{ ms: number; error?: unknown }> {
  const started = Date.now();
  try {
    await work();
    return { ms: Date.now() - started };
  } catch (error) {
    return { ms: Date.now() - started, error };
  }
}

describe.skipIf(!postgres)('a store that stops answering (docs/invariants.md, No store wedge)', () => {
  it('fails calls as StackUnavailable within the timeout while paused, and resumes after, losing nothing acknowledged', async () => {
    const agentId = env.agent('paused');
    const acknowledged: string[] = [];
    const write = async (n: number, to = agentId) => {
      const res = await env.client.write({
        agentId: to,
        entries: [{ text: `The relay station ${n} reports a fault on line ${n % 7}.`, salience: 0.7 }],
      });
      if (to === agentId) acknowledged.push(...res.entries.map((e) => e.id));
    };
    for (let n = 0; n < 6; n++) await write(n);

    // Writes and recalls in flight when the store stops, and more sent while it is stopped.
    process.kill(ferretdbPid(), 'SIGSTOP');
    try {
      const during = await Promise.all([
        ...Array.from({ length: 4 }, (_, i) =>
          timed(() => env.client.recall({ agentId, query: `relay fault ${i}` })),
        ),
        ...Array.from({ length: 4 }, (_, i) => timed(() => env.store.hot.findOne({ _id: `x${i}`, agentId }))),
        // One write per agent: an agent's writes queue behind each other (client/client.ts).
        ...Array.from({ length: 3 }, (_, i) =>
          timed(() => write(100 + i, i === 0 ? agentId : env.agent(`paused-${i}`))),
        ),
      ]);
      const recalls = during.slice(0, 8);
      const writes = during.slice(8);
      for (const r of recalls) {
        expect(r.error).toBeInstanceOf(StackUnavailableError);
        expect(r.ms).toBeLessThan(TIMEOUT_MS + SLACK_MS);
      }
      // The store's own call names the operation that got no answer.
      expect((recalls[4]!.error as StackUnavailableError).details).toMatchObject({
        operation: 'entries_hot.findOne',
      });
      expect((recalls[4]!.error as Error).message).toContain(`within ${TIMEOUT_MS} ms`);
      // A write waits out its own timeout (its workflow retries the store meanwhile), then says so.
      for (const w of writes) {
        expect(w.error).toBeInstanceOf(StackUnavailableError);
        expect(w.ms).toBeLessThan(4_000 + SLACK_MS);
      }
    } finally {
      // Resumed whatever the assertions found, so the tests after this one meet a store that answers.
      process.kill(ferretdbPid(), 'SIGCONT');
    }
    // Everything resumes: new writes and recalls answer (the first may still meet the
    // reconnection), and every acknowledged write is there.
    const deadline = Date.now() + 60_000;
    for (;;) {
      const attempt = await timed(() => write(200));
      if (!attempt.error) break;
      expect(attempt.error).toBeInstanceOf(StackUnavailableError);
      expect(Date.now()).toBeLessThan(deadline);
    }
    const result = await env.client.recall({ agentId, query: 'relay station fault' });
    expect(result.hits.length).toBeGreaterThan(0);
    for (const _id of acknowledged) expect(await env.store.hot.findOne({ _id, agentId })).not.toBeNull();
    await expectVerified(env, agentId);
  }, 180_000);

  it('health says so: /readyz answers 503, `stack status` names the problem, and the metric counts the timeout', async () => {
    const metricsPort = await freePort();
    const { child: serve, url } = await spawnServe(env, {
      ...STORE,
      MEMGATE_STORE_TIMEOUT_MS: String(TIMEOUT_MS),
      MEMGATE_METRICS_PORT: String(metricsPort),
    });
    try {
      const ready = () => fetch(`${url}/readyz`);
      expect((await ready()).status).toBe(200);
      const status = () =>
        runMemgate(env, ['stack', 'status'], {
          ...STORE,
          MEMGATE_STATE_DIR: scratch,
          MEMGATE_MONGO_PORT: String(settings.mongoPort),
          MEMGATE_POSTGRES_PORT: String(settings.postgresPort),
          MEMGATE_STORE_TIMEOUT_MS: String(TIMEOUT_MS),
        }).then((r) => JSON.parse(r.stdout) as { mongo: boolean; mongoProblem?: string });
      expect(await status()).toMatchObject({ mongo: true });

      process.kill(ferretdbPid(), 'SIGSTOP');
      try {
        // The port still accepts connections; only an answer tells.
        const paused = await ready();
        expect(paused.status).toBe(503);
        expect(await paused.json()).toMatchObject({ error: { type: 'StackUnavailable' } });
        const reported = await status();
        expect(reported.mongo).toBe(false);
        expect(reported.mongoProblem).toMatch(
          /the store did not answer|cannot reach the MongoDB-protocol server/,
        );
        const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
        expect(metrics).toMatch(
          /memgate_store_timeouts_total\{[^}]*operation="admin\.listDatabases"[^}]*\} [1-9]/,
        );
      } finally {
        process.kill(ferretdbPid(), 'SIGCONT');
      }
      const until = Date.now() + 30_000;
      while ((await ready()).status !== 200) {
        expect(Date.now()).toBeLessThan(until);
        await new Promise((r) => setTimeout(r, 250));
      }
    } finally {
      await killWorker(serve);
    }
  }, 180_000);

  it('the watchdog restarts a FerretDB that stays paused, and says so in its log', async () => {
    const before = ferretdbPid();
    watchdog = spawn('node', [CLI, 'stack', 'watch'], {
      env: {
        ...process.env,
        ...STORE,
        MEMGATE_STATE_DIR: scratch,
        MEMGATE_CACHE_DIR: settings.cacheDir,
        MEMGATE_MONGO_PORT: String(settings.mongoPort),
        MEMGATE_POSTGRES_PORT: String(settings.postgresPort),
        MEMGATE_STORE_TIMEOUT_MS: String(TIMEOUT_MS),
      },
      stdio: 'ignore',
    });
    const log = () => {
      try {
        return readFileSync(join(scratch, 'watchdog.log'), 'utf8');
      } catch {
        return '';
      }
    };
    const waitFor = async (what: string, ok: () => boolean | Promise<boolean>, ms: number) => {
      const until = Date.now() + ms;
      while (!(await ok())) {
        if (Date.now() > until) throw new Error(`${what} within ${ms} ms; watchdog log:\n${log()}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    };
    await waitFor('the watchdog watching', () => log().includes('watching FerretDB'), 60_000);
    process.kill(before, 'SIGSTOP');
    // Three unanswered probes, a few seconds apart, then the restart.
    await waitFor('a restart', () => log().includes('restarted FerretDB'), 90_000);
    expect(log()).toMatch(/FerretDB did not answer within 2000 ms 3 times in a row/);
    expect(readFileSync(join(scratch, 'ferretdb.log'), 'utf8')).toContain(
      '[memgate watchdog] restarted FerretDB',
    );
    expect(ferretdbPid()).not.toBe(before);
    // The new FerretDB answers this process's store again.
    await waitFor(
      'the store answering again',
      () =>
        env.store.answers().then(
          () => true,
          () => false,
        ),
      60_000,
    );
    expect(await env.client.recall({ agentId: env.agent('paused'), query: 'relay station' })).toMatchObject({
      hits: expect.arrayContaining([expect.objectContaining({ id: expect.any(String) })]),
    });
  }, 180_000);
});
