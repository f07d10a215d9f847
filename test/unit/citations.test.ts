import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The code and the docs cite each other by name: `(docs/invariants.md, Erasure wins)` names a
 * row of the invariants table, `(docs/windows.md, Context windows)` or `(docs/store.md, Quotas)` a
 * heading, and the docs link to each other. Renaming a heading or a row would orphan them
 * silently; here it fails.
 */
const ROOT = resolve(__dirname, '..', '..');
const tracked = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' })
  .split('\n')
  .filter((f) => /\.(ts|md|py|cjs|mjs)$/.test(f) && existsSync(join(ROOT, f)));
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

/** `(docs/<page>.md, <Name>; <Name>)` or `(README, <Heading>)`: the document and the names cited. */
const CITATION = /\((docs\/[a-z-]+\.md|README), ([^()]+)\)/g;
/** A cited name: words, as headings and invariants are named (not code that happens to match). */
const NAME = /^[A-Z][A-Za-z0-9 ,'-]*$/;

function namesIn(document: string): Set<string> {
  const file = document === 'README' ? 'README.md' : document;
  if (!existsSync(join(ROOT, file))) return new Set();
  const text = read(file);
  const headings = text.match(/^#{1,6} .+$/gm)?.map((h) => h.replace(/^#+ /, '').trim()) ?? [];
  // The invariants are the first column of the table.
  const rows = text.match(/^\| [^|]+\|/gm)?.map((r) => r.slice(1, -1).trim()) ?? [];
  return new Set([...headings, ...rows]);
}

describe('citations and links', () => {
  it('every citation of a doc by name names a heading or an invariant there', () => {
    const names = new Map<string, Set<string>>();
    const orphans: string[] = [];
    let cited = 0;
    for (const file of tracked) {
      for (const [, document, list] of read(file).matchAll(CITATION)) {
        const known = names.get(document!) ?? namesIn(document!);
        names.set(document!, known);
        for (const name of list!.split(';').map((n) => n.trim())) {
          if (!NAME.test(name)) continue;
          cited++;
          if (!known.has(name)) orphans.push(`${file}: (${document}, ${name})`);
        }
      }
    }
    expect(orphans).toEqual([]);
    // The check reads the citations the tree has (over a hundred), not none.
    expect(cited).toBeGreaterThan(100);
  });

  it('every relative link between the docs reaches a file', () => {
    const broken: string[] = [];
    let links = 0;
    for (const file of tracked.filter((f) => f.endsWith('.md'))) {
      for (const [, target] of read(file).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^(https?:|mailto:|#)/.test(target!)) continue;
        links++;
        const path = resolve(ROOT, dirname(file), target!.split('#')[0]!);
        if (!existsSync(path)) broken.push(`${file}: ${target}`);
      }
    }
    expect(broken).toEqual([]);
    expect(links).toBeGreaterThan(5);
  });
});
