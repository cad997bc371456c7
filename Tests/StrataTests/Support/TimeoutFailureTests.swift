import Foundation
import Testing
import Strata
@testable import StrataOutbox
import StrataTesting

@Suite("TimeoutFailure: one family for every timeout error")
struct TimeoutFailureTests {
    @Test("a load past timingOut(after:) is caught as the family, with its limit")
    func aTimedOutLoadIsCaughtAsTheFamily() async throws {
        let clock = ManualClock()
        let base = LoaderSpy<Void, Int>(.success(7), holdsLoads: true, name: "slow remote")
        let load = Task { try await base.timingOut(after: .seconds(2)).environment(\.clock, clock).load() }
        try await base.waitForLoads()
        try await clock.waitForSleepers()
        clock.advance(by: .seconds(2))
        do {
            _ = try await load.value
            Issue.record("the load should have timed out")
        } catch let error as any TimeoutFailure {
            #expect(error.timeout == .seconds(2))
            #expect(error is TimeoutError)
        }
    }

    @Test("each timeout error names its limit as the family's timeout")
    func eachNamesItsLimit() {
        let errors: [any TimeoutFailure] = [
            TimeoutError(tier: "remote", timeout: .seconds(1)),
            WaitTimeoutError(awaited: "a save", observed: "none", timeout: .seconds(3)),
            OutboxHandlerTimeoutError(deadline: .seconds(60)),
        ]
        #expect(errors.map(\.timeout) == [.seconds(1), .seconds(3), .seconds(60)])
    }
}
