import Foundation
import InMemoryTracing
import Logging
import MetricsTestKit
import Testing
import Tracing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// Collects every report a chain hands it.
private final class ReportLog: LoadTracker {
    let reports = Locked<[LoadReport]>([])
    func track(_ report: LoadReport) { reports.withLock { $0.append(report) } }
    var all: [LoadReport] { reports.withLock { $0 } }
}

private struct TransformFailed: Error, Equatable {}

/// A decorator written as an app would write one: only `load(_:)`, so its base runs with the
/// context bound as the task's (and starts its own hit path from there).
private struct OnlyLoad<Base: Loader>: Loader {
    let base: Base
    func load(_ input: Base.Input) async throws -> Base.Output { try await base.load(input) }
}

@Suite("loadImmediately(_:in:): the hit path")
struct LoadImmediatelyTests {
    let clock = ManualClock()

    /// A memory store holding `itemA`, stored `age` before the clock's now.
    func memory(holdingItemAged age: Duration = .zero) async throws -> MemoryStore<String, Item> {
        let store = MemoryStore<String, Item>()
        try await store.insert(itemA, for: "feed", storedAt: clock.date.addingTimeInterval(-age.seconds))
        return store
    }

    /// The README's shape: fresh memory → remote (write-through) → any-age memory.
    func chain(_ store: MemoryStore<String, Item>, remote: LoaderSpy<Void, Item>) -> some Loader<Void, Item> {
        store.loader(key: "feed", freshness: .maxAge(.seconds(60))).named("fresh local")
            .fallingBack(to: remote.originating(from: .remote).writingThrough(in: store, key: "feed").named("remote"))
            .fallingBack(to: store.loader(key: "feed").named("stale local"))
    }

    @Test func aFreshMemoryHit_answersThroughEveryPassThroughOperator_withoutTheRemote() async throws {
        let store = try await memory(holdingItemAged: .seconds(30))
        let remote = LoaderSpy<Void, Item>(.success(itemB))
        let sut = chain(store, remote: remote)
            .map { $0 }.mapError { $0 }.logged().coalesced().eraseToAnyLoader()
            .environment(clock.environment())

        #expect(sut.loadImmediately(()) == itemA)
        let served = try #require(sut.loadServedImmediately(()))
        #expect(served.provenance.origin == .memory)
        #expect(served.provenance.tier == "fresh local")
        #expect(served.provenance.age == .seconds(30))
        #expect(try await sut.load() == itemA)
        #expect(remote.loadCount == 0)
    }

    @Test func anEntryThePolicyRefuses_hasNoImmediateAnswer_andTheLoadRuns() async throws {
        let store = try await memory(holdingItemAged: .seconds(90))
        let remote = LoaderSpy<Void, Item>(.success(itemB))
        let sut = chain(store, remote: remote).environment(clock.environment())

        #expect(sut.loadImmediately(()) == nil)
        #expect(remote.loadCount == 0)
        let served = try await sut.loadServed()
        #expect(served.value == itemB)
        #expect(served.provenance.tier == "remote")
        #expect(remote.loadCount == 1)
        // The write-through made the store fresh again: the next hit is immediate.
        #expect(sut.loadImmediately(()) == itemB)
    }

    @Test func anAttemptWithoutAnAnswer_leavesNoTrace() async throws {
        let store = try await memory(holdingItemAged: .seconds(90))
        let remote = LoaderSpy<Void, Item>(.success(itemB))
        let reports = ReportLog()
        let metrics = TestMetrics()
        let logs = LogCapture()
        let sut = chain(store, remote: remote)
            .logged(to: logs.logger).tracked(by: reports).metered("feed", metricsFactory: metrics)
            .environment(clock.environment())

        #expect(sut.loadImmediately(()) == nil)
        #expect(reports.all.isEmpty)
        #expect(logs.entries.isEmpty)
        #expect(metrics.counters.allSatisfy { $0.totalValue == 0 })
        #expect(metrics.timers.allSatisfy { $0.values.isEmpty })

        _ = try await sut.load()
        // One report, of the load: the refused attempt before it recorded nothing.
        #expect(reports.all.count == 1)
        #expect(reports.all.first?.events.filter { if case .served = $0 { true } else { false } }.count == 1)
        #expect(try metrics.expectCounter("strata_loads_total", [("loader", "feed"), ("outcome", "served")]).totalValue == 1)
    }

