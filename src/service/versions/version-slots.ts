import type { Reservation, TableVersions } from './dataset-versions.js';

// Version slots. Every writer of version v of a dataset, single or batch, first holds v's
// reservation (create-if-absent of `_catalog/reservations/v` in the dataset directory), so that
// one writer at a time works on a version, and a drop can wait for the commits under way (see
// table-fences.ts). A single writer's reservation carries a lease: past it, its holder is presumed
// dead and the slot may be taken over. A batch's reservation names its transaction and is held for
// as long as the batch is unfinished, whatever its own `expires_at` says (a batch renews only its
// record's lease, see batch-lease.ts); whoever meets it resolves the batch (rolled forward or back,
// once its lease has run out; helped forward past its commit point), which frees the slot.

/** Longest a writer waits for another writer's hold on the same version slot. */
const MAX_SLOT_WAIT_MS = 10_000;

/** A single writer's hold on a version slot (VersionSlots.hold). */
export interface SlotHold {
  /** Releases the hold (once, however often it is called). */
  release(): Promise<void>;
}

export class VersionSlots {
  /** Single commits in flight in this process, by reservation key: waiters await them instead of polling. */
  private readonly inFlight = new Map<string, Promise<void>>();

  constructor(
    private readonly leaseMs: number,
    /** Brings the batch holding a slot to an end (batch-recovery.ts). */
    private readonly resolveBatch: (transactionId: string) => Promise<unknown>,
  ) {}

  /** A fresh hold, for a single writer or for batch `transactionId`. */
  lease(transactionId?: string): Reservation {
    const now = Date.now();
    return {
      ...(transactionId ? { transaction_id: transactionId } : {}),
      created_at: new Date(now).toISOString(),
      expires_at: new Date(now + this.leaseMs).toISOString(),
    };
  }

  /**
   * Claims version slot v for a writer. A slot held past its lease by a writer that died is taken
   * over with a replace-if-unchanged; a slot held by a batch is first resolved (the batch rolled
   * forward or back), which may free it. A slot held by a live writer is waited for, up to
   * MAX_SLOT_WAIT_MS: a loser must be answered only once the winner's version is visible, because
   * a Lance client that gets 409 asks for that version to learn whether its own commit landed.
   */
  async claim(versions: TableVersions, version: number, reservation: Reservation): Promise<boolean> {
    const deadline = Date.now() + MAX_SLOT_WAIT_MS;
    let delay = 2;
    for (;;) {
      if (await versions.claim(version, reservation)) return true;
      const held = await versions.readReservation(version);
      if (!held) continue; // released meanwhile
      const holder = held.value.transaction_id;
      if (holder && holder !== reservation.transaction_id) {
        await this.resolveBatch(holder);
      } else if (Date.parse(held.value.expires_at) < Date.now()) {
        if (await versions.claim(version, reservation, held.etag)) return true;
        continue;
      }
      if (Date.now() > deadline) return false;
      const local = this.inFlight.get(versions.reservationKey(version));
      if (local) await local;
      else {
        // Held by another replica (or a batch): poll with backoff until it is released.
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 50);
      }
    }
  }

  /**
   * Holds slot v for a single writer until the hold's `release`; `busy` is thrown when the slot
   * cannot be had in time. Until released, other writers of v in this process wait for it.
   */
  async hold(versions: TableVersions, version: number, busy: () => Error): Promise<SlotHold> {
    const reservation = this.lease();
    if (!(await this.claim(versions, version, reservation))) throw busy();
    const key = versions.reservationKey(version);
    let settled = () => {};
    const held = new Promise<void>((resolve) => (settled = resolve));
    this.inFlight.set(key, held);
    let released: Promise<void> | undefined;
    return {
      release: () =>
        (released ??= this.release(versions, version, reservation).finally(() => {
          // Another hold of this slot in this process (after this one's lease ran out) keeps its entry.
          if (this.inFlight.get(key) === held) this.inFlight.delete(key);
          settled();
        })),
    };
  }

  /**
   * Releases only this writer's own hold: past its lease another writer may have taken the slot
   * over. Nobody takes a slot over before its lease ran out, so a hold released within half its
   * lease (the other half allows for clocks that disagree) is deleted without a look.
   */
  private async release(versions: TableVersions, version: number, reservation: Reservation): Promise<void> {
    if (Date.now() - Date.parse(reservation.created_at) < this.leaseMs / 2) {
      await versions.release(version);
      return;
    }
    const held = await versions.readReservation(version);
    if (held && !held.value.transaction_id && held.value.created_at === reservation.created_at) await versions.release(version);
  }
}
