/**
 * The configuration table of docs/configuration.md, generated from the one configuration
 * schema: `npx tsx scripts/config-docs.ts` rewrites it in place; a unit test fails when it is
 * stale.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONFIG_SPECS } from '../core/config';
import { POLICY_FIELDS } from '../core/policy';

const START = '<!-- config-table:start -->';
const END = '<!-- config-table:end -->';
export const CONFIGURATION_DOC = join(__dirname, '..', 'docs', 'configuration.md');

export function configTable(): string {
  // A policy variable only proposes the stored policy (core/policy.ts): say so where it is listed.
  const policy = new Set<string>(POLICY_FIELDS);
  const rows = Object.entries(CONFIG_SPECS).map(
    ([key, s]) =>
      `| \`${s.env}\` | ${s.default === undefined ? '(unset)' : `\`${s.default}\``} | ${policy.has(key) ? 'policy: ' : ''}${s.doc}; ${s.allowed} |`,
  );
  return ['| variable | default | meaning; allowed values |', '| --- | --- | --- |', ...rows].join('\n');
}

/** The page's current table, or undefined when its markers are missing. */
export function documentedTable(page: string): string | undefined {
  const a = page.indexOf(START);
  const b = page.indexOf(END);
  return a < 0 || b < a ? undefined : page.slice(a + START.length, b).trim();
}

/** A table with Prettier's column padding taken out, for comparing content only. */
export function normaliseTable(table: string): string {
  return table
    .split('\n')
    .map((row) =>
      row
        .split('|')
        .map((cell) => cell.trim())
        .map((cell) => (/^-+$/.test(cell) ? '---' : cell))
        .join('|'),
    )
    .join('\n');
}

if (require.main === module) {
  const page = readFileSync(CONFIGURATION_DOC, 'utf8');
  const a = page.indexOf(START);
  const b = page.indexOf(END);
  if (a < 0 || b < a) throw new Error(`docs/configuration.md lacks the ${START} … ${END} markers`);
  writeFileSync(CONFIGURATION_DOC, `${page.slice(0, a + START.length)}\n${configTable()}\n${page.slice(b)}`);
}