    @Test func observersRecordAnImmediateAnswer_asALoadItsFirstTierServed() async throws {
        let store = try await memory(holdingItemAged: .seconds(30))
        let reports = ReportLog()
        let metrics = TestMetrics()
        let logs = LogCapture(level: .debug)
        let tracer = InMemoryTracer()
        let sut = chain(store, remote: LoaderSpy(.success(itemB)))
            .logged(to: logs.logger).tracked(by: reports).metered("feed", metricsFactory: metrics).traced("load feed", tracer: tracer)
            .environment(clock.environment())

        #expect(sut.loadImmediately(()) == itemA)

        let report = try #require(reports.all.first)
        #expect(reports.all.count == 1)
        #expect(report.isCacheHit && !report.leftFirstTier)
        guard case .served(let provenance) = report.outcome else { Issue.record("not served: \(report.outcome)"); return }
        #expect(provenance.tier == "fresh local" && provenance.age == .seconds(30))

        #expect(try metrics.expectCounter("strata_loads_total", [("loader", "feed"), ("outcome", "served")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_cache_hits_total", [("loader", "feed")]).totalValue == 1)

        // At `debug`: the start, the tier's event, then the line that says where the value came from.
        #expect(logs.entries.map(\.message) == ["load started", "served: memory via fresh local, age 30s", "served from memory"])
        #expect(logs.entries.allSatisfy { $0.level == .debug })

        let span = try #require(tracer.finishedSpans.first)
        #expect(tracer.finishedSpans.count == 1)
        #expect(span.operationName == "load feed")
        #expect(span.attributes["strata.tier"]?.toSpanAttribute() == "fresh local")
        #expect(span.attributes["strata.outcome"]?.toSpanAttribute() == "served")
        #expect(span.events.map(\.name) == ["served"])
    }

    @Test func aLoadThatAnswersImmediately_isReportedOnce() async throws {
        let store = try await memory()
        let reports = ReportLog()
        let sut = chain(store, remote: LoaderSpy(.success(itemB))).tracked(by: reports).environment(clock.environment())
        let served = try await sut.loadServed()
        #expect(served.value == itemA)
        #expect(served.events.count == 1)
        #expect(reports.all.count == 1)
    }

    @Test func aMapThatThrowsOnTheImmediateValue_fallsBackToTheLoad_whichFailsWithItsError() async throws {
        let store = try await memory()
        let reports = ReportLog()
        let sut = store.loader(key: "feed").named("local")
            .map { (_: Item) -> Item in throw TransformFailed() }
            .tracked(by: reports)
        #expect(sut.loadImmediately(()) == nil)
        #expect(reports.all.isEmpty)
        await #expect(throws: TransformFailed.self) { try await sut.load() }
        #expect(reports.all.count == 1)
        guard case .failed = reports.all.first?.outcome else { Issue.record("the load's report is missing"); return }
    }

    @Test func observersInsideAMapThatThrows_reportNothingForTheAttempt() async throws {
        let store = try await memory()
        let reports = ReportLog()
        let metrics = TestMetrics()
        let logs = LogCapture(level: .debug)
        let tracer = InMemoryTracer()
        let sut = store.loader(key: "feed").named("local")
            .logged(to: logs.logger).tracked(by: reports).metered("feed", metricsFactory: metrics).traced("inner", tracer: tracer)
            .map { (_: Item) -> Item in throw TransformFailed() }
        #expect(sut.loadImmediately(()) == nil)
        #expect(reports.all.isEmpty)
        #expect(logs.entries.isEmpty)
        #expect(metrics.counters.allSatisfy { $0.totalValue == 0 })
        #expect(tracer.finishedSpans.isEmpty)

        await #expect(throws: TransformFailed.self) { try await sut.load() }
        // The load reports once: the hit it made, before the transform threw.
        #expect(reports.all.count == 1)
        #expect(tracer.finishedSpans.count == 1)
        #expect(try metrics.expectCounter("strata_loads_total", [("loader", "feed"), ("outcome", "served")]).totalValue == 1)
    }

