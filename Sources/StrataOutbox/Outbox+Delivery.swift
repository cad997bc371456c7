import Foundation
@_spi(StrataInternals) import Strata

extension Outbox {
    enum Outcome: Equatable {
        case delivered, parked, discarded, deferred, stopped
        /// A first save's unknown outcome was settled: the drain goes on with the scope.
        case settled
    }

    /// Delivers the due writes of the claimed `scope` one after another, until one fails or none is due.
    /// On a storage shared by processes, it first claims the scope there (and reads it back), renews
    /// the claim before each write while less than half of it is left, and releases it at the end.
    ///
    /// A delivered write is removed from the storage together with the next write's attempt, in one
    /// ``OutboxStorage/saveAttempt(_:removingDelivered:)`` (one commit per delivery instead of two),
    /// and on its own when no write follows it in the scope (before it is reported delivered), before
    /// the scope is read back or its claim renewed, and when the drain leaves the scope (even
    /// cancelled). Killed in between, the process leaves it stored, as if killed just before its
    /// removal: it is sent again with its key.
    func drainScope(_ scope: String) async -> OutboxDrainReport {
        defer {
            // A `run()` that looked for its next wake-up while this scope was busy skipped it: when
            // the scope still holds writes, make it look again.
            if state.withLock({ $0.machine.releaseScope(scope) }) { wake() }
        }
        var report = OutboxDrainReport()
        let shared = storage.isSharedByProcesses
        var claimedUntil: Date?
        if shared {
            guard let until = await claimShared(scope, report: &report) else { return report }
            claimedUntil = until
        }
        var delivered = DeliveredWrites()
        let release = await drainClaimed(scope, shared: shared, claimedUntil: claimedUntil, report: &report, delivered: &delivered)
        // In a task of its own, which the drain's cancellation (a shutdown) does not reach: a
        // cancelled storage call would fail, leaving a delivered write stored, to be sent again.
        await removeDeliveredShielded(&delivered)
        if shared && release { await Task { await self.releaseShared(scope) }.value }
        return report
    }

    /// The loop of `drainScope(_:)` on a scope it holds; returns whether the claim is still to be
    /// released (not when renewing it failed). Delivered writes not removed yet are left in `delivered`.
    private func drainClaimed(
        _ scope: String, shared: Bool, claimedUntil: Date?, report: inout OutboxDrainReport, delivered: inout DeliveredWrites
    ) async -> Bool {
        var claimedUntil = claimedUntil
        while !Task.isCancelled {
            let now = environment.now()
            if let until = claimedUntil, until.timeIntervalSince(now) < claimLease.seconds / 2 {
                // Removed first: a renewal that fails releases the claim, and the next drainer
                // would read the delivered write back.
                await removeDelivered(&delivered)
                guard let renewed = await claimShared(scope, report: &report, renewing: true) else { return false }
                claimedUntil = renewed
            }
            // This process queued into the scope while draining it: another process may have too,
            // earlier; read it back again, so theirs go first.
            if shared, state.withLock({ $0.machine.needsReread(scope) }) {
                await removeDelivered(&delivered)
                guard await readBack(scope) else { return true }
            }
            let outcome: Outcome
            switch state.withLock({ $0.machine.nextStep(in: scope, now: now) }) {
            case .release:
                return true
            case .park(let entry, let letter):
                outcome = await park(entry, letter)
            case .resolve(let entry):
                outcome = await settleInDrain(entry)
            case .deliver(let entry):
                outcome = await deliver(entry, delivered: &delivered)
            }
            report.record(outcome)
            guard [.delivered, .parked, .discarded, .settled].contains(outcome) else { break }
        }
        return true
    }

    /// The writes a drain delivered and has not removed from the storage yet.
    struct DeliveredWrites: Sendable {
        /// To remove with the next write's attempt.
        var pending: [OutboxEntry] = []
        /// Whose removal failed: tried again on their own, never inside an attempt's save (a
        /// removal that keeps failing must not hold the next write back).
        var failed: [OutboxEntry] = []

        var isEmpty: Bool { pending.isEmpty && failed.isEmpty }
    }

