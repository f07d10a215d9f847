import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestEnv, type TestEnv } from '../support/env';
import { killWorker, runMemgate, spawnServe, spawnWorker } from '../support/cli';
import { expectVerified } from '../support/verify';
import { runningServers } from '../../stack/stack';

/**
 * Many processes at once on one store: two `memgate worker`s, a `memgate serve` and this
 * client, each with many writes, recalls, nights and embeddings in flight. Every night
 * settles its entries' pending work in update commands of many statements, and every worker
 * runs several nights at once: the shape that held every connection of FerretDB's pool with a
 * command waiting for one more, for good, before admission (docs/invariants.md, No store
 * wedge). Bounded in count and time, on loopback; it ends by itself either way.
 *
 * A call the store cannot serve within MEMGATE_STORE_TIMEOUT_MS is refused as a retryable
 * `StackUnavailable` (a 503 over HTTP), and this client retries it as any client should. How
 * many are refused depends on the machine's speed, so the test does not count them; it asserts
 * that every refusal is that typed one, and that every call is answered in the end. A wedged
 * store answers nothing, however often it is asked.
 */
const AGENTS = 24;
const WRITES_PER_AGENT = 8;
const ENTRIES_PER_WRITE = 8;
const RECALLS_PER_AGENT = 4;
/**
 * A wedged store answers nothing: not the calls in flight, and not a probe of its storage
 * (`Store.answers`, which needs a connection of FerretDB's PostgreSQL pool, as the watchdog's
 * does). Under this load a probe is answered within seconds; none answered for this long is a wedge.
 */
const WEDGED_AFTER_SILENT_MS = 60_000;
/**
 * Past this, a phase's calls are taken for hung even though the store still answers. Their
 * time is the machine's (phase two took 177 s on two busy cores, longer beside the rest of
 * the suite), so the bound is far above it: what this test catches is a store that stops.
 * The test's timeout holds two phases at this bound and the checks after them.
 */
const PHASE_BOUND_MS = 480_000;

let env: TestEnv;
const processes: ChildProcess[] = [];
let api: string;
let key: string;

beforeAll(async () => {
  env = await startTestEnv({}, { inProcessWorker: false });
  for (let i = 0; i < 2; i++) processes.push(await spawnWorker(env));
  const created = await runMemgate(env, ['keys', 'create', '--agents', '*']);
  expect(created.code).toBe(0);
  key = created.stdout.trim().split('\n').at(-1)!;
  // One key makes every call here: its share of the server is not what this test is about.
  const serve = await spawnServe(env, { MEMGATE_HTTP_IN_FLIGHT_PER_KEY: '10000' });
  processes.push(serve.child);
  api = serve.url;
}, 180_000);

afterAll(async () => {
  for (const p of processes) await killWorker(p);
  await env?.close();
});

async function http(method: string, path: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${api}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const answer = (await res.json()) as { error?: { type?: string; message?: string } };
  if (res.status === 503 && answer.error?.type === 'StackUnavailable')
    throw new Refused(`${method} ${path} answered 503: ${answer.error.message}`);
  return { status: res.status, body: answer };
}

function entry(agent: number, write: number, i: number) {
  const n = (write * ENTRIES_PER_WRITE + i) * 7919 + agent;
  return {
    text: `Shipment ${n} for depot ${agent} leaves dock ${write} with ${i + 2} pallets of part ${n % 97}.`,
    idempotencyKey: `stress-${agent}-${write}-${i}`,
    salience: 0.4 + (i % 5) / 10,
  };
}

/** A refusal that tells the caller to try again: the store answered, in time, that it is busy. */
class Refused extends Error {}

function refusedAsBusy(err: unknown): boolean {
  return err instanceof Refused || (err as { type?: unknown }).type === 'StackUnavailable';
}

const refusals: string[] = [];

/**
 * `call`, tried again after each `StackUnavailable`, backing off as a client should (1, 2, 4,
 * up to 16 s, jittered: callers that all retry at once keep a busy store busy); any other
 * failure is final. Writes carry idempotency keys, so a write tried again cannot land twice.
 */
async function retried<T>(call: () => Promise<T>): Promise<T> {
  const giveUpAt = Date.now() + PHASE_BOUND_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (!refusedAsBusy(err) || Date.now() > giveUpAt) throw err;
      refusals.push((err as Error).message);
      const backoff = Math.min(16_000, 1_000 * 2 ** attempt);
      await new Promise((resolve) => setTimeout(resolve, backoff / 2 + Math.random() * (backoff / 2)));
    }
  }
}

/**
 * Each call's outcome. Fails as soon as the store has answered no probe for
 * WEDGED_AFTER_SILENT_MS, or when a call is still unanswered after PHASE_BOUND_MS.
 */
