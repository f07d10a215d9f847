import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dormantAt, HOUR_MS, isAboveGate, refreshedSalience, salienceAt } from '../../core/salience';

const base = fc.double({ min: 1e-6, max: 1, noNaN: true });
const gate = fc.double({ min: 1e-4, max: 0.99, noNaN: true });
const halfLife = fc.integer({ min: 1, max: 10_000 }).map((h) => h * HOUR_MS);
const at = fc.integer({ min: 0, max: 4e12 });
const offset = fc.integer({ min: -1e11, max: 1e11 });

describe('the gate as a timestamp', () => {
  it('dormantAt > now agrees with salience(now) >= gate for all inputs away from the boundary instant', () => {
    fc.assert(
      fc.property(base, at, halfLife, gate, offset, (b, t0, hl, g, dt) => {
        const s = { base: b, at: t0 };
        const dAt = dormantAt(s, hl, g);
        const now = t0 + dt;
        // Floating point can disagree only within a hair of the crossing instant.
        fc.pre(Math.abs(now - dAt) > 1e-6 * hl);
        expect(isAboveGate(dAt, now)).toBe(salienceAt(s, now, hl) >= g);
      }),
      { numRuns: 2_000 },
    );
  });

  it('salience at dormantAt equals the gate', () => {
    fc.assert(
      fc.property(base, at, halfLife, gate, (b, t0, hl, g) => {
        const s = { base: b, at: t0 };
        expect(salienceAt(s, dormantAt(s, hl, g), hl)).toBeCloseTo(g, 9);
      }),
    );
  });

  it('an entry written below the gate is dormant from the start', () => {
    const s = { base: 0.1, at: 1_000 };
    expect(dormantAt(s, 72 * HOUR_MS, 0.15)).toBeLessThan(1_000);
    expect(isAboveGate(dormantAt(s, 72 * HOUR_MS, 0.15), 1_000)).toBe(false);
  });

  it('halves every half-life', () => {
    const s = { base: 0.8, at: 0 };
    expect(salienceAt(s, 72 * HOUR_MS, 72 * HOUR_MS)).toBeCloseTo(0.4, 12);
    expect(salienceAt(s, 144 * HOUR_MS, 72 * HOUR_MS)).toBeCloseTo(0.2, 12);
  });

  it('a refresh never lowers current salience and moves dormantAt later', () => {
    fc.assert(
      fc.property(
        base,
        at,
        halfLife,
        gate,
        fc.integer({ min: 0, max: 1e10 }),
        base,
        (b, t0, hl, g, dt, boost) => {
          const s = { base: b, at: t0 };
          const now = t0 + dt;
          const r = refreshedSalience(s, now, hl, boost);
          expect(r.base).toBeGreaterThanOrEqual(salienceAt(s, now, hl) - 1e-12);
          expect(dormantAt(r, hl, g)).toBeGreaterThanOrEqual(dormantAt(s, hl, g) - 1e-3);
        },
      ),
    );
  });
});