    /// Removes the delivered writes not removed yet. One whose removal fails (logged once) is kept
    /// in `delivered.failed` for the drain's last pass, which runs even when the drain is
    /// cancelled; failing there too, it is sent again with its key after a relaunch.
    private func removeDelivered(_ delivered: inout DeliveredWrites) async {
        var failed: [OutboxEntry] = []
        for entry in delivered.pending {
            do {
                try await storage.removeDelivered(entry.id)
            } catch {
                metrics.storageFailures.increment()
                logger.error(
                    "outbox delivered a write but could not remove it; after a relaunch it is sent again with the same idempotency key",
                    metadata: metadata(for: entry, error: error))
                failed.append(entry)
            }
        }
        for entry in delivered.failed where (try? await storage.removeDelivered(entry.id)) == nil {
            failed.append(entry)
        }
        delivered = DeliveredWrites(pending: [], failed: failed)
    }

    /// `removeDelivered(_:)` in a task of its own, which the drain's cancellation (a shutdown) does
    /// not reach: a storage call made in a cancelled task fails.
    private func removeDeliveredShielded(_ delivered: inout DeliveredWrites) async {
        guard !delivered.isEmpty else { return }
        let left = delivered
        delivered = await Task {
            var left = left
            await self.removeDelivered(&left)
            return left
        }.value
    }

    /// Claims `scope` in the shared storage and reads it back, or renews the claim. Returns until
    /// when it holds it, or `nil` when another process drains it (its head waits; counted in
    /// `report`) or the storage failed (logged; the scope is held back).
    private func claimShared(_ scope: String, report: inout OutboxDrainReport, renewing: Bool = false) async -> Date? {
        let now = environment.now()
        let until = now.addingTimeInterval(claimLease.seconds)
        do {
            switch try await storage.claim(scope: scope, for: claimant, until: until, now: now) {
            case .claimed:
                break
            case .heldElsewhere(let claim):
                report.heldElsewhere += 1
                metrics.claimsHeldElsewhere.increment()
                let retry = min(claim.expiresAt, now.addingTimeInterval(Self.claimRetry.seconds))
                state.withLock { $0.machine.heldElsewhere(scope, until: retry) }
                logger.debug(
                    "outbox scope is being drained by another process; asked again at \(retry)",
                    metadata: ["outbox": "\(name)", "outbox.scope": "\(scope)", "outbox.claimant": "\(claim.claimant)"])
                changed()
                return nil
            }
            if renewing { return until }
            try await readBackOrThrow(scope)
            return until
        } catch {
            metrics.storageFailures.increment()
            logger.error("outbox could not claim a scope in its shared storage; it waits", metadata: [
                "outbox": "\(name)", "outbox.scope": "\(scope)", "error": "\(error)"])
            state.withLock { $0.machine.heldElsewhere(scope, until: holdBackDate()) }
            if renewing { await releaseShared(scope) }
            return nil
        }
    }

    /// Reads the claimed `scope` back from the shared storage into the machine.
    private func readBackOrThrow(_ scope: String) async throws {
        let stored = try await storage.entries(inScope: scope)
        let (left, joined) = state.withLock { state in
            let found = state.machine.reconcile(scope: scope, stored: stored)
            for entry in found.left { state.writeEvents.append(.delivered(entry)) }
            for entry in found.joined where entry.isPending { state.writeEvents.append(.queued(entry)) }
            return found
        }
        if !left.isEmpty || !joined.isEmpty {
            await reportWriteEvents()
            changed()
        }
    }

    /// `readBackOrThrow(_:)`; on a failure (logged) the scope is held back and `false` returned.
    private func readBack(_ scope: String) async -> Bool {
        do {
            try await readBackOrThrow(scope)
            return true
        } catch {
            metrics.storageFailures.increment()
            logger.error("outbox could not read a scope back from its shared storage; it waits", metadata: [
                "outbox": "\(name)", "outbox.scope": "\(scope)", "error": "\(error)"])
            state.withLock { $0.machine.heldElsewhere(scope, until: holdBackDate()) }
            return false
        }
    }

    /// Gives the scope's claim back (a failure is logged: the claim lapses by itself).
    private func releaseShared(_ scope: String) async {
        do {
            try await storage.release(scope: scope, for: claimant)
        } catch {
            logger.warning("outbox could not release its claim on a scope; it lapses at its date", metadata: [
                "outbox": "\(name)", "outbox.scope": "\(scope)", "error": "\(error)"])
        }
    }

