import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
@testable import StrataQueries
import StrataTesting

/// What an inspector reads of a client: every query's state, chain and value (secrets redacted),
/// the timeline of loads, and its actions (force an error, remove).
@Suite("QueryClient: inspection", .timeLimit(.minutes(1)))
struct QueryInspectionTests {
    let clock = ManualClock()

    struct Account: Codable, Equatable, Sendable {
        var name: String
        var apiKey: String
        var session: Session
        struct Session: Codable, Equatable, Sendable {
            var accessToken: String
            var expires: Int
        }
    }

    static let account = Account(name: "ada", apiKey: "k-123", session: .init(accessToken: "t-456", expires: 60))

    @Test func inspect_showsStateChainAndValue_withSecretsRedacted() async throws {
        let remote = LoaderSpy<Void, Account>(.success(Self.account), .success(Account(name: "ada l.", apiKey: "k-123", session: .init(accessToken: "t-789", expires: 60))))
        let queries = QueryClient(environment: clock.environment())
        let query = queries.query(["account"], tags: ["me"], policy: QueryPolicy(staleAfter: .seconds(60)), chain: remote.originating(from: .remote).named("api"))
        #expect(queries.inspect().map(\.state) == [.inactive])
        // The previous value is kept for an inspector's diff only while one follows.
        // Subscribed here, before the task starts: the client records from this line on.
        let changes = queries.changes()
        let inspector = Task { for await _ in changes {} }
        defer { inspector.cancel() }

        let observing = Task { for await _ in query.snapshots() {} }
        defer { observing.cancel() }
        try await query.waitForObservers(1)
        try await query.settled()
        var shown = try #require(queries.inspect().first)
        #expect(shown.key == "account")
        #expect(shown.tags == ["me"])
        #expect(shown.state == .fresh)
        #expect(shown.observers == 1)
        #expect(shown.tier == "api")
        #expect(shown.chain.contains("named \"api\""))
        let json = try #require(shown.valueJSON)
        #expect(json.contains("\"name\" : \"ada\""))
        #expect(json.contains("\"apiKey\" : \"***\""))
        #expect(json.contains("\"accessToken\" : \"***\""))
        #expect(!json.contains("k-123") && !json.contains("t-456"))
        #expect(shown.previousValueJSON == nil)

        clock.advance(by: .seconds(61))
        #expect(queries.inspect().first?.state == .stale)
        query.refetch()
        try await query.settled()
        shown = try #require(queries.inspect().first)
        #expect(shown.valueJSON?.contains("ada l.") == true)
        #expect(shown.previousValueJSON?.contains("\"name\" : \"ada\"") == true)
        #expect(shown.previousValueJSON?.contains("t-456") == false)
    }

    @Test func theTimeline_recordsLoadsOnlyOnceAnInspectorFollows() async throws {
        let remote = LoaderSpy<Void, Int>(.success(1), .success(2), .success(3))
        let queries = QueryClient(environment: clock.environment())
        let query = queries.query(["n"], chain: remote.originating(from: .remote).named("api"))
        let observing = Task { for await _ in query.snapshots() {} }
        defer { observing.cancel() }
        try await query.waitForObservers(1)
        try await query.settled()
        #expect(queries.recentLoads.isEmpty, "nothing is recorded for an app nobody inspects")

        let changes = queries.changes()
        query.refetch()
        try await query.settled()
        query.failNextLoad(InjectedFailure("the inspector's button"))
        query.refetch()
        try await query.settled()
        let loads = queries.recentLoads
        #expect(loads.map(\.reason) == ["refetch", "refetch"])
        #expect(loads.map(\.outcome) == [.value, .failed])
        #expect(loads.first?.tier == "api")
        #expect(loads.last?.error?.contains("the inspector's button") == true)
        #expect(query.current.value == 2, "a failed refresh keeps the value")
        #expect(query.current.lastError?.description.contains("injected by the inspector") == true)
        #expect(remote.loadCount == 2, "the injected failure never reached the chain")
        var iterator = changes.makeAsyncIterator()
        #expect(await iterator.next() != nil)
    }

    @Test func remove_forgetsTheQuery_andTheNextCallMakesANewOne() async throws {
        let queries = QueryClient(environment: clock.environment())
        let first = queries.query(["n"], chain: StubLoader<Void, Int>(.success(1)))
        queries.remove(["n"])
        #expect(queries.keys.isEmpty)
        let second = queries.query(["n"], chain: StubLoader<Void, Int>(.success(1)))
        #expect(first !== second)
    }

    @Test func theTimeline_keepsTheLast200Loads_oldestFirst_andARetryIsTheSameRecord() {
        var feed = InspectionFeed()
        let query: UInt64 = 1   // a query's serial number
        let at = Date(timeIntervalSince1970: 0)
        for flight in 1...250 {
            feed.record(.loadStarted(key: ["k"], query: query, flight: flight, reason: .refetch, at: at.addingTimeInterval(Double(flight))))
            feed.record(.loadEnded(key: ["k"], query: query, flight: flight, outcome: .value, tier: "t", error: nil, at: at.addingTimeInterval(Double(flight))))
        }
        #expect(feed.loads.count == InspectionFeed.capacity)
        #expect(feed.loads.first?.startedAt == at.addingTimeInterval(51))
        #expect(feed.loads.last?.startedAt == at.addingTimeInterval(250))
        #expect(feed.loads.allSatisfy { $0.outcome == .value })

        // A load that fails and is tried again stays one record, running again, its end forgotten.
        feed.record(.loadStarted(key: ["k"], query: query, flight: 251, reason: .refetch, at: at))
        feed.record(.loadEnded(key: ["k"], query: query, flight: 251, outcome: .failed, tier: nil, error: "down", at: at))
        feed.record(.loadStarted(key: ["k"], query: query, flight: 251, reason: .refetch, at: at))
        #expect(feed.loads.last?.outcome == .running)
        #expect(feed.loads.last?.error == nil && feed.loads.last?.endedAt == nil)
        // The same flight number of another query (a key made again) is a new record.
        let other: UInt64 = 2
        feed.record(.loadStarted(key: ["k"], query: other, flight: 251, reason: .firstObserver, at: at))
        #expect(feed.loads.suffix(2).map(\.reason) == ["refetch", "first observer"])
    }

}
