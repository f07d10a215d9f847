import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

/**
 * The layer graph is enforced by lint (docs/architecture.md, Layout): each case is a one-line file placed
 * in a folder, linted with the project's own configuration. A wrong edge must fail; the
 * edges the layers allow must pass; so must a cycle, even within a layer.
 */
const root = join(__dirname, '..', '..');
const eslint = new ESLint({
  cwd: root,
  // The cases are no files of the TypeScript project: linted without type information, which
  // only the type-aware rules (not the layer rules) need.
  overrideConfig: {
    languageOptions: { parserOptions: { projectService: false } },
    rules: { '@typescript-eslint/no-floating-promises': 'off', '@typescript-eslint/no-deprecated': 'off' },
  },
});

async function restricted(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(`${code}\nexport const used = [x];\n`, { filePath });
  return result!.messages
    .filter(
      (m) => m.ruleId === '@typescript-eslint/no-restricted-imports' || m.ruleId === 'no-restricted-syntax',
    )
    .map((m) => m.message);
}

/** The same edge as a static import case, taken by `import()`: `const x = import('../store/db');`. */
function dynamicImport(code: string): string {
  const specifier = /from '([^']+)';$/.exec(code)![1]!;
  return `const x = import('${specifier}');`;
}

/** For each top-level folder, an import of a layer above its own: each must fail. */
const UPWARD: [string, string][] = [
  ['core/layer-case.ts', "import { openStore as x } from '../store/db';"],
  ['audit/messages.ts', "import { createAuditActivities as x } from './activities';"],
  ['vectorEngine/layer-case.ts', "import { openStore as x } from '../store/db';"],
  ['llm/layer-case.ts', "import { openStore as x } from '../store/db';"],
  ['store/layer-case.ts', "import { MemgateClient as x } from '../client/client';"],
  ['codec/layer-case.ts', "import { createActivities as x } from '../activities';"],
  ['stack/layer-case.ts', "import { MemgateClient as x } from '../client/client';"],
  ['activities/layer-case.ts', "import { forget as x } from '../workflows/forget';"],
  ['audit/activities.ts', "import { registerAuditCommands as x } from './command';"],
  ['workflows/layer-case.ts', "import { openStore as x } from '../store/db';"],
  ['audit/workflow.ts', "import { openStore as x } from '../store/db';"],
  ['worker/layer-case.ts', "import { MemgateClient as x } from '../client/client';"],
  ['client/layer-case.ts', "import { createMemgateWorker as x } from '../worker/worker';"],
  ['client/layer-case.ts', "import { buildHttpServer as x } from '../server/http';"],
  ['server/layer-case.ts', "import { main as x } from '../cli/cli';"],
  ['cli/commands/layer-case.ts', "import { configTable as x } from '../../scripts/config-docs';"],
  ['sim/layer-case.ts', "import { openStore as x } from '../store/db';"],
  ['ui/layer-case.ts', "import { MemgateClient as x } from '../client/client';"],
  ['scripts/layer-case.ts', "import { startTestEnv as x } from '../test/support/env';"],
  ['bench/layer-case.ts', "import { configTable as x } from '../scripts/config-docs';"],
  ['test/unit/layer-case.ts', "import { run as x } from '../../bench/run';"],
];

