import { join } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

/**
 * The layer graph is enforced by lint (docs/architecture.md, Layout): each case is a one-line file placed
 * in a folder, linted with the project's own configuration. A wrong edge must fail; the
 * edges the layers allow must pass.
 */
const eslint = new ESLint({
  cwd: join(__dirname, '..', '..'),
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
    .filter((m) => m.ruleId === '@typescript-eslint/no-restricted-imports')
    .map((m) => m.message);
}

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
  ])('allows %s: %s', async (file, code) => {
    expect(await restricted(file, code)).toEqual([]);
  });
});
