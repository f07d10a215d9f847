import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { haystackTurns, listQuestions, loadQuestion, parseLongMemEvalDate } from '../../audit/longMemEval';
import { InvalidInputError } from '../../core/errors';

const dir = mkdtempSync(join(tmpdir(), 'lme-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function question(id: string, overrides: Record<string, unknown> = {}) {
  return {
    question_id: id,
    question_type: 'knowledge-update',
    question: 'Where do I keep my shoes?',
    question_date: '2023/06/23 (Fri) 07:31',
    answer: 5,
    answer_session_ids: ['s-gold'],
    // Listed out of date order on purpose.
    haystack_dates: ['2023/05/02 (Tue) 10:00', '2023/04/30 (Sun) 13:59', '2023/05/02 (Tue) 10:00'],
    haystack_session_ids: ['s-gold', 's-old', 's-other'],
    haystack_sessions: [
      [
        { role: 'user', content: 'I put a shoe rack in my closet.', has_answer: true },
        { role: 'assistant', content: 'Nice.' },
      ],
      [{ role: 'user', content: 'Hello there.' }],
      // has_answer outside a gold session is not gold.
      [{ role: 'user', content: 'My shoes are muddy.', has_answer: true }],
    ],
    ...overrides,
  };
}

describe('LongMemEval-format data', () => {
  it('reads a folder of single-question files and a JSON list alike', () => {
    writeFileSync(join(dir, 'b.json'), JSON.stringify(question('q2')));
    writeFileSync(join(dir, 'a.json'), JSON.stringify(question('q1')));
    const list = join(dir, 'list.json');
    writeFileSync(list, JSON.stringify([question('l1'), question('l2')]));
    const refs = listQuestions(dir);
    expect(refs.map((r) => r.questionId)).toEqual(['q1', 'q2', 'l1', 'l2']);
    expect(listQuestions(list)).toEqual([
      { file: list, index: 0, questionId: 'l1' },
      { file: list, index: 1, questionId: 'l2' },
    ]);
    expect(loadQuestion(refs[3]!).question_id).toBe('l2');
    expect(loadQuestion(refs[3]!).answer).toBe('5');
  });

  it('orders turns by session date, keeps session ids and dates, and marks gold only in gold sessions', () => {
    const q = loadQuestion(listQuestions(join(dir, 'a.json'))[0]!);
    const turns = haystackTurns(q);
    expect(turns.map((t) => t.unitId)).toEqual(['s-old#0', 's-gold#0', 's-gold#1', 's-other#0']);
    expect(turns.filter((t) => t.gold).map((t) => t.unitId)).toEqual(['s-gold#0']);
    expect(turns[1]).toMatchObject({
      sessionId: 's-gold',
      sessionDate: '2023/05/02 (Tue) 10:00',
      role: 'user',
    });
    for (let i = 1; i < turns.length; i++) expect(turns[i]!.at).toBeGreaterThan(turns[i - 1]!.at);
  });

  it('parses LongMemEval dates as UTC', () => {
    expect(parseLongMemEvalDate('2023/05/20 (Sat) 02:51')).toBe(Date.UTC(2023, 4, 20, 2, 51));
    expect(() => parseLongMemEvalDate('yesterday')).toThrow(InvalidInputError);
  });

  it('rejects malformed data with a typed error that names the problem', () => {
    const bad = join(dir, 'bad');
    const mismatched = join(dir, 'mismatched.json');
    writeFileSync(mismatched, JSON.stringify(question('m', { haystack_dates: ['2023/05/02 (Tue) 10:00'] })));
    expect(() => listQuestions(mismatched)).toThrow(/one entry per session/);
    const notJson = join(dir, 'broken.json');
    writeFileSync(notJson, '{');
    expect(() => listQuestions(notJson)).toThrow(InvalidInputError);
    expect(() => listQuestions(bad)).toThrow(/no such file or folder/);
    const dup = join(dir, 'dup.json');
    writeFileSync(dup, JSON.stringify([question('d'), question('d')]));
    expect(() => listQuestions(dup)).toThrow(/appears twice/);
  });
});
