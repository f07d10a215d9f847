/**
 * The store's share of a write, command by command: the commands one durable write makes,
 * each run alone with the durable runs' shape (bench/write-path at 32 in flight: 16 agents,
 * one Update at a time each, 28 entries an Update), and the CPU each server of the local stack
 * spent per entry on it. The client's content keys (`contentKeysFor`), the persisting
 * activity's read of them (`contentKeys`), and its insert of new entries
 * (`insertNewEntries`: the registry of ids, then hot); hot's `insertMany` alone tells the
 * registry's part from the entry's. Sizes: BENCH_AGENTS (16), BENCH_WRITE_BATCH (28),
 * BENCH_WRITE_UPDATES (updates per agent and round, 16), three rounds (the first warms up).
 */
import { randomUUID } from 'node:crypto';
import { memoryPolicy, type Entry } from '../core/entry';
import { contentKeys, contentKeysFor } from '../store/contentKeys';
import { indexedEntry, insertNewEntries } from '../store/entries';
import {
  cpuSpentPer,
  cpuUsed,
  emit,
  episodeEntry,
  round,
  startBenchEnv,
  writePathText as text,
} from './support';

const AGENTS = Number(process.env.BENCH_AGENTS ?? 16);
const BATCH = Number(process.env.BENCH_WRITE_BATCH ?? 28);
const UPDATES = Number(process.env.BENCH_WRITE_UPDATES ?? 16);

async function main() {
  // No embeddings endpoint: nothing but these commands runs on the stack meanwhile.
  const env = await startBenchEnv({}, { embeddings: { unavailable: 'the store commands alone' } });
  try {
    const store = env.client.store;
    const policy = memoryPolicy(env.config);
    const agentOf = (a: number) => `writer-${a}-${env.runId}`;
    const ids = (batch: Entry[]) => batch.map((e) => e._id);
    // One round's batches: each agent's Updates, each with BATCH new entries.
    const batchesOf = (prefix: string) =>
      Array.from({ length: AGENTS }, (_, a) =>
        Array.from({ length: UPDATES }, (_, u) =>
          Array.from({ length: BATCH }, (_, i) =>
            episodeEntry(
              agentOf(a),
              `${prefix}-${u}-${i}`,
              { text: text(a, u * BATCH + i), writtenAt: Date.now() },
              policy,
            ),
          ),
        ),
      );
    const entries = AGENTS * UPDATES * BATCH;
    const measured: Record<string, unknown>[] = [];
    for (const pass of [0, 1, 2]) {
      // The write's commands on one set of entries, in the order a write makes them; hot alone
      // on entries of its own (the others' ids are in hot by then).
      const written = batchesOf(randomUUID());
      const steps: [string, Entry[][][], (batch: Entry[]) => Promise<unknown>][] = [
        ['contentKeyInsert', written, (b) => contentKeysFor(store, b[0]!.agentId, ids(b), Date.now())],
        ['contentKeyRead', written, (b) => contentKeys(store, b[0]!.agentId, ids(b))],
        ['registryAndHotInsert', written, (b) => insertNewEntries(store, b)],
        [
          'hotInsertAlone',
          batchesOf(randomUUID()),
          (b) => store.hot.insertMany(b.map(indexedEntry), { ordered: false }),
        ],
      ];
      for (const [name, batches, run] of steps) {
        const before = cpuUsed(env.config);
        const t0 = performance.now();
        // Each agent's batches one after another, the agents side by side.
        await Promise.all(
          batches.map(async (agentBatches) => {
            for (const batch of agentBatches) await run(batch);
          }),
        );
        const seconds = (performance.now() - t0) / 1000;
        if (pass > 0)
          measured.push({
            command: name,
            pass,
            entriesPerSecond: round(entries / seconds, 1),
            cpuMsPerEntry: cpuSpentPer(before, cpuUsed(env.config), entries),
          });
      }
    }
    emit({ bench: 'write-store', agents: AGENTS, entriesPerUpdate: BATCH, entries, commands: measured });
  } finally {
    await env.close();
  }
}
void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
