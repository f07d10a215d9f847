import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Admission,
  AdmissionTimeout,
  connectionBudget,
  MIN_CONNECTIONS_PER_PROCESS,
} from '../../core/admission';

/**
 * The admission that keeps the store from wedging (docs/invariants.md, No store wedge): the
 * budgets of a deployment's processes never add up to more than the server's connections,
 * and a process never has more units out than its budget.
 */
describe('the connection budget', () => {
  const shares = fc
    .record({
      connections: fc.integer({ min: 1, max: 10_000 }),
      processes: fc.integer({ min: 1, max: 1_000 }),
    })
    .filter((s) => Math.floor(s.connections / s.processes) >= MIN_CONNECTIONS_PER_PROCESS);

  it('gives every process a share, and all shares together fit in the server', () => {
    fc.assert(
      fc.property(shares, (share) => {
        const b = connectionBudget(share);
        expect(b.perProcess * share.processes).toBeLessThanOrEqual(share.connections);
        expect(b.cursors + b.commands).toBe(b.perProcess);
        expect(b.cursors).toBeGreaterThanOrEqual(1);
      }),
    );
  });

  it('never sends an update command that needs more connections than the commands may hold', () => {
    fc.assert(
      fc.property(shares, (share) => {
        const b = connectionBudget(share);
        // Each statement's query, plus the write's transaction.
        expect(b.updatesPerCommand + 1).toBeLessThanOrEqual(b.commands);
        expect(b.updatesPerCommand).toBeGreaterThanOrEqual(1);
      }),
    );
  });

  it('sends an unordered bulk write in commands that together hold at most half the commands, or one command', () => {
    fc.assert(
      fc.property(shares, (share) => {
        const { commands, updatesPerCommand, unordered } = connectionBudget(share);
        expect(unordered.statements).toBeGreaterThanOrEqual(1);
        expect(unordered.statements).toBeLessThanOrEqual(updatesPerCommand);
        expect(unordered.inFlight).toBeGreaterThanOrEqual(1);
        const held = unordered.inFlight * (unordered.statements + 1);
        expect(held <= Math.floor(commands / 2) || (unordered.inFlight === 1 && held <= commands)).toBe(true);
      }),
    );
  });

  it('refuses a share too small to hold a cursor and an update beside it', () => {
    expect(() => connectionBudget({ connections: 10, processes: 4 })).toThrow(RangeError);
    expect(connectionBudget({ connections: 200, processes: 8 })).toEqual({
      perProcess: 25,
      cursors: 5,
      commands: 20,
      updatesPerCommand: 16,
      unordered: { statements: 1, inFlight: 5 },
    });
  });
});

describe('Admission', () => {
  it('never has more units out than its capacity, and grants every request in the end', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 12 }),
        fc.array(
          fc.record({ units: fc.integer({ min: 1, max: 12 }), holdTicks: fc.integer({ min: 0, max: 3 }) }),
          {
            minLength: 1,
            maxLength: 40,
          },
        ),
        async (capacity, requests) => {
          const admission = new Admission(capacity);
          let out = 0;
          let peak = 0;
          const granted = await Promise.all(
            requests.map(async ({ units, holdTicks }) => {
              const asked = Math.min(units, capacity);
              const release = await admission.acquire(asked, Date.now() + 60_000);
              out += asked;
              peak = Math.max(peak, out);
              for (let i = 0; i < holdTicks; i++) await Promise.resolve();
              out -= asked;
              release();
              return asked;
            }),
          );
          expect(peak).toBeLessThanOrEqual(capacity);
          expect(granted).toHaveLength(requests.length);
          expect(admission.inUse).toBe(0);
        },
      ),
    );
  });

  it('serves first come first served: a large request is not overtaken by small ones', async () => {
    const admission = new Admission(4);
    const order: string[] = [];
    const first = await admission.acquire(3, Date.now() + 1_000);
    const large = admission.acquire(4, Date.now() + 1_000).then((r) => (order.push('large'), r));
    const small = admission.acquire(1, Date.now() + 1_000).then((r) => (order.push('small'), r));
    await Promise.resolve();
    // One unit is free, but the large request came first.
    expect(order).toEqual([]);
    first();
    (await large)();
    (await small)();
    expect(order).toEqual(['large', 'small']);
  });

  it('rejects at the deadline with AdmissionTimeout, and lets through those it held back', async () => {
    const admission = new Admission(2);
    const held = await admission.acquire(1, Date.now() + 1_000);
    const large = admission.acquire(2, Date.now() + 30);
    // One unit is free, but the large request is ahead of this one until it gives up.
    const small = admission.acquire(1, Date.now() + 1_000);
    await expect(large).rejects.toBeInstanceOf(AdmissionTimeout);
    (await small)();
    held();
    expect(admission.inUse).toBe(0);
  });

  it('refuses a request larger than its capacity at once', async () => {
    await expect(new Admission(2).acquire(3, Date.now() + 1_000)).rejects.toBeInstanceOf(RangeError);
  });

  it('gives back the units of a release called twice only once', async () => {
    const admission = new Admission(2);
    const release = await admission.acquire(1, Date.now() + 1_000);
    release();
    release();
    expect(admission.inUse).toBe(0);
    await admission.acquire(2, Date.now() + 1_000);
    expect(admission.inUse).toBe(2);
  });
});
