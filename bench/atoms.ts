/**
 * Fact-atom extraction (core/atoms.ts) on adversarial text: every pattern runs on user text
 * in the write path, so each must be linear in it. For each family of inputs, the time per
 * call at growing sizes, the throughput, and the log-log slope of time against size (1 is
 * linear; the money pattern this replaced was 2 on "1,1,1,…"). Pure CPU: no servers.
 *
 * Env: BENCH_ATOMS_SIZES (characters; default 8000,16000,32000,64000,128000).
 */
import { atoms } from '../core/atoms';
import { emit, round } from './support';

const SIZES = (process.env.BENCH_ATOMS_SIZES ?? '8000,16000,32000,64000,128000').split(',').map(Number);

const FAMILIES: Record<string, string> = {
  'digits and commas': '1,',
  'digits and dots': '1.',
  'digit then spaces': '1' + ' '.repeat(63),
  'currency signs': '$1',
  capitals: 'A ',
  'capital runs': 'Ab.',
  'open quotes': '"' + 'a'.repeat(300),
  'number words': 'one ',
  'months and days': 'May 1 ',
  prose: 'The supplier Acme Corp renewed on May 1, 2024 for $1,200.50 with a 30-day notice period at 2pm. ',
};

function timeCall(text: string): number {
  // The fastest of a few runs: the figure is the work, not the machine's noise.
  let best = Infinity;
  for (let i = 0; i < 3; i++) {
    const start = process.hrtime.bigint();
    atoms(text);
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e6);
  }
  return best;
}

const families = Object.entries(FAMILIES).map(([name, unit]) => {
  const sizes = SIZES.map((chars) => {
    const text = unit.repeat(Math.ceil(chars / unit.length)).slice(0, chars);
    const ms = timeCall(text);
    return { chars, ms: round(ms, 3), mbPerS: round(Buffer.byteLength(text) / 1e6 / (ms / 1000), 1) };
  });
  const first = sizes[0]!;
  const last = sizes[sizes.length - 1]!;
  const growthExponent = round(
    Math.log(Math.max(last.ms, 1e-3) / Math.max(first.ms, 1e-3)) / Math.log(last.chars / first.chars),
    2,
  );
  console.error(
    `${name}: ${sizes.map((s) => `${s.chars} → ${s.ms} ms`).join(', ')}; exponent ${growthExponent}`,
  );
  return { name, sizes, growthExponent };
});

emit({
  bench: 'atoms',
  families,
  slowestMbPerS: Math.min(...families.flatMap((f) => f.sizes.map((s) => s.mbPerS))),
  maxGrowthExponent: Math.max(...families.map((f) => f.growthExponent)),
});
