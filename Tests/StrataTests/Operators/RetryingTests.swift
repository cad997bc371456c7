import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("retrying(_:)")
struct RetryingTests {
    let clock = ManualClock()
    let url = URL(string: "https://api.example.com/feed")!

    func status(_ code: Int, retryAfter: String? = nil) -> HTTPError {
        .status(code: code, url: url, headerFields: fields(retryAfter.map { ["Retry-After": $0] } ?? [:]), body: Data())
    }

    var transport: HTTPError { .transport(url: url, reason: "connection refused", underlying: nil) }

    /// Runs `load` in a task, advancing the clock by each wait the loader asks for, until it ends.
    func drive<T: Sendable>(_ load: @escaping @Sendable () async throws -> T, waits: [Duration]) async throws -> T {
        let task = Task { try await load() }
        for wait in waits {
            try await clock.waitForSleepers(count: 1)
            clock.advance(by: wait)
        }
        return try await task.value
    }

    @Test func succeedsWithoutWaitingWhenTheFirstAttemptSucceeds() async throws {
        let base = LoaderSpy<Void, Int>(.success(1))
        #expect(try await base.retrying(.constant(attempts: 3, delay: .seconds(1))).environment(\.clock, clock).load() == 1)
        #expect(base.loadCount == 1)
        #expect(clock.sleeperCount == 0)
    }

    @Test func retriesTransientFailuresAfterEachDelay() async throws {
        let base = LoaderSpy<Void, Int>(.failure(transport), .failure(status(503)), .success(3))
        let sut = base.retrying(.constant(attempts: 3, delay: .seconds(2))).environment(\.clock, clock)

        let value = try await drive({ try await sut.load() }, waits: [.seconds(2), .seconds(2)])

        #expect(value == 3)
        #expect(base.loadCount == 3)
    }

    @Test func doesNotRetryBeforeTheDelayHasPassed() async throws {
        let base = LoaderSpy<Void, Int>(.failure(transport), .success(2))
        let sut = base.retrying(.constant(attempts: 2, delay: .seconds(5))).environment(\.clock, clock)
        let task = Task { try await sut.load() }

        try await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(4))
        // Still waiting: `advance` wakes a due sleeper before it returns, so a shorter wait fails here.
        #expect(clock.sleeperCount == 1, "no retry before the delay")
        clock.advance(by: .seconds(1))

