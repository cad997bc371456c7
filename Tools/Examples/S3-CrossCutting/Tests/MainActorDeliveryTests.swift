import Foundation
import Testing
import CrossCuttingExample
@_spi(StrataInternals) import Strata
import StrataTesting

@Suite("S3 CrossCutting: deliveredOnMainActor()")
struct MainActorDeliveryTests {
    /// What the sink saw: each result, and whether it ran on the main queue.
    final class SinkRecorder: Sendable {
        private let state = Locked<[(value: Result<[String], any Error>, onMainQueue: Bool)]>([])

        var deliveries: [(value: Result<[String], any Error>, onMainQueue: Bool)] { state.withLock { $0 } }

        var sink: @MainActor @Sendable (Result<[String], any Error>) -> Void {
            { [self] result in
                MainActor.assertIsolated()
                state.withLock { $0.append((result, currentQueueTag() == "main")) }
            }
        }
    }

    @Test func aLoadFromOffTheMainActor_isHandedToTheSinkOnTheMainActorBeforeLoadReturns() async throws {
        let recorder = SinkRecorder()
        let baseRanOnMain = Locked<Bool?>(nil)
        let sut = ClosureLoader { () -> [String] in
            baseRanOnMain.withLock { $0 = currentQueueTag() == "main" }
            return sampleItems
        }.deliveredOnMainActor(recorder.sink)

        let loaded = try await Task.detached { try await sut.load() }.value

        #expect(loaded == sampleItems, "the value is also returned, unchanged")
        #expect(baseRanOnMain.withLock { $0 } == false, "the load itself ran off the main queue")
        #expect(recorder.deliveries.count == 1)
        #expect(recorder.deliveries.first?.onMainQueue == true)
        #expect(try recorder.deliveries.first?.value.get() == sampleItems)
    }

    @Test func aFailedLoad_isDeliveredAsAFailureAndRethrown() async throws {
        let recorder = SinkRecorder()
        let sut = LoaderSpy<Void, [String]>(.failure(TestError("offline"))).deliveredOnMainActor(recorder.sink)

        await #expect(throws: TestError("offline")) { try await sut.load() }

        #expect(recorder.deliveries.count == 1)
        #expect(recorder.deliveries.first?.onMainQueue == true)
        #expect(throws: TestError("offline")) { try recorder.deliveries.first?.value.get() }
    }

    @Test func aCancelledLoad_deliversNothing() async throws {
        let recorder = SinkRecorder()
        let base = LoaderSpy<Void, [String]>(holdsLoads: true)
        let sut = base.deliveredOnMainActor(recorder.sink)

        let task = Task { try await sut.load() }
        try await base.waitForLoads(count: 1)
        task.cancel()

        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(recorder.deliveries.isEmpty)
    }
}