describe('the layer rules', () => {
  it.each([
    ['core/layer-case.ts', "import { openStore as x } from '../store/db';"],
    ['core/layer-case.ts', "import { MongoClient as x } from 'mongodb';"],
    ['core/layer-case.ts', "import { spawn as x } from 'node:child_process';"],
    ['core/nightly/layer-case.ts', "import { openStore as x } from '../../store/db';"],
    ['workflows/layer-case.ts', "import { createActivities as x } from '../activities';"],
    ['workflows/layer-case.ts', "import { openStore as x } from '../store/db';"],
    ['activities/layer-case.ts', "import { forget as x } from '../workflows/forget';"],
    ['client/layer-case.ts', "import { MongoClient as x } from 'mongodb';"],
    ['client/layer-case.ts', "import { run as x } from '../bench/run';"],
    ['test/unit/layer-case.ts', "import { run as x } from '../../bench/run';"],
    ['audit/records.ts', "import { openStore as x } from '../store/db';"],
    ['server/layer-case.ts', "import { openStore as x } from '../store/db';"],
    ['server/layer-case.ts', "import { MongoClient as x } from 'mongodb';"],
    ['server/layer-case.ts', "import { forget as x } from '../workflows/forget';"],
    ['server/layer-case.ts', "import { createActivities as x } from '../activities';"],
    ['vectorEngine/layer-case.ts', "import { openStore as x } from '../store/db';"],
    ['vectorEngine/layer-case.ts', "import { MongoClient as x } from 'mongodb';"],
    ['ui/layer-case.ts', "import { readFileSync as x } from 'node:fs';"],
    ['ui/layer-case.ts', "import { buildHttpServer as x } from '../server/http';"],
  ])('refuses %s: %s', async (file, code) => {
    expect(await restricted(file, code)).not.toEqual([]);
  });

  it.each([
    ['core/layer-case.ts', "import { z as x } from 'zod';"],
    ['core/nightly/layer-case.ts', "import { terms as x } from '../text';"],
    ['workflows/layer-case.ts', "import type { NightlyActivities as x } from '../activities';"],
    ['workflows/layer-case.ts', "import { parseInput as x } from '../core/messages';"],
    ['activities/layer-case.ts', "import { openStore as x } from '../store/db';"],
    ['store/layer-case.ts', "import { MongoClient as x } from 'mongodb';"],
    ['bench/layer-case.ts', "import { simulate as x } from '../sim/simulate';"],
    ['server/layer-case.ts', "import { MemgateClient as x } from '../client/client';"],
    ['server/layer-case.ts', "import { agentIdSchema as x } from '../core/entry';"],
    ['server/layer-case.ts', "import x from 'fastify';"],
    ['vectorEngine/layer-case.ts', "import { Index as x } from 'usearch';"],
    ['vectorEngine/layer-case.ts', "import { stateInDefaultRecall as x } from '../core/recall';"],
    ['ui/layer-case.ts', "import { html as x } from 'htm/preact';"],
    ['ui/layer-case.ts', "import type { MemgateClient as x } from '../client/client';"],
    ['ui/layer-case.ts', "import { NIGHT_PHASES as x } from '../core/nightly/registry';"],
  ])('allows %s: %s', async (file, code) => {
    expect(await restricted(file, code)).toEqual([]);
  });
  it.each(UPWARD)('refuses the upward import %s: %s', async (file, code) => {
    expect(await restricted(file, code)).not.toEqual([]);
  });
  it.each(UPWARD.map(([file, code]) => [file, dynamicImport(code)]))(
    'refuses the upward import() %s: %s',
    async (file, code) => {
      expect(await restricted(file, code)).not.toEqual([]);
    },
  );
  it.each([
    ['cli/commands/layer-case.ts', "const x = import('../../worker/worker');"],
    ['core/layer-case.ts', "const x = import('zod');"],
  ])('allows the import() %s: %s', async (file, code) => {
    expect(await restricted(file, code)).toEqual([]);
  });

  it('has an upward case for every top-level folder of TypeScript', () => {
    const folders = new Set(
      execFileSync('git', ['ls-files', '*.ts'], { cwd: root, encoding: 'utf8' })
        .split('\n')
        .filter((f) => f.includes('/'))
        .map((f) => f.split('/')[0]),
    );
    expect(new Set(UPWARD.map(([file]) => file.split('/')[0]))).toEqual(folders);
  });

  it('type-checks every top-level folder of TypeScript by name, not only through imports', () => {
    const folders = execFileSync('git', ['ls-files', '*/*.ts'], { cwd: root, encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map((f) => f.split('/')[0]!);
    const tsconfig = JSON.parse(readFileSync(join(root, 'tsconfig.json'), 'utf8')) as { include: string[] };
    // A folder for another runtime (the browser's ui/) has its own tsconfig, checked by the lint script.
    const lint = (
      JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { lint: string } }
    ).scripts.lint;
    const checked = (f: string) => tsconfig.include.includes(f) || lint.includes(`tsc --noEmit -p ${f}`);
    expect([...new Set(folders)].filter((f) => !checked(f))).toEqual([]);
  });

  it('gives every TypeScript file a layer rule (none is deeper than the rule reaches)', async () => {
    const files = execFileSync('git', ['ls-files', '*/*.ts'], { cwd: root, encoding: 'utf8' })
      .split('\n')
      .filter(Boolean);
    const unruled: string[] = [];
    for (const file of files) {
      const config = (await eslint.calculateConfigForFile(file)) as { rules: Record<string, unknown> };
      const rule = config.rules['@typescript-eslint/no-restricted-imports'] as
        [unknown, { patterns: unknown[] }] | undefined;
      if (!rule?.[1].patterns.length) unruled.push(file);
    }
    expect(unruled).toEqual([]);
  });

  it('refuses a cycle of imports, even within a layer', async () => {
    // The cycle check reads the imported files from disk: two real files, removed after.
    const [a, b] = ['store/layer-cycle-a.ts', 'store/layer-cycle-b.ts'];
    writeFileSync(
      join(root, a),
      "import { b } from './layer-cycle-b';\nexport const a = (): unknown => b;\n",
    );
    writeFileSync(
      join(root, b),
      "import { a } from './layer-cycle-a';\nexport const b = (): unknown => a;\n",
    );
    try {
      const [result] = await eslint.lintFiles([a]);
      expect(result!.messages.map((m) => m.ruleId)).toContain('import-x/no-cycle');
    } finally {
      rmSync(join(root, a), { force: true });
      rmSync(join(root, b), { force: true });
    }
  });
});
