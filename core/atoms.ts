import { terms } from './text';

/**
 * Fact atoms: the parts of a text a summary must keep to be lossless —
 * numbers with units, dates, times, durations, money, percentages, quoted strings and
 * proper names, each normalised so that "30 days", "thirty days" and "30-day" are one atom.
 */

const SMALL: Record<string, number> = {
  zero: 0,
  one: 1,
  two: 2,
  three: 3,
  four: 4,
  five: 5,
  six: 6,
  seven: 7,
  eight: 8,
  nine: 9,
  ten: 10,
  eleven: 11,
  twelve: 12,
  thirteen: 13,
  fourteen: 14,
  fifteen: 15,
  sixteen: 16,
  seventeen: 17,
  eighteen: 18,
  nineteen: 19,
};
const TENS: Record<string, number> = {
  twenty: 20,
  thirty: 30,
  forty: 40,
  fifty: 50,
  sixty: 60,
  seventy: 70,
  eighty: 80,
  ninety: 90,
};
const SCALE: Record<string, number> = {
  hundred: 100,
  thousand: 1_000,
  million: 1_000_000,
  billion: 1_000_000_000,
};

const UNIT_ALIASES: Record<string, string> = {
  ms: 'millisecond',
  millisecond: 'millisecond',
  milliseconds: 'millisecond',
  s: 'second',
  sec: 'second',
  secs: 'second',
  second: 'second',
  seconds: 'second',
  min: 'minute',
  mins: 'minute',
  minute: 'minute',
  minutes: 'minute',
  h: 'hour',
  hr: 'hour',
  hrs: 'hour',
  hour: 'hour',
  hours: 'hour',
  day: 'day',
  days: 'day',
  week: 'week',
  weeks: 'week',
  month: 'month',
  months: 'month',
  year: 'year',
  years: 'year',
  yr: 'year',
  yrs: 'year',
  token: 'token',
  tokens: 'token',
  request: 'request',
  requests: 'request',
  req: 'request',
  call: 'call',
  calls: 'call',
  user: 'user',
  users: 'user',
  item: 'item',
  items: 'item',
  kb: 'kb',
  mb: 'mb',
  gb: 'gb',
  tb: 'tb',
  km: 'km',
  m: 'm',
  cm: 'cm',
  mm: 'mm',
  kg: 'kg',
  g: 'g',
  lb: 'lb',
  lbs: 'lb',
  mile: 'mile',
  miles: 'mile',
  unit: 'unit',
  units: 'unit',
  seat: 'seat',
  seats: 'seat',
  percent: '%',
  pct: '%',
  '%': '%',
};

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const MONTH_RE =
  '(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\\.?';
const CURRENCY: Record<string, string> = {
  $: 'USD',
  '€': 'EUR',
  '£': 'GBP',
  '¥': 'JPY',
  usd: 'USD',
  eur: 'EUR',
  gbp: 'GBP',
  dollars: 'USD',
  euros: 'EUR',
  pounds: 'GBP',
};

const NOT_NAMES = new Set(
  (
    'The A An And But Or If When While Then This That These Those It Its We I You He She They Our Your My ' +
    'Monday Tuesday Wednesday Thursday Friday Saturday Sunday Yes No Please Thanks Also However Note After Before ' +
    'In On At For From To Of By With As Is Are Was Were Be Can Could Should Would Will What Which Who How Why Where'
  ).split(' '),
);

const NUMBER_WORDS = Object.keys({ ...SMALL, ...TENS, ...SCALE }).join('|');
/** Built once: every write's text goes through it, and building it cost more than matching. */
const SPELLED_NUMBER = new RegExp(
  `\\b(?:(?:${NUMBER_WORDS})(?:[\\s-]+(?:and[\\s-]+)?(?=(?:${NUMBER_WORDS})\\b))?)+\\b`,
  'gi',
);

