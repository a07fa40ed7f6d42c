// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { importBoundaries } from './eslint/import-boundaries.js';

// The layering (docs/decisions/0026-layout-and-boundaries.md): each folder and the folders it may
// import. Lower layers never import higher ones; test/ may import anything.
const srcBelowServices = [
  'src/platform',
  'src/gen',
  'src/wire',
  'src/model',
  'src/fleet',
  'src/raft',
  'src/workflow',
  'src/state',
];
const srcSubsystems = [
  ...srcBelowServices,
  'src/power',
  'src/artifacts',
  'src/boot',
  'src/worker',
  'src/bootos',
  'src/api',
  'src/node',
  'src/tinkerbell',
  'src/cli',
];
const zones = {
  'src/platform': [],
  'src/gen': [],
  // What nodes and clients agree on beside the protobuf messages (refusal metadata, limits).
  'src/wire': ['src/platform', 'src/gen'],
  'src/model': ['src/platform'],
  // Selectors, fingerprints, drift: pure rules on model records, so the state can apply them.
  'src/fleet': ['src/platform', 'src/model'],
  'src/raft': ['src/platform', 'src/gen'],
  'src/workflow': ['src/platform', 'src/model'],
  // Tinkerbell's objects mapped to Slipway's documents (docs/decisions/0039): pure, for the CLI.
  'src/tinkerbell': ['src/platform', 'src/model', 'src/workflow'],
  'src/state': ['src/platform', 'src/model', 'src/fleet', 'src/workflow', 'src/raft'],
  'src/power': ['src/platform', 'src/model', 'src/state'],
  // The boot servers answer from what they are given; a node wires them to the state
  // (src/node/boot-services.ts).
  'src/boot': ['src/platform', 'src/model'],
  'src/artifacts': [...srcBelowServices, 'src/boot'],
  'src/worker': ['src/platform', 'src/gen', 'src/model', 'src/workflow'],
  'src/bootos': ['src/platform'],
  'src/api': [...srcBelowServices, 'src/power', 'src/artifacts'],
  'src/node': [...srcSubsystems.filter((z) => z !== 'src/cli' && z !== 'src/node'), 'lb'],
  'src/cli': [...srcSubsystems, 'lb', 'cluster'],
  lb: srcSubsystems,
  cluster: [...srcSubsystems, 'lb'],
  bench: [...srcSubsystems, 'lb', 'cluster'],
  bin: ['src/cli'],
  test: ['*'],
};

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'dist/',
      '.build-test-*/',
      'coverage/',
      'src/gen/',
      'bin/*.js',
      // Loaded by node:test before tsx's hooks, so plain JavaScript.
      'test/support/file-times-reporter.mjs',
      'eslint.config.js',
      'eslint/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: ['test', 'it', 'describe', 'suite', 'before', 'after'],
            },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: true },
      ],
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allowNumber: true, allowBoolean: true, allowNullish: true },
      ],
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-unnecessary-condition': 'off',
      '@typescript-eslint/no-confusing-void-expression': 'off',
      '@typescript-eslint/prefer-promise-reject-errors': 'off',
    },
  },
  {
    plugins: { slipway: { rules: { 'import-boundaries': importBoundaries } } },
    rules: {
      'slipway/import-boundaries': [
        'error',
        // Outside src/, a subsystem is reached through its index.ts; the leaf libraries are open.
        { zones, entryOnly: ['lb', 'cluster', 'bench'], open: ['src/platform', 'src/gen', 'src/model'] },
      ],
    },
  },
  {
    // Functions stay short enough to read at once: a longer one is split into named steps.
    // Tests are exempt (a test reads as one story).
    files: ['src/**/*.ts', 'lb/**/*.ts', 'bench/**/*.ts', 'cluster/**/*.ts'],
    rules: {
      'max-lines-per-function': [
        'error',
        { max: 100, skipBlankLines: true, skipComments: true, IIFEs: true },
      ],
    },
  },
  {
    // Protocol and consensus cores are pure: no I/O, clocks or randomness inside.
    files: [
      'src/raft/core/**/*.ts',
      'src/state/**/*.ts',
      'src/fleet/**/*.ts',
      'src/tinkerbell/**/*.ts',
      'src/boot/dhcp/codec*.ts',
      'src/boot/tftp/packet.ts',
      'src/boot/tftp/transfer.ts',
    ],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: ['node:*', 'pino', '@grpc/*', 'level', 'classic-level'] },
      ],
      'no-restricted-globals': ['error', 'setTimeout', 'setInterval', 'setImmediate', 'performance'],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now' },
        { object: 'Math', property: 'random' },
      ],
    },
  },
);