    /// Tells the outbox that another process changed its storage (queued, delivered, retried or
    /// discarded a write): it reads the storage again, so the writes queued there show up in
    /// `entries()`, `status` and `observeWrites(_:)` (a live query's pending writes) and are
    /// drained here too, and the writes delivered there leave. Call it from the platform's
    /// cross-process signal: on Apple platforms a Darwin notification your app and its extensions
    /// post after they queue (`CFNotificationCenterGetDarwinNotifyCenter`), or when the app comes to
    /// the foreground. Scopes being drained here are left to their drain, which reads them back itself.
    /// - Throws: ``OutboxError/storage(_:)`` when the storage cannot be read.
    public func storageChangedElsewhere() async throws {
        try await ensureLoaded()
        let stored: [OutboxEntry]
        do {
            stored = try await storage.loadAll()
        } catch {
            metrics.storageFailures.increment()
            throw OutboxError.storage(error)
        }
        let found = state.withLock { state in
            let found = state.machine.refreshed(stored)
            for entry in found.left { state.writeEvents.append(.delivered(entry)) }
            for entry in found.joined where entry.isPending { state.writeEvents.append(.queued(entry)) }
            return found
        }
        if !found.left.isEmpty || !found.joined.isEmpty {
            await reportWriteEvents()
            changed()
            wake()
        }
    }

    /// Reads the shared storage for writes other processes queued, so their scopes are drained here
    /// too: only when the storage numbered writes past this process's own last one.
    func discoverWritesOfOtherProcesses() async throws {
        let stored: [OutboxEntry]
        do {
            if let issued = try await storage.lastSequenceIssued(), issued < state.withLock({ $0.machine.nextSequence }) { return }
            stored = try await storage.loadAll()
        } catch {
            metrics.storageFailures.increment()
            throw OutboxError.storage(error)
        }
        let joined = state.withLock { state in
            let joined = state.machine.discovered(stored)
            for entry in joined where entry.isPending { state.writeEvents.append(.queued(entry)) }
            return joined
        }
        if !joined.isEmpty {
            await reportWriteEvents()
            changed()
        }
    }

    /// A first save with an unknown outcome, read back in a drain: queued or absent (the drain goes
    /// on), or still unknown (held back by the retry policy's first delay).
    private func settleInDrain(_ entry: OutboxEntry) async -> Outcome {
        let readBack = await readBack(entry.id)
        defer { finishSave(of: entry.id) }
        if let error = readBack.error {
            metrics.storageFailures.increment()
            logger.error("outbox still cannot tell whether a write was saved", metadata: metadata(for: entry, error: error))
            state.withLock { $0.machine.heldBack(entry.id, until: holdBackDate()) }
            return .stopped
        }
        state.withLock { state in
            if let queued = state.machine.saveFinished(entry.id, readBack.outcome) { state.writeEvents.append(.queued(queued)) }
        }
        await reportWriteEvents()
        logger.notice(
            readBack.outcome == .absent
                ? "outbox settled a write whose save had an unknown outcome: it was not stored"
                : "outbox settled a write whose save had an unknown outcome: it was stored, and is queued",
            metadata: metadata(for: entry))
        changed()
        return .settled
    }

    /// One write (its attempt already counted), through its handler, with what the failure classes ask for.
    private func deliver(_ entry: OutboxEntry, delivered: inout DeliveredWrites) async -> Outcome {
        guard let registration = registration(for: entry.kind) else {
            // The machine saw the kind registered, and registrations are never removed.
            preconditionFailure("outbox: no registration for a kind the state machine knows")
        }
        var entry = entry
        var context = OutboxStateMachine.DeliveryContext(precondition: entry.baseVersion)
        var counted = true
        while true {
            if !counted {
                entry.attempts += 1
                state.withLock { $0.machine.updateDelivering(entry) }
            }
            counted = false
            guard await persistAttempt(entry, removing: &delivered) else { return holdBack(entry) }
            let result = await runHandler(registration.handler, Delivery(entry: entry, precondition: context.precondition))
            let error: any Error
            switch result {
            case .success(let receipt):
                return await complete(entry, receipt, delivered: &delivered)
            case .failure(let failure):
                // Only the drain's own cancellation stops it; a handler that throws
                // `CancellationError` by itself (a transport whose request was cancelled) failed,
                // and is classified, so it backs off instead of being sent again at once.
                if Task.isCancelled {
                    state.withLock { $0.machine.deferred(entry) }
                    return .stopped
                }
                error = failure
            }
            let classified = Self.classify(error, at: environment.now())
            state.withLock { $0.machine.lastFailure = classified.failure }
            metrics.failures(classified.failure.class).increment()
            let decision = OutboxStateMachine.decide(
                after: classified, entry: entry, context: &context, conflicts: registration.conflicts.kind,
                hasAuthRefresh: registration.refreshAuthorization != nil, retry: retryPolicy, retention: retention)
            switch decision {
            case .retryLater(let waiting):
                // Not saved (logged): the backoff still holds in this process; after a relaunch the
                // write is due at once, which is safe.
                _ = await persistAttempt(waiting, removing: &delivered)
                state.withLock { $0.machine.deferred(waiting) }
                changed()
                return .deferred
            case .park(let failed, let letter):
                return await park(failed, letter)
            case .refreshAuthorization(let failed):
                entry = failed
                do {
                    try await registration.refreshAuthorization?()
                } catch {
                    return await park(entry, DeadLetter(
                        reason: .unauthorized, detail: "the auth refresh failed: \(error)", status: classified.failure.status,
                        body: classified.body, parkedAt: classified.failure.at))
                }
            case .dropServerWins(let failed):
                let outcome = await remove(failed, because: .conflictServerWins)
                if case .serverWins(let refetch) = registration.conflicts, outcome == .discarded { await refetch(failed) }
                return outcome
            case .resend(let resent):
                entry = resent
            case .merge(let failed, let conflict):
                guard case .merge(let merge) = registration.conflicts else { return await park(failed, DeadLetter(
                    reason: .conflict, detail: conflict.description, status: conflict.status, body: conflict.body,
                    parkedAt: classified.failure.at)) }
                do {
                    let merged = try await merge(failed, conflict)
                    entry = failed
                    entry.payload = merged.payload
                    entry.baseVersion = merged.baseVersion
                    context.precondition = merged.baseVersion
                } catch {
                    return await park(failed, DeadLetter(
                        reason: .conflict, detail: "\(conflict.description); the merge failed: \(error)",
                        status: conflict.status, body: conflict.body, parkedAt: classified.failure.at))
                }
            }
        }
    }

