import Foundation
import Testing
import Strata
@testable import StrataOutbox
import StrataTesting

@Suite("Backoff: the one backoff of retries, the outbox, repairs and reconnects")
struct BackoffTests {
    @Test("each wait grows by the multiplier up to the largest, and jitter takes off at most its fraction")
    func growsThenCaps() {
        let backoff = Backoff(initialDelay: .seconds(1), multiplier: 2, maxDelay: .seconds(10), jitter: 0.5)
        #expect((1...6).map { backoff.delay(beforeRetry: $0, random: 0) } == [1, 2, 4, 8, 10, 10].map { Duration.seconds($0) })
        #expect(backoff.delay(beforeRetry: 3, random: 1) == .seconds(2))
        #expect(backoff.delay(beforeRetry: 1_000, random: 0) == .seconds(10))
        #expect(backoff.delay(beforeRetry: 0, random: 0) == .seconds(1))
    }

    @Test("a retry policy and the outbox's compute their waits with it, and expose it")
    func policiesUseIt() {
        var retry = RetryPolicy(maxAttempts: 4, initialDelay: .milliseconds(100), multiplier: 3, maxDelay: .seconds(1), jitter: 0)
        #expect(retry.backoff == Backoff(initialDelay: .milliseconds(100), multiplier: 3, maxDelay: .seconds(1)))
        #expect((1...4).map(retry.delay(beforeRetry:)) == (1...4).map { retry.backoff.delay(beforeRetry: $0, random: 0) })
        retry.backoff = Backoff(initialDelay: .seconds(2), maxDelay: .seconds(2))
        #expect(retry.delay(beforeRetry: 3) == .seconds(2))

        let outbox = OutboxRetryPolicy(initialDelay: .seconds(1), multiplier: 2, maxDelay: .seconds(300), jitter: 0.5, random: { 0.5 })
        #expect(outbox.delay(afterAttempt: 3, requested: nil) == outbox.backoff.delay(beforeRetry: 3, random: 0.5))
        #expect(outbox.delay(afterAttempt: 3, requested: nil) == .seconds(3))
    }

    @Test("a tiered store's repairs double from the first delay to the largest")
    func tieredRepairs() {
        let store = TieredStore(memory: MemoryStore<String, Item>(), shared: MemoryStore<String, Item>(),
                                firstRetryDelay: .seconds(1), maxRetryDelay: .seconds(60))
        #expect(store.repairBackoff == Backoff(initialDelay: .seconds(1), multiplier: 2, maxDelay: .seconds(60)))
    }
}
