import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemgateError } from '../../core/errors';
import { DAY_MS, HOUR_MS } from '../../core/salience';
import { useTestEnv } from '../support/env';
import { expectVerified } from '../support/verify';

/**
 * Randomised interleavings (fast-check prints the seed and the sequence on failure; it does
 * not shrink, since every run costs seconds of real servers):
 * writes (some replayed), recalls, forget and restore, nightly runs, a night and an erasure
 * at the same time, worker restarts. Whatever the order, the store ends as `memgate verify`
 * wants it, and no forgotten text is left in either tier.
 */
const T0 = Date.UTC(2026, 0, 5);

const HOT_CAPACITY = 6;
const env = useTestEnv({ MEMGATE_HOT_CAPACITY: String(HOT_CAPACITY), MEMGATE_LOW_WATERMARK: '0.5' });

const SUBJECTS = ['dock 7', 'the vault', 'bay 12', 'the north desk'];
const HOURS = ['08:00', '14:30', '16:00'];

type Op =
  | { kind: 'write'; subject: number; hour: number; salience: number; replay: boolean }
  | { kind: 'recall'; subject: number; deep: boolean }
  | { kind: 'forget'; pick: number }
  | { kind: 'restore'; pick: number }
  | { kind: 'night' }
  | { kind: 'nightWithForget'; pick: number }
  | { kind: 'restart' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('write' as const),
      subject: fc.nat(SUBJECTS.length - 1),
      hour: fc.nat(HOURS.length - 1),
      salience: fc.constantFrom(0.2, 0.5, 0.9),
      replay: fc.boolean(),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('recall' as const),
      subject: fc.nat(SUBJECTS.length - 1),
      deep: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('forget' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('restore' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.constant({ kind: 'night' as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('nightWithForget' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'restart' as const }) },
);

/** Only typed refusals are expected (an id already erased, nothing to restore). */
async function typed(p: Promise<unknown>): Promise<void> {
  try {
    await p;
  } catch (err) {
    if (!(err instanceof MemgateError)) throw err;
  }
}

describe('randomised interleavings of the whole lifecycle (fast-check)', () => {
  it('end with memgate verify passing and no forgotten text left', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 10, maxLength: 24 }), async (ops) => {
        const agentId = env.agent(`interleave-${run++}`);
        const written: { id: string; text: string; key: string }[] = [];
        const forgotten = new Set<string>();
        let day = 0;
        let n = 0;
        const dayAt = (hour: number) => T0 + day * DAY_MS + hour * HOUR_MS;
        const pick = (i: number) => written[i % written.length];
        const forget = async (i: number) => {
          const target = pick(i);
          if (!target) return;
          forgotten.add(target.text);
          await typed(env.client.forget({ agentId, entryId: target.id }));
        };
        for (const op of ops) {
          switch (op.kind) {
            case 'write': {
              const earlier = op.replay ? written.at(-1) : undefined;
              const key = earlier?.key ?? `k${n}`;
              const text =
                earlier?.text ??
                `Pickups at ${SUBJECTS[op.subject]} leave at ${HOURS[op.hour]}, note ${n} of day ${day}.`;
              n++;
              // With a note of its own, so that the agent's store grows past its capacity.
              const result = await env.client.write({
                agentId,
                entries: [
                  { text, salience: op.salience, idempotencyKey: key, writtenAt: dayAt(9) + n },
                  {
                    text: `Filed under ${SUBJECTS[op.subject]}: memo ${n}.`,
                    idempotencyKey: `memo-${key}`,
                    writtenAt: dayAt(9) + n,
                  },
                ],
              });
              const [entry] = result.entries;
              if (!earlier) written.push({ id: entry!.id, text, key });
              else expect(entry!.id).toBe(earlier.id);
              break;
            }
            case 'recall':
              await env.client.recall({
                agentId,
                query: `pickups ${SUBJECTS[op.subject]}`,
                deep: op.deep,
                asOf: dayAt(12),
              });
              break;
            case 'forget':
              await forget(op.pick);
              break;
            case 'restore': {
              const target = pick(op.pick);
              if (target) await typed(env.client.restore({ agentId, entryId: target.id }));
              break;
            }
            case 'night':
              day++;
              await env.client.consolidate({ agentId, asOf: dayAt(3) });
              break;
            case 'nightWithForget':
              day++;
              await Promise.all([env.client.consolidate({ agentId, asOf: dayAt(3) }), forget(op.pick)]);
              break;
            case 'restart':
              await env.restartWorker();
              break;
          }
        }
        // Past capacity before the closing night, whatever the sequence wrote, so that every
        // run's reclaim has work on the state the sequence left (a short sequence alone may not).
        await env.client.write({
          agentId,
          entries: Array.from({ length: HOT_CAPACITY + 1 }, (_, i) => ({
            text: `Closing inventory line ${i} of day ${day}.`,
            writtenAt: dayAt(10) + i,
          })),
        });
        day++;
        await env.client.consolidate({ agentId, asOf: dayAt(3) });
        await expectVerified(env, agentId);
        // What left hot went to cold or behind a tombstone.
        expect(
          await env.store.ledger.countDocuments({ agentId, event: { $in: ['spill', 'evict'] } }),
        ).toBeGreaterThan(0);
        const stored = JSON.stringify([
          await env.store.hot.find({ agentId }).toArray(),
          await env.store.cold.find({ agentId }).toArray(),
        ]);
        for (const text of forgotten) expect(stored).not.toContain(text);
      }),
      { numRuns: 8, endOnFailure: true },
    );
  }, 900_000);
});
