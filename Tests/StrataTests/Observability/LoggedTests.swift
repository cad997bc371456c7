import Foundation
import InMemoryTracing
import Logging
import MetricsTestKit
import Testing
import Tracing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("logged(to:level:failureLevel:)")
struct LoggedTests {
    let clock = ManualClock()

    @Test func logsStartEventsAndTheServedValueWithOriginAndTier() async throws {
        let capture = LogCapture(level: .trace)
        let sut = observedChain(clock: clock).logged(to: capture.logger)
        #expect(try await sut.load() == 42)

        let lines = capture.entries.map { $0.line(excluding: ["duration"]) }
        #expect(lines.first == "debug load started loader=fresh local → remote")
        #expect(lines.contains { $0.hasPrefix("info failed: fresh local: MemoryStore: nothing cached for 'k'") })
        #expect(lines.contains { $0.hasPrefix("info retrying: remote, attempt 2") })
        #expect(lines.last == "info served from remote age=0s loader=fresh local → remote origin=remote retries=1 tier=remote")
    }

    /// A cache in front of a remote that fills it: the first load leaves the first tier, the second
    /// is a hit.
    func cachingChain() -> some Loader<Void, Int> {
        let store = MemoryStore<String, Int>()
        let remote = LoaderSpy<Void, Int>(.success(42), name: "remote").originating(from: .remote)
        return store.loader(key: "k", freshness: .maxAge(.seconds(60))).named("fresh local")
            .fallingBack(to: remote.writingThrough(in: store, key: "k").named("remote"))
    }

