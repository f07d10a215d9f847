import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Admission,
  AdmissionTimeout,
  connectionBudget,
  MIN_CONNECTIONS_PER_PROCESS,
  type WorkClass,
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
      background: { whileActive: 1, whileQuiet: 15, activeForMs: 1_000 },
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

  it('keeps its bounds and grants every request in the end, whatever the mix of classes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 12 }).chain((capacity) =>
          fc.tuple(
            fc.constant(capacity),
            fc.record({
              whileActive: fc.integer({ min: 1, max: capacity }),
              whileQuiet: fc.integer({ min: 1, max: capacity }),
              activeForMs: fc.constantFrom(0, 5, 60_000),
            }),
            fc.array(
              fc.record({
                units: fc.integer({ min: 1, max: capacity }),
                holdTicks: fc.integer({ min: 0, max: 3 }),
                workClass: fc.constantFrom<WorkClass>('interactive', 'background'),
              }),
              { minLength: 1, maxLength: 40 },
            ),
          ),
        ),
        async ([capacity, limits, requests]) => {
          const admission = new Admission(capacity, limits);
          const out = { interactive: 0, background: 0 };
          let backgroundOverLimit = false;
          const granted = await Promise.all(
            requests.map(async ({ units, holdTicks, workClass }) => {
              const release = await admission.acquire(units, Date.now() + 60_000, workClass);
              // Background may go past the larger of its limits only alone.
              const most = Math.max(limits.whileActive, limits.whileQuiet);
              if (workClass === 'background' && out.background > 0 && out.background + units > most)
                backgroundOverLimit = true;
              out[workClass] += units;
              expect(out.interactive + out.background).toBeLessThanOrEqual(capacity);
              for (let i = 0; i < holdTicks; i++) await Promise.resolve();
              out[workClass] -= units;
              release();
              return units;
            }),
          );
          expect(backgroundOverLimit).toBe(false);
          expect(granted).toHaveLength(requests.length);
          expect(admission.inUse).toBe(0);
        },
      ),
    );
  });

  it('grants a waiting interactive request before background ones that came first', async () => {
    const admission = new Admission(2);
    const order: string[] = [];
    const held = await admission.acquire(2, Date.now() + 1_000, 'background');
    const waiting = [
      admission.acquire(1, Date.now() + 1_000, 'background').then((r) => (order.push('background'), r)),
      admission.acquire(1, Date.now() + 1_000, 'interactive').then((r) => (order.push('interactive'), r)),
    ];
    held();
    // The background one starts once the caller's command ends, not beside it.
    (await waiting[1]!)();
    (await waiting[0]!)();
    expect(order).toEqual(['interactive', 'background']);
  });

  it("starts no background command beside a caller's running command, though units are free; it goes once that ends", async () => {
    const admission = new Admission(8, { whileActive: 2, whileQuiet: 6, activeForMs: 50 });
    const interactive = await admission.acquire(1, Date.now() + 1_000, 'interactive');
    let started = false;
    const background = admission
      .acquire(1, Date.now() + 1_000, 'background')
      .then((release) => ((started = true), release));
    await new Promise((r) => setTimeout(r, 10));
    expect(started).toBe(false);
    expect(admission.inUse).toBe(1);
    interactive();
    (await background)();
    expect(started).toBe(true);
    expect(admission.inUse).toBe(0);
  });

  it('keeps units free for interactive requests while background work waits for more', async () => {
    const admission = new Admission(4, { whileActive: 3, whileQuiet: 3, activeForMs: 0 });
    const background = await Promise.all(
      [1, 2, 3].map(() => admission.acquire(1, Date.now() + 1_000, 'background')),
    );
    let fourth = false;
    const more = admission.acquire(1, Date.now() + 1_000, 'background').then((r) => ((fourth = true), r));
    // The last unit is the interactive one's, at once.
    const interactive = await admission.acquire(1, Date.now() + 1_000, 'interactive');
    await Promise.resolve();
    expect(fourth).toBe(false);
    interactive();
    background[0]!();
    (await more)();
    for (const release of background.slice(1)) release();
    expect(admission.inUse).toBe(0);
  });

  it('holds background work to a few units while callers are active, and lets it grow once they are quiet', async () => {
    const admission = new Admission(8, { whileActive: 2, whileQuiet: 6, activeForMs: 50 });
    const interactive = await admission.acquire(1, Date.now() + 1_000, 'interactive');
    const granted: (() => void)[] = [];
    const background = Array.from({ length: 6 }, () =>
      admission.acquire(1, Date.now() + 5_000, 'background').then((release) => granted.push(release)),
    );
    await new Promise((r) => setTimeout(r, 10));
    // A caller's command runs: none beside it, though seven units are free.
    expect(granted).toHaveLength(0);
    interactive();
    await new Promise((r) => setTimeout(r, 10));
    // It ended a moment ago: callers still count as active, and background takes two units.
    expect(granted).toHaveLength(2);
    // Once they have been quiet for activeForMs, background takes what it may then.
    await Promise.all(background);
    expect(granted).toHaveLength(6);
    for (const release of granted) release();
    expect(admission.inUse).toBe(0);
  });

  it('slows background work under interactive load, never stops it', async () => {
    const capacity = 2;
    const admission = new Admission(capacity);
    let holder = await admission.acquire(capacity, Date.now() + 1_000, 'interactive');
    let backgroundGranted = false;
    const background = admission
      .acquire(1, Date.now() + 5_000, 'background')
      .then((r) => ((backgroundGranted = true), r));
    // Interactive requests keep arriving, each taking every unit: the background one is passed
    // at most `capacity` times.
    let passed = 0;
    while (!backgroundGranted) {
      const next = admission.acquire(capacity, Date.now() + 5_000, 'interactive');
      holder();
      await Promise.resolve();
      if (backgroundGranted) {
        (await background)();
        holder = await next;
        break;
      }
      holder = await next;
      passed++;
    }
    holder();
    expect(passed).toBeLessThanOrEqual(capacity);
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
