import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { forget, forgetWorkflowId } from '../../workflows/forget';
import { consolidateAgent } from '../../workflows/nightly';
import { consolidateAgentWorkflowId } from '../../core/ids';
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

// The client adopts this policy into the fresh store (docs/invariants.md, One policy); the
// batch size is each worker's own, so the worker processes get it too.
const POLICY = { MEMGATE_HOT_CAPACITY: '600', MEMGATE_LOW_WATERMARK: '0.5', MEMGATE_NIGHTLY_BATCH: '25' };

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

  it('in every nightly phase, one after the other: the run completes, every entry in one place', async () => {
    const agentId = env.agent('kill-phases');
    const day0 = (i: number) => dayAt(0, 0) + i * 1000;
    // Work for every phase: volatile facts past their freshness (expire), every new entry's
    // terms (refresh), facts replaced by newer ones (supersede), near-duplicates (consolidate),
    // and more than the capacity of 600 (reclaim).
    const entries = [
      ...Array.from({ length: 300 }, (_, i) => ({
        text: `Dock ${i} quota is ${i * 13} pallets this week.`,
        kind: 'fact' as const,
        volatile: true,
        freshUntil: dayAt(0, 12),
        writtenAt: day0(i),
      })),
      ...Array.from({ length: 300 }, (_, i) => ({
        text: `Gate ${i} supervisor is ${i % 2 ? 'Ines' : 'Tomas'} ${WORDS[i % WORDS.length]}.`,
        kind: 'fact' as const,
        subject: `gate ${Math.floor(i / 2)}`,
        attribute: 'supervisor',
        writtenAt: day0(1000 + i),
      })),
      ...Array.from({ length: 300 }, (_, i) => ({
        text: `${note(200_000 + Math.floor(i / 2))}${i % 2 ? ' Signed off.' : ''}`,
        writtenAt: day0(2000 + i),
      })),
    ];
    for (let i = 0; i < entries.length; i += 100) {
      await env.client.write({ agentId, entries: entries.slice(i, i + 100) });
    }
    const asOf = dayAt(1, 3);
    const handle = await env.client.temporal.workflow.start(consolidateAgent, {
      workflowId: consolidateAgentWorkflowId(agentId, asOf),
      taskQueue: env.config.taskQueue,
      args: [{ agentId, asOf }],
    });
    const phases = ['expirePhase', 'refreshPhase', 'supersedePhase', 'consolidatePhase', 'reclaimPhase'];
    for (const phase of phases) {
      await until(
        `${phase} under way`,
        async () =>
          (await handle.describe()).raw.pendingActivities?.some(
            (a) => a.activityType?.name === phase && a.state === 2 /* STARTED */,
          ) ?? false,
        300_000,
      );
      await killCurrentWorker();
      await startWorker();
    }
    const report = await handle.result();
    // Each phase was cut off once and retried to completion on the next worker.
    const history = await handle.fetchHistory();
    const scheduled = new Map<number, string>();
    const attempts = new Map<string, number>();
    for (const event of history.events ?? []) {
      const s = event.activityTaskScheduledEventAttributes;
      if (s) scheduled.set(Number(event.eventId), s.activityType!.name!);
      const started = event.activityTaskStartedEventAttributes;
      if (started) attempts.set(scheduled.get(Number(started.scheduledEventId))!, started.attempt!);
    }
    for (const phase of phases) expect(attempts.get(phase), phase).toBeGreaterThanOrEqual(2);
    expect(report.counts).toMatchObject({ expired: 300, superseded: 150 });
    expect(report.counts.summarised).toBeGreaterThan(0);
    expect(report.counts.spilled).toBeGreaterThan(0);
    const [hot, cold] = await Promise.all([
      env.store.hot.countDocuments({ agentId }),
      env.store.cold.countDocuments({ agentId }),
    ]);
    expect(hot).toBe(300);
    expect(hot + cold).toBe(900 + report.counts.summarised);
    await expectVerified(env, agentId);
  }, 900_000);

  it('during forget: the erasure completes on the new worker and nothing of the entry remains', async () => {
    const agentId = env.agent('kill-forget');
    const written = await env.client.write({
      agentId,
      entries: Array.from({ length: 40 }, (_, i) => ({
        text: `${note(300_000 + Math.floor(i / 2))}${i % 2 ? ' Signed off.' : ''}`,
        writtenAt: dayAt(0, 0) + i * 1000,
      })),
    });
    const asOf = dayAt(1, 3);
    const night = await env.client.temporal.workflow.execute(consolidateAgent, {
      workflowId: consolidateAgentWorkflowId(agentId, asOf),
      taskQueue: env.config.taskQueue,
      args: [{ agentId, asOf }],
    });
    expect(night.counts.summarised).toBeGreaterThan(0);
    // An entry a summary was built from: erasure rebuilds or removes that summary too.
    const summarised = await env.store.hot.findOne({ agentId, 'subsumedBy.0': { $exists: true } });
    const entryId = summarised!._id;
    expect(written.entries.map((e) => e.id)).toContain(entryId);
    const handle = await env.client.temporal.workflow.start(forget, {
      workflowId: forgetWorkflowId(agentId, entryId),
      taskQueue: env.config.taskQueue,
      args: [{ agentId, entryId }],
    });
    await until(
      'the erasure under way',
      async () => (await env.store.tombstones.countDocuments({ agentId })) > 0,
    );
    await killCurrentWorker();
    expect((await handle.describe()).status.name).toBe('RUNNING');
    await startWorker();
    await handle.result();
    expect(await env.store.hot.countDocuments({ _id: entryId })).toBe(0);
    expect(await env.store.cold.countDocuments({ _id: entryId })).toBe(0);
    await expectVerified(env, agentId);
  }, 600_000);

  it('during a burst of writes: every write is acknowledged once, by the new worker if need be', async () => {
    const agentId = env.agent('kill-writes');
    const burst = Array.from({ length: 30 }, (_, w) => ({
      agentId,
      entries: Array.from({ length: 20 }, (_, j) => ({
        text: note(100_000 + w * 20 + j),
        idempotencyKey: `burst-${w}-${j}`,
      })),
    }));
    // An application retries a write that failed, with the same keys: exactly once
    // (docs/writes.md, Ids and exactly-once).
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
