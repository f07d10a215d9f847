import js from '@eslint/js';
import regexp from 'eslint-plugin-regexp';
import tseslint from 'typescript-eslint';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';

/**
 * The layer graph (docs/architecture.md, Layout): each layer, the files it holds, and the layers
 * it may import; every other layer's files are refused, so the arrows run one way. A layer's files
 * are top-level folders, or named modules of a folder that holds more than one layer (the audit
 * is a slice through the layers). `types` are layers it may import
 * types of only, `packages` (when given) the only packages it may import, and `mongodb` marks the
 * layers that may import the driver.
 */
const LAYERS = {
  core: { files: ['core'], imports: [], packages: ['zod', '@temporalio/common'] },
  auditRecords: {
    files: ['audit/records', 'audit/arms', 'audit/report', 'audit/messages'],
    imports: ['core'],
    packages: ['zod', '@temporalio/common'],
  },
  vectorEngine: { files: ['vectorEngine'], imports: ['core'], packages: ['usearch', 'node:*'] },
  llm: { files: ['llm'], imports: ['core'] },
  store: { files: ['store'], imports: ['core', 'auditRecords', 'vectorEngine'], mongodb: true },
  codec: { files: ['codec'], imports: ['core', 'store'], packages: ['node:*', '@temporalio/common'] },
  stack: { files: ['stack'], imports: ['core', 'llm', 'store'] },
  activities: {
    files: ['activities', 'audit/activities', 'audit/longMemEval'],
    imports: ['core', 'auditRecords', 'vectorEngine', 'llm', 'store', 'codec'],
  },
  // Deterministic code: the workflow API and core; activities only as types (proxies).
  workflows: {
    files: ['workflows', 'audit/workflow'],
    imports: ['core', 'auditRecords'],
    types: ['activities'],
    packages: ['zod', '@temporalio/workflow', '@temporalio/common'],
  },
  worker: {
    files: ['worker'],
    imports: ['core', 'auditRecords', 'llm', 'store', 'codec', 'stack', 'activities', 'workflows'],
  },
  client: {
    files: ['client'],
    imports: ['core', 'auditRecords', 'llm', 'store', 'codec', 'stack', 'workflows'],
  },
  // The HTTP API answers through the client (MemgateClient, WindowClient), never the store.
  server: {
    files: ['server'],
    imports: ['core', 'client'],
    packages: ['zod', 'fastify', '@fastify/*', '@modelcontextprotocol/sdk/*'],
  },
  cli: {
    files: ['cli', 'audit/command'],
    imports: [
      'core',
      'auditRecords',
      'llm',
      'store',
      'codec',
      'stack',
      'workflows',
      'worker',
      'client',
      'server',
    ],
  },
  sim: { files: ['sim'], imports: ['core', 'llm', 'workflows'], types: ['client'] },
  // The memory browser's page, bundled for the browser (cli/ui.ts): pure core code, the API's
  // result types, and its front-end packages; never a module that needs Node.
  ui: {
    files: ['ui'],
    imports: ['core'],
    types: ['client', 'server'],
    packages: ['preact', 'preact/*', 'htm/*', 'uplot', 'uplot/*'],
  },
  scripts: {
    files: ['scripts'],
    imports: [
      'core',
      'auditRecords',
      'llm',
      'store',
      'codec',
      'stack',
      'workflows',
      'worker',
      'client',
      'cli',
    ],
  },
  // Nothing imports bench: the simulation lives in sim/.
  bench: {
    files: ['bench'],
    imports: [
      'core',
      'auditRecords',
      'vectorEngine',
      'llm',
      'store',
      'codec',
      'stack',
      'activities',
      'workflows',
      'worker',
      'client',
      'cli',
      'sim',
      'test',
    ],
    mongodb: true,
  },
  test: {
    files: ['test'],
    imports: [
      'core',
      'auditRecords',
      'vectorEngine',
      'llm',
      'store',
      'codec',
      'stack',
      'activities',
      'workflows',
      'worker',
      'client',
      'server',
      'cli',
      'sim',
      'scripts',
    ],
    mongodb: true,
  },
};

/** Folders deeper than this below a layer's folder get no layer rule (test/unit/layers.test.ts checks none exists). */
const MAX_DEPTH = 3;

const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The specifier prefix by which a file `depth` folders below the top of `folder` imports `path`
 * (a folder or a module, both relative to the root): `./x`, `../x`, `../../x` and so on.
 */
