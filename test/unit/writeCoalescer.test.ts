import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { WriteEntry } from '../../core/entry';
import { InvalidInputError } from '../../core/errors';
import { WriteCoalescer } from '../../core/writeCoalescer';

const entry = (text: string) => ({ text }) as WriteEntry;

describe('WriteCoalescer', () => {
  it('answers every caller with exactly its own entries, in order, in batches within the limit', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c'), fc.integer({ min: 1, max: 5 }), fc.nat(3)), {
          minLength: 1,
          maxLength: 40,
        }),
        fc.integer({ min: 5, max: 12 }),
        async (writes, max) => {
          const sent: { agentId: string; size: number }[] = [];
          const coalescer = new WriteCoalescer<string>(async (agentId, entries) => {
            sent.push({ agentId, size: entries.length });
            await new Promise((r) => setTimeout(r, 1));
            return entries.map((e) => `${agentId}:${e.text}`);
          }, max);
          const calls = writes.map(async ([agentId, n, delay], i) => {
            await new Promise((r) => setTimeout(r, delay));
            const texts = Array.from({ length: n }, (_, j) => `${i}.${j}`);
            const got = await coalescer.write(agentId, texts.map(entry));
            expect(got).toEqual(texts.map((t) => `${agentId}:${t}`));
          });
          await Promise.all(calls);
          expect(sent.every((s) => s.size <= max)).toBe(true);
          expect(sent.reduce((n, s) => n + s.size, 0)).toBe(writes.reduce((n, [, k]) => n + k, 0));
        },
      ),
      { numRuns: 60 },
    );
  });

  it('gives each caller of a refused coalesced write its own verdict: sent alone, each valid one is taken', async () => {
    // The workflow's limit is lower than the client's (the stored policy changed since the
    // client read it): three entries at most, where the client coalesces up to ten.
    const sizes: number[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const coalescer = new WriteCoalescer<string>(async (_agent, entries) => {
      sizes.push(entries.length);
      if (sizes.length === 1) await gate;
      if (entries.length > 3)
        throw new InvalidInputError('invalid write', [
          { path: 'entries', message: 'at most 3 entries per write' },
        ]);
      return entries.map((e) => e.text);
    }, 10);
    const first = coalescer.write('a', [entry('1')]);
    const small = coalescer.write('a', [entry('2'), entry('3')]);
    const alsoSmall = coalescer.write('a', [entry('4'), entry('5')]);
    const tooLarge = coalescer.write('a', [entry('6'), entry('7'), entry('8'), entry('9')]);
    release();
    expect(await first).toEqual(['1']);
    expect(await small).toEqual(['2', '3']);
    expect(await alsoSmall).toEqual(['4', '5']);
    await expect(tooLarge).rejects.toBeInstanceOf(InvalidInputError);
    // Together first (refused), then each alone.
    expect(sizes).toEqual([1, 8, 2, 2, 4]);
  });

  it('sends writes that arrive while one is in flight together, and an idle write at once', async () => {
    const sizes: number[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const coalescer = new WriteCoalescer<number>(async (_agent, entries) => {
      sizes.push(entries.length);
      if (sizes.length === 1) await gate;
      return entries.map((_, i) => i);
    }, 100);
    const first = coalescer.write('a', [entry('1')]);
    const rest = [coalescer.write('a', [entry('2')]), coalescer.write('a', [entry('3'), entry('4')])];
    release();
    await Promise.all([first, ...rest]);
    expect(sizes).toEqual([1, 3]);
  });

  it('sends together the writes its callers make on being answered, with those already waiting', async () => {
    // Eight callers, each writing again as soon as its last write is answered (an agent's
    // concurrent writers, or a pipeline): after the first write, which goes alone, each
    // Update carries one write of every caller.
    const sizes: number[] = [];
    const coalescer = new WriteCoalescer<number>(async (_agent, entries) => {
      sizes.push(entries.length);
      await new Promise((r) => setTimeout(r, 1));
      return entries.map((_, i) => i);
    }, 100);
    await Promise.all(
      Array.from({ length: 8 }, async (_, caller) => {
        for (let i = 0; i < 5; i++) await coalescer.write('a', [entry(`${caller}.${i}`)]);
      }),
    );
    expect(sizes).toEqual([1, 8, 8, 8, 8, 7]);
  });

  it('fails every caller of a failed batch, and only them', async () => {
    let calls = 0;
    const coalescer = new WriteCoalescer<number>(async (_agent, entries) => {
      calls++;
      if (calls === 2) throw new Error('boom');
      await new Promise((r) => setTimeout(r, 5));
      return entries.map(() => calls);
    }, 100);
    const first = coalescer.write('a', [entry('1')]);
    const second = coalescer.write('a', [entry('2')]);
    const third = coalescer.write('a', [entry('3')]);
    await expect(first).resolves.toEqual([1]);
    await expect(second).rejects.toThrow('boom');
    await expect(third).rejects.toThrow('boom');
    await expect(coalescer.write('a', [entry('4')])).resolves.toEqual([3]);
  });
});
