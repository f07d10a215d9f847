import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { consolidateAgent, consolidateAgentWorkflowId } from '../../workflows/consolidation';
import { killWorker, spawnWorker } from '../support/cli';
import { startTestEnv, type TestEnv } from '../support/env';
import { expectVerified } from '../support/verify';

/**
 * The worker is a `memgate worker` process, killed with SIGKILL (no shutdown, no cleanup, no
 * injected exception) in the middle of work, then a new one is started: the work completes,
 * nothing acknowledged is lost or doubled, and `memgate verify` passes.
 */
const T0 = Date.UTC(2025, 11, 1);
const dayAt = (day: number, hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;

// The client adopts this policy into the fresh store (One policy); the batch size is each
// worker's own, so the worker processes get it too.
const POLICY = { MEMGATE_HOT_CAPACITY: '600', MEMGATE_LOW_WATERMARK: '0.5', MEMGATE_LIFECYCLE_BATCH: '25' };

let env: TestEnv;
const workers: ChildProcess[] = [];

async function startWorker(): Promise<void> {
  workers.push(await spawnWorker(env, POLICY));
}
async function killCurrentWorker(): Promise<void> {
  await killWorker(workers.at(-1)!);
}

beforeAll(async () => {
  env = await startTestEnv(POLICY, { inProcessWorker: false });
  await startWorker();
}, 120_000);
afterAll(async () => {
  for (const w of workers) await killWorker(w);
  await env?.close();
});

const WORDS =
  'amber basalt cedar delta ember fjord garnet harbor indigo juniper kestrel lagoon marble nectar onyx pewter quartz raven saffron tundra umber violet willow xenon yarrow zephyr'.split(
    ' ',
  );
/** Entries that share few words, so the night has no near-duplicates to merge. */
function note(i: number): string {
  const pick = (k: number) => WORDS[Math.floor(i / WORDS.length ** k) % WORDS.length]!;
  return `Ledger line ${i}: ${pick(0)} ${pick(1)} ${pick(2)} shipment ${i * 7919} cleared.`;
}

async function until(what: string, ready: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ready())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('SIGKILL of the worker process', () => {
  it('during a nightly reclaim: the run completes on a new worker, every entry in one place', async () => {
    const agentId = env.agent('kill-reclaim');
    for (let w = 0; w < 9; w++) {
      await env.client.write({
        agentId,
        entries: Array.from({ length: 100 }, (_, j) => ({
          text: note(w * 100 + j),
          salience: 0.9,
          writtenAt: dayAt(0, 0) + (w * 100 + j) * 1000,
        })),
      });
    }
    const asOf = dayAt(1, 3);
    const handle = await env.client.temporal.workflow.start(consolidateAgent, {
      workflowId: consolidateAgentWorkflowId(agentId, asOf),
      taskQueue: env.config.taskQueue,
      args: [{ agentId, asOf }],
    });
    // Mid-phase: some of the 600 spills made, not all.
    await until(
      'the first spills',
      async () => (await env.store.cold.countDocuments({ agentId })) >= 25,
      300_000,
    );
    await killCurrentWorker();
    const coldAtKill = await env.store.cold.countDocuments({ agentId });
    expect(coldAtKill).toBeLessThan(600);
    expect((await handle.describe()).status.name).toBe('RUNNING');

    await startWorker();
    // The killed attempt is retried once its heartbeat is missed.
    const report = await handle.result();
    // Counted from the store itself: the run's summaries joined hot, reclaim took it to its
    // low watermark, and every entry is in exactly one tier (verify: none lost, none doubled).
    const [hot, cold] = await Promise.all([
      env.store.hot.countDocuments({ agentId }),
      env.store.cold.countDocuments({ agentId }),
    ]);
    expect(hot).toBe(300);
    expect(hot + cold).toBe(900 + report.counts.summarised);
    expect(report.counts.spilled).toBe(cold);
    await expectVerified(env, agentId);
  }, 900_000);

  it('during a burst of writes: every write is acknowledged once, by the new worker if need be', async () => {
    const agentId = env.agent('kill-writes');
    const burst = Array.from({ length: 30 }, (_, w) => ({
      agentId,
      entries: Array.from({ length: 20 }, (_, j) => ({
        text: note(100_000 + w * 20 + j),
        idempotencyKey: `burst-${w}-${j}`,
      })),
    }));
    // An application retries a write that failed, with the same keys: exactly once (README).
    const writeWithRetry = async (request: (typeof burst)[number]) => {
      try {
        return await env.client.write(request);
      } catch {
        return env.client.write(request);
      }
    };
    const results = burst.map(writeWithRetry);
    await until('the first entries', async () => (await env.store.hot.countDocuments({ agentId })) > 0);
    await killCurrentWorker();
    await startWorker();
    const acknowledged = (await Promise.all(results)).flatMap((r) => r.entries);
    expect(acknowledged).toHaveLength(600);
    expect(new Set(acknowledged.map((e) => e.id)).size).toBe(600);
    expect(await env.store.hot.countDocuments({ agentId })).toBe(600);
    await expectVerified(env, agentId);
  }, 600_000);
});
