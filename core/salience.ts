/**
 * Salience decays continuously: value(now) = base * 2^-((now - at) / halfLife).
 * Because decay is known, the gate `salience(now) >= gate` is the timestamp comparison
 * `now < dormantAt`, so no job ever rewrites salience and the gate is one indexed range
 * comparison. All times are epoch milliseconds.
 */
export interface Salience {
  /** Salience at time `at`, in (0, 1]. */
  base: number;
  at: number;
}

export const HOUR_MS = 3_600_000;
export const DAY_MS = 24 * HOUR_MS;

/** The UTC day number of an instant: an equality key for "what happened on that day". */
export function dayOf(at: number): number {
  return Math.floor(at / DAY_MS);
}

export function salienceAt(s: Salience, now: number, halfLifeMs: number): number {
  return s.base * Math.pow(2, -(now - s.at) / halfLifeMs);
}

/** The moment the gate closes: salience(dormantAt) === gateThreshold. */
export function dormantAt(s: Salience, halfLifeMs: number, gateThreshold: number): number {
  return s.at + halfLifeMs * Math.log2(s.base / gateThreshold);
}

/** Visible to default recall. Equivalent to salienceAt(...) >= gate away from the boundary instant. */
export function isAboveGate(entryDormantAt: number, now: number): boolean {
  return entryDormantAt > now;
}

/** A refresh restarts decay from a new base at `now` (never lower than the current value). */
export function refreshedSalience(
  current: Salience,
  now: number,
  halfLifeMs: number,
  boost: number,
): Salience {
  const value = salienceAt(current, now, halfLifeMs);
  return { base: Math.min(1, Math.max(value, boost)), at: now };
}
