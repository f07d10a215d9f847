import type { WriteEntryInput } from '../core/entry';
import { DAY_MS, HOUR_MS } from '../core/salience';
import { Prng } from './prng';

/**
 * The seed's 30-day workload as a deterministic event stream, identical for every policy.
 *
 * Subjects (suppliers, projects) are named by made-up words, so a subject's name is a term no
 * other subject shares. Facts about a subject's attributes are written once and sometimes
 * updated; some get a later-written summary of an earlier draft that states an older value
 * (the supplier's 14-versus-30-day notice period, generalised). Around them: call notes, tool
 * reports that repeat almost verbatim (near-duplicates for consolidation) and volatile quotas.
 *
 * Warm subjects are asked about many times a day; cold ones are written about once and asked
 * about rarely. Every query asks about one subject by name; a judged query wants the current
 * value of one attribute, which the generator knows.
 */

export interface WorkloadParams {
  seed: number;
  /** Epoch ms of day 0, 00:00 UTC. */
  start: number;
  days: number;
  warmSubjects: number;
  coldSubjects: number;
  /** Warm subjects are onboarded evenly over these first days... */
  onboardDays: number;
  /** ...each with this many writes on its day: a fact per attribute, tool reports, call notes. */
  onboardingWrites: number;
  onboardingReports: number;
  /** Further writes per day about onboarded warm subjects: during the onboarding days, then after. */
  ingestWritesPerDay: number;
  steadyWritesPerDay: number;
  /** How those further writes split between roles (weights summing to 1). */
  roles: Record<OngoingRole, number>;
  /** Queries per day about onboarded warm subjects, each about one picked uniformly. */
  warmQueriesPerDay: number;
  /** Expected queries per day about one cold subject, once its fact exists. */
  coldQueryRate: number;
  /** Share of warm queries that ask for an attribute's value and are judged. */
  judgedShare: number;
  /** Share of cold subjects' facts that later get a summary of an earlier draft with an older value. */
  draftShare: number;
}

export type Role = 'fact' | 'update' | 'draft' | 'chatter' | 'report' | 'quota';
export type OngoingRole = Exclude<Role, 'fact'>;

export interface WriteEvent {
  type: 'write';
  at: number;
  role: Role;
  subject: string;
  attribute?: string;
  entry: WriteEntryInput & { idempotencyKey: string; writtenAt: number };
}

export interface QueryEvent {
  type: 'query';
  at: number;
  /** The subject's name: the query asks for everything known about it. */
  text: string;
  subject: string;
  /** The attribute asked for, its current value and the key of the write that stated it. */
  judged?: { attribute: string; truth: string; truthKey: string };
}

export type WorkloadEvent = WriteEvent | QueryEvent;

export interface WorkloadDay {
  day: number;
  events: WorkloadEvent[];
  /** The nightly run after this day. */
  nightAsOf: number;
}

/** Attribute names and the values they take; values hold no full stop (the reader splits on it). */
const ATTRIBUTES: { name: string; values: string[] }[] = [
  {
    name: 'contractual notice period',
    values: ['7 days', '14 days', '21 days', '30 days', '45 days', '60 days'],
  },
  {
    name: 'payment terms',
    values: ['net 15 days', 'net 30 days', 'net 45 days', 'net 60 days', 'net 90 days'],
  },
  { name: 'delivery lead time', values: ['3 days', '5 days', '10 days', '15 days', '20 days'] },
  { name: 'support response time', values: ['1 hours', '2 hours', '4 hours', '8 hours', '24 hours'] },
  { name: 'volume discount', values: ['2 percent', '5 percent', '8 percent', '10 percent', '15 percent'] },
  { name: 'minimum order', values: ['10 units', '25 units', '50 units', '100 units', '250 units'] },
  { name: 'warranty period', values: ['3 months', '6 months', '12 months', '18 months', '24 months'] },
  { name: 'credit limit', values: ['5000 USD', '10000 USD', '20000 USD', '50000 USD', '80000 USD'] },
  { name: 'late fee', values: ['1 percent', '2 percent', '3 percent', '4 percent'] },
  { name: 'renewal term', values: ['6 months', '12 months', '24 months', '36 months'] },
  { name: 'price per seat', values: ['8 USD', '12 USD', '15 USD', '20 USD', '25 USD'] },
  { name: 'uptime commitment', values: ['95 percent', '97 percent', '98 percent', '99 percent'] },
];

