import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeExportFile } from '../../cli/commands/export';
import { InvalidInputError } from '../../core/errors';

/**
 * `memgate export --out <file>` writes the file whole or not at all: an export that fails
 * midway (the store gone after the first page) leaves a file already there as it was, and no
 * part of itself. Before, the file was emptied at the first chunk and left cut off.
 */
const dir = mkdtempSync(join(tmpdir(), 'memgate-export-out-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function* chunks(lines: string[], failAfter?: number): AsyncGenerator<string> {
  for (const [i, line] of lines.entries()) {
    if (i === failAfter) throw new Error('the store went away');
    yield line;
  }
}

describe('export --out', () => {
  it('replaces the file once the export is whole', async () => {
    const out = join(dir, 'whole.jsonl');
    writeFileSync(out, 'the previous export\n');
    await writeExportFile(out, chunks(['a\n', 'b\n', 'end\n']));
    expect(readFileSync(out, 'utf8')).toBe('a\nb\nend\n');
    expect(readdirSync(dir)).toEqual(['whole.jsonl']);
  });

  it('leaves the previous file as it was, and nothing beside it, when the export fails midway', async () => {
    const out = join(dir, 'kept.jsonl');
    writeFileSync(out, 'the previous export\n');
    await expect(writeExportFile(out, chunks(['a\n', 'b\n', 'end\n'], 2))).rejects.toThrow(
      'the store went away',
    );
    expect(readFileSync(out, 'utf8')).toBe('the previous export\n');
    expect(readdirSync(dir).filter((f) => f.includes('kept'))).toEqual(['kept.jsonl']);
  });

  it('refuses a directory, or a folder it cannot write in, naming --out', async () => {
    const folder = join(dir, 'a-folder');
    mkdirSync(folder);
    for (const path of [folder, join(dir, 'missing', 'x.jsonl')]) {
      const err = await writeExportFile(path, chunks(['a\n'])).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, path).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).issues[0]?.path).toBe('--out');
    }
  });
});