    /// Runs one attempt's handler with the outbox's deadline (on its clock). Past the deadline the
    /// handler's task is cancelled and left behind (its result, if it ever comes, is ignored: the
    /// next attempt carries the same key), and the attempt fails with ``OutboxHandlerTimeoutError``.
    private func runHandler(_ handler: @escaping Handler, _ delivery: Delivery) async -> Result<Receipt, any Error> {
        guard let deadline = handlerDeadline else {
            do { return .success(try await handler(delivery)) } catch { return .failure(error) }
        }
        switch await raceAgainstDeadline(clock: environment.clock, duration: deadline, { try await handler(delivery) }) {
        case .value(let result): return result
        case .deadline: return .failure(OutboxHandlerTimeoutError(deadline: deadline))
        case .cancelled: return .failure(CancellationError())
        }
    }

    /// When a write held back by a storage failure is due again: after the retry policy's first delay.
    func holdBackDate() -> Date {
        environment.now().addingTimeInterval(retryPolicy.delay(afterAttempt: 1, requested: nil).seconds)
    }

    /// The storage failed while `entry` was being handled: it stays as it is, due again after the
    /// retry policy's first delay in this process (so neither `drain()` nor `run()` spins on a
    /// storage that keeps failing).
    func holdBack(_ entry: OutboxEntry) -> Outcome {
        state.withLock { $0.machine.heldBack(entry.id, until: holdBackDate()) }
        return .stopped
    }

    /// Saves `entry` and mirrors it; `false` (logged) when the storage failed.
    func persist(_ entry: OutboxEntry) async -> Bool {
        do {
            try await storage.save(entry)
            return true
        } catch {
            metrics.storageFailures.increment()
            logger.error("outbox could not save a write; it stays queued as it was", metadata: metadata(for: entry, error: error))
            return false
        }
    }

    /// Saves an attempt of `entry` (a count or a backoff) with ``OutboxStorage/saveAttempt(_:)``, a
    /// write a storage may commit without a flush (losing it to a power failure only sends the
    /// write once more), removing the delivered writes waiting for it (`delivered.pending`) in the
    /// same step; `false` (logged) when the storage failed, and then they are left to be removed later.
    func persistAttempt(_ entry: OutboxEntry, removing delivered: inout DeliveredWrites) async -> Bool {
        do {
            if delivered.pending.isEmpty {
                try await storage.saveAttempt(entry)
            } else {
                try await storage.saveAttempt(entry, removingDelivered: delivered.pending.map(\.id))
                delivered.pending.removeAll()
            }
            return true
        } catch {
            metrics.storageFailures.increment()
            logger.error("outbox could not save a write; it stays queued as it was", metadata: metadata(for: entry, error: error))
            return false
        }
    }

