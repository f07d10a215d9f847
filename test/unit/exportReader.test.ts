import { describe, expect, it } from 'vitest';
import { buildEntry, memoryPolicy } from '../../core/entry';
import { InvalidInputError } from '../../core/errors';
import {
  entryLine,
  ExportReader,
  exportLineText,
  headerLine,
  type ExportLine,
} from '../../core/exportFormat';
import { episode } from '../support/memories';
import { thrownBy } from '../support/thrown';

/**
 * An export is JSON Lines: an editor's or a shell's blank line (a final empty line, one
 * between concatenated parts, spaces and a carriage return) carries no record, so the reader
 * passes over it, and its refusals still name the line of the file.
 */
const NOW = Date.UTC(2026, 0, 1);
const policy = memoryPolicy({ halfLifeHours: 168, gateThreshold: 0.2 });
const header = exportLineText(headerLine('a1', NOW)).trimEnd();
const entry = JSON.stringify(
  entryLine(buildEntry('e1', 'a1', episode('The door code is 4417.', NOW), policy), 'hot'),
);
const end = (records: number) => JSON.stringify({ type: 'end', records });

/** Each line read in turn, and the reader finished: the records it gave. */
function readAll(lines: string[]): ExportLine['type'][] {
  const reader = new ExportReader();
  const read = lines.flatMap((l) => {
    const line = reader.read(l);
    return line ? [line.type] : [];
  });
  reader.finish();
  return read;
}

describe('ExportReader', () => {
  it('passes over blank lines before, between and after the records', () => {
    expect(readAll(['', header, '  ', entry, '\t', end(1), '', ''])).toEqual(['header', 'entry', 'end']);
  });

  it('still names the line of the file when it refuses one after a blank line', () => {
    const err = thrownBy(() => readAll(['', header, '', entry, '', end(2)]), InvalidInputError);
    expect(err.message).toContain('line 6 refused (the end line counts 2 records, and 1 came before it)');
    const cut = thrownBy(() => readAll([header, '', entry, '']), InvalidInputError);
    expect(cut.message).toContain('line 5 refused (the export ends without its end line');
  });

  it('refuses an input of blank lines alone as empty', () => {
    const err = thrownBy(() => readAll(['', ' ', '']), InvalidInputError);
    expect(err.message).toContain('line 4 refused (the input is empty)');
  });

  it('still refuses a record after the end line, blank lines between', () => {
    const err = thrownBy(() => readAll([header, end(0), '', entry]), InvalidInputError);
    expect(err.message).toContain('line 4 refused (a line after the end line)');
  });
});
