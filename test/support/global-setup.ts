import type { TestProject } from 'vitest/node';
import { buildConsole } from '../../scripts/build-ui.js';
import { type S3TestServer, startMinio, startRgw } from './s3-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    s3Servers: S3TestServer[];
    s3SkipReasons: string[];
  }
}

// One S3 server per test run. radosgw is required (CI installs it through the same script);
// set LANCE_NS_TEST_S3=off to run only the local tier while iterating.
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The web console the test apps serve at /ui (dist/ui/), bundled as `npm run build` does; well under a second.
  await buildConsole();
  const servers: S3TestServer[] = [];
  const reasons: string[] = [];
  const stops: Array<() => Promise<void>> = [];
  if (process.env.LANCE_NS_TEST_S3 === 'off') {
    if (process.env.CI) throw new Error('LANCE_NS_TEST_S3=off is not allowed in CI: the S3 tier must run');
    reasons.push('S3 tiers skipped: LANCE_NS_TEST_S3=off');
  } else {
    const rgw = await startRgw();
    servers.push(rgw.server);
    stops.push(rgw.stop);
    const minio = await startMinio();
    if ('skipped' in minio) reasons.push(minio.skipped);
    else {
      servers.push(minio.server);
      stops.push(minio.stop);
    }
  }
  for (const reason of reasons) console.log(reason);
  project.provide('s3Servers', servers);
  project.provide('s3SkipReasons', reasons);
  return async () => {
    for (const stop of stops) await stop();
  };
}