        #expect(try await task.value == 2)
        #expect(base.loadCount == 2)
    }

    @Test func afterTheLastAttempt_throwsTheLastErrorUnchanged() async throws {
        let base = LoaderSpy<Void, Int>(.failure(status(500)), .failure(status(502)))
        let sut = base.retrying(.constant(attempts: 2, delay: .seconds(1))).environment(\.clock, clock)

        await #expect {
            try await drive({ try await sut.load() }, waits: [.seconds(1)])
        } throws: { ($0 as? HTTPError)?.statusCode == 502 }
        #expect(base.loadCount == 2)
    }

    @Test(arguments: [400, 401, 403, 404, 409, 422])
    func neverRetriesOtherClientErrors(code: Int) async throws {
        let base = LoaderSpy<Void, Int>(.failure(status(code)))
        await #expect(throws: HTTPError.self) {
            try await base.retrying(.constant(attempts: 5, delay: .seconds(1))).environment(\.clock, clock).load()
        }
        #expect(base.loadCount == 1)
    }

    @Test(arguments: [408, 429, 500, 502, 503, 504])
    func retriesTimeoutsThrottlingAndServerErrors(code: Int) {
        #expect(RetryPolicy.isTransient(status(code)))
    }

    @Test func neverRetriesDecodingErrorsCacheMissesOrCancellation() {
        #expect(!RetryPolicy.isTransient(HTTPError.decoding(url: url, type: "X", underlying: TestError())))
        #expect(!RetryPolicy.isTransient(CacheLoadError.empty(store: "s", key: "k")))
        #expect(!RetryPolicy.isTransient(CancellationError()))
        #expect(!RetryPolicy.isTransient(TestError()))
    }

    @Test func customPredicateDecidesWhatIsRetried() async throws {
        var policy = RetryPolicy.constant(attempts: 2, delay: .seconds(1))
        policy.shouldRetry = { $0 is TestError }
        let base = LoaderSpy<Void, Int>(.failure(TestError()), .success(9))
        let sut = base.retrying(policy).environment(\.clock, clock)
        #expect(try await drive({ try await sut.load() }, waits: [.seconds(1)]) == 9)
    }

    @Test func backoffGrowsExponentiallyUpToTheCap() {
        let policy = RetryPolicy(maxAttempts: 10, initialDelay: .milliseconds(100), multiplier: 2, maxDelay: .milliseconds(500), jitter: 0)
        #expect((1...5).map { policy.delay(beforeRetry: $0) } == [
            .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(500), .milliseconds(500),
        ])
    }

    @Test(arguments: [0.0, 0.5, 0.999])
    func jitterShortensTheWaitWithinItsFraction(random: Double) {
        let policy = RetryPolicy(maxAttempts: 3, initialDelay: .seconds(10), jitter: 0.2, random: { random })
        let delay = policy.delay(beforeRetry: 1)
        #expect(delay <= .seconds(10))
        #expect(delay >= .seconds(8))
        #expect(delay == .seconds(10 * (1 - 0.2 * random)))
    }

    @Test func retryAfterSeconds_isWaitedWhenLongerThanTheBackoff() async throws {
        let base = LoaderSpy<Void, Int>(.failure(status(503, retryAfter: "7")), .success(1))
        let sut = base.retrying(.constant(attempts: 2, delay: .seconds(1))).environment(\.clock, clock)
        let task = Task { try await sut.load() }

        try await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(6))
        #expect(clock.sleeperCount == 1, "the server asked for 7 seconds")
        clock.advance(by: .seconds(1))

        #expect(try await task.value == 1)
    }

    @Test func retryAfterHTTPDate_isMeasuredFromNow() async throws {
        let base = LoaderSpy<Void, Int>(.failure(status(429, retryAfter: "Thu, 01 Jan 2026 00:00:30 GMT")), .success(1))
        // The clock's wall time starts at 2026-01-01T00:00:00Z, so the date is 30 s away.
        let sut = base.retrying(.constant(attempts: 2, delay: .seconds(1))).environment(LoadEnvironment(now: clock.wallClock, clock: clock))
        #expect(try await drive({ try await sut.load() }, waits: [.seconds(30)]) == 1)
    }

    @Test func retryAfterLongerThanTheLimit_endsTheRetriesAtOnce() async throws {
        let base = LoaderSpy<Void, Int>(.failure(status(503, retryAfter: "3600")), .success(1))
        var policy = RetryPolicy.constant(attempts: 3, delay: .seconds(1))
        policy.maxRetryAfter = .seconds(60)

        await #expect { try await base.retrying(policy).environment(\.clock, clock).load() } throws: { ($0 as? HTTPError)?.statusCode == 503 }
        #expect(base.loadCount == 1)
    }

    @Test func cancellationDuringTheWait_throwsCancellationAndStops() async throws {
        let base = LoaderSpy<Void, Int>(.failure(transport), .success(1))
        let sut = base.retrying(.constant(attempts: 3, delay: .seconds(10))).environment(\.clock, clock)
        let task = Task { try await sut.load() }
        try await clock.waitForSleepers(count: 1)

        task.cancel()

        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(base.loadCount == 1)
    }

    @Test func eachRetryIsRecordedWithItsAttemptAndDelay() async throws {
        let base = LoaderSpy<Void, Int>(.failure(transport), .success(1), name: "remote")
        let sut = base.retrying(.constant(attempts: 2, delay: .seconds(3))).environment(\.clock, clock)

        let served = try await drive({ try await sut.loadServed() }, waits: [.seconds(3)])

        guard case .retrying(let tier, let attempt, let delay, _) = served.events.first else {
            Issue.record("expected a retry event, got \(served.events)")
            return
        }
        #expect(tier == "remote" && attempt == 2 && delay == .seconds(3))
    }

    @Test func formatsSubSecondWaits() {
        #expect(Duration.milliseconds(250).formattedAge == "250ms")
        #expect(Duration.zero.formattedAge == "0s")
        #expect(Duration.seconds(-5).formattedAge == "0s")
    }
}