    @Test func anAttemptUnderTheTasksRecorder_leavesNoTraceEither() async throws {
        let store = try await memory()
        let reports = ReportLog()
        let failingMap = store.loader(key: "feed").named("local").map { (_: Item) -> Item in throw TransformFailed() }
        // `OnlyLoad` binds the tracked load's recorder as the task's: the inner chain's own hit
        // path runs under it and must hold its events back.
        let sut = OnlyLoad(base: failingMap).tracked(by: reports)
        await #expect(throws: TransformFailed.self) { try await sut.load() }
        let events = try #require(reports.all.first?.events)
        #expect(events.count == 1, "the store's hit, once: \(events)")
    }

    @Test(arguments: ["retrying", "timingOut", "guarded", "writingThrough", "aLoaderOfYourOwn", "closureAnyLoader"])
    func anOperatorWhoseWorkSuspends_hasNoImmediateAnswer(_ operator: String) async throws {
        let store = try await memory()
        let hit = store.loader(key: "feed")
        let sut: AnyLoader<Void, Item> = switch `operator` {
        case "retrying": hit.retrying(.constant(attempts: 2, delay: .zero)).eraseToAnyLoader()
        case "timingOut": hit.timingOut(after: .seconds(1)).eraseToAnyLoader()
        case "guarded": hit.guarded(by: CircuitBreaker(name: "b")).eraseToAnyLoader()
        case "writingThrough": hit.writingThrough(in: MemoryStore<String, Item>(), key: "copy").eraseToAnyLoader()
        case "aLoaderOfYourOwn": ClosureLoader("mine") { try await hit.load() }.eraseToAnyLoader()
        default: AnyLoader("closure") { try await hit.load() }
        }
        #expect(sut.loadImmediately(()) == nil)
        #expect(try await sut.load() == itemA)
    }

    @Test func aStoreThatReadsFromDisk_hasNoImmediateAnswer() async throws {
        let directory = try TemporaryDirectory()
        let store = FileStore<Item>(directory: directory.url, synchronizesWrites: false)
        try await store.insert(itemA, for: "feed", storedAt: clock.date)
        let sut = store.loader(key: "feed").named("disk")
        #expect(sut.loadImmediately(()) == nil)
        #expect(try await sut.load() == itemA)
    }

    @Test func cachePolicies_answerImmediatelyOnlyWhenTheyReadTheCacheFirst() async throws {
        let store = try await memory(holdingItemAged: .seconds(30))
        let remote = LoaderSpy<Void, Item>(.success(itemB), .success(itemB))
        func sut(_ policy: CachePolicy) -> some Loader<Void, Item> {
            remote.cached(policy, in: store, key: "feed").environment(clock.environment())
        }
        #expect(sut(.cacheFirst(freshness: .maxAge(.seconds(60)))).loadImmediately(()) == itemA)
        #expect(sut(.cacheFirst(freshness: .maxAge(.seconds(10)))).loadImmediately(()) == nil)
        #expect(sut(.cacheOnly()).loadImmediately(()) == itemA)
        #expect(sut(.networkFirst()).loadImmediately(()) == nil)
        #expect(sut(.networkOnly).loadImmediately(()) == nil)
        #expect(remote.loadCount == 0)
    }

    @Test func aCancelledTask_getsNoImmediateAnswerFromACoalescedChain() async throws {
        let store = try await memory()
        let sut = store.loader(key: "feed").coalesced()
        let task = Task { () -> (Item?, (any Error)?) in
            withUnsafeCurrentTask { $0?.cancel() }
            do {
                _ = try await sut.load()
                return (sut.loadImmediately(()), nil)
            } catch {
                return (sut.loadImmediately(()), error)
            }
        }
        let (immediate, error) = await task.value
        #expect(immediate == nil)
        #expect(error is CancellationError)
    }

    @MainActor
    @Test func onTheMainActor_theFirstReadHoldsTheCachedValue() async throws {
        let store = try await memory()
        let sut = chain(store, remote: LoaderSpy(.success(itemB))).logged().environment(clock.environment())
        // Synchronous: a view model's first frame, no suspension point.
        let first = sut.loadImmediately(())
        #expect(first == itemA)
        MainActor.assertIsolated()
    }
}

extension Duration {
    fileprivate var seconds: TimeInterval {
        TimeInterval(components.seconds) + TimeInterval(components.attoseconds) / 1e18
    }
}