/** Replace spelled-out numbers ("thirty", "twenty-one", "two hundred") with digits. */
export function wordsToDigits(text: string): string {
  // `replace` starts a global expression from the start of each text.
  return text.replace(SPELLED_NUMBER, (match) => {
    let total = 0;
    let current = 0;
    for (const w of match.toLowerCase().split(/[\s-]+/)) {
      if (w === 'and') continue;
      if (w in SMALL) current += SMALL[w]!;
      else if (w in TENS) current += TENS[w]!;
      else if (w in SCALE) {
        current = Math.max(current, 1) * SCALE[w]!;
        if (SCALE[w]! >= 1000) {
          total += current;
          current = 0;
        }
      }
    }
    return String(total + current);
  });
}

function num(raw: string): string {
  const n = Number(raw.replace(/,/g, ''));
  return Number.isFinite(n) ? String(n) : raw;
}

function monthIndex(name: string): number {
  return MONTHS.indexOf(name.toLowerCase().slice(0, 3)) + 1;
}

/** Drops trailing dots and apostrophes; a loop, since `/[.’']+$/` retries from every mark of a long run. */
function trimTrailingMarks(word: string): string {
  let end = word.length;
  while (end > 0 && ".’'".includes(word[end - 1]!)) end--;
  return word.slice(0, end);
}

function pad(n: number): string {
  return String(n).padStart(2, '0');
}

/**
 * Extract the normalised, de-duplicated, sorted fact atoms of a text. Each pattern below is
 * one left-to-right pass whose attempts start only where its match could begin (a quote, a
 * digit after a non-number, a currency sign, a capital after a word boundary) and whose
 * backtracking is bounded by the run it started on, so the whole is linear in the text
 * (`npm run bench -- atoms` measures it on adversarial inputs).
 */