    /// Parks pending writes past the retention's age, even while offline; returns how many.
    func parkExpired() async -> Int {
        let expired = state.withLock { $0.machine.claimExpired(now: environment.now()) }
        var parked = 0
        for (entry, letter) in expired where await park(entry, letter) == .parked {
            parked += 1
        }
        return parked
    }

    func park(_ entry: OutboxEntry, _ letter: DeadLetter) async -> Outcome {
        var parked = entry
        parked.state = .parked(letter)
        guard await persist(parked) else { return holdBack(entry) }
        let revive = state.withLock { state in
            defer { state.writeEvents.append(.refused(parked)) }
            return state.machine.parked(parked)
        }
        await reportWriteEvents()
        metrics.parked(letter.reason).increment()
        var details = metadata(for: parked)
        details["outbox.reason"] = "\(letter.reason.rawValue)"
        details["outbox.detail"] = "\(letter.detail)"
        if let status = letter.status { details["http.status"] = "\(status)" }
        logger.warning("outbox write parked as a dead letter", metadata: details)
        settleAndNotify()
        // Its kind was registered while it was being parked: back to the queue.
        if let revive { Task { await self.revive([revive]) } }
        return .parked
    }

    private func complete(_ entry: OutboxEntry, _ receipt: Receipt, delivered: inout DeliveredWrites) async -> Outcome {
        // The writes queued behind it are rewritten (a server-assigned id) and saved *before* the
        // delivered write is removed: a crash in between sends the delivered write again with the
        // same key, the server answers it from its record, and the rewrite runs again. Removed
        // first, a crash would leave the later writes with an id nothing can rewrite any more.
        if let rewrite = receipt.rewrite {
            // A write queued behind it while it was delivered is rewritten too: wait for its save.
            for id in state.withLock({ $0.machine.saving(after: entry.id) }) {
                try? await waitForSave(of: id)
            }
            for var next in state.withLock({ $0.machine.queued(after: entry.id) }) {
                guard let payload = rewrite(next) else { continue }
                next.payload = payload
                guard await persist(next) else {
                    logger.error(
                        "outbox could not save a write rewritten after the one before it was delivered; that one is kept and sent again",
                        metadata: metadata(for: entry))
                    return holdBack(entry)
                }
                state.withLock { state in
                    state.machine.rewritten(next)
                    state.writeEvents.append(.queued(next))
                }
                await reportWriteEvents()
            }
        }
        // Removed with the next write's attempt when one follows in the scope; otherwise now, before
        // anyone hears it was delivered (`waitUntilDrained` returns, and the app may then exit).
        delivered.pending.append(entry)
        if state.withLock({ $0.machine.queued(after: entry.id).isEmpty }) { await removeDeliveredShielded(&delivered) }
        state.withLock { state in
            state.machine.delivered(entry.id)
            state.writeEvents.append(.delivered(entry))
        }
        await reportWriteEvents()
        metrics.delivered.increment()
        settleAndNotify()
        return .delivered
    }

    private func remove(_ entry: OutboxEntry, because why: OutboxMetrics.DiscardReason) async -> Outcome {
        do {
            try await storage.remove(entry.id)
        } catch {
            metrics.storageFailures.increment()
            logger.error("outbox could not remove a write", metadata: metadata(for: entry, error: error))
            return holdBack(entry)
        }
        state.withLock { state in
            state.machine.delivered(entry.id)
            state.writeEvents.append(.refused(entry))
        }
        await reportWriteEvents()
        metrics.discarded(why).increment()
        var details = metadata(for: entry)
        details["outbox.payload_bytes"] = "\(entry.payload.count)"
        logger.warning("outbox write dropped: the server's version wins the conflict", metadata: details)
        settleAndNotify()
        return .discarded
    }
}

/// An attempt whose handler ran past the outbox's `handlerDeadline`: it was cancelled, and the write
/// is retried after a backoff as one that got no answer (``OutboxFailure/Class/timedOut``).
public struct OutboxHandlerTimeoutError: Error, Sendable, CustomStringConvertible {
    /// The deadline it ran past.
    public var deadline: Duration
    public var description: String { "the write's handler ran past its deadline of \(deadline.formattedAge) and was cancelled" }
}

extension OutboxHandlerTimeoutError: TimeoutFailure {
    /// The handler's deadline (``deadline``), as every timeout error names its limit.
    public var timeout: Duration { deadline }
}

extension OutboxConflictPolicy {
    var kind: OutboxStateMachine.ConflictPolicyKind {
        switch self {
        case .manual: .manual
        case .serverWins: .serverWins
        case .clientWins: .clientWins
        case .merge: .merge
        }
    }
}
