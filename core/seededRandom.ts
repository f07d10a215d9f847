/**
 * mulberry32, the one seeded generator: whatever samples with it (the simulation's workload,
 * the audit's random arms and bootstraps, the benchmarks, tests) is reproducible, no
 * Math.random. Uniform in [0, 1).
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A named seed as a number (FNV-1a): the audit's seeds are strings, an arm's and `<seed>:gold`. */
export function seedOf(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