    /// The owners' rule: a load its first tier answers is `debug`; one that left it is `level`.
    @Test func aLoadTheFirstTierAnswers_isADebugLine_andOneThatLeftIt_isAnInfoLine() async throws {
        let capture = LogCapture(level: .trace)
        let sut = cachingChain().logged(to: capture.logger).environment(clock.environment(logger: capture.logger))
        _ = try await sut.load()
        #expect(capture.entries.last?.level == .info)
        #expect(capture.entries.last?.message == "served from remote")

        let before = capture.entries.count
        _ = try await sut.load()
        let hit = capture.entries.dropFirst(before).map { $0.line(excluding: ["duration"]) }
        #expect(hit == [
            "debug load started loader=fresh local → remote",
            "debug served: memory via fresh local, age 0s event=served loader=fresh local → remote",
            "debug served from memory age=0s loader=fresh local → remote origin=memory tier=fresh local",
        ])
    }

    @Test func atInfo_aHitWritesNothing_andAMissSaysWhy() async throws {
        let capture = LogCapture(level: .info)
        let sut = cachingChain().logged(to: capture.logger).environment(clock.environment(logger: capture.logger))
        _ = try await sut.load()
        let miss = capture.entries.count
        #expect(miss > 0)
        #expect(capture.entries.allSatisfy { $0.level >= .info })
        _ = try await sut.load()
        #expect(capture.entries.count == miss)
    }

    @Test(arguments: [Logger.Level.trace, .debug])
    func aLevelBelowDebug_isTheLevelOfHitsToo(level: Logger.Level) async throws {
        let capture = LogCapture(level: .trace)
        let sut = cachingChain().logged(to: capture.logger, level: level).environment(clock.environment(logger: capture.logger))
        _ = try await sut.load()
        _ = try await sut.load()
        #expect(capture.entries.last?.message == "served from memory")
        #expect(capture.entries.last?.level == level)
    }

    /// A handler that reads its level from a setting shared with the app, as a global override does.
    struct SharedLevelHandler: LogHandler {
        let setting: Locked<Logger.Level>
        let lines: Locked<[String]>
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level {
            get { setting.withLock { $0 } }
            set { setting.withLock { $0 = newValue } }
        }
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { lines.withLock { $0.append("\(event.message)") } }
    }

    @Test func aLevelThatCanChange_isReadAtEveryLoad_andAStreamLoggersOnce() async throws {
        let setting = Locked(Logger.Level.critical)
        let lines = Locked<[String]>([])
        let logger = Logger(label: "shared") { _ in SharedLevelHandler(setting: setting, lines: lines) }
        #expect(logger.fixedLevel == nil)
        let sut = cachingChain().logged(to: logger).environment(clock.environment())
        _ = try await sut.load()
        #expect(lines.withLock { $0 }.isEmpty)
        setting.withLock { $0 = .debug }
        _ = try await sut.load()
        #expect(lines.withLock { $0 }.last == "served from memory")

        var stream = Logger(label: "stream")
        stream.logLevel = .warning
        #expect(stream.fixedLevel == .warning)
        #expect(Logger(label: "none") { _ in SwiftLogNoOpLogHandler() }.fixedLevel != nil)
        #expect(LogCapture().logger.fixedLevel == nil)
    }

    @Test func leftFirstTier_isTrueForEveryEventButServedAndCoalesced() {
        func report(_ events: [LoadEvent]) -> LoadReport {
            LoadReport(loader: "x", outcome: .served(Provenance(origin: .memory, tier: "x")), duration: .zero, events: events)
        }
        let served = LoadEvent.served(Provenance(origin: .memory, tier: "x"))
        #expect(!report([served]).leftFirstTier)
        #expect(!report([.coalesced(tier: "x"), served]).leftFirstTier)
        #expect(report([.tierFailed(tier: "x", error: TestError()), served]).leftFirstTier)
        #expect(report([.retrying(tier: "x", attempt: 2, delay: .zero, error: TestError()), served]).leftFirstTier)
        #expect(report([served, .cacheWritten(store: "s", key: "k")]).leftFirstTier)
        #expect(report([served, .revalidated(store: "s", key: "k")]).leftFirstTier)
    }

    @Test func withoutALoggerItWritesToTheChainsEnvironmentLogger() async throws {
        let capture = LogCapture(level: .trace)
        let other = LogCapture(level: .trace)
        let sut = observedChain(clock: clock).logged().environment(\.logger, capture.logger)
        #expect(try await sut.load() == 42)
        #expect(capture.entries.last?.message == "served from remote")
        #expect("\(sut)".hasPrefix("logged(info)"))

        // Read at each load: the same chain under another environment writes there, not to the first.
        let written = capture.entries.count
        let inner = observedChain(clock: clock).logged()
        _ = try await inner.environment(\.logger, other.logger).load()
        #expect(other.entries.last?.message == "served from remote")
        #expect(capture.entries.count == written)
    }

    @Test func secretsInErrorsNeverReachTheLog() async throws {
        let capture = LogCapture(level: .trace)
        let url = URL(string: "https://user:hunter2@api.example.com/feed?token=abc123")!
        let failure = HTTPError.transport(url: url, reason: "Authorization: Bearer abc123 rejected", underlying: nil)
        let sut = StubLoader<Void, Int>(.failure(failure), name: "GET \(url.absoluteString)").logged(to: capture.logger)
        await #expect(throws: HTTPError.self) { try await sut.load() }

        let everything = capture.entries.map { $0.line() }.joined(separator: "\n")
        #expect(!everything.contains("hunter2"))
        #expect(!everything.contains("abc123"))
        #expect(capture.entries.last?.level == .error)
        #expect(capture.entries.last?.message == "load failed")
    }

    @Test func atADisabledLevelItIsAPlainCall() async throws {
        let capture = LogCapture(level: .critical)
        let base = LoaderSpy<Void, Int>(.failure(TestError()))
        let sut = base.logged(to: capture.logger)
        await #expect(throws: TestError.self) { try await sut.load() }
        #expect(capture.entries.isEmpty)
        #expect(base.loadCount == 1)
    }

    @Test func breakerChangesAreWarnings() async throws {
        let capture = LogCapture(level: .warning)
        let breaker = CircuitBreaker(name: "api", policy: CircuitBreakerPolicy(minimumThroughput: 1), clock: clock)
        let sut = StubLoader<Void, Int>(.failure(TestError())).guarded(by: breaker).logged(to: capture.logger)
        _ = try? await sut.load()
        #expect(capture.entries.map(\.message) == ["circuit api: closed → open", "load failed"])
    }
}