async function allWithin<T>(work: Promise<T>[]): Promise<PromiseSettledResult<T>[]> {
  let answered = 0;
  const counted = work.map((w) => w.finally(() => answered++));
  const unanswered = () => `${work.length - answered} of ${work.length} calls unanswered`;
  const started = Date.now();
  let lastProbeAnswered = started;
  let settled = false;
  const timers: NodeJS.Timeout[] = [];
  const stopped = new Promise<never>((_, reject) => {
    const probe = async (): Promise<void> => {
      if (settled) return;
      try {
        await env.store.answers();
        lastProbeAnswered = Date.now();
      } catch {
        // Refused as busy or timed out: what counts is how long since the last answer.
      }
      const silentFor = Date.now() - lastProbeAnswered;
      if (silentFor > WEDGED_AFTER_SILENT_MS)
        reject(new Error(`the store is wedged: no probe answered for ${silentFor} ms, ${unanswered()}`));
      else if (!settled) timers.push(setTimeout(() => void probe(), 2_000));
    };
    void probe();
    timers.push(
      setTimeout(
        () => reject(new Error(`${unanswered()} after ${PHASE_BOUND_MS} ms, the store still answering`)),
        PHASE_BOUND_MS,
      ),
    );
  });
  try {
    return await Promise.race([Promise.allSettled(counted), stopped]);
  } finally {
    settled = true;
    for (const timer of timers) clearTimeout(timer);
    console.info(`a phase of ${work.length} calls answered in ${Date.now() - started} ms`);
  }
}

describe('the store under many processes at once (docs/invariants.md, No store wedge)', () => {
  it('answers every write, recall, night and embedding, loses nothing, and verifies clean', async () => {
    // The stack's watchdog restarts a FerretDB that stops answering: a wedge it healed is still one.
    const ferretDb = runningServers(env.config).ferretdb;
    expect(ferretDb).toBeDefined();
    const agents = Array.from({ length: AGENTS }, (_, a) => env.agent(`stress-${a}`));
    const written = new Map<string, Set<string>>(agents.map((a) => [a, new Set()]));
    const record = (agentId: string, ids: string[]) => ids.forEach((id) => written.get(agentId)!.add(id));

    const writes = agents.flatMap((agentId, a) =>
      Array.from({ length: WRITES_PER_AGENT }, (_, w) =>
        retried(async () => {
          const entries = Array.from({ length: ENTRIES_PER_WRITE }, (_, i) => entry(a, w, i));
          // Half through the HTTP API's process, half through this one.
          if (w % 2 === 0) {
            const res = await http('POST', `/v1/agents/${agentId}/memories`, { entries });
            if (res.status !== 200)
              throw new Error(`write answered ${res.status}: ${JSON.stringify(res.body)}`);
            record(
              agentId,
              (res.body as { entries: { id: string }[] }).entries.map((e) => e.id),
            );
          } else {
            const res = await env.client.write({ agentId, entries });
            record(
              agentId,
              res.entries.map((e) => e.id),
            );
          }
        }),
      ),
    );
    const recalls = (query: string) =>
      agents.flatMap((agentId, a) =>
        Array.from({ length: RECALLS_PER_AGENT }, (_, r) =>
          retried(async () => {
            const q = `${query} depot ${a} pallets part ${r}`;
            if (r % 2 === 0) {
              const res = await http('POST', `/v1/agents/${agentId}/recall`, {
                query: q,
                k: 10,
                deep: r === 2,
              });
              if (res.status !== 200)
                throw new Error(`recall answered ${res.status}: ${JSON.stringify(res.body)}`);
            } else await env.client.recall({ agentId, query: q, k: 10 });
          }),
        ),
      );

    const first = await allWithin([...writes, ...recalls('shipment')]);
    expect(first.filter((r) => r.status === 'rejected')).toEqual([]);

    // Every agent's night at once, in both workers, while writes and recalls go on.
    const asOf = Date.now();
    const second = await allWithin<unknown>([
      ...agents.map((agentId) => retried(() => env.client.consolidate({ agentId, asOf }))),
      ...agents.map((agentId, a) =>
        retried(() => env.client.write({ agentId, entries: [entry(a, WRITES_PER_AGENT, 0)] })).then((res) =>
          record(
            agentId,
            res.entries.map((e) => e.id),
          ),
        ),
      ),
      ...recalls('dock'),
    ]);
    expect(second.filter((r) => r.status === 'rejected')).toEqual([]);
    if (refusals.length > 0) console.info(`${refusals.length} calls refused as busy and tried again`);
    expect(runningServers(env.config).ferretdb, 'FerretDB was restarted: it stopped answering').toBe(
      ferretDb,
    );

    // Nothing acknowledged is lost, and every store agrees with itself.
    for (const agentId of agents) {
      const ids = [...written.get(agentId)!];
      expect(ids).toHaveLength(WRITES_PER_AGENT * ENTRIES_PER_WRITE + 1);
      const stored = await Promise.all(
        ids.map(
          async (_id) =>
            (await env.store.hot.findOne({ _id, agentId })) ??
            (await env.store.cold.findOne({ _id, agentId })),
        ),
      );
      expect(stored.filter((e) => e === null)).toHaveLength(0);
      await expectVerified(env, agentId);
    }
  }, 1_020_000);
});
