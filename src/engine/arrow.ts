import { createRequire } from 'node:module';

// apache-arrow ships separate ESM and CJS builds; @lancedb/lancedb is CJS and checks `instanceof`
// against the CJS classes, so the service must load the very same (CJS) module instance.
const require = createRequire(import.meta.url);
export const arrow = require('apache-arrow') as typeof import('apache-arrow');