function relative(folder, depth, path) {
  const [top, ...rest] = path.split('/');
  if (top === folder && rest.length > 0)
    return `${depth === 0 ? '\\./' : '(\\.\\./)'.repeat(depth)}${escape(rest.join('/'))}`;
  return `(\\.\\./){${depth + 1}}${escape(path)}`;
}

/** A regex matching the specifiers of `paths` (folders or modules) seen from `depth` below `folder`. */
function specifiers(folder, depth, paths) {
  return `^(${paths.map((path) => relative(folder, depth, path)).join('|')})(/|$)`;
}

/** The packages a layer may import, as the negative look-ahead of a regex refusing all others. */
function onlyPackages(packages) {
  const allowed = packages.map((p) => (p.endsWith('*') ? escape(p.slice(0, -1)) : `${escape(p)}$`));
  return `^(?![./])(?!${allowed.join('|')})`;
}

function layerRules(name, layer, folder, depth) {
  const filesOf = (names) => names.flatMap((n) => LAYERS[n].files);
  const others = Object.keys(LAYERS).filter((n) => n !== name);
  const refused = others.filter((n) => !layer.imports.includes(n) && !layer.types?.includes(n));
  const refusedPaths = filesOf(refused);
  const why = `${name} imports only ${layer.imports.join(', ') || 'itself'}${layer.types ? ` (and types of ${layer.types.join(', ')})` : ''} (docs/architecture.md, Layout).`;
  const patterns = [];
  if (refusedPaths.length) {
    patterns.push({ regex: specifiers(folder, depth, refusedPaths), message: why });
  }
  if (layer.types) {
    patterns.push({
      regex: specifiers(folder, depth, filesOf(layer.types)),
      message: why,
      allowTypeImports: true,
    });
  }
  if (layer.packages) {
    patterns.push({
      regex: onlyPackages(layer.packages),
      message: `${name} imports only the packages ${layer.packages.join(', ')}.`,
    });
  }
  const paths = layer.mongodb
    ? []
    : [{ name: 'mongodb', message: 'Only store/ imports the MongoDB driver.' }];
  // `import()` is an edge too, which no-restricted-imports does not see: the same specifiers,
  // type-only layers included (a dynamic import loads the module), refused by selector.
  const dynamic = [
    ...patterns.map(({ regex, message }) => ({ regex, message })),
    ...paths.map(({ name, message }) => ({ regex: `^${escape(name)}$`, message })),
  ].map(({ regex, message }) => ({
    // esquery's regex literal cannot hold a slash: the same character, escaped.
    selector: `ImportExpression[source.value=/${regex.replaceAll('/', '\\x2F')}/]`,
    message: `import(): ${message}`,
  }));
  return {
    '@typescript-eslint/no-restricted-imports': ['error', { paths, patterns }],
    'no-restricted-syntax': ['error', ...dynamic],
  };
}

/**
 * Where a layer's path holds files: a module is one file; a folder is a place per depth below
 * it, since a relative specifier's `../` count depends on the depth.
 */
function places(path) {
  const [folder, ...rest] = path.split('/');
  if (rest.length > 0) return [{ folder, depth: rest.length - 1, files: [`${path}.ts`] }];
  return Array.from({ length: MAX_DEPTH + 1 }, (_, depth) => ({
    folder,
    depth,
    files: [`${path}/${'*/'.repeat(depth)}*.ts`],
  }));
}

/** One configuration per layer and place, generated from LAYERS. */
function layers() {
  return Object.entries(LAYERS).flatMap(([name, layer]) =>
    layer.files.flatMap((path) =>
      places(path).map(({ folder, depth, files }) => ({
        files,
        rules: layerRules(name, layer, folder, depth),
      })),
    ),
  );
}

export default tseslint.config(
  { ignores: ['node_modules/', '.memgate/', 'dist/', 'audit-out/', 'bench/results/', 'test-artifacts/'] },
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
  // The layer graph (LAYERS above): an import across a refused edge fails lint, a type-only one too
  // unless the layer's `types` name it (a workflow names its activities so).
  ...layers(),
  {
    // Within a layer too, modules import one way: no module reaches itself through its imports.
    // Packages are not followed (ignoreExternal), so the check reads only memgate's own files.
    files: ['**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js', '.json'] })],
    },
    rules: { 'import-x/no-cycle': ['error', { ignoreExternal: true }] },
  },
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