const NAME_SYLLABLES = [
  'ka',
  'lo',
  'mi',
  'ren',
  'tor',
  'vel',
  'dan',
  'bri',
  'sol',
  'mar',
  'nor',
  'pel',
  'quin',
  'ral',
  'sen',
  'tiv',
  'ul',
  'vor',
  'wen',
  'zar',
  'ko',
  'li',
  'fa',
  'gor',
  'hal',
  'jen',
  'cal',
  'dro',
  'fen',
  'gil',
];
const WORD_SYLLABLES = [
  'ab',
  'ced',
  'dom',
  'eft',
  'gru',
  'hop',
  'ith',
  'jal',
  'kum',
  'lep',
  'mox',
  'nib',
  'orp',
  'pud',
  'rab',
  'tez',
  'umb',
  'vak',
  'wib',
  'yot',
  'zem',
  'bly',
  'cro',
  'dwe',
  'fli',
  'gna',
  'plo',
  'tru',
];

/** The workload's names: subjects (capitalised) and lowercase filler words, none ending in `s`. */
function vocabulary(prng: Prng, subjects: number) {
  const names: string[] = [];
  for (const a of NAME_SYLLABLES)
    for (const b of NAME_SYLLABLES) for (const c of NAME_SYLLABLES) names.push(a + b + c);
  prng.shuffle(names);
  if (subjects > names.length) throw new RangeError(`at most ${names.length} subjects`);
  const words: string[] = [];
  for (const a of WORD_SYLLABLES) for (const b of WORD_SYLLABLES) words.push(a + b);
  return {
    subjects: names.slice(0, subjects).map((n) => n[0]!.toUpperCase() + n.slice(1)),
    words,
  };
}

export function isoDate(at: number): string {
  return new Date(at).toISOString().slice(0, 10);
}

export function factText(subject: string, attribute: string, value: string, at: number): string {
  return `As of ${isoDate(at)}, the ${attribute} of ${subject} is ${value}.`;
}

export function draftText(subject: string, attribute: string, value: string, at: number): string {
  return `Summary of an earlier draft (${isoDate(at)}): the ${attribute} of ${subject} was ${value}.`;
}

interface FactState {
  value: string;
  /** Idempotency key of the write that stated it. */
  key: string;
  /** The date the fact states, as epoch ms of its write. */
  at: number;
  drafted: boolean;
}

interface SubjectState {
  name: string;
  warm: boolean;
  facts: Map<string, FactState>;
  reportBase: number;
  /** Entries written about it so far. */
  writes: number;
  /** Warm subjects: the day they are onboarded; cold ones: the day their fact is written. */
  bornDay: number;
}

const SALIENCE: Record<Role, [number, number]> = {
  fact: [0.3, 0.7],
  update: [0.4, 0.8],
  draft: [0.5, 0.9],
  report: [0.2, 0.5],
  chatter: [0.2, 0.8],
  quota: [0.4, 0.8],
};

/** Writes and queries happen between 06:00 and 22:00; the nightly run is at 03:00. */
const DAY_OPENS = 6 * HOUR_MS;
const DAY_HOURS = 16 * HOUR_MS;
const NIGHT_AT = 3 * HOUR_MS;

export class Workload {
  private readonly prng: Prng;
  private readonly subjects: SubjectState[];
  private readonly warm: SubjectState[];
  private readonly cold: SubjectState[];
  private readonly words: string[];
  private writes = 0;

  constructor(readonly params: WorkloadParams) {
    this.prng = new Prng(params.seed);
    const vocab = vocabulary(this.prng, params.warmSubjects + params.coldSubjects);
    this.words = vocab.words;
    this.subjects = vocab.subjects.map((name, i) => {
      const warm = i < params.warmSubjects;
      return {
        name,
        warm,
        facts: new Map(),
        reportBase: 100 + this.prng.below(900),
        writes: 0,
        bornDay: warm
          ? Math.floor((i * params.onboardDays) / params.warmSubjects)
          : this.prng.below(Math.max(1, params.days - 1)),
      };
    });
    this.warm = this.subjects.filter((s) => s.warm);
    this.cold = this.subjects.filter((s) => !s.warm);
  }

