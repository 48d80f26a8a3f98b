import { randomUUID } from 'node:crypto';
import type { ObjectStore } from '../../store/object-store.js';
import { healthProbeKey } from '../catalog/layout.js';
import type { StoreCheck } from './store-check.js';

/**
 * Readiness: the store was found to honour conditional writes (see store-check.ts), and the root
 * can be written and read back. Each replica probes its own key.
 */
export class HealthService {
  private readonly probeKey = healthProbeKey(randomUUID());

  constructor(
    private readonly store: ObjectStore,
    private readonly storeCheck: StoreCheck,
  ) {}

  /**
   * `reason` is for anyone who asks (readiness needs no credentials): it names no endpoint, root
   * or error; the failure is the `cause`, for the log.
   */
  async ready(): Promise<{ ok: true } | { ok: false; reason: string; cause?: unknown }> {
    const unsafe = await this.storeCheck.unready();
    if (unsafe !== null) return { ok: false, reason: unsafe };
    try {
      const body = new Date().toISOString();
      await this.store.put(this.probeKey, body);
      const back = await this.store.get(this.probeKey);
      await this.store.delete(this.probeKey);
      if (back?.body.toString() !== body) return { ok: false, reason: 'the store did not return what was written' };
      return { ok: true };
    } catch (e) {
      return { ok: false, reason: 'store unreachable: the root cannot be written and read back', cause: e };
    }
  }
}
