import { pino } from 'pino';
import { createApp } from './app.js';
import { loadConfig } from './config.js';

// The SDK's notice that its 2027 releases need Node 22 is noise while versions are pinned exactly.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const config = loadConfig(process.argv.slice(2), process.env);
const logger = pino({ level: config.logLevel });
const app = await createApp(config, logger);
await app.server.listen({ host: config.host, port: config.port });
logger.info({ root: app.store.rootUri }, 'serving the Lance namespace catalog');

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
