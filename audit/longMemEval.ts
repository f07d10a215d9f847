import type { QuestionRef } from './messages';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { z } from 'zod';
import { zodIssues } from '../core/entry';
import { InvalidInputError } from '../core/errors';

/**
 * LongMemEval-format question files: a folder of files, or one file, each holding one
 * question object or a JSON list of them (the official format). Memory units are turns.
 */

const turnSchema = z.object({
  role: z.enum(['user', 'assistant']),
  content: z.string(),
  has_answer: z.boolean().optional(),
});

const questionSchema = z
  .object({
    question_id: z.string().min(1),
    question_type: z.string(),
    question: z.string().min(1),
    question_date: z.string(),
    answer: z.union([z.string(), z.number()]).transform(String),
    answer_session_ids: z.array(z.string()),
    haystack_dates: z.array(z.string()),
    haystack_session_ids: z.array(z.string()),
    haystack_sessions: z.array(z.array(turnSchema)),
  })
  .refine(
    (q) =>
      q.haystack_dates.length === q.haystack_sessions.length &&
      q.haystack_session_ids.length === q.haystack_sessions.length,
    'haystack_dates, haystack_session_ids and haystack_sessions must have one entry per session',
  );

export type LongMemEvalQuestion = z.output<typeof questionSchema>;

/** Where one question lives: a file, and its position when the file holds a list. */
/** "2023/05/20 (Sat) 02:51" as epoch milliseconds (UTC). */
export function parseLongMemEvalDate(text: string): number {
  const m = /^(\d{4})\/(\d{2})\/(\d{2})(?:\s*\(\w+\))?\s*(\d{2}):(\d{2})/.exec(text.trim());
  if (!m) throw new InvalidInputError(`not a LongMemEval date: ${JSON.stringify(text)}`);
  const [, y, mo, d, h, mi] = m.map(Number) as number[];
  return Date.UTC(y!, mo! - 1, d!, h!, mi!);
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new InvalidInputError(`${file} is not readable JSON: ${(err as Error).message}`);
  }
}

function parseQuestion(raw: unknown, where: string): LongMemEvalQuestion {
  const parsed = questionSchema.safeParse(raw);
  if (!parsed.success)
    throw new InvalidInputError(`${where} is not a LongMemEval question`, zodIssues(parsed.error));
  return parsed.data;
}

function questionsIn(file: string): { index: number | null; question: LongMemEvalQuestion }[] {
  const raw = readJson(file);
  if (Array.isArray(raw))
    return raw.map((q, i) => ({ index: i, question: parseQuestion(q, `${file}[${i}]`) }));
  return [{ index: null, question: parseQuestion(raw, file) }];
}

/** The questions of a folder (its .json files, by name) or of one file, in order. */
export function listQuestions(source: string): QuestionRef[] {
  if (!existsSync(source)) throw new InvalidInputError(`no such file or folder: ${source}`);
  const files = statSync(source).isDirectory()
    ? readdirSync(source)
        .filter((f) => f.endsWith('.json'))
        .sort()
        .map((f) => join(source, f))
    : [source];
  if (files.length === 0) throw new InvalidInputError(`no .json files in ${source}`);
  const refs = files.flatMap((file) =>
    questionsIn(file).map(({ index, question }) => ({ file, index, questionId: question.question_id })),
  );
  const seen = new Set<string>();
  for (const r of refs) {
    if (seen.has(r.questionId))
      throw new InvalidInputError(`question ${r.questionId} appears twice (${basename(r.file)})`);
    seen.add(r.questionId);
  }
  return refs;
}

let cached:
  { file: string; questions: { index: number | null; question: LongMemEvalQuestion }[] } | undefined;

/** One question; the last file read stays parsed, since a list file serves many questions. */
export function loadQuestion(ref: QuestionRef): LongMemEvalQuestion {
  if (cached?.file !== ref.file) cached = { file: ref.file, questions: questionsIn(ref.file) };
  const found = cached.questions.find((q) => q.index === ref.index)?.question;
  if (!found || found.question_id !== ref.questionId) {
    throw new InvalidInputError(`${ref.file} no longer holds question ${ref.questionId} where it was listed`);
  }
  return found;
}

export interface HaystackTurn {
  /** Stable across agents: the unit's identity is its session and turn. */
  unitId: string;
  sessionId: string;
  sessionDate: string;
  turn: number;
  role: 'user' | 'assistant';
  text: string;
  /** Session date plus the turn's position in the haystack, so write times order the turns. */
  at: number;
  gold: boolean;
}

export function unitId(sessionId: string, turn: number): string {
  return `${sessionId}#${turn}`;
}

/** The haystack's turns in date order (sessions by date, then as listed); gold = evidence turns in gold sessions. */
export function haystackTurns(q: LongMemEvalQuestion): HaystackTurn[] {
  const goldSessions = new Set(q.answer_session_ids);
  const sessions = q.haystack_sessions
    .map((turns, i) => ({
      turns,
      sessionId: q.haystack_session_ids[i]!,
      sessionDate: q.haystack_dates[i]!,
      date: parseLongMemEvalDate(q.haystack_dates[i]!),
      i,
    }))
    .sort((a, b) => a.date - b.date || a.i - b.i);
  const out: HaystackTurn[] = [];
  for (const s of sessions) {
    s.turns.forEach((t, turn) => {
      out.push({
        unitId: unitId(s.sessionId, turn),
        sessionId: s.sessionId,
        sessionDate: s.sessionDate,
        turn,
        role: t.role,
        text: t.content,
        at: s.date + out.length,
        gold: t.has_answer === true && goldSessions.has(s.sessionId),
      });
    });
  }
  return out;
}