@Suite("Redaction.redactingSecrets(in:)")
struct RedactionTests {
    @Test(arguments: [
        ("GET https://user:pass@host.example/a", "GET https://***@host.example/a"),
        ("https://host.example/a?token=abc&page=2", "https://host.example/a?token=***&page=***"),
        ("Authorization: Bearer abc.def", "Authorization: ***"),
        ("headers [\"Cookie\": \"session=1\"]", "headers [\"Cookie\": \"***\"]"),
        ("sent bearer xyz123 to host", "sent Bearer *** to host"),
        ("x-api-key=k123", "x-api-key=***"),
        ("nothing secret here", "nothing secret here"),
        ("postgres://strata:pw@127.0.0.1:5432/db", "postgres://***@127.0.0.1:5432/db"),
        // Path segments shaped like secrets.
        ("GET https://api.example.com/v1/reset/sk_live_4eC39HqLyjWDarjtT1zdp7dc/confirm", "GET https://api.example.com/v1/reset/***/confirm"),
        ("https://hooks.slack.com/services/xoxb-2444-ab12cd34ef/x", "https://hooks.slack.com/services/***/x"),
        ("https://h.example/files/a8Fk29dLq0ZrT7xW3mNb5vYc1Qs/raw", "https://h.example/files/***/raw"),
        ("https://h.example/s/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "https://h.example/s/***"),
        ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl in text", "token *** in text"),
        ("https://s3.example/AKIAIOSFODNN7EXAMPLE/obj", "https://s3.example/***/obj"),
        // Identifiers are kept.
        ("https://api.example.com/users/550e8400-e29b-41d4-a716-446655440000/posts/123456789012345678901234",
         "https://api.example.com/users/550e8400-e29b-41d4-a716-446655440000/posts/123456789012345678901234"),
        ("https://blog.example/how-to-cache-feeds-offline-in-2026", "https://blog.example/how-to-cache-feeds-offline-in-2026"),
        // Found by fuzzing: a backslash before a line break does not carry a value into the next line.
        ("{\"password\": \"first\\\n\"password\": \"second\"", "{\"password\": \"***\n\"password\": \"***\""),
        ("{\\\"password\\\":\\\"first\\\n\\\"token\\\":\\\"second\\\"", "{\\\"password\\\":\\\"***\n\\\"token\\\":\\\"***\\\""),
    ])
    func redacts(input: String, expected: String) {
        #expect(Redaction.redactingSecrets(in: input) == expected)
    }

    @Test("redacting a path twice gives what redacting it once did (found by fuzzing)", arguments: [
        "A.eyJiJ9.eyJzdWI.yJiJ9.eyJzdWIapi_~xI2n.nP1[yJiJ9.eyJzdWIapi_~xI2n.nP1clbmFET hl",
        #"s_%7C_17C?e42ookieF292c6912E780n='bSet-Set-Cookie: {s l\nxcdue178B4aDefaultIndicesCookie: {s l\nxDefaultIndices-="#,
    ])
    func redactingAPathTwice_isRedactingItOnce(path: String) {
        let once = Redaction.redactingSecrets(inPath: path)
        let twice = Redaction.redactingSecrets(inPath: once)
        #expect(twice == once, "once: \(once.debugDescription), twice: \(twice.debugDescription)")
    }

    @Test("a URL whose path Foundation read leniently (a `[`) is redacted, never a trap (found by fuzzing)")
    func aLenientlyReadPath_isRedacted() throws {
        let url = try #require(URL(string: "Posres://urefve/s:/[uerify-fusho99lusho99l/"))
        let shown = Redaction.redactedString(for: url)
        #expect(!shown.contains("fusho99lusho99l"), "\(shown)")
        #expect(shown.hasPrefix("posres://urefve/s:/") || shown.hasPrefix("Posres://urefve/s:/"), "\(shown)")
    }
}
