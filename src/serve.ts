// The service process, once main.ts has sized the thread pool.
import { pino } from 'pino';
import { createApp } from './app.js';
import { loadConfig } from './config.js';
import { isLoopbackAddress } from './http/browser-guard.js';
import { UnsafeStoreError } from './service/health/store-check.js';

// The SDK's notice that its 2027 releases need Node 22 is noise while versions are pinned exactly.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const config = loadConfig(process.argv.slice(2), process.env);
const logger = pino({ level: config.logLevel });
// Without authentication, open is acceptable only where nothing but this machine reaches.
if (!config.auth && !isLoopbackAddress(config.host) && !config.insecure) {
  logger.fatal(
    { host: config.host },
    'refusing to serve without authentication on a non-loopback address: every caller that reaches the port would have full access; configure auth in the --config file, bind a loopback address, or pass --insecure (LANCE_NS_INSECURE=true) to accept that',
  );
  process.exit(2);
}
const app = await createApp(config, logger).catch((e: unknown) => {
  if (!(e instanceof UnsafeStoreError)) throw e;
  // A store that ignores conditional writes would settle every race wrongly, without a word.
  logger.fatal(
    { root: e.root, notHonoured: e.broken, ...(config.s3.endpoint && e.root.startsWith('s3://') ? { endpoint: config.s3.endpoint } : {}) },
    e.message,
  );
  process.exit(2);
});
await app.server.listen({ host: config.host, port: config.port });
logger.info({ root: app.store.rootUri }, 'serving the Lance namespace catalog');
if (!config.auth) {
  logger.warn(
    { host: config.host },
    isLoopbackAddress(config.host)
      ? 'no authentication: every caller on this machine has full access (bound to loopback)'
      : 'no authentication (--insecure): every caller that reaches the port has full access',
  );
}

let closing = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, 'shutting down: finishing in-flight requests');
    app.close().then(
      () => process.exit(0),
      (e: unknown) => {
        logger.error({ err: e }, 'shutdown failed');
        process.exit(1);
      },
    );
  });
}
