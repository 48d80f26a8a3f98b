import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Real servers, engines and stores per file; two cores.
    maxWorkers: 2,
    reporters: ['default'],
    // The AWS SDK warns that its 2027 releases need Node 22; our pins are exact.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  },
});