export function atoms(text: string): string[] {
  const found = new Set<string>();
  let t = wordsToDigits(text.normalize('NFKC'));

  // Quoted strings first, so their insides are not re-read as names.
  t = t.replace(/["“”]([^"“”]{2,200})["“”]/g, (_m, q: string) => {
    found.add(`quote:${q.trim().toLowerCase()}`);
    return ' ';
  });

  // ISO dates and slash dates (month/day/year).
  t = t.replace(/\b(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2}))?\b/g, (_m, y, mo, d, hh, mm) => {
    found.add(`date:${y}-${mo}-${d}`);
    if (hh) found.add(`time:${hh}:${mm}`);
    return ' ';
  });
  t = t.replace(/\b(\d{4})\/(\d{1,2})\/(\d{1,2})\b/g, (_m, y, mo, d) => {
    found.add(`date:${y}-${pad(+mo)}-${pad(+d)}`);
    return ' ';
  });
  t = t.replace(/\b(\d{1,2})\/(\d{1,2})\/(\d{4})\b/g, (_m, mo, d, y) => {
    found.add(`date:${y}-${pad(+mo)}-${pad(+d)}`);
    return ' ';
  });
  // "May 1, 2024", "May 1st", "1 May 2024".
  t = t.replace(
    new RegExp(`\\b${MONTH_RE}\\s+(\\d{1,2})(?:st|nd|rd|th)?(?:,?\\s+(\\d{4}))?\\b`, 'gi'),
    (_m, mo, d, y) => {
      found.add(`date:${y ? `${y}-` : ''}${pad(monthIndex(mo))}-${pad(+d)}`);
      return ' ';
    },
  );
  t = t.replace(
    new RegExp(`\\b(\\d{1,2})(?:st|nd|rd|th)?\\s+(?:of\\s+)?${MONTH_RE}(?:,?\\s+(\\d{4}))?\\b`, 'gi'),
    (_m, d, mo, y) => {
      found.add(`date:${y ? `${y}-` : ''}${pad(monthIndex(mo))}-${pad(+d)}`);
      return ' ';
    },
  );
  t = t.replace(new RegExp(`\\b${MONTH_RE}\\s+(\\d{4})\\b`, 'gi'), (_m, mo, y) => {
    found.add(`date:${y}-${pad(monthIndex(mo))}`);
    return ' ';
  });

  // Times: 14:30, 2pm, 2:30 p.m.
  t = t.replace(/\b(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\.?(?![a-z])/gi, (_m, h, mm, ap) => {
    let hour = +h % 12;
    if (ap.toLowerCase() === 'p') hour += 12;
    found.add(`time:${pad(hour)}:${mm ?? '00'}`);
    return ' ';
  });
  t = t.replace(/\b([01]?\d|2[0-3]):([0-5]\d)\b/g, (_m, h, mm) => {
    found.add(`time:${pad(+h)}:${mm}`);
    return ' ';
  });

  // Money: $1,200.50, €30, 1200 USD, 30 dollars.
  t = t.replace(
    /([$€£¥])\s?(\d[\d,]*(?:\.\d+)?)\s*(k|m|bn)?\b/gi,
    (_m, cur: string, n: string, mult?: string) => {
      const factor = mult ? { k: 1e3, m: 1e6, bn: 1e9 }[mult.toLowerCase() as 'k' | 'm' | 'bn'] : 1;
      found.add(`money:${CURRENCY[cur]}:${Number(num(n)) * factor}`);
      return ' ';
    },
  );
  // Tried only where a number starts (the lookbehind): from every digit of "1,1,1,…" it would
  // rescan the rest of the run, quadratic in its length (8,000 characters took 100 ms).
  t = t.replace(
    /(?<![\d,.])(\d[\d,]*(?:\.\d+)?)\s*(usd|eur|gbp|dollars|euros|pounds)\b/gi,
    (_m, n: string, cur: string) => {
      found.add(`money:${CURRENCY[cur.toLowerCase()]}:${num(n)}`);
      return ' ';
    },
  );

  // Numbers with units (durations, percentages, quantities); "30-day" reads as "30 day".
  t = t.replace(/(\d[\d,]*(?:\.\d+)?)\s*(?:-\s*)?(%|[a-z]+)?/gi, (m, n: string, unit?: string) => {
    const canonical = unit ? UNIT_ALIASES[unit.toLowerCase()] : undefined;
    if (canonical === '%') found.add(`percent:${num(n)}`);
    else if (canonical) found.add(`qty:${num(n)} ${canonical}`);
    else found.add(`num:${num(n)}`);
    return canonical ? ' ' : ` ${unit ?? ''}`.replace(m, ' ');
  });

  // Proper names: capitalised word runs, skipping sentence-initial function words.
  for (const m of t.matchAll(/\b([A-Z][\p{L}'’&.-]*(?:\s+(?:of\s+|de\s+|van\s+)?[A-Z][\p{L}'’&.-]*)*)/gu)) {
    const words = m[1]!.split(/\s+/).filter((w) => !NOT_NAMES.has(trimTrailingMarks(w)));
    if (words.length === 0) continue;
    const name = trimTrailingMarks(words.join(' ')).toLowerCase();
    if (name.length > 1) found.add(`name:${name}`);
  }
  return [...found].sort();
}

export interface LosslessnessReport {
  lossless: boolean;
  /** Atoms (or, for atom-free sources, content terms) of the source absent from the summary. */
  missing: string[];
}

/**
 * A summary is lossless for a source when it keeps every atom of the source, or, for a
 * source with no atoms, every content term.
 */
export function checkLossless(sourceText: string, summaryText: string): LosslessnessReport {
  const sourceAtoms = atoms(sourceText);
  if (sourceAtoms.length > 0) {
    const kept = new Set(atoms(summaryText));
    const missing = sourceAtoms.filter((a) => !kept.has(a));
    return { lossless: missing.length === 0, missing };
  }
  const kept = new Set(terms(summaryText));
  const missing = terms(sourceText)
    .filter((t) => !kept.has(t))
    .map((t) => `term:${t}`);
  return { lossless: missing.length === 0, missing };
}
