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
  round,
  startBenchEnv,
  episodeEntry,
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
    // One round's batches: each agent's Updates, each with BATCH new entries.
    const batchesOf = (round: string) =>
      Array.from({ length: AGENTS }, (_, a) =>
        Array.from({ length: UPDATES }, (_, u) =>
          Array.from({ length: BATCH }, (_, i) =>
            episodeEntry(
              agentOf(a),
              `${round}-${u}-${i}`,
              { text: text(a, u * BATCH + i), writtenAt: Date.now() },
              policy,
            ),
          ),
        ),
      );
    const commands: Record<string, (batch: Entry[]) => Promise<unknown>> = {
      contentKeyInsert: (b) =>
        contentKeysFor(
          store,
          b[0]!.agentId,
          b.map((e) => e._id),
          Date.now(),
        ),
      contentKeyRead: (b) =>
        contentKeys(
          store,
          b[0]!.agentId,
          b.map((e) => e._id),
        ),
      registryAndHotInsert: (b) => insertNewEntries(store, b),
    };
    const entries = AGENTS * UPDATES * BATCH;
    const measured: Record<string, unknown>[] = [];
    for (const pass of [0, 1, 2]) {
      const batches = batchesOf(randomUUID());
      // Hot alone, on entries of their own (the others' ids are then taken).
      const hotAlone = batchesOf(randomUUID());
      const steps: (readonly [string, (a: number, u: number) => Promise<unknown>])[] = [
        ...Object.entries(commands).map(
          ([name, run]) => [name, (a: number, u: number) => run(batches[a]![u]!)] as const,
        ),
        [
          'hotInsertAlone',
          (a: number, u: number) =>
            store.hot.insertMany(hotAlone[a]![u]!.map(indexedEntry), { ordered: false }),
        ],
      ];
      for (const [name, run] of steps) {
        const before = cpuUsed(env.config);
        const t0 = performance.now();
        await Promise.all(
          Array.from({ length: AGENTS }, async (_, a) => {
            for (let u = 0; u < UPDATES; u++) await run(a, u);
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