  /** Every subject's name, for indexing recall candidates by subject. */
  subjectNames(): string[] {
    return this.subjects.map((s) => s.name);
  }

  *days(): Generator<WorkloadDay> {
    for (let day = 0; day < this.params.days; day++) yield this.day(day);
  }

  private day(day: number): WorkloadDay {
    const p = this.params;
    const dayStart = p.start + day * DAY_MS;
    const at = () => dayStart + DAY_OPENS + this.prng.below(DAY_HOURS);
    type Slot = { at: number; make: (at: number) => WorkloadEvent };
    const slots: Slot[] = [];
    // Onboarding: every attribute's fact, some tool reports, call notes for the rest. A
    // subject with many entries from its first day keeps the clustering's candidate lists short.
    const onboarded = this.warm.filter((s) => s.bornDay < day);
    for (const s of this.warm.filter((w) => w.bornDay === day)) {
      ATTRIBUTES.forEach((attribute) =>
        slots.push({ at: at(), make: (t) => this.factWrite(s, attribute, t, 'fact') }),
      );
      for (let i = ATTRIBUTES.length; i < p.onboardingWrites; i++) {
        const report = i < ATTRIBUTES.length + p.onboardingReports;
        slots.push({ at: at(), make: (t) => (report ? this.reportWrite(s, t) : this.chatterWrite(s, t)) });
      }
    }
    const writes =
      onboarded.length === 0 ? 0 : day < p.onboardDays ? p.ingestWritesPerDay : p.steadyWritesPerDay;
    for (let i = 0; i < writes; i++) {
      slots.push({ at: at(), make: (t) => this.warmWrite(this.lighter(onboarded), t) });
    }
    for (const s of this.cold) {
      if (s.bornDay === day) {
        const attribute = this.prng.pick(ATTRIBUTES);
        slots.push({ at: at(), make: (t) => this.factWrite(s, attribute, t, 'fact') });
        slots.push({ at: at(), make: (t) => this.chatterWrite(s, t) });
      }
      // A cold subject's draft summary comes one to three days after its fact.
      if (day > s.bornDay && day <= s.bornDay + 3 && s.facts.size > 0) {
        const [attribute, fact] = [...s.facts][0]!;
        if (!fact.drafted && this.prng.chance(p.draftShare / 3)) {
          slots.push({ at: at(), make: (t) => this.draftWrite(s, attribute, t) });
          fact.drafted = true;
        }
      }
      if (day >= s.bornDay) {
        for (let q = this.prng.poisson(p.coldQueryRate); q > 0; q--)
          slots.push({ at: at(), make: (t) => this.query(s, t, true) });
      }
    }
    const askable = this.warm.filter((s) => s.bornDay <= day);
    for (let i = 0; i < (askable.length ? p.warmQueriesPerDay : 0); i++) {
      slots.push({
        at: at(),
        make: (t) => this.query(this.prng.pick(askable), t, this.prng.chance(p.judgedShare)),
      });
    }
    // Content is decided in time order, so a judged query's truth is what was written before it.
    slots.sort((a, b) => a.at - b.at);
    const events = slots.map((slot) => slot.make(slot.at));
    return { day, events, nightAsOf: dayStart + DAY_MS + NIGHT_AT };
  }

  private warmWrite(s: SubjectState, at: number): WriteEvent {
    const role = this.role();
    if (role === 'update') {
      // A new value is dated at least a day after the one it replaces, so dates never tie.
      const due = [...s.facts].filter(([, f]) => at - f.at >= DAY_MS);
      if (due.length) {
        const [name] = this.prng.pick(due);
        return this.factWrite(
          s,
          ATTRIBUTES.find((a) => a.name === name)!,
          at,
          'update',
        );
      }
    }
    if (role === 'draft') {
      const undrafted = [...s.facts].filter(([, f]) => !f.drafted);
      if (undrafted.length) {
        const [name, fact] = this.prng.pick(undrafted);
        fact.drafted = true;
        return this.draftWrite(s, name, at);
      }
    }
    if (role === 'report') return this.reportWrite(s, at);
    if (role === 'quota') return this.quotaWrite(s, at);
    return this.chatterWrite(s, at);
  }

