import js from '@eslint/js';
import regexp from 'eslint-plugin-regexp';
import tseslint from 'typescript-eslint';

/** Pure files outside core/: the audit's records, arms, report and message schemas. */
const AUDIT_PURE = ['audit/records.ts', 'audit/arms.ts', 'audit/report.ts', 'audit/messages.ts'];

const rule = (patterns, paths = []) => ({
  '@typescript-eslint/no-restricted-imports': ['error', { paths, patterns }],
});
const mongodb = { name: 'mongodb', message: 'Only store/ imports the MongoDB driver.' };
const notBench = {
  regex: '(^|/)bench(/|$)',
  message: 'Nothing imports bench/: the simulation lives in sim/.',
};

function layers() {
  return [
    {
      files: ['**/*.ts'],
      ignores: ['store/**', 'test/**', 'bench/**'],
      rules: rule([notBench], [mongodb]),
    },
    {
      files: ['store/**/*.ts', 'test/**/*.ts'],
      rules: rule([notBench]),
    },
    {
      // core is pure policy: its own modules, zod, and Temporal's failure types.
      files: ['core/*.ts'],
      rules: rule(
        [
          notBench,
          {
            regex: '^(?!zod$|@temporalio/common$|\\./)',
            message: 'core/ imports only core, zod and @temporalio/common.',
            allowTypeImports: false,
          },
        ],
        [mongodb],
      ),
    },
    {
      files: AUDIT_PURE,
      rules: rule(
        [
          notBench,
          {
            regex: '^(?!zod$|@temporalio/common$|\\./|\\.\\./core/)',
            message: "The audit's pure files import only core, zod and @temporalio/common.",
          },
        ],
        [mongodb],
      ),
    },
    {
      files: ['core/*/*.ts'],
      rules: rule(
        [
          notBench,
          {
            regex: '^(?!zod$|@temporalio/common$|\\./|\\.\\./[^./])',
            message: 'core/ imports only core, zod and @temporalio/common.',
          },
        ],
        [mongodb],
      ),
    },
    {
      // Deterministic code: core, the workflow API, zod; activities only as types (proxies).
      files: ['workflows/*.ts', 'audit/workflow.ts'],
      rules: rule(
        [
          notBench,
          {
            regex: '^(?!zod$|@temporalio/(workflow|common)$|\\./|\\.\\./core/)',
            message: 'workflows/ import only core, @temporalio/workflow and zod (and types).',
            allowTypeImports: true,
          },
        ],
        [mongodb],
      ),
    },
    {
      // The HTTP API answers through the client (MemgateClient, WindowClient), never the store.
      files: ['server/**/*.ts'],
      rules: rule(
        [
          notBench,
          {
            regex: '^(?!zod$|fastify$|@fastify/|@modelcontextprotocol/sdk/|\\./|\\.\\./(core|client)/)',
            message: 'server/ imports only core, client, fastify and its plugins, zod and the MCP SDK.',
          },
        ],
        [mongodb],
      ),
    },
    {
      // The vector engine is a derived index: core, usearch and Node only, never the store.
      files: ['vectorEngine/*.ts'],
      rules: rule(
        [
          notBench,
          {
            regex: '^(?!usearch$|node:|\\./|\\.\\./core/)',
            message: 'vectorEngine/ imports only core, usearch and Node.',
          },
        ],
        [mongodb],
      ),
    },
    {
      // The codec seals and encrypts what reaches Temporal, with keys from the store.
      files: ['codec/*.ts'],
      rules: rule(
        [
          {
            regex: '^(?!node:|@temporalio/common$|\\./|\\.\\./(core|store)/)',
            message: 'codec/ imports only core, store, @temporalio/common and Node.',
          },
        ],
        [mongodb],
      ),
    },
    {
      files: ['activities/*.ts', 'audit/activities.ts', 'audit/longMemEval.ts'],
      rules: rule(
        [
          notBench,
          { regex: '(^|/)workflows(/|$)|^\\./workflow$', message: 'activities never import workflows.' },
          { regex: '(^|/)client(/|$)', message: 'activities never import the client.' },
        ],
        [mongodb],
      ),
    },
  ];
}

export default tseslint.config(
  { ignores: ['node_modules/', '.memgate/', 'dist/', 'audit-out/', 'bench/results/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // A promise nobody awaits loses its failure, and in a workflow its ordering: every one is
    // awaited, returned, or marked `void` on purpose (as the Temporal SDK and samples lint).
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // The samples warn on deprecated APIs: Temporal marks what a later SDK drops.
      '@typescript-eslint/no-deprecated': 'error',
      'object-shorthand': ['error', 'always'],
    },
  },
  // The layer graph (docs/architecture.md, Layout). Each folder imports only what its layer may; a value
  // import across a forbidden edge fails lint, a type-only import of a message shape does not.
  ...layers(),
  {
    // Patterns run on user text in the write path and the nightly run: none may take time
    // super-linear in its input, whether by backtracking or by restarting at every position.
    files: ['core/**/*.ts', 'store/**/*.ts', 'llm/**/*.ts'],
    plugins: { regexp },
    rules: {
      'regexp/no-super-linear-backtracking': 'error',
      'regexp/no-super-linear-move': ['error', { ignoreSticky: false, ignorePartial: false }],
    },
  },
  {
    files: ['**/*.cjs'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: {
        require: 'readonly',
        module: 'writable',
        process: 'readonly',
        __dirname: 'readonly',
        console: 'readonly',
      },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