  /**
   * The less written-about of two random subjects: keeps every subject's entries well under
   * what one deep recall returns, so a wrong answer is never a ranking cut-off.
   */
  private lighter(subjects: readonly SubjectState[]): SubjectState {
    const a = this.prng.pick(subjects);
    const b = this.prng.pick(subjects);
    return a.writes <= b.writes ? a : b;
  }

  private role(): OngoingRole {
    let r = this.prng.next();
    for (const [role, weight] of Object.entries(this.params.roles) as [OngoingRole, number][]) {
      r -= weight;
      if (r < 0) return role;
    }
    return 'chatter';
  }

  private write(
    s: SubjectState,
    at: number,
    role: Role,
    text: string,
    extra: Partial<WriteEntryInput> = {},
  ): WriteEvent {
    const [lo, hi] = SALIENCE[role];
    s.writes++;
    const event: WriteEvent = {
      type: 'write',
      at,
      role,
      subject: s.name,
      entry: {
        text,
        kind: 'episode',
        salience: Math.round(this.prng.between(lo, hi) * 1000) / 1000,
        idempotencyKey: `w${this.writes++}`,
        source: { origin: role === 'report' ? 'tool' : 'agent' },
        writtenAt: at,
        ...extra,
      },
    };
    return event;
  }

  private factWrite(
    s: SubjectState,
    attribute: { name: string; values: string[] },
    at: number,
    role: 'fact' | 'update',
  ): WriteEvent {
    const previous = s.facts.get(attribute.name);
    const value = this.prng.pick(attribute.values.filter((v) => v !== previous?.value));
    const event = this.write(s, at, role, factText(s.name, attribute.name, value, at), {
      kind: 'fact',
      subject: s.name,
      attribute: attribute.name,
      source: { origin: 'user' },
    });
    event.attribute = attribute.name;
    s.facts.set(attribute.name, {
      value,
      key: event.entry.idempotencyKey,
      at,
      drafted: previous?.drafted ?? false,
    });
    return event;
  }

  /** A summary of an earlier draft: dated before the fact it disagrees with, written after it. */
  private draftWrite(s: SubjectState, attribute: string, at: number): WriteEvent {
    const fact = s.facts.get(attribute)!;
    const values = ATTRIBUTES.find((a) => a.name === attribute)!.values.filter((v) => v !== fact.value);
    const dated = fact.at - (1 + this.prng.below(20)) * DAY_MS;
    const event = this.write(s, at, 'draft', draftText(s.name, attribute, this.prng.pick(values), dated));
    event.attribute = attribute;
    return event;
  }

  private chatterWrite(s: SubjectState, at: number): WriteEvent {
    const words = Array.from({ length: 8 }, () => this.prng.pick(this.words));
    return this.write(s, at, 'chatter', `Call notes on ${s.name}: ${words.join(' ')}.`);
  }

  /**
   * A subject's tool reports name its own sync job and differ only in their counts:
   * near-duplicates of each other, and of nothing else.
   */
  private reportWrite(s: SubjectState, at: number): WriteEvent {
    const loaded = s.reportBase + this.prng.below(3);
    const rejected = this.prng.below(3);
    const job = `${s.name.toLowerCase()}sync`;
    return this.write(s, at, 'report', `${s.name} ${job}: ${loaded} loaded, ${rejected} rejected.`);
  }

  private quotaWrite(s: SubjectState, at: number): WriteEvent {
    const freshUntil = at + (2 + this.prng.below(4)) * DAY_MS;
    const limit = (1 + this.prng.below(20)) * 50;
    return this.write(
      s,
      at,
      'quota',
      `${s.name} API quota: ${limit} requests per hour until ${isoDate(freshUntil)}.`,
      {
        kind: 'fact',
        volatile: true,
        freshUntil,
      },
    );
  }

  private query(s: SubjectState, at: number, judged: boolean): QueryEvent {
    const event: QueryEvent = { type: 'query', at, text: s.name, subject: s.name };
    if (judged && s.facts.size > 0) {
      const [attribute, fact] = this.prng.pick([...s.facts]);
      event.judged = { attribute, truth: fact.value, truthKey: fact.key };
    }
    return event;
  }
}
